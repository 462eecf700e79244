"""Build one index: ``DIST/index/<arch>/`` for one arch, ``DIST/index/gfx950-gfx1201/`` for a fat build.

Every wheel has an architecture-independent filename: in one directory two
arches' wheels overwrite each other and ``--find-links`` serves whichever
landed last, so the architecture lives in the path. Layout, as readers see
it through the ``DIST/index/<dir>`` symlink (see ``rocm_bake.index.tree``)::

    index.html              PEP 503 root (normalized names)
    <project>/index.html    one page per project
    files/<wheel>           copied from --wheels (a reflink where the filesystem can)
    files/<wheel>.metadata  PEP 658/714 core metadata
    files/rocm_torch-<v>-py3-none-any.whl
    requirements.txt        the hash lock, pylock.toml beside it (``rocm_bake.index.lock``)

Every link carries ``#sha256=`` "so an offsite asset is still verified by
pip at install time", and ``data-dist-info-metadata``/``data-core-metadata``
so resolvers read the ``.metadata`` file instead of downloading 300–500 MB
wheels. With ``wheel_url`` the hrefs point at e.g. a GitHub release ("gh-pages
carries the index ... and the wheels go to a release"); the ``.metadata``
files sit at the same URL plus ``.metadata``, so they travel with the wheels.

A fat index (``--arch 'gfx950;gfx1201'``, the PYTORCH_ROCM_ARCH spelling)
is built the same way and offers ``rocm-torch[device-gfx950-gfx1201]``
only; every device-code wheel in it must carry code objects for *every*
arch of the build, since the one install serves every GPU of the host.

Everything is validated before anything is written (filenames, member
paths, METADATA, device code); the new tree is written beside the current
one, rewriting only the files whose bytes change, and swapped in by one
rename. A hash cache makes a rebuild over unchanged wheels cheap, and a
stamp (``rocm_bake.index.stamp``) answers a rebuild over an unchanged index
from ``stat`` alone.
"""

from __future__ import annotations

import hashlib
import html
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from pydantic import BaseModel

from rocm_bake import offload, progress
from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index import lock, stamp
from rocm_bake.index.defaults import FILES_DIR, GENERATOR, GENERATOR_TAG
from rocm_bake.index.hashcache import CacheEntry, FileKey, HashCache, hash_workers, sha256_file
from rocm_bake.index.metapackage import Metapackage, build_metapackage
from rocm_bake.index.tree import TreeFile, TreeStore, WriteStats, fault_point, is_rocm_bake_index, link_or_copy
from rocm_bake.index.versions import (
    DEFAULT_ROCM_VERSION,
    METAPACKAGE,
    WheelName,
    check_rocm_version,
    check_version,
    parse_name,
)
from rocm_bake.index.wheelfile import check_record, parse_core_metadata, read_metadata_bytes

__all__ = [
    "FILES_DIR", "GENERATOR", "GENERATOR_TAG", "IndexFile", "IndexPlan", "IndexResult", "PlannedWheel",
    "build_index", "index_dir", "is_rocm_bake_index", "link_or_copy", "plan_index", "remove_index",
    "render_pages", "tree_matches", "write_index",
]


class IndexFile(BaseModel):
    filename: str
    sha256: str
    size: int


class IndexResult(BaseModel):
    """What a build wrote. ``wheel_count`` counts every wheel served, rocm-torch included.

    ``arch`` is the PYTORCH_ROCM_ARCH spelling (``gfx950`` or
    ``gfx950;gfx1201``); ``dir_name`` and ``extra`` are the directory and the
    rocm-torch extra that serve it.
    """

    arch: str
    index_dir: str
    wheel_count: int
    index_sha256: str
    metapackage: str
    files: list[IndexFile]
    arches: list[str] = []
    dir_name: str = ""
    extra: str = ""
    hashed_bytes: int = 0  # bytes read to hash (0 on a fully warm rebuild)
    unchanged: bool = False  # the tree on disk already matched, so nothing was written
    files_written: int = 0  # files of the tree whose bytes were written (input wheels copied from --wheels)
    files_kept: int = 0  # files hard-linked unchanged from the previous tree
    lock: str | None = None  # the hash lock's file name in the index, when there is one
    lock_missing: str | None = None  # why there is no lock (one line)
    #: Pins with no local version segment (``name==version``): a public index may host the same version, so
    #: only the hash lock tells this index's file from another's.
    exposed: list[str] = []


