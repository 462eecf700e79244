"""The landing page: one table that tells every user which index is theirs.

A wheel's filename does not say which GPU it was built for (torch's is the
same for every arch), so a user must find the index for their GPU before
installing anything. Publishing writes,
in the same single gh-pages commit as the index itself:

- ``data/wheels/<dir>/index.json``: what that index holds (arches, ROCm
  version, wheel count, total size, release). Content only, no clock, so an
  unchanged index re-publishes byte for byte and makes no commit.
- ``data/wheels/index.json``: every index on the branch, with when its
  folder last changed (this commit's time for the folder being changed,
  carried over from the previous listing for the others).
- ``data/wheels/index.html``: the page, rendered from that listing.

Both site files are regenerated from the tree the commit leaves behind (the
other stacks' folders are read back from the branch), so the page can never
list an index that is not there. ``rocm-bake index page`` renders the same
page from ``DIST/index/*``. Plain HTML, no script, readable on a phone.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from rocm_bake.archset import Arch, ArchSet
from rocm_bake.publish.naming import PAGES_ROOT

#: Each index folder's summary, and the site-wide listing beside the page.
SUMMARY_NAME = "index.json"
LANDING_PATH = PAGES_ROOT + "index.html"
LISTING_PATH = PAGES_ROOT + SUMMARY_NAME
#: Reads the local GPUs' gfx names from the KFD topology with nothing installed (CPU nodes report 0).
KFD_ONE_LINER = (
    "awk '$1 == \"gfx_target_version\" && $2 > 0 { printf \"gfx%d%x%x\\n\", $2 / 10000, "
    "int($2 / 100) % 100, $2 % 100 }' /sys/class/kfd/kfd/topology/nodes/*/properties"
)
#: Sizes GitHub's blob API accepts comfortably; a summary is a few hundred bytes.
MAX_SUMMARY_BYTES = 64 << 10


class IndexSummary(BaseModel):
    """What one published index holds, as its folder's ``index.json`` records it."""

    dir_name: str
    #: Validated when a summary is read back from the branch: one naming an unknown arch is not ours.
    arches: list[Arch]
    rocm_version: str
    wheel_count: int
    total_bytes: int
    release_tag: str | None = None
    release_url: str | None = None
    #: The rocm-torch metapackage's version (the pin every line carries); None: not recorded, no pinned line.
    metapackage_version: str | None = None
    #: Whether the hash lock (``requirements.txt``) is beside the index: the hash-locked line is shown only then.
    lock: bool = False

    def to_bytes(self) -> bytes:
        return _json(self.model_dump())


class ListedIndex(IndexSummary):
    """A row of the page: the summary, and when its folder last changed (None: not recorded)."""

    published: str | None = None


class Listing(BaseModel):
    """``data/wheels/index.json``: the page as data."""

    indexes: list[ListedIndex]

    def to_bytes(self) -> bytes:
        return _json(self.model_dump())


def _json(data: object) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()


def now_utc() -> str:
    """The publish time as the page shows it (minutes: a commit is not more precise than that to a reader)."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def summarize(arch: ArchSet, rocm_version: str, files: list[Path],
              release_tag: str | None = None, release_url: str | None = None, lock: bool = False) -> IndexSummary:
    """An index's summary from its ``files/``: wheels counted (not their ``.metadata``), bytes summed,
    the metapackage's version read from its wheel's name; ``lock``: the hash lock is published beside it."""
    from rocm_bake.install_line import metapackage_version_of

    wheels = [f for f in files if f.name.endswith(".whl")]
    return IndexSummary(dir_name=arch.dir_name, arches=list(arch.arches), rocm_version=rocm_version,
                        wheel_count=len(wheels),
                        total_bytes=sum(f.stat().st_size for f in wheels),
                        release_tag=release_tag, release_url=release_url,
                        metapackage_version=metapackage_version_of([f.name for f in wheels]), lock=lock)


def parse_summary(data: bytes, where: str = "") -> IndexSummary | None:
    """A folder's ``index.json``; None (the folder is listed without facts) when it is not one of ours."""
    if len(data) > MAX_SUMMARY_BYTES:
        return None
    try:
        return IndexSummary.model_validate_json(data)
    except ValidationError:
        return None


def _previous_dates(data: bytes | None) -> dict[str, str]:
    """dir name -> published, from the listing the branch holds now (nothing when absent or not ours)."""
    if data is None or len(data) > MAX_SUMMARY_BYTES * 64:
        return {}
    try:
        listing = Listing.model_validate_json(data)
    except ValidationError:
        return {}
    return {i.dir_name: i.published for i in listing.indexes if i.published}


