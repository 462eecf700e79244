"""Fake KFD topology trees for tests: the real-host ones of ``rocm_bake.gpu.fake_kfd``, and hostile ones.

``kfd_tree`` writes what the kernel never would, for the hostile cases.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rocm_bake.gpu.fake_kfd import CPU_PROPS, gpu_props, host, sysfs
from rocm_bake.gpu.kfd import KFD_NODES

__all__ = ["CPU_PROPS", "NODES", "gpu_props", "host", "kfd_tree", "sysfs"]

#: Where the nodes live under a ``--sysfs-root``.
NODES = KFD_NODES


def kfd_tree(root: Path, nodes: dict[str, str | bytes | None | Callable[[Path], None]]) -> Path:
    """A KFD topology under ``root`` with exactly these node entries (names as given, in any order)."""
    top = root / NODES
    top.mkdir(parents=True)
    for name, content in nodes.items():
        entry = top / name
        if callable(content):
            content(entry)
            continue
        entry.mkdir()
        if isinstance(content, bytes):
            (entry / "properties").write_bytes(content)
        elif content is not None:
            (entry / "properties").write_text(content)
    return root