class PlannedWheel(BaseModel):
    filename: str
    project: str
    version: str
    sha256: str
    size: int
    metadata: bytes
    requires_python: str | None
    source: str | None  # None: generated (the metapackage)


class IndexPlan(BaseModel):
    """The whole index, computed in memory; ``write_index`` puts it on disk."""

    arch: ArchSet
    dist: str
    wheel_url: str | None
    wheels: list[PlannedWheel]
    pages: dict[str, bytes]  # path relative to the index dir -> HTML
    metapackage: Metapackage
    index_sha256: str
    hashed_bytes: int
    request: dict[str, Any] = {}  # what the stamp keys the warm path on
    lock_missing: str | None = None  # why the hash lock could not be resolved
    inputs: dict[str, list[int]] | None = None  # the wheels' stat before they were read

    @property
    def index_dir(self) -> Path:
        return index_dir(Path(self.dist), self.arch)


def index_dir(dist: Path, arch: ArchSet) -> Path:
    """``DIST/index/<dir_name>``: ``gfx950``, or ``gfx950-gfx1201`` for a fat build."""
    return Path(dist) / "index" / arch.dir_name


def cache_path(dist: Path, arch: ArchSet) -> Path:
    """Outside the index tree: it holds absolute paths and is never published."""
    return Path(dist) / ".cache" / "rocm-bake" / f"index-{arch.dir_name}.json"


def _store(dist: Path, arch: ArchSet) -> TreeStore:
    return TreeStore(Path(dist), arch.dir_name, stamp.lock_path(Path(dist), arch.dir_name))


# ------------------------------------------------------------ validation


def check_wheel_url(url: str | None) -> str | None:
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise RocmBakeError(
            f"--wheel-url {url!r}: expected an http(s) URL prefix with no query or fragment "
            f"(e.g. https://github.com/OWNER/REPO/releases/download/TAG)"
        )
    return url.rstrip("/")


def check_index_base(base: str | None) -> str | None:
    """``--index-base``: the rule ``which-index`` applies (https, file://, or plain http on loopback only)."""
    if base is None:
        return None
    from rocm_bake.gpu.which import check_index_base as checked

    return checked(base)


def check_dist(dist: Path) -> Path:
    """DIST must be a directory (or not exist yet): ``--out`` naming a file is refused up front."""
    for path in (Path(dist), Path(dist) / "index"):
        if path.exists() and not path.is_dir():
            raise RocmBakeError(f"--out {dist}: {path} exists and is not a directory")
    return Path(dist)


def list_wheels(wheels_dir: Path, arch: ArchSet) -> list[Path]:
    """The ``*.whl`` files in ``wheels_dir`` (fetch's manifest and other files are not wheels)."""
    if not wheels_dir.is_dir():
        from rocm_bake.path_kind import path_kind

        kind = path_kind(wheels_dir)
        raise RocmBakeError(f"wheels directory {wheels_dir} (index {arch}) " + (
            f"is {kind}, not a directory (--wheels names the directory that holds the wheels)" if kind
            else "does not exist"))
    try:
        wheels = sorted(p for p in wheels_dir.iterdir() if p.name.endswith(".whl"))
    except OSError as exc:
        raise RocmBakeError(f"wheels directory {wheels_dir} (index {arch}): {exc.strerror or exc}") from None
    for p in wheels:
        if not p.is_file():
            raise RocmBakeError(f"{p.name} (index {arch}): rule regular-file: not a regular file")
    if not wheels:
        raise RocmBakeError(f"wheels directory {wheels_dir} (index {arch}) holds no .whl files")
    return wheels


def validate_names(paths: list[Path], arch: ArchSet, rocm_version: str) -> list[WheelName]:
    """Every filename rule, all wheels at once; one error listing every violation."""
    problems: list[str] = []
    names: list[WheelName] = []
    for path in paths:
        try:
            name = parse_name(path.name, arch)
            check_version(name, arch, rocm_version)
            names.append(name)
        except RocmBakeError as exc:
            problems.append(str(exc))
    by_project: dict[str, list[WheelName]] = {}
    for name in names:
        by_project.setdefault(name.project, []).append(name)
    for project, group in sorted(by_project.items()):
        versions = sorted({str(n.version) for n in group})
        if len(versions) > 1:
            files = ", ".join(n.filename for n in group)
            problems.append(
                f"{files} (index {arch}): rule one-version-per-project: {project} appears as "
                f"{', '.join(versions)}; the metapackage pins one version with =="
            )
    if problems:
        raise _combined(problems, arch)
    return names


