"""Per-arch PEP 503/658 index: models, rules, pages, plan and build; metapackage, version rules, hash cache, install check.

The package face (see ``rocm_bake.lazy_face``): the CLI and the components import from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocm_bake.lazy_face import lazy_getattr

_EXPORTS: dict[str, str] = {
    "DEFAULT_ROCM_VERSION": "defaults",
    "INSTALLERS": "defaults",
    "IndexResult": "models",
    "MAX_METADATA_BYTES": "wheelfile",
    "PYPI": "defaults",
    "WheelMetadata": "wheelfile",
    "build_index": "build",
    "check_index": "check",
    "check_rocm_version": "versions",
    "index_dir": "models",
    "is_rocm_bake_index": "tree",
    "parse_core_metadata": "wheelfile",
    "plan_index": "plan",
    "remove_index": "build",
    "tree_matches": "build",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from rocm_bake.index.build import build_index, remove_index, tree_matches
    from rocm_bake.index.models import IndexResult, index_dir
    from rocm_bake.index.plan import plan_index
    from rocm_bake.index.check import check_index
    from rocm_bake.index.defaults import DEFAULT_ROCM_VERSION, INSTALLERS, PYPI
    from rocm_bake.index.tree import is_rocm_bake_index
    from rocm_bake.index.versions import check_rocm_version
    from rocm_bake.index.wheelfile import (
        MAX_METADATA_BYTES,
        WheelMetadata,
        parse_core_metadata,
    )


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
