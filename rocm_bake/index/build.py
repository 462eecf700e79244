"""Build one architecture's pip index: ``DIST/index/<arch>/``.

The spec: "Every wheel here has an architecture-independent filename ... In
one directory they overwrite each other and --find-links serves whichever
landed last. So the architecture lives in the path." Layout::

    DIST/index/<arch>/index.html              PEP 503 root (normalized names)
    DIST/index/<arch>/<project>/index.html    one page per project
    DIST/index/<arch>/files/<wheel>           hard-linked from --wheels (copied across devices)
    DIST/index/<arch>/files/<wheel>.metadata  PEP 658/714 core metadata
    DIST/index/<arch>/files/rocm_torch-<v>-py3-none-any.whl

Every link carries ``#sha256=`` "so an offsite asset is still verified by
pip at install time", and ``data-dist-info-metadata``/``data-core-metadata``
so resolvers read the ``.metadata`` file instead of downloading 300–500 MB
wheels. With ``wheel_url`` the hrefs point at e.g. a GitHub release ("gh-pages
carries the index ... and the wheels go to a release"); the ``.metadata``
files sit at the same URL plus ``.metadata``, so they travel with the wheels.

Everything is validated before anything is written, the tree is written to a
temp dir and renamed into place (a failed run leaves the previous index
whole), and a hash cache makes a rebuild over unchanged wheels cheap.
"""

from __future__ import annotations

import email.parser
import errno
import hashlib
import html
import os
import shutil
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, urlsplit

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel

from rocm_bake import offload
from rocm_bake.arch import validate_arch
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.hashcache import CacheEntry, FileKey, HashCache, sha256_file
from rocm_bake.index.metapackage import Metapackage, build_metapackage
from rocm_bake.index.versions import (
    DEFAULT_ROCM_VERSION,
    METAPACKAGE,
    WheelName,
    check_rocm_version,
    check_version,
    parse_name,
)

GENERATOR = "rocm-bake"
GENERATOR_TAG = f'<meta name="generator" content="{GENERATOR}">'
FILES_DIR = "files"


class IndexFile(BaseModel):
    filename: str
    sha256: str
    size: int


class IndexResult(BaseModel):
    """What a build wrote. ``wheel_count`` counts every wheel served, rocm-torch included."""

    arch: str
    index_dir: str
    wheel_count: int
    index_sha256: str
    metapackage: str
    files: list[IndexFile]
    hashed_bytes: int = 0  # bytes read to hash (0 on a fully warm rebuild)
    unchanged: bool = False  # the tree on disk already matched, so nothing was written


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

    arch: str
    dist: str
    wheel_url: str | None
    wheels: list[PlannedWheel]
    pages: dict[str, bytes]  # path relative to the index dir -> HTML
    metapackage: Metapackage
    index_sha256: str
    hashed_bytes: int

    @property
    def index_dir(self) -> Path:
        return index_dir(Path(self.dist), self.arch)


def index_dir(dist: Path, arch: str) -> Path:
    return Path(dist) / "index" / arch


def cache_path(dist: Path, arch: str) -> Path:
    """Outside the index tree: it holds absolute paths and is never published."""
    return Path(dist) / ".cache" / "rocm-bake" / f"index-{arch}.json"


def is_rocm_bake_index(path: Path) -> bool:
    """True when ``path`` is an index this module wrote (its root page says so)."""
    page = path / "index.html"
    try:
        return page.is_file() and GENERATOR_TAG.encode() in page.read_bytes()[:4096]
    except OSError:
        return False


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


def list_wheels(wheels_dir: Path, arch: str) -> list[Path]:
    """The ``*.whl`` files in ``wheels_dir`` (fetch's manifest and other files are not wheels)."""
    if not wheels_dir.is_dir():
        raise RocmBakeError(f"wheels directory {wheels_dir} (index {arch}) does not exist")
    wheels = sorted(p for p in wheels_dir.iterdir() if p.name.endswith(".whl"))
    for p in wheels:
        if not p.is_file():
            raise RocmBakeError(f"{p.name} (index {arch}): rule regular-file: not a regular file")
    if not wheels:
        raise RocmBakeError(f"wheels directory {wheels_dir} (index {arch}) holds no .whl files")
    return wheels


def validate_names(paths: list[Path], arch: str, rocm_version: str) -> list[WheelName]:
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


def _combined(problems: list[str], arch: str) -> RocmBakeError:
    if len(problems) == 1:
        return RocmBakeError(problems[0])
    return RocmBakeError(
        f"{len(problems)} wheels refused for the {arch} index (nothing written):\n  "
        + "\n  ".join(problems)
    )