def _combined(problems: list[str], arch: ArchSet) -> RocmBakeError:
    if len(problems) == 1:
        return RocmBakeError(problems[0])
    return RocmBakeError(
        f"{len(problems)} wheels refused for the {arch} index (nothing written):\n  "
        + "\n  ".join(problems)
    )


def read_metadata(path: Path, name: WheelName, arch: ArchSet) -> tuple[bytes, str | None]:
    """The wheel's validated METADATA bytes (served verbatim, PEP 658) and its Requires-Python.

    Member paths, the size cap and the fields a resolver needs are checked
    by ``rocm_bake.index.wheelfile``; here the metadata must also name the
    same project and version as the filename.
    """
    where = f"{path.name} (index {arch})"
    meta = parse_core_metadata(read_metadata_bytes(path, where), where)
    from packaging.utils import canonicalize_name

    if canonicalize_name(meta.name) != name.project or meta.version != name.version:
        raise RocmBakeError(
            f"{where}: rule metadata-matches-filename: METADATA says {meta.name} {meta.version}, "
            f"the filename says {name.project} {name.version}"
        )
    return meta.raw, meta.requires_python


def check_device_code(entry: CacheEntry, target: ArchSet, wheel: str) -> None:
    """Refuse device code that does not cover every arch of ``target``.

    Wheels fetched by the wrong tag (``:latest``, written by whichever arch
    pushed last) look exactly like the right ones afterwards, so the device
    code itself must be for this index. A single
    arch needs code that loads on it; a fat index needs code for *every*
    arch of the build (a torch with only gfx950 code objects would install
    on a gfx950+gfx1201 host and fail on the second GPU). Pure-Python and
    host-only wheels pass; unreadable device code is refused (an unknown
    is exactly how a wrong-arch asset would pass).
    """
    targets = entry.device_targets or []
    if entry.device_unknown:
        raise RocmBakeError(
            f"{wheel}: cannot verify it is for {target}: "
            + "; ".join(n for n in entry.device_notes if "unknown" in n or "cannot" in n)
            + " (refused: an unverifiable asset could be another arch's)"
        )
    if not targets:
        return
    missing = [a for a in target.arches if not any(offload.covers(t, a) for t in targets)]
    if not missing:
        return
    if not target.is_fat:
        raise RocmBakeError(
            f"{wheel}: device code is for {', '.join(targets)}, not {target}: "
            f"refused for the {target} index (a wheel fetched by a tag another arch pushed, "
            f"e.g. :latest, looks exactly like this)"
        )
    raise RocmBakeError(
        f"{wheel} (index {target}): rule covers-every-arch: device code is for {', '.join(targets)}, "
        f"missing {', '.join(missing)}: a fat index serves one install to every GPU of the host, so each "
        f"device-code wheel must carry code objects for every arch of the build ({target})"
    )


def _inspect(path: Path, name: WheelName, target: ArchSet, key: FileKey,
             prior: CacheEntry | None) -> tuple[CacheEntry, int]:
    """Everything derived from a wheel's bytes: metadata, sha256, device code.

    Returns the cache entry and the bytes hashed (0 when the sha256 was cached).
    """
    metadata, requires_python = read_metadata(path, name, target)
    if prior is not None:
        sha, hashed = prior.sha256, 0
    else:
        with progress.track(f"hash {path.name}", key.size) as advance:
            sha, hashed = sha256_file(path, advance), key.size
    check_record(path, f"{path.name} (index {target})")  # once per file (the cache entry then vouches)
    report = offload.wheel_targets(path)
    if FileKey.of(path) != key:
        raise RocmBakeError(f"{path.name} (index {target}): rule stable-input: changed while being read")
    entry = CacheEntry(
        key=key, sha256=sha, metadata_b64=CacheEntry.encode(metadata), requires_python=requires_python,
        device_targets=report.targets, device_unknown=report.compressed_unknown, device_notes=report.notes,
    )
    check_device_code(entry, target, path.name)
    return entry, hashed


