"""The landing page: one table that tells every user which index is theirs.

Publishing writes ``data/wheels/<dir>/index.json`` (what that index holds) in
its folder and regenerates ``data/wheels/index.html`` from every ``index.json``
on gh-pages, in the same single commit, so the page can never list an index
that is not there. ``rocm-bake index page --out DIR`` renders the same page
from ``DIST/index/*``. Plain HTML, no script, readable on a phone.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from pathlib import Path

from pydantic import BaseModel

PYPI = "https://pypi.org/simple"
SUMMARY_NAME = "index.json"
LANDING_PATH = "data/wheels/index.html"
WHICH_INDEX = "rocm-bake which-index"


class IndexSummary(BaseModel):
    """What one published index holds, as its folder's ``index.json`` records it."""

    dir_name: str
    arches: list[str]
    rocm_version: str
    wheel_count: int
    total_bytes: int
    #: When the index's current content was built (its newest file): stable while nothing changes.
    published: str
    release_tag: str | None = None
    release_url: str | None = None

    def to_bytes(self) -> bytes:
        return (json.dumps(self.model_dump(), indent=1, sort_keys=True) + "\n").encode()


def summarize(dir_name: str, arches: list[str], rocm_version: str, files: list[Path],
              release_tag: str | None = None, release_url: str | None = None) -> IndexSummary:
    """An index's summary from its ``files/``: wheels counted (not their ``.metadata``), bytes summed."""
    wheels = [f for f in files if f.name.endswith(".whl")]
    newest = max((f.stat().st_mtime for f in files), default=0.0)
    when = dt.datetime.fromtimestamp(newest, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return IndexSummary(dir_name=dir_name, arches=arches, rocm_version=rocm_version, wheel_count=len(wheels),
                        total_bytes=sum(f.stat().st_size for f in wheels), published=when,
                        release_tag=release_tag, release_url=release_url)


def parse_summary(data: bytes, where: str) -> IndexSummary | None:
    """A folder's ``index.json``; None (left off the page) when it is not one of ours."""
    try:
        return IndexSummary.model_validate_json(data)
    except ValueError:
        return None


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def render_landing(summaries: list[IndexSummary], base_url: str) -> bytes:
    """The page: a card per index (a table on wide screens), with the exact pip and uv lines."""
    base = base_url.rstrip("/")
    esc = html.escape
    rows = []
    for s in sorted(summaries, key=lambda s: (len(s.arches), s.dir_name)):
        url = f"{base}/{s.dir_name}/"
        extra = f"rocm-torch[device-{s.dir_name}]"
        pip = f'pip install --index-url {url} --extra-index-url {PYPI} "{extra}"'
        uv = f'uv pip install --index {url} --default-index {PYPI} "{extra}"'
        release = (f'<a href="{esc(s.release_url)}">{esc(s.release_tag or "release")}</a>'
                   if s.release_url else esc(s.release_tag or "—"))
        kind = "fat build: one binary for all of these" if len(s.arches) > 1 else "one architecture"
        rows.append(
            f'<tr class="index" id="{esc(s.dir_name)}">'
            f'<td data-label="Arches"><strong>{esc(", ".join(s.arches))}</strong><br><small>{kind}</small></td>'
            f'<td data-label="ROCm">{esc(s.rocm_version)}</td>'
            f'<td data-label="Wheels">{s.wheel_count}</td>'
            f'<td data-label="Size">{_size(s.total_bytes)}</td>'
            f'<td data-label="Last published">{esc(s.published)}</td>'
            f'<td data-label="Release">{release}</td>'
            f'<td data-label="Install"><code>{esc(pip)}</code><code>{esc(uv)}</code></td></tr>'
        )
    body = "\n".join(rows) or '<tr><td colspan="7">No index is published yet.</td></tr>'
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="rocm-bake">
<title>rocm-bake wheel indexes</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1rem auto; max-width: 72rem; padding: 0 1rem; line-height: 1.4; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ border-bottom: 1px solid #ccc; padding: .5rem; text-align: left; vertical-align: top; }}
code {{ display: block; white-space: pre-wrap; word-break: break-all; background: #f4f4f4; padding: .3rem;
        margin: .2rem 0; font-size: .85rem; }}
p code {{ display: inline; padding: 0 .2rem; }}
@media (max-width: 48rem) {{
  thead {{ display: none; }}
  tr.index {{ display: block; border: 1px solid #ccc; border-radius: .4rem; margin: 0 0 1rem; padding: .3rem; }}
  tr.index td {{ display: block; border: none; padding: .25rem .4rem; }}
  tr.index td::before {{ content: attr(data-label) ": "; font-weight: 600; }}
}}
</style>
</head>
<body>
<h1>rocm-bake wheel indexes</h1>
<p>Every index serves one architecture (or one fat build) of the same ROCm PyTorch stack. The wheel filenames
do not say which GPU they are for: install through the index for <em>your</em> GPU, and keep
<code>--extra-index-url</code>: ordinary dependencies such as numpy come from PyPI.</p>
<p>Not sure which GPU you have? In a checkout of rocm-bake (<code>make setup</code>),
<code>{esc(WHICH_INDEX)}</code> reads it and prints your line (a host with GPUs of several architectures gets
the fat-build index that covers them all, if there is one).</p>
<table>
<thead><tr><th>Arches</th><th>ROCm</th><th>Wheels</th><th>Size</th><th>Last published</th><th>Release</th><th>Install</th></tr></thead>
<tbody>
{body}
</tbody>
</table>
</body>
</html>
"""
    return page.encode()


def local_summaries(dist: Path, rocm_version: str) -> list[IndexSummary]:
    """The summary of every index under ``DIST/index/``, for ``rocm-bake index page``."""
    from rocm_bake.index.target import IndexTarget

    out = []
    root = Path(dist) / "index"
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        target = IndexTarget.from_dir_name(entry.name)
        files = entry / "files"
        if target is None or not files.is_dir():
            continue
        out.append(summarize(target.dir_name, list(target.arches), rocm_version, sorted(files.iterdir())))
    return out