def read_metadata(path: Path, name: WheelName, arch: str) -> tuple[bytes, str | None]:
    """The wheel's ``.dist-info/METADATA`` bytes (served verbatim, PEP 658) and Requires-Python."""
    where = f"{path.name} (index {arch})"
    try:
        with zipfile.ZipFile(path) as zf:
            found = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(found) != 1:
                raise RocmBakeError(
                    f"{where}: rule dist-info: expected one top-level *.dist-info/METADATA, "
                    f"found {len(found)}"
                )
            data = zf.read(found[0])
    except zipfile.BadZipFile as exc:
        raise RocmBakeError(f"{where}: rule wheel-archive: not a zip archive ({exc})") from None
    headers = email.parser.BytesParser().parsebytes(data, headersonly=True)
    meta_name, meta_version = headers.get("Name"), headers.get("Version")
    try:
        ok = (
            meta_name is not None and meta_version is not None
            and canonicalize_name(meta_name) == name.project and Version(meta_version) == name.version
        )
    except InvalidVersion:
        ok = False
    if not ok:
        raise RocmBakeError(
            f"{where}: rule metadata-matches-filename: METADATA says {meta_name} {meta_version}, "
            f"the filename says {name.project} {name.version}"
        )
    return data, headers.get("Requires-Python")


def _inspect(path: Path, name: WheelName, arch: str, key: FileKey, prior: CacheEntry | None) -> tuple[CacheEntry, int]:
    """Everything derived from a wheel's bytes: metadata, sha256, the code-object check.

    Returns the cache entry and the bytes hashed (0 when the sha256 was cached).
    """
    metadata, _ = read_metadata(path, name, arch)
    sha = prior.sha256 if prior is not None else sha256_file(path)
    # The spec: wheels "indistinguishable afterwards" when fetched by the wrong
    # tag — so the device code itself must be for this index's arch.
    offload.check_wheel_for_arch(path, arch)
    if FileKey.of(path) != key:
        raise RocmBakeError(f"{path.name} (index {arch}): rule stable-input: changed while being read")
    entry = CacheEntry(key=key, sha256=sha, arch_ok=[arch], metadata_b64=CacheEntry.encode(metadata))
    return entry, 0 if prior is not None else key.size


def inspect_wheels(
    paths: list[Path], names: list[WheelName], arch: str, cache: HashCache, workers: int
) -> tuple[list[CacheEntry], int]:
    """Cached entries for unchanged files; the rest inspected in threads (hashlib drops the GIL)."""
    keys = [FileKey.of(p) for p in paths]
    entries: list[CacheEntry | None] = []
    todo: list[int] = []
    for i, key in enumerate(keys):
        hit = cache.lookup(key)
        if hit is not None and arch in hit.arch_ok and hit.metadata_b64 is not None:
            entries.append(hit)
        else:
            entries.append(None)
            todo.append(i)
    problems: list[str] = []
    hashed = 0
    if todo:
        with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            futures = {
                i: pool.submit(_inspect, paths[i], names[i], arch, keys[i], cache.lookup(keys[i]))
                for i in todo
            }
            for i, future in futures.items():
                try:
                    entries[i], nbytes = future.result()
                    hashed += nbytes
                except RocmBakeError as exc:
                    problems.append(str(exc))
    if problems:
        raise _combined(problems, arch)
    done = [e for e in entries if e is not None]
    for entry in done:
        cache.record(entry)
    cache.keep_only({e.key.path for e in done})
    cache.save()
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


def render_pages(arch: str, wheels: list[PlannedWheel], wheel_url: str | None) -> dict[str, bytes]:
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
    arch: str,
    wheels_dir: Path,
    dist: Path,
    wheel_url: str | None = None,
    rocm_version: str = DEFAULT_ROCM_VERSION,
    workers: int | None = None,
) -> IndexPlan:
    """Validate, hash (cached) and render everything without writing the index."""
    validate_arch(arch)
    check_rocm_version(rocm_version)
    wheel_url = check_wheel_url(wheel_url)
    wheels_dir, dist = Path(wheels_dir), Path(dist)
    paths = list_wheels(wheels_dir, arch)
    names = validate_names(paths, arch, rocm_version)

    cache = HashCache(cache_path(dist, arch))
    entries, hashed = inspect_wheels(paths, names, arch, cache, workers or min(4, os.cpu_count() or 1))
    planned = []
    for path, name, entry in zip(paths, names, entries):
        metadata = entry.metadata or b""
        headers = email.parser.BytesParser().parsebytes(metadata, headersonly=True)
        planned.append(
            PlannedWheel(
                filename=path.name, project=name.project, version=str(name.version),
                sha256=entry.sha256, size=entry.key.size, metadata=metadata,
                requires_python=headers.get("Requires-Python"), source=str(path),
            )
        )

    pins = {name.project: name.version for name in names}
    meta_pkg = build_metapackage(arch, pins)
    planned.append(
        PlannedWheel(
            filename=meta_pkg.filename, project=METAPACKAGE, version=meta_pkg.version,
            sha256=hashlib.sha256(meta_pkg.data).hexdigest(), size=len(meta_pkg.data),
            metadata=meta_pkg.metadata, requires_python=None, source=None,
        )
    )
    planned.sort(key=lambda w: w.filename)
    pages = render_pages(arch, planned, wheel_url)
    return IndexPlan(
        arch=arch, dist=str(dist), wheel_url=wheel_url, wheels=planned, pages=pages,
        metapackage=meta_pkg, index_sha256=tree_digest(pages, planned), hashed_bytes=hashed,
    )


