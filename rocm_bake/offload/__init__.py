"""Which GPUs a wheel's device code is for, read from its offload bundles.

The package face: the CLI, the index and the components import from here.
Names load lazily (PEP 562): ``which-index`` needs only ``GENERIC_COVERS``
(from the pydantic-free ``targets``), so importing the face costs nothing
until a name is used.

Modules: ``targets`` (gfx names, bundle id grammar, generic coverage),
``corrupt`` (the parsers' one error and their byte getter), ``elf`` (ELF file
and section headers), ``bundle`` (uncompressed bundle headers), ``ccob``
(compressed bundle headers), ``inflate`` (zlib/zstd inflation of a CCOB's
prefix), ``source`` (a member read once front to back, or in place when
stored), ``scan`` (the ``.hip_fatbin`` walk), ``models`` (the plain
reports), ``wheel`` (per-wheel reports and the arch check).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocm_bake.lazy_face import lazy_getattr

_EXPORTS: dict[str, str] = {
    "AMDGPU_MACH": "targets",
    "BUNDLE_MAGIC": "bundle",
    "BundleEntry": "models",
    "BundleId": "targets",
    "CCOB_MAGIC": "ccob",
    "CCOB_METHODS": "ccob",
    "CodeObjectSource": "models",
    "DEVICE_KINDS": "targets",
    "GENERIC_COVERS": "targets",
    "WheelTargets": "models",
    "check_wheel_for_arch": "wheel",
    "covers": "targets",
    "parse_bundle_id": "targets",
    "wheel_targets": "wheel",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from rocm_bake.offload.bundle import BUNDLE_MAGIC
    from rocm_bake.offload.ccob import CCOB_MAGIC, CCOB_METHODS
    from rocm_bake.offload.models import BundleEntry, CodeObjectSource, WheelTargets
    from rocm_bake.offload.targets import (
        AMDGPU_MACH,
        DEVICE_KINDS,
        GENERIC_COVERS,
        BundleId,
        covers,
        parse_bundle_id,
    )
    from rocm_bake.offload.wheel import check_wheel_for_arch, wheel_targets


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
