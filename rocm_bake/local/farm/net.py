"""The farm's network: a namespace per host, a veth pair each, one bridge in this host's namespace.

Everything goes through the ``ip`` CLI (iproute2). Only names a farm's
:class:`~rocm_bake.local.farm.layout.Layout` gives are ever made or removed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

from rocm_bake.errors import RocmBakeError
from rocm_bake.local.farm.layout import HOSTS, Layout

#: How long the processes of a namespace get to end after SIGTERM before SIGKILL.
STOP_GRACE_S = 15.0

#: Retransmissions before a farm host's TCP gives up on a peer that stopped answering: 8 is about 100 s
#: at the 200 ms minimum RTO, against about 15 min for Linux's default 15. A push to a registry whose link
#: went down mid-write otherwise hangs that long; a team whose hosts can vanish sets the same.
TCP_RETRIES2 = 8


def ip(*args: str, check: bool = True) -> str:
    """Run ``ip``; a failure is one line naming the command and ip's own reason."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        raise RocmBakeError(f"ip {' '.join(args)}: {reason}")
    return result.stdout


def link_exists(name: str) -> bool:
    return os.path.exists(f"/sys/class/net/{name}")


def netns_exists(name: str) -> bool:
    return os.path.exists(f"/run/netns/{name}")


def slots_in_use() -> set[int]:
    """Third octets of the 198.18.x.0/24 nets any address or route of this namespace touches.

    A /16 or wider route over 198.18 counts as all of them.
    """
    used: set[int] = set()
    text = ip("-4", "-o", "addr", "show") + ip("-4", "route", "show", "table", "all", check=False)
    for match in re.finditer(r"\b198\.(18|19)\.(\d+)\.\d+(?:/(\d+))?", text):
        prefix = int(match.group(3) or 32)
        if prefix < 24:
            return set(range(256))
        if match.group(1) == "18":
            used.add(int(match.group(2)))
    return used


def create(layout: Layout) -> None:
    """The bridge (with the farm's gateway address) and each host's namespace, joined by a veth pair."""
    ip("link", "add", layout.bridge, "type", "bridge")
    ip("addr", "add", f"{layout.gateway}/24", "dev", layout.bridge)
    ip("link", "set", layout.bridge, "up")
    for host in HOSTS:
        ns = layout.netns(host)
        ip("netns", "add", ns)
        ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "add", layout.veth(host), "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("link", "set", layout.veth(host), "master", layout.bridge, "up")
        ip("-n", ns, "addr", "add", f"{layout.address(host)}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        give_up_on_silent_peers(ns)


def give_up_on_silent_peers(ns: str) -> None:
    """Set the namespace's own ``net.ipv4.tcp_retries2`` (a per-namespace sysctl: this host's stays as it is)."""
    result = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"net.ipv4.tcp_retries2={TCP_RETRIES2}"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        raise RocmBakeError(f"sysctl net.ipv4.tcp_retries2 in {ns}: {reason}")


def netns_pids(ns: str) -> list[int]:
    return [int(p) for p in ip("netns", "pids", ns, check=False).split() if p.isdigit()]


def stop_processes(ns: str) -> list[int]:
    """SIGTERM every process in namespace ``ns``, SIGKILL what remains after STOP_GRACE_S."""
    pids = netns_pids(ns)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_GRACE_S
    while netns_pids(ns) and time.monotonic() < deadline:
        reap(pids)
        time.sleep(0.05)
    for pid in netns_pids(ns):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    while netns_pids(ns) and time.monotonic() < deadline + 5:
        reap(pids)
        time.sleep(0.05)
    reap(pids)
    return pids


def reap(pids: list[int]) -> None:
    """Collect those of ``pids`` that exited and are our own children (``up`` and ``down`` in one process)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def destroy(layout: Layout) -> list[str]:
    """Remove what ``create`` made for ``layout`` (whatever part of it exists); say what was removed.

    Every step is tried even when one fails (a half-made farm is still taken
    down as far as it goes); the failures are raised together at the end.
    """
    removed, failed = [], []
    for host in HOSTS:
        ns = layout.netns(host)
        try:
            if netns_exists(ns):
                stopped = stop_processes(ns)
                ip("netns", "del", ns)
                removed.append(f"namespace {ns}" + (f" (stopped pids {', '.join(map(str, stopped))})" if stopped else ""))
        except RocmBakeError as exc:
            failed.append(str(exc))
    for name in [*(layout.veth(h) for h in HOSTS), layout.bridge]:
        # A veth whose peer's namespace went is deleted by the kernel; only what is still there is ours to remove.
        if link_exists(name) and ip("link", "del", name, check=False) == "" and not link_exists(name):
            removed.append(f"link {name}")
        elif link_exists(name):
            failed.append(f"{name} could not be removed (ip link del {name})")
    if failed:
        raise RocmBakeError("; ".join(failed))
    return removed
