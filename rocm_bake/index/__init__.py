"""Per-arch PEP 503/658 index: build, metapackage, version rules, hash cache, install check.

The package face: the CLI and the components import from here. Names load
lazily (PEP 562), so importing the face costs nothing until a name is used —
``rocm-bake --version`` must not pay for httpx or pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocm_bake.lazy_face import lazy_getattr

_EXPORTS: dict[str, str] = {
    "DEFAULT_ROCM_VERSION": "versions",
    "INSTALLERS": "check",
    "IndexResult": "build",
    "PYPI": "check",
    "build_index": "build",
    "check_index": "check",
    "index_dir": "build",
    "is_rocm_bake_index": "build",
    "plan_index": "build",
    "tree_matches": "build",
    "check_rocm_version": "versions",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from rocm_bake.index.build import IndexResult, build_index, index_dir, is_rocm_bake_index, plan_index, tree_matches
    from rocm_bake.index.check import INSTALLERS, PYPI, check_index
    from rocm_bake.index.versions import DEFAULT_ROCM_VERSION, check_rocm_version


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