def _complete(entry: CacheEntry | None) -> bool:
    return entry is not None and entry.metadata_b64 is not None and entry.device_targets is not None


def inspect_wheels(
    paths: list[Path], names: list[WheelName], target: ArchSet, cache: HashCache, workers: int
) -> tuple[list[CacheEntry], int]:
    """Cached entries for unchanged files; the rest inspected in threads, largest first."""
    keys = [FileKey.of(p) for p in paths]
    entries: list[CacheEntry | None] = []
    todo: list[int] = []
    problems: list[str] = []
    for i, key in enumerate(keys):
        hit = cache.lookup(key)
        if hit is not None and _complete(hit):
            try:
                check_device_code(hit, target, paths[i].name)
            except RocmBakeError as exc:
                problems.append(str(exc))
            entries.append(hit)
        else:
            entries.append(None)
            todo.append(i)
    todo.sort(key=lambda i: -keys[i].size)  # the threads finish together
    hashed = 0
    if todo:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(todo)))) as pool:
            futures = {
                i: pool.submit(_inspect, paths[i], names[i], target, keys[i], cache.lookup(keys[i]))
                for i in todo
            }
            for i, future in sorted(futures.items()):
                try:
                    entries[i], nbytes = future.result()
                    hashed += nbytes
                except RocmBakeError as exc:
                    problems.append(str(exc))
    if problems:
        raise _combined(problems, target)
    done = [e for e in entries if e is not None]
    for entry in done:
        cache.record(entry)
    cache.keep_only({e.key.path for e in done})
    try:
        cache.save()
    except OSError as exc:
        raise RocmBakeError(f"cannot write the hash cache {cache.path}: {exc.strerror or exc}") from None
    return done, hashed


# --------------------------------------------------------------- pages


def _page(title: str, body: list[str]) -> bytes:
    lines = [
        "<!DOCTYPE html>",
        "<html>",
        "  <head>",
        '    <meta name="pypi:repository-version" content="1.0">',
        f"    {GENERATOR_TAG}",
        f"    <title>{html.escape(title)}</title>",
        "  </head>",
        "  <body>",
        *(f"    {line}<br>" for line in body),
        "  </body>",
        "</html>",
        "",
    ]
    return "\n".join(lines).encode()


def wheel_href(filename: str, sha256: str, wheel_url: str | None) -> str:
    base = wheel_url if wheel_url is not None else f"../{FILES_DIR}"
    return f"{base}/{quote(filename)}#sha256={sha256}"


def anchor(wheel: PlannedWheel, wheel_url: str | None) -> str:
    meta = "sha256=" + hashlib.sha256(wheel.metadata).hexdigest()
    attrs = [f'href="{html.escape(wheel_href(wheel.filename, wheel.sha256, wheel_url))}"']
    if wheel.requires_python:
        attrs.append(f'data-requires-python="{html.escape(wheel.requires_python)}"')
    attrs += [f'data-dist-info-metadata="{meta}"', f'data-core-metadata="{meta}"']
    return f"<a {' '.join(attrs)}>{html.escape(wheel.filename)}</a>"


def render_pages(arch: ArchSet, wheels: list[PlannedWheel], wheel_url: str | None) -> dict[str, bytes]:
    projects: dict[str, list[PlannedWheel]] = {}
    for wheel in wheels:
        projects.setdefault(wheel.project, []).append(wheel)
    pages = {
        "index.html": _page(
            f"rocm-bake index for {arch}",
            [f'<a href="{p}/">{p}</a>' for p in sorted(projects)],
        )
    }
    for project, group in sorted(projects.items()):
        pages[f"{project}/index.html"] = _page(
            f"Links for {project} ({arch})",
            [anchor(w, wheel_url) for w in sorted(group, key=lambda w: w.filename)],
        )
    return pages


def exposed_pins(wheels: list[PlannedWheel]) -> list[str]:
    """``name==version`` of every pinned wheel whose version has no local segment (PyPI could host it too)."""
    from packaging.version import Version

    return [f"{w.project}=={w.version}" for w in sorted(wheels, key=lambda w: w.project)
            if w.project != METAPACKAGE and Version(w.version).local is None]


