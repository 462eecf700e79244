"""Run many ``python -m rocm_bake`` calls as forks of one interpreter that has imported the CLI once.

Each call is still its own process (its own cwd, environment, file
descriptors, exit code, and a timeout that kills its process group), run
the way ``python -m rocm_bake`` runs it (``runpy`` on ``rocm_bake.__main__``,
an uncaught exception printed as the interpreter prints it, exit 1), but
without an interpreter start and the CLI's imports per call. The parent is
this module run alone (``python -m tests.cli_forks``), single-threaded, so a
fork never copies a lock another thread holds.

Input on stdin, one JSON object: ``{"workers": N, "timeout_s": T, "jobs": [{"argv", "cwd", "env", "stderr"}]}``.
Output on stdout, one JSON line per job as it ends: ``{"index": i, "returncode": rc, "seconds": s}``; after a
timeout ``{"index": i, "returncode": null}``.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import signal
import sys
import time
import traceback
from typing import Any

import rocm_bake.cli  # noqa: F401  (imported once here, inherited by every fork)

#: Libraries commands import when they run (the CLI keeps them off its start-up path): imported once here too.
#: Only third-party ones, whose import reads neither the environment nor the working directory.
PRELOADED = ("httpx", "pydantic", "yaml", "packaging.metadata", "packaging.version")
for _name in PRELOADED:
    importlib.import_module(_name)


def _child(job: dict[str, Any]) -> int:
    """Become ``python -m rocm_bake ARGV`` in the job's cwd and environment; the exit code."""
    os.setpgid(0, 0)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    devnull = os.open(os.devnull, os.O_RDWR)
    err = os.open(job["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(err, 2)
    sys.stdin = open(0, "r", closefd=False)  # noqa: SIM115 - the process's own streams, closed at exit
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.argv = ["rocm_bake", *job["argv"]]
    try:
        runpy.run_module("rocm_bake", run_name="__main__", alter_sys=True)
        code: int = 0
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:  # sys.exit("message"): the interpreter prints it and exits 1
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - an uncaught exception, reported as the interpreter reports it
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            pass
    return code


def _start(job: dict[str, Any]) -> int:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = _child(job)
        finally:
            os._exit(code & 0xFF)
    return pid


def main() -> None:
    spec = json.load(sys.stdin)
    jobs: list[dict[str, Any]] = spec["jobs"]
    workers, timeout_s = int(spec["workers"]), float(spec["timeout_s"])
    waiting = list(enumerate(jobs))
    running: dict[int, tuple[int, float]] = {}  # pid -> (job index, start)
    while waiting or running:
        while waiting and len(running) < workers:
            index, job = waiting.pop(0)
            running[_start(job)] = (index, time.monotonic())
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            index, started = running.pop(pid)
            print(json.dumps({"index": index, "returncode": os.waitstatus_to_exitcode(status),
                              "seconds": round(time.monotonic() - started, 3)}), flush=True)
            continue
        now = time.monotonic()
        for pid, (index, started) in list(running.items()):
            if now - started > timeout_s:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                del running[pid]
                print(json.dumps({"index": index, "returncode": None}), flush=True)
        time.sleep(0.005)


if __name__ == "__main__":
    main()
