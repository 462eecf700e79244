"""Find the local AMD GPUs' gfx names: KFD topology first, ``rocminfo`` second.

Users of per-arch indexes "must know their GPU's gfx name before they can
install anything, and a wrong URL means a wrong wheel". The kernel's KFD
topology (``/sys/class/kfd/kfd/topology/nodes/*/properties``) needs no ROCm
install; ``rocminfo`` is the fallback when that tree is absent.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from rocm_bake.gpu import kfd
from rocm_bake.gpu.kfd import KFD_NODES, gfx_from_target_version

__all__ = ["KFD_NODES", "Detection", "Gpu", "RocminfoRunner", "detect_gpus", "gfx_from_target_version",
           "parse_rocminfo", "read_kfd", "run_rocminfo"]

#: Runs ``rocminfo`` and returns its stdout, or None when it is unavailable.
RocminfoRunner = Callable[[], "str | None"]


class Gpu(BaseModel):
    """One GPU agent: where it was seen and its processor name."""

    gfx: str
    source: Literal["kfd", "rocminfo"]
    node: str
    marketing_name: str | None = None


class Detection(BaseModel):
    """What was looked at and what was found (``gpus`` empty: no AMD GPU)."""

    gpus: list[Gpu]
    source: Literal["kfd", "rocminfo", "none"]
    looked_at: list[str]


def read_kfd(sysfs_root: Path) -> list[Gpu] | None:
    """GPUs in the KFD topology under ``sysfs_root`` (see ``rocm_bake.gpu.kfd``); None when the tree is absent."""
    found = kfd.read_kfd(sysfs_root)
    if found is None:
        return None
    return [Gpu(gfx=g.gfx, source="kfd", node=g.node, marketing_name=g.marketing_name) for g in found]


_AGENT = re.compile(r"^\s*Agent\s+(\d+)\s*$", re.MULTILINE)
_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?):\s*(.*?)\s*$")


def parse_rocminfo(text: str) -> list[Gpu]:
    """GPU agents in ``rocminfo`` output: their first ``Name: gfx…`` line.

    Each agent block is headed ``Agent N``; only blocks whose ``Device Type``
    is GPU count (CPU agents are named after the CPU model).
    """
    gpus: list[Gpu] = []
    marks = list(_AGENT.finditer(text))
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(text)
        fields: dict[str, str] = {}
        for line in text[mark.end() : end].splitlines():
            match = _FIELD.match(line)
            if match and match.group(1) not in fields:
                fields[match.group(1)] = match.group(2)
        if fields.get("Device Type", "").upper() != "GPU":
            continue
        name = fields.get("Name", "")
        if not re.fullmatch(r"gfx[0-9a-f]+", name):
            continue
        gpus.append(
            Gpu(gfx=name, source="rocminfo", node=f"agent {mark.group(1)}",
                marketing_name=fields.get("Marketing Name") or None)
        )
    return gpus


def run_rocminfo() -> str | None:
    """Real ``rocminfo`` stdout, or None when it is not installed or fails."""
    exe = shutil.which("rocminfo")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def detect_gpus(sysfs_root: Path = Path("/"), rocminfo: RocminfoRunner = run_rocminfo) -> Detection:
    """KFD topology when present, else ``rocminfo``; empty ``gpus`` means none found."""
    kfd.check_sysfs_root(sysfs_root)
    looked = [str(sysfs_root / KFD_NODES)]
    found = read_kfd(sysfs_root)
    if found is not None:
        return Detection(gpus=found, source="kfd", looked_at=looked)
    looked.append("rocminfo")
    text = rocminfo()
    if text is None:
        return Detection(gpus=[], source="none", looked_at=looked)
    return Detection(gpus=parse_rocminfo(text), source="rocminfo", looked_at=looked)