def _index_folders(paths: set[str]) -> list[ArchSet]:
    """The arch set of every ``data/wheels/<dir>/`` holding a PEP 503 root (``index.html``) under a valid index name.

    The branch's folder names are read here, once; what is not an index name of ours is not listed.
    """
    found = []
    for path in paths:
        rest = path[len(PAGES_ROOT):] if path.startswith(PAGES_ROOT) else ""
        name, _, leaf = rest.partition("/")
        arch = ArchSet.from_dir_name(name) if leaf == "index.html" else None
        if arch is not None:
            found.append(arch)
    return sorted(found, key=lambda arch: arch.dir_name)


def _bare(arch: ArchSet) -> ListedIndex:
    """A folder with no summary of ours: listed (it is there), with what its name says."""
    return ListedIndex(dir_name=arch.dir_name, arches=list(arch.arches), rocm_version="", wheel_count=-1,
                       total_bytes=-1)


def site_pages(files: dict[str, bytes | None], read: Callable[[str], bytes], base_url: str,
               changed: set[str], when: str | None = None) -> dict[str, bytes]:
    """``{LISTING_PATH: json, LANDING_PATH: html}`` for the branch as one commit leaves it.

    ``files`` is every path of that tree: bytes where the commit writes them,
    None where they are already on the branch (``read(path)`` fetches those,
    only the summaries). ``changed`` names the index folders this commit
    adds or changes: their "last published" is ``when`` (default now); every
    other folder keeps the date the current listing gives it. A folder's row
    comes only from a folder that is there, and a summary naming another
    folder than its own is not believed.
    """
    def content(path: str) -> bytes | None:
        if path not in files:
            return None
        data = files[path]
        return data if data is not None else read(path)

    stamp = (when or now_utc()) if changed else None
    before = _previous_dates(content(LISTING_PATH))
    rows = []
    for arch in _index_folders(set(files)):
        name = arch.dir_name
        raw = content(f"{PAGES_ROOT}{name}/{SUMMARY_NAME}")
        summary = parse_summary(raw) if raw is not None else None
        if summary is None or summary.dir_name != name:
            row = _bare(arch)
        else:
            row = ListedIndex(**summary.model_dump())
        row.published = stamp if name in changed else before.get(name)
        rows.append(row)
    listing = Listing(indexes=sorted(rows, key=_order))
    return {LISTING_PATH: listing.to_bytes(), LANDING_PATH: render_landing(listing.indexes, base_url)}


def _order(row: IndexSummary) -> tuple[int, list[tuple[int, str]]]:
    """Single arches first (gfx950 before gfx1151: numerically), then fat builds."""
    return len(row.arches), [(len(a), a) for a in row.arches]


def _size(count: int) -> str:
    """Decimal units, as GitHub shows asset sizes; a no-break space keeps number and unit on one line."""
    if count < 0:
        return "not recorded"
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f}\u00a0{unit}" if unit == "B" else f"{value:.1f}\u00a0{unit}"
        value /= 1000
    return f"{value:.1f}\u00a0GB"  # pragma: no cover - the loop returns at GB


def install_lines(base_url: str, summary: IndexSummary) -> list[str]:
    """The index's lines as ``rocm_bake.install_line`` writes them: hash-locked when its lock is published,
    pinned pip and uv when its metapackage version is recorded (never an unpinned line)."""
    from rocm_bake.install_line import lines_for

    return lines_for(base_url, summary.dir_name, summary.metapackage_version, summary.lock)


def which_index_line(base_url: str) -> str:
    """``rocm-bake which-index`` pointed at this site: always named (a reader's checkout may be another fork)."""
    return f"rocm-bake which-index --index-base {base_url.rstrip('/')}"


def safe_link(url: str | None) -> str | None:
    """``url`` if a page may link to it: https, or plain http to loopback; None otherwise.

    A summary is read back from gh-pages, where anyone with push access can
    write it: a ``javascript:`` or ``data:`` "release" link would run in every
    reader's browser, and plain http off this host can be swapped.
    """
    from urllib.parse import urlsplit

    from rocm_bake.loopback import is_loopback

    if not url or any(ch.isspace() or ord(ch) < 32 for ch in url):
        return None
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return url
    return None


def _row(s: ListedIndex, base_url: str, date_label: str) -> str:
    from rocm_bake.install_line import CHECK_HINT, LOCK_FILE

    esc = html.escape
    lines = install_lines(base_url, s)
    hows = (["hash-locked (preferred)"] if s.lock else []) + (["pip", "uv"] if s.metapackage_version else [])
    install = "".join(f'<span class="how">{how}</span><code>{esc(line)}</code>' for how, line in zip(hows, lines))
    install = (install + f"<small>{esc(CHECK_HINT)}</small>" if lines
               else f"<small>not recorded: re-publish this index for its pinned lines and {LOCK_FILE}</small>")
    link = safe_link(s.release_url)
    release = (f'<a href="{esc(link)}">{esc(s.release_tag or "release")}</a>'
               if link else esc(s.release_tag or "—"))
    kind = "fat build: one set of wheels for all of these" if len(s.arches) > 1 else "one architecture"
    count = str(s.wheel_count) if s.wheel_count >= 0 else "not recorded"
    return (
        f'<tr class="index" id="{esc(s.dir_name)}">'
        f'<td data-label="Arches"><strong>{esc(", ".join(s.arches))}</strong><br><small>{kind}</small></td>'
        f'<td data-label="ROCm">{esc(s.rocm_version or "not recorded")}</td>'
        f'<td data-label="Wheels">{count}</td>'
        f'<td data-label="Size">{_size(s.total_bytes)}</td>'
        f'<td data-label="{esc(date_label)}">{esc(s.published or "not recorded")}</td>'
        f'<td data-label="Release">{release}</td>'
        f'<td data-label="Install">{install}</td></tr>'
    )


