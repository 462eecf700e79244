"""OCI registry: the generic client and its parts, rocm-bake's image tags, the selective wheel fetch, the loopback server.

The package face (see ``rocm_bake.lazy_face``): the CLI and the components import from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocm_bake.lazy_face import lazy_getattr

_EXPORTS: dict[str, str] = {
    "DEFAULT_WHEEL_DIR": "extract",
    "FETCH_MANIFEST": "extract",
    "FetchResult": "extract",
    "RegistryClient": "client",
    "check_ref_for_arch": "tags",
    "fetch_wheels": "extract",
    "read_fetch_manifest": "extract",
    "reusable": "extract",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from rocm_bake.registry.client import RegistryClient
    from rocm_bake.registry.tags import check_ref_for_arch
    from rocm_bake.registry.extract import DEFAULT_WHEEL_DIR, FETCH_MANIFEST, FetchResult, fetch_wheels, read_fetch_manifest, reusable


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
