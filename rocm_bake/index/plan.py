"""Planning an index: validate, hash (cached) and render the whole tree in memory, writing nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rocm_bake.archset import ArchSet
from rocm_bake.index import lock, stamp
from rocm_bake.index.hashcache import HashCache, hash_workers
from rocm_bake.index.metapackage import build_metapackage
from rocm_bake.index.models import IndexPlan, PlannedWheel, cache_path, index_dir
from rocm_bake.index.pages import render_pages, tree_digest
from rocm_bake.index.rules import (
    check_dist,
    check_index_base,
    check_wheel_url,
    inspect_wheels,
    list_wheels,
    validate_names,
)
from rocm_bake.index.versions import DEFAULT_ROCM_VERSION, METAPACKAGE, check_rocm_version


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
