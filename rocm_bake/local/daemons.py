"""This checkout's background daemons, known by their pidfiles: is one ours, and stop it.

A pidfile alone is not proof: after a reboot or a crash its pid may belong
to anyone. A daemon is ours only while it runs its program and either its
command line names this checkout's own path for it (its state dir or
config), or it holds its cwd or an open file (its log) inside the pidfile's
directory. The kernel keeps those links true when the checkout is moved, so
``make down`` still finds a moved checkout's daemons, and never signals
another checkout's process or a stranger's. A pidfile whose pid still runs
the program is never deleted unless that process was ours and has stopped.

Standard library only (``make down`` runs it before or without the venv).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


#: What the user's shell may hold for pulumi's state bucket (the export lines ``make state-server`` prints):
#: no daemon of ours needs those keys, so none inherits them for its whole life.
NOT_FOR_DAEMONS = ("AWS_",)
SIGKILL_WAIT_S = 10.0  # a killed process whose threads are still exiting (e.g. flushing to a slow disk)


def daemon_env(also: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment for a daemon it starts: without ``NOT_FOR_DAEMONS`` (and ``also``) variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(NOT_FOR_DAEMONS + also)}


def cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def recorded_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def runs(pid: int, program: str) -> bool:
    """Whether process ``pid`` is alive and its executable is named ``program``."""
    args = cmdline(pid)
    return bool(args) and os.path.basename(args[0]) == program.encode()


def holds_inside(pid: int, directory: Path) -> bool:
    """Whether the process's cwd or one of its open files lies inside ``directory`` (as it is named now)."""
    inside = str(directory.resolve())
    links = [f"/proc/{pid}/cwd"]
    try:
        links += [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        pass
    for link in links:
        try:
            target = os.readlink(link)
        except OSError:
            continue
        if target == inside or target.startswith(inside + "/"):
            return True
    return False


def running_pid(pidfile: Path, program: str, marker: Path) -> int | None:
    """The pid in ``pidfile`` if that process runs ``program`` and is this checkout's (see the module's doc)."""
    pid = recorded_pid(pidfile)
    if pid is None or not runs(pid, program):
        return None
    if str(marker).encode() in b" ".join(cmdline(pid)) or holds_inside(pid, pidfile.parent):
        return pid
    return None


def stop(pidfile: Path, program: str, marker: Path, name: str, grace_s: float = 30.0) -> str:
    """SIGTERM to the daemon's session, up to ``grace_s`` to wind down, then SIGKILL; says what it did."""
    pid = running_pid(pidfile, program, marker)
    if pid is None:
        other = recorded_pid(pidfile)
        if other is not None and runs(other, program):
            return (f"{name}: pid {other} in {pidfile} runs {program} but is not recognisably this checkout's; "
                    "left alone (pidfile kept)")
        pidfile.unlink(missing_ok=True)
        return f"{name}: not running"
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, signal.SIGTERM)
    deadline, killed = time.monotonic() + grace_s, False
    while alive(pid):  # not its identity: a process tearing down has no cmdline any more, yet still runs
        reap(pid)
        if time.monotonic() > deadline:
            if killed:
                break
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            # wait for its threads to go after SIGKILL too: until the last one has, its ports are still taken
            deadline, killed = time.monotonic() + SIGKILL_WAIT_S, True
        time.sleep(0.05)
    reap(pid)
    pidfile.unlink(missing_ok=True)
    return f"{name}: stopped (pid {pid})"


def alive(pid: int) -> bool:
    """Whether any thread of ``pid`` still runs (is not a zombie or dead).

    Every thread counts, not only the leader: a Go daemon's main thread can be a zombie while its other threads are
    still exiting, and those still hold its files, so its listening port stays taken until the last one is gone.
    """
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            if (task / "stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                return True
        except (OSError, IndexError):
            continue
    return False


def reap(pid: int) -> None:
    """Collect the exit of a daemon that is our own child (tests start some in-process)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