def render_landing(indexes: list[ListedIndex], base_url: str, date_label: str = "Last published") -> bytes:
    """The page: a card per index on a phone, a table on wider screens, with the exact pip and uv lines."""
    esc = html.escape
    rows = "\n".join(_row(s, base_url, date_label) for s in sorted(indexes, key=_order))
    body = rows or '<tr><td colspan="7">No index is published yet.</td></tr>'
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="rocm-bake">
<title>rocm-bake wheel indexes</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1rem auto; max-width: 80rem; padding: 0 1rem; line-height: 1.4; }}
h1 {{ font-size: 1.6rem; margin: .5rem 0; }}
h2 {{ font-size: 1.2rem; margin: 1.5rem 0 .5rem; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ border-bottom: 1px solid #ccc; padding: .5rem; text-align: left; vertical-align: top; }}
pre, td code {{ display: block; white-space: pre-wrap; overflow-wrap: anywhere; background: #f4f4f4;
        padding: .3rem; margin: .1rem 0 .4rem; font-size: .85rem; }}
p code {{ white-space: nowrap; }}
.how {{ font-size: .8rem; color: #555; }}
@media (max-width: 48rem) {{
  thead {{ display: none; }}
  tr.index {{ display: block; border: 1px solid #ccc; border-radius: .4rem; margin: 0 0 1rem; padding: .3rem; }}
  tr.index td {{ display: block; border: none; padding: .2rem .4rem; }}
  tr.index td::before {{ content: attr(data-label) ": "; font-weight: 600; }}
}}
</style>
</head>
<body>
<h1>rocm-bake wheel indexes</h1>
<p>One pip index per GPU architecture, or per fat build covering several. Wheel filenames do not say which
GPU they are for: install through the index that covers <em>all</em> your GPUs, with the line as given: it pins
<code>rocm-torch</code> to a version PyPI cannot host, and the hash-locked line checks every file against the
lock beside the index (numpy and friends come from PyPI). Not sure which? In a rocm-bake checkout:</p>
<pre>{esc(which_index_line(base_url))}</pre>
<table>
<thead><tr><th>Arches</th><th>ROCm</th><th>Wheels</th><th>Size</th><th>{esc(date_label)}</th><th>Release</th><th>Install</th></tr></thead>
<tbody>
{body}
</tbody>
</table>
<h2>Which GPUs do I have?</h2>
<p><code>rocm-bake which-index</code> reads them and prints the one line for your host (the fat-build index
when your GPUs are of several architectures, or how to pin each process to one arch's GPUs when no index
covers them all). With nothing installed, this prints each GPU's name; pick the row whose arches include
every one:</p>
<pre>{esc(KFD_ONE_LINER)}</pre>
</body>
</html>
"""
    return page.encode()


def local_summaries(dist: Path, rocm_version: str) -> list[ListedIndex]:
    """Every index under ``DIST/index/`` for ``rocm-bake index page``; its date is when it was built."""
    from rocm_bake.install_line import LOCK_FILE

    out = []
    root = Path(dist) / "index"
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        arch = ArchSet.from_dir_name(entry.name)  # the directory listing is the edge
        files, page = entry / "files", entry / "index.html"
        if arch is None or not files.is_dir() or not page.is_file():
            continue
        summary = summarize(arch, rocm_version, sorted(files.iterdir()), lock=(entry / LOCK_FILE).is_file())
        built = dt.datetime.fromtimestamp(page.stat().st_mtime, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        out.append(ListedIndex(**summary.model_dump(), published=built))
    return out


def write_local_page(dist: Path, out: Path, base_url: str, rocm_version: str) -> list[str]:
    """``OUT/index.html`` from ``DIST/index/*``: the dir names listed (an error when there are none)."""
    from rocm_bake.errors import RocmBakeError

    indexes = local_summaries(dist, rocm_version)
    if not indexes:
        raise RocmBakeError(f"{dist}/index/: no index to list; run `rocm-bake index build` first")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "index.html").write_bytes(render_landing(indexes, base_url, date_label="Built"))
    except OSError as exc:
        raise RocmBakeError(f"--out {out}: cannot write the page: {exc.strerror or exc}") from None
    return [i.dir_name for i in indexes]
