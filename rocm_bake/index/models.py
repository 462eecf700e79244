"""What an index build plans and reports, and where an arch's index and hash cache live under DIST."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rocm_bake.archset import ArchSet
from rocm_bake.index.metapackage import Metapackage


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