def tree_digest(pages: dict[str, bytes], wheels: list[PlannedWheel]) -> str:
    """sha256 over (relative path, sha256) of every file the index holds, sorted."""
    entries = {path: hashlib.sha256(data).hexdigest() for path, data in pages.items()}
    for w in wheels:
        entries[f"{FILES_DIR}/{w.filename}"] = w.sha256
        entries[f"{FILES_DIR}/{w.filename}.metadata"] = hashlib.sha256(w.metadata).hexdigest()
    body = "".join(f"{path}\0{sha}\n" for path, sha in sorted(entries.items()))
    return hashlib.sha256(body.encode()).hexdigest()


# ------------------------------------------------------------- planning


def plan_index(
    arch: ArchSet,
    wheels_dir: Path,
    dist: Path,
    wheel_url: str | None = None,
    rocm_version: str = DEFAULT_ROCM_VERSION,
    workers: int | None = None,
    index_base: str | None = None,
) -> IndexPlan:
    """Validate, hash (cached) and render everything without writing the index.

    ``arch`` is one arch (``gfx950``) or a fat build's (``gfx950;gfx1201``).
    ``index_base`` is where the indexes will be served, recorded in the
    metapackage for its checker's install lines (None: not known here).
    """
    check_rocm_version(rocm_version)
    index_base = check_index_base(index_base)
    request = stamp.request(arch.spelling, Path(wheels_dir), wheel_url, rocm_version, index_base)
    wheel_url = check_wheel_url(wheel_url)
    wheels_dir, dist = Path(wheels_dir), check_dist(Path(dist))
    paths = list_wheels(wheels_dir, arch)
    inputs = stamp.input_listing(wheels_dir)
    names = validate_names(paths, arch, rocm_version)

    cache = HashCache(cache_path(dist, arch))
    entries, hashed = inspect_wheels(paths, names, arch, cache, workers or hash_workers())
    planned = []
    for path, name, entry in zip(paths, names, entries):
        planned.append(
            PlannedWheel(
                filename=path.name, project=name.project, version=str(name.version),
                sha256=entry.sha256, size=entry.key.size, metadata=entry.metadata or b"",
                requires_python=entry.requires_python, source=str(path),
            )
        )

    pins = {name.project: name.version for name in names}
    meta_pkg = build_metapackage(arch, pins, index_base)
    planned.append(
        PlannedWheel(
            filename=meta_pkg.filename, project=METAPACKAGE, version=meta_pkg.version,
            sha256=hashlib.sha256(meta_pkg.data).hexdigest(), size=len(meta_pkg.data),
            metadata=meta_pkg.metadata, requires_python=None, source=None,
        )
    )
    planned.sort(key=lambda w: w.filename)
    pages = render_pages(arch, planned, wheel_url)
    pages.update(lock.kept(index_dir(dist, arch), arch, meta_pkg.version))
    return IndexPlan(
        arch=arch, dist=str(dist), wheel_url=wheel_url, wheels=planned, pages=pages,
        metapackage=meta_pkg, index_sha256=tree_digest(pages, planned), hashed_bytes=hashed,
        request=request, inputs=inputs,
    )


# --------------------------------------------------------------- writing


def tree_files(plan: IndexPlan) -> list[TreeFile]:
    """Every file of ``plan``'s tree, with the bytes to write or the wheel to link."""
    files = [TreeFile(rel=rel, sha256=hashlib.sha256(data).hexdigest(), data=data) for rel, data in plan.pages.items()]
    for w in plan.wheels:
        rel = f"{FILES_DIR}/{w.filename}"
        if w.source is None:
            files.append(TreeFile(rel=rel, sha256=w.sha256, data=plan.metapackage.data))
        else:
            files.append(TreeFile(rel=rel, sha256=w.sha256, source=Path(w.source)))
        files.append(TreeFile(rel=f"{rel}.metadata", sha256=hashlib.sha256(w.metadata).hexdigest(), data=w.metadata))
    return files


