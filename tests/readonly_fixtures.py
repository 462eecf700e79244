"""Run the CLI with one directory read-only, for real, whoever runs the tests.

As root a mode of 0555 changes nothing (root writes anyway), so the directory
is bind-mounted read-only in a private mount namespace (``unshare --mount``)
that only the command sees; as another user its mode is 0555. Either way the
command meets the same refusal a read-only dist gives it. No skip: if neither
can be arranged the test fails naming what is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REMOUNT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


def run_read_only(directory: Path, argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``rocm-bake ARGV`` with ``directory`` read-only for it; the directory is writable again afterwards."""
    command = [sys.executable, "-m", "rocm_bake", *argv]
    env = {k: v for k, v in {**os.environ, **(env or {})}.items() if "proxy" not in k.lower()}
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
        finally:
            directory.chmod(0o755)
    if shutil.which("unshare") is None:
        pytest.fail("a read-only directory for root needs unshare(1) from util-linux: apt-get install util-linux")
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", REMOUNT, "sh",
                            str(directory), "true"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.fail(f"cannot bind-mount {directory} read-only in a private mount namespace "
                    f"(needs CAP_SYS_ADMIN): {probe.stderr.strip()}")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", REMOUNT, "sh",
                           str(directory), *command], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
