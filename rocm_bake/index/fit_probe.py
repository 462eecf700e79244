"""Ask an installed index's own checker whether it fits, on fake hosts: part of ``index check``.

Every index's metapackage carries ``python -m rocm_torch``; a checker that
says "ok" on the wrong GPU, or fails on the right one, is a broken
metapackage. So after each install ``index check`` runs it in the throwaway
venv against two fake KFD trees (``rocm_bake.gpu.fake_kfd``): a host of the
index's own arches (must exit 0) and a host of another arch (must exit 1).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from rocm_bake.archset import KNOWN_ARCHES, ArchSet, sorted_arches
from rocm_bake.gpu.fake_kfd import host

Runner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


def another_arch(arch: ArchSet) -> str:
    """The first known arch outside ``arch``: the fake host this index must not claim to cover."""
    return next(a for a in sorted_arches(KNOWN_ARCHES) if a not in arch.arches)


def fake_hosts(arch: ArchSet) -> list[tuple[list[str], int]]:
    """(the host's GPUs, the exit code the checker must give there)."""
    return [(list(arch.arches), 0), ([another_arch(arch)], 1)]


def fit_problems(venv_python: Path, arch: ArchSet, work: Path, run: Runner, timeout: float) -> list[str]:
    """What the installed checker got wrong on the fake hosts (empty: it told both right)."""
    problems: list[str] = []
    for gpus, want in fake_hosts(arch):
        root = host(work / f"kfd-{'-'.join(gpus)}", gpus)
        proc = run([str(venv_python), "-I", "-m", "rocm_torch", "--sysfs-root", str(root), "--json"], timeout)
        try:
            reason = json.loads(proc.stdout)["reason"]
        except (ValueError, KeyError, TypeError):
            reason = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        if proc.returncode != want:
            problems.append(f"python -m rocm_torch on a {', '.join(gpus)} host exited {proc.returncode}, "
                            f"expected {want}: {reason}")
    return problems
