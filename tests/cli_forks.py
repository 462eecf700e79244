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

import _collections_abc
import importlib
import json
import os
import pathlib
import pkgutil
import runpy
import signal
import sys
import time
import traceback
from typing import Any

import rocm_bake

#: Libraries commands import when they run (the CLI keeps them off its start-up path): imported once here too.
#: Only third-party ones, whose import reads neither the environment nor the working directory.
PRELOADED = ("httpx", "pydantic", "yaml", "packaging.metadata", "packaging.version")
#: The product's own modules (the CLI's and every command's) are imported once here too, their pydantic models
#: built once: all but the entry point. A fork must still see its own job's environment and cwd, so none of them
#: may read either while it is imported: ``_preload_product`` refuses to start, naming the line and what it read.
SKIPPED = ("rocm_bake.__main__",)


class ImportReadsJobState(RuntimeError):
    """A product module read the environment or the working directory while it was imported."""


#: Where the standard ways to read the environment or the cwd (os.getenv, Mapping.get, Path.cwd/home) live:
#: passed over to find the code that asked.
READERS = ("<frozen os>", "<frozen posixpath>", "<frozen _collections_abc>", _collections_abc.__file__,
           pathlib.__file__)


def _read_by_product(what: str) -> None:
    """Raise when the code reading ``what`` (the first frame outside ``READERS``) is the product's own."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in READERS:
        frame = frame.f_back
    if frame is not None and frame.f_code.co_filename.startswith(os.path.dirname(rocm_bake.__file__) + os.sep):
        raise ImportReadsJobState(f"{frame.f_code.co_filename}:{frame.f_lineno} reads {what} while imported: "
                                  "a fork would see the fork server's, not its job's")


def _preload_product() -> None:
    """Import every product module with reads of the environment and of the cwd watched (see ``SKIPPED``)."""
    environ_type, real_getcwd = type(os.environ), os.getcwd
    real_getitem, real_iter = environ_type.__getitem__, environ_type.__iter__

    def getitem(self: Any, key: str) -> Any:
        _read_by_product(f"the environment ({key})")
        return real_getitem(self, key)

    def iterate(self: Any) -> Any:
        _read_by_product("the environment")
        return real_iter(self)

    def getcwd() -> str:
        _read_by_product("the working directory")
        return real_getcwd()

    environ_type.__getitem__, environ_type.__iter__, os.getcwd = getitem, iterate, getcwd  # type: ignore[method-assign]
    try:
        for module in pkgutil.walk_packages(rocm_bake.__path__, "rocm_bake."):
            if module.name not in SKIPPED:
                importlib.import_module(module.name)
    finally:
        environ_type.__getitem__, environ_type.__iter__, os.getcwd = real_getitem, real_iter, real_getcwd  # type: ignore[method-assign]


for _name in PRELOADED:
    importlib.import_module(_name)
_preload_product()


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
