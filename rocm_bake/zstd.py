"""zstd through one declared dependency: 3.14's ``compression.zstd``, or its backport ``backports.zstd``.

BuildKit pushes ``+zstd`` layers when asked (``compression=zstd``) and clang
writes CCOB method-1 bundles with zstd: both must read here without a CLI or
an optional package that may or may not be installed.
"""

from __future__ import annotations

import functools
from types import ModuleType


@functools.cache
def zstd() -> ModuleType:
    """The zstd module, looked up once (imported on first use: most commands never need it)."""
    try:
        from compression import zstd as module  # type: ignore[import-not-found]  # Python 3.14+
    except ImportError:
        try:
            from backports import zstd as module  # the declared backport on 3.11-3.13
        except ImportError as exc:  # pragma: no cover - a broken install
            from rocm_bake.errors import RocmBakeError

            raise RocmBakeError(
                f"zstd support is missing ({exc}): reinstall rocm-bake, which depends on backports.zstd"
            ) from None
    return module
