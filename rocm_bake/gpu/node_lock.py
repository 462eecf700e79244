"""The busy-node lock: one GPU test at a time per node, held over the SSH session.

The busy case: the default gpu_node holds a lock file while a test
runs, a second test on the same node waits with a visible message or fails
after a configurable timeout, and ``--host`` moves it to another node that
holds the card. The lock is ``flock(1)`` on the node itself, taken by the
remote shell that runs the test, so it is released when that shell exits
(test finished, or the SSH session and its shell died) — no stale lock
files to clean up by hand. The lock file's content names the holder, so a
waiter can say who it is waiting for.

The remote side talks back on stderr in lines starting with
``rocm-bake-lock:``; :class:`LockProtocol` turns them into events.
"""

from __future__ import annotations

import getpass
import os
import shlex
import socket
import time
from dataclasses import dataclass, field

from rocm_bake.archset import Arch
from rocm_bake.errors import RocmBakeError

DEFAULT_LOCK_PATH = "/tmp/rocm-bake-gpu.lock"
PREFIX = "rocm-bake-lock: "
#: Remote status when the lock was not obtained (EX_TEMPFAIL: try again later).
LOCK_FAILED_STATUS = 75


class LockTimeout(RocmBakeError):
    """The node stayed busy for the whole lock timeout."""


def holder_text(arch: Arch, image: str) -> str:
    """Who holds the lock: written into the lock file for waiters to show."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    name, _, digest = image.partition("@")
    short = f"{name.rsplit('/', 1)[-1]}@{digest[:19]}" if digest else name.rsplit("/", 1)[-1]
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()} ({arch} {short}) since {stamp}"


def _seconds(timeout: float) -> str:
    if timeout < 0:
        raise RocmBakeError(f"lock timeout {timeout} is negative: expected seconds >= 0")
    return f"{timeout:g}"


def locked_command(command: str, node: str, lock_path: str, timeout: float, holder: str) -> str:
    """``command`` wrapped so it runs only while holding ``lock_path`` on the node.

    Returns one ``sh -c`` command line for ssh. The test's own exit status is
    passed through; the wrapper itself exits 75 (with a ``timeout:`` or
    ``error:`` line) only when the lock was not obtained.
    """
    if not lock_path.startswith("/"):
        raise RocmBakeError(f"lock path {lock_path!r} for node {node} must be absolute")
    secs = _seconds(timeout)
    q = shlex.quote
    script = f"""
lock={q(lock_path)}
if ! command -v flock >/dev/null 2>&1; then
  echo "{PREFIX}error: flock(1) not found on node {node} (install util-linux)" >&2
  exit {LOCK_FAILED_STATUS}
fi
if ! true 2>/dev/null >>"$lock"; then
  echo "{PREFIX}error: cannot open lock file $lock on node {node}" >&2
  exit {LOCK_FAILED_STATUS}
fi
exec 9>>"$lock"
if ! flock -n 9; then
  held=$(head -n 1 "$lock" 2>/dev/null)
  echo "{PREFIX}waiting: waiting for lock on {node} held by ${{held:-unknown}} (lock $lock, timeout {secs}s)" >&2
  if ! flock -w {secs} 9; then
    held=$(head -n 1 "$lock" 2>/dev/null)
    echo "{PREFIX}timeout: timed out after {secs}s waiting for lock on {node} held by ${{held:-unknown}}" >&2
    exit {LOCK_FAILED_STATUS}
  fi
fi
printf '%s\\n' {q(holder)} > "$lock"
echo "{PREFIX}acquired" >&2
( {command} ) 9>&-
status=$?
: > "$lock"
exit $status
"""
    return f"sh -c {q(script)}"


@dataclass
class LockProtocol:
    """Parses the wrapper's ``rocm-bake-lock:`` stderr lines for one run."""

    node: str
    acquired: bool = False
    waited: bool = False
    timeout_message: str | None = None
    error_message: str | None = None
    wait_started: float | None = None
    messages: list[str] = field(default_factory=list)

    def feed(self, line: str) -> str | None:
        """Consume one stderr line; return a message to show, or None.

        Non-protocol lines are returned unchanged (the test's own stderr).
        """
        if not line.startswith(PREFIX):
            return line
        kind, _, text = line[len(PREFIX):].rstrip("\n").partition(": ")
        if kind == "acquired":
            self.acquired = True
            if self.waited and self.wait_started is not None:
                return f"rocm-bake: lock on {self.node} acquired after {time.monotonic() - self.wait_started:.1f}s\n"
            return None
        if kind == "waiting":
            self.waited = True
            self.wait_started = time.monotonic()
        elif kind == "timeout":
            self.timeout_message = text
        elif kind == "error":
            self.error_message = text
        self.messages.append(text)
        return f"rocm-bake: {text}\n"

    def check(self, status: int) -> None:
        """Raise when the wrapper, not the test, ended the run."""
        if self.acquired or status != LOCK_FAILED_STATUS:
            return
        if self.timeout_message:
            raise LockTimeout(self.timeout_message)
        if self.error_message:
            raise RocmBakeError(self.error_message)
