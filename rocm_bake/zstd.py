"""zstd through one declared dependency: 3.14's ``compression.zstd``, or its backport ``backports.zstd``.

BuildKit pushes ``+zstd`` layers when asked (``compression=zstd``) and clang
writes CCOB method-1 bundles with zstd: both must read here without a CLI or
an optional package that may or may not be installed.
"""

from __future__ import annotations

import functools
import sys
from types import ModuleType


@functools.cache
def zstd_if_installed() -> ModuleType | None:
    """The zstd module, looked up once, or None where neither is importable.

    By version, as pyproject.toml declares it: the backport is installed only
    where ``python_version < "3.14"``, and 3.14 has no use for it. The
    ``rocm_torch`` checker carries a copy of this module and runs on any
    Python, with or without the backport: there, None leaves zstd bundles unread
    (their targets unknown), never a crash.
    """
    try:
        if sys.version_info >= (3, 14):
            from compression import zstd as module  # type: ignore[import-not-found]
        else:
            from backports import zstd as module
    except ImportError:
        return None
    return module


def zstd() -> ModuleType:
    """The zstd module (imported on first use: most commands never need it); rocm-bake always has one."""
    module = zstd_if_installed()
    if module is None:  # pragma: no cover - a broken install
        from rocm_bake.errors import RocmBakeError

        raise RocmBakeError(
            "zstd support is missing: reinstall rocm-bake (on Python below 3.14 it depends on backports.zstd)"
        )
    return module