def tree_matches(plan: IndexPlan) -> bool:
    """True when the index readers see is exactly what ``plan`` would write.

    Pages, ``.metadata`` files and the metapackage are compared byte for
    byte; an input wheel must be a copy (never a link to the input) whose
    bytes have that sha256, as recorded when it was copied or read again.
    Anything extra, missing or different means a rewrite.
    """
    recorded = stamp.recorded_files(stamp.load(Path(plan.dist), plan.arch.dir_name))
    try:
        return _store(Path(plan.dist), plan.arch).unchanged(tree_files(plan), recorded)
    except RocmBakeError:
        return False


def write_index(plan: IndexPlan) -> IndexResult:
    """Put ``plan`` on disk: only changed files written, swapped in by one rename (see ``tree``)."""
    target = plan.arch
    dist = Path(plan.dist)
    store = _store(dist, target)
    files = tree_files(plan)
    saved = stamp.load(dist, target.dir_name)
    recorded = stamp.recorded_files(saved)
    try:
        with store.locked():
            for note in store.recover():
                progress.note(f"index {target}: {note}")
            if store.unchanged(files, recorded):
                stats, unchanged = WriteStats(kept=len(files), tree=store.link_target()), True
            else:
                stats, unchanged = store.commit(files, plan.index_sha256, recorded), False
            result = IndexResult(
                arch=target.spelling, index_dir=str(index_dir(dist, target)), wheel_count=len(plan.wheels),
                index_sha256=plan.index_sha256, metapackage=plan.metapackage.filename,
                files=[IndexFile(filename=w.filename, sha256=w.sha256, size=w.size) for w in plan.wheels],
                arches=list(target.arches), dir_name=target.dir_name, extra=target.extra,
                hashed_bytes=plan.hashed_bytes, unchanged=unchanged,
                files_written=len(stats.written), files_kept=stats.kept,
                lock=lock.LOCK_FILE if lock.LOCK_FILE in plan.pages else None, lock_missing=plan.lock_missing,
                exposed=exposed_pins(plan.wheels),
            )
            if stats.tree is not None and plan.request:
                stamp.record(dist, target.dir_name, plan.request, plan.inputs, stats.tree,
                             {f.rel: f.sha256 for f in files}, result.model_dump(mode="json"))
            fault_point("stamp-written")
    except OSError as exc:
        where = exc.filename or dist
        raise RocmBakeError(f"cannot write the {target} index under {dist}: {where}: "
                            f"{exc.strerror or exc}") from None
    return result


def build_index(
    arch: ArchSet,
    wheels_dir: Path,
    dist: Path,
    wheel_url: str | None = None,
    rocm_version: str = DEFAULT_ROCM_VERSION,
    index_base: str | None = None,
) -> IndexResult:
    """Validate ``wheels_dir``'s wheels for ``arch`` and bring ``DIST/index/<dir>/`` up to date.

    ``arch``: ``gfx950``, or ``gfx950;gfx1201`` (a fat build).
    """
    hit = stamp.quick_result(Path(dist), arch.dir_name, arch.spelling, Path(wheels_dir), wheel_url, rocm_version,
                             index_base)
    if hit is not None and "lock" in hit:  # a stamp from before indexes had locks is built again
        return IndexResult.model_validate(hit)
    check_dist(Path(dist))
    _store(Path(dist), arch).current()  # refuse a foreign DIST/index/<dir> before hashing anything
    return write_index(lock.with_lock(plan_index(arch, wheels_dir, dist, wheel_url, rocm_version,
                                                 index_base=index_base)))


def remove_index(dist: Path, arch: ArchSet) -> bool:
    """Remove ``DIST/index/<dir>`` (the link and its trees) if rocm-bake wrote it; True if removed.

    ``shutil.rmtree`` refuses a symlink, so callers that delete an index
    (the ``WheelIndex`` provider) use this.
    """
    import shutil

    store = _store(Path(dist), arch)
    if not os.path.lexists(store.link) and not store.trees.exists():
        return False
    with store.locked():
        store.recover()
        try:
            kind, current = store.current()
        except RocmBakeError:
            return False
        if kind == "ours":
            os.unlink(store.link)
            shutil.rmtree(store.trees, ignore_errors=True)
        elif kind == "directory":
            shutil.rmtree(store.link)
        elif kind == "foreign-link":
            os.unlink(store.link)
        else:
            return False
        stamp.forget(Path(dist), arch.dir_name)
        return True
