"""The index about to be published, read from ``DIST/index/<dir_name>/`` and checked against GitHub's limits.

Publishing sends what ``rocm-bake index build`` wrote and fetches nothing
again: the release gets every file of ``files/`` (wheels, their PEP 658
``.metadata``, the rocm-torch metapackage) and gh-pages the same pages
rendered with hrefs at the release's download URL. Every link carries a
``#sha256=`` fragment, so pip still verifies an asset served from elsewhere.

Everything here is checked before any request, so a refusal uploads
nothing: the index is present and its pages match its files, no asset is
2 GiB or more, no two names are one to GitHub, at most 1000 assets, no page
over 100 MB.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from packaging.utils import canonicalize_name
from pydantic import BaseModel

from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.defaults import FILES_DIR
from rocm_bake.index.models import PlannedWheel, index_dir
from rocm_bake.index.pages import render_pages
from rocm_bake.index.tree import is_rocm_bake_index
from rocm_bake.index.hashcache import HashCache
from rocm_bake.publish.github import MAX_ASSET_BYTES, MAX_GIT_BLOB_BYTES, MAX_RELEASE_ASSETS
from rocm_bake.install_line import LOCK_FILE, PYLOCK_FILE
from rocm_bake.publish.hashing import hash_files, publish_cache_path
from rocm_bake.publish.naming import pages_prefix

#: Characters GitHub keeps in an asset name; anything else it renames, which would break the hrefs.
SAFE_ASSET_NAME = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]*[A-Za-z0-9_+-]$")


class LocalFile(BaseModel):
    name: str
    path: str
    size: int
    sha256: str


class LocalIndex(BaseModel):
    """The published-to-be content of ``DIST/index/<dir_name>/``, checked and hashed."""

    arch: ArchSet
    index_dir: str
    files: list[LocalFile]
    wheels: list[PlannedWheel]
    #: The hash lock beside the index (published beside its pages), None when the build could not resolve one.
    lock: bytes | None = None
    pylock: bytes | None = None


def check_asset_names(names: list[str], arch: ArchSet) -> None:
    """Refuse names GitHub would rename, and names it would treat as the same asset."""
    problems = [f"{n}: GitHub renames asset names with other characters than A-Z a-z 0-9 . _ + - "
                f"(or a leading/trailing period), which would break the index hrefs"
                for n in names if not SAFE_ASSET_NAME.match(n)]
    seen: dict[str, str] = {}
    for n in names:
        other = seen.setdefault(n.lower(), n)
        if other != n:
            problems.append(f"{other} and {n}: two assets with the same name (GitHub compares case-insensitively)")
    if len(names) > MAX_RELEASE_ASSETS:
        problems.append(f"{len(names)} assets: a GitHub release holds at most {MAX_RELEASE_ASSETS}")
    if problems:
        raise RocmBakeError(f"refusing to publish {arch} (nothing uploaded):\n  " + "\n  ".join(problems))


def check_asset_sizes(paths: list[Path], arch: ArchSet) -> None:
    """stat only: a 2 GiB file is refused before anything is read or uploaded."""
    big = [p for p in paths if p.stat().st_size >= MAX_ASSET_BYTES]
    if big:
        listed = ", ".join(f"{p.name} ({p.stat().st_size} bytes)" for p in big)
        raise RocmBakeError(
            f"refusing to publish {arch} (nothing uploaded): {listed}: a GitHub release asset must be "
            f"under 2 GiB ({MAX_ASSET_BYTES} bytes)"
        )


def _planned_wheel(path: Path, sha: str, metadata: bytes) -> PlannedWheel:
    """The published ``.metadata`` validated as the index build validates METADATA (what pip and uv
    would reject fails here, naming the file and field), so a broken file never reaches a resolver."""
    from rocm_bake.index import parse_core_metadata

    meta = parse_core_metadata(metadata, f"{path.name}.metadata")
    return PlannedWheel(
        filename=path.name, project=canonicalize_name(meta.name), version=str(meta.version), sha256=sha,
        size=path.stat().st_size, metadata=metadata, requires_python=meta.requires_python,
        source=str(path),
    )


def _disk_pages(root: Path) -> dict[str, bytes]:
    pages = {}
    for dirpath, _dirs, names in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if rel.parts[:1] == (FILES_DIR,):
            continue
        for name in names:
            pages[(rel / name).as_posix()] = (Path(dirpath) / name).read_bytes()
    return pages


def read_local_index(dist: Path, arch: ArchSet, wheel_url: str | None = None) -> LocalIndex:
    """``DIST/index/<dir_name>/`` checked for publishing: present, consistent, within GitHub's limits.

    The pages on disk must be exactly what ``rocm_bake.index.pages`` renders for
    the files beside them (relative hrefs, or ``wheel_url`` ones), so a stale
    or hand-edited index is refused rather than published.
    """
    if Path(dist).exists() and not Path(dist).is_dir():
        raise RocmBakeError(f"--dist {dist}: is not a directory (expected the DIST that `rocm-bake index build` "
                            f"wrote index/<arch>/ into)")
    root = index_dir(Path(dist), arch)
    if not is_rocm_bake_index(root):
        raise RocmBakeError(f"{root}: no rocm-bake index for {arch}; run `rocm-bake index build --arch {arch}` first")
    files_dir = root / FILES_DIR
    paths = sorted(p for p in files_dir.iterdir()) if files_dir.is_dir() else []
    if not paths:
        raise RocmBakeError(f"{files_dir}: no files to publish for {arch}")
    odd = [p.name for p in paths if not p.is_file() or not (p.name.endswith(".whl") or p.name.endswith(".whl.metadata"))]
    if odd:
        raise RocmBakeError(f"{files_dir}: not a wheel or .metadata file: {', '.join(odd)}")
    check_asset_names([p.name for p in paths], arch)
    check_asset_sizes(paths, arch)
    wheel_paths = [p for p in paths if p.name.endswith(".whl")]
    missing = [p.name for p in wheel_paths if not (files_dir / f"{p.name}.metadata").is_file()]
    orphans = [p.name for p in paths if p.name.endswith(".metadata") and not (files_dir / p.name[: -len(".metadata")]).is_file()]
    if missing or orphans:
        raise RocmBakeError(f"{root}: index incomplete (wheel without .metadata: {missing}; .metadata without wheel: "
                            f"{orphans}); rebuild it with `rocm-bake index build`")
    shas = hash_files(paths, HashCache(publish_cache_path(Path(dist), arch)))
    wheels = [_planned_wheel(p, shas[p.name], (files_dir / f"{p.name}.metadata").read_bytes()) for p in wheel_paths]
    on_disk = _disk_pages(root)
    lock = on_disk.pop(LOCK_FILE, None)  # the pages are checked against the files; the locks were resolved from them
    pylock = on_disk.pop(PYLOCK_FILE, None)
    if on_disk not in (render_pages(arch, wheels, None), render_pages(arch, wheels, wheel_url)):
        raise RocmBakeError(f"{root}: the pages do not match the files beside them (stale or edited index); "
                            f"rebuild it with `rocm-bake index build --arch {arch}` before publishing")
    files = [LocalFile(name=p.name, path=str(p), size=p.stat().st_size, sha256=shas[p.name]) for p in paths]
    return LocalIndex(arch=arch, index_dir=str(root), files=files, wheels=wheels, lock=lock, pylock=pylock)


def desired_pages(local: LocalIndex, wheel_url: str) -> dict[str, bytes]:
    """gh-pages path -> bytes: the index pages with hrefs at the release download URL."""
    pages = render_pages(local.arch, local.wheels, wheel_url.rstrip("/"))
    if local.lock is not None:
        pages[LOCK_FILE] = local.lock
    if local.pylock is not None:
        from rocm_bake.index.lock import published_pylock

        pages[PYLOCK_FILE] = published_pylock(local.pylock, wheel_url)
    out = {pages_prefix(local.arch) + rel: data for rel, data in sorted(pages.items())}
    big = [p for p, d in out.items() if len(d) > MAX_GIT_BLOB_BYTES]
    if big:
        raise RocmBakeError(f"refusing {', '.join(big)}: GitHub refuses any file over 100 MB in git")
    return out
