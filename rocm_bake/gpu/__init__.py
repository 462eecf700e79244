"""GPUs: detecting them on this host, and running a test on a fleet node over SSH.

The package face (see ``rocm_bake.lazy_face``): the CLI and the components import from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocm_bake.lazy_face import lazy_getattr

_EXPORTS: dict[str, str] = {
    "Detection": "detect",
    "Gpu": "detect",
    "LOCK_TIMEOUT_STATUS": "status",
    "NOT_COVERED_STATUS": "status",
    "RocminfoRunner": "detect",
    "detect_gpus": "detect",
    "not_covered_message": "remote_test",
    "run_gpu_test": "remote_test",
    "run_rocminfo": "detect",
    "select_node": "remote_test",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from rocm_bake.gpu.detect import Detection, Gpu, RocminfoRunner, detect_gpus, run_rocminfo
    from rocm_bake.gpu.remote_test import not_covered_message, run_gpu_test, select_node
    from rocm_bake.gpu.status import LOCK_TIMEOUT_STATUS, NOT_COVERED_STATUS


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