# --------------------------------------------------------------- writing


def link_or_copy(src: Path, dest: Path) -> None:
    """Hard link (no bytes copied); copy only when the link crosses devices."""
    try:
        os.link(src, dest)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copyfile(src, dest)


def _populate(tmp: Path, plan: IndexPlan) -> None:
    files = tmp / FILES_DIR
    files.mkdir()
    for wheel in plan.wheels:
        dest = files / wheel.filename
        if wheel.source is None:
            dest.write_bytes(plan.metapackage.data)
        else:
            link_or_copy(Path(wheel.source), dest)
        (files / f"{wheel.filename}.metadata").write_bytes(wheel.metadata)
    for rel, data in plan.pages.items():
        page = tmp / rel
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_bytes(data)


def _swap_into_place(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` to ``final``; the old tree is moved aside first and restored on failure."""
    old = None
    if final.exists() or final.is_symlink():
        if not is_rocm_bake_index(final) and (final.is_symlink() or not final.is_dir() or any(final.iterdir())):
            raise RocmBakeError(
                f"{final} exists and is not an index rocm-bake wrote; refusing to replace it"
            )
        old = Path(tempfile.mkdtemp(prefix=f".old-{final.name}-", dir=final.parent))
        os.rename(final, old / "tree")
    try:
        os.rename(tmp, final)
    except BaseException:
        if old is not None:
            os.rename(old / "tree", final)
            old.rmdir()
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _same_bytes(path: Path, data: bytes) -> bool:
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def tree_matches(plan: IndexPlan) -> bool:
    """True when the index on disk is exactly what ``plan`` would write.

    Pages, ``.metadata`` files and the metapackage are compared byte for byte;
    an input wheel must be the very same file (hard link: same inode and
    size). Anything extra, missing or different means a rewrite. A copied
    (cross-device) wheel never matches, so it is re-copied.
    """
    root = plan.index_dir
    if not is_rocm_bake_index(root):
        return False
    files = root / FILES_DIR
    expected = {f"{FILES_DIR}/{w.filename}" for w in plan.wheels}
    expected |= {f"{FILES_DIR}/{w.filename}.metadata" for w in plan.wheels} | set(plan.pages)
    present = set()
    for dirpath, _dirs, names in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        present.update(name if rel == "." else f"{rel}/{name}" for name in names)
    if present != expected:
        return False
    for rel, data in plan.pages.items():
        if not _same_bytes(root / rel, data):
            return False
    for wheel in plan.wheels:
        if not _same_bytes(files / f"{wheel.filename}.metadata", wheel.metadata):
            return False
        dest = files / wheel.filename
        if wheel.source is None:
            if not _same_bytes(dest, plan.metapackage.data):
                return False
            continue
        src, got = os.stat(wheel.source), os.stat(dest)
        if (src.st_ino, src.st_dev, src.st_size) != (got.st_ino, got.st_dev, got.st_size):
            return False
    return True


def write_index(plan: IndexPlan) -> IndexResult:
    """Write ``plan`` (temp dir, then rename); a tree that already matches is left alone."""
    final = plan.index_dir
    unchanged = tree_matches(plan)
    if not unchanged:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{plan.arch}-", dir=final.parent))
        try:
            _populate(tmp, plan)
            _swap_into_place(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return IndexResult(
        arch=plan.arch,
        index_dir=str(final),
        wheel_count=len(plan.wheels),
        index_sha256=plan.index_sha256,
        metapackage=plan.metapackage.filename,
        files=[IndexFile(filename=w.filename, sha256=w.sha256, size=w.size) for w in plan.wheels],
        hashed_bytes=plan.hashed_bytes,
        unchanged=unchanged,
    )


def build_index(
    arch: str,
    wheels_dir: Path,
    dist: Path,
    wheel_url: str | None = None,
    rocm_version: str = DEFAULT_ROCM_VERSION,
) -> IndexResult:
    """Validate ``wheels_dir``'s wheels for ``arch`` and (re)write ``DIST/index/<arch>/``."""
    return write_index(plan_index(arch, wheels_dir, dist, wheel_url, rocm_version))
