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
import os
from pathlib import Path

from rocm_bake import progress
from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index import lock, stamp
from rocm_bake.index.defaults import FILES_DIR
from rocm_bake.index.models import IndexFile, IndexPlan, IndexResult, index_dir
from rocm_bake.index.pages import exposed_pins
from rocm_bake.index.plan import plan_index
from rocm_bake.index.rules import check_dist
from rocm_bake.index.tree import TreeFile, TreeStore, WriteStats, fault_point
from rocm_bake.index.versions import DEFAULT_ROCM_VERSION


def _store(dist: Path, arch: ArchSet) -> TreeStore:
    return TreeStore(Path(dist), arch.dir_name, stamp.lock_path(Path(dist), arch.dir_name))


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
