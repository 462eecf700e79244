"""How the daemon helpers tell that a process is gone: by its last thread, since its ports go with that one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from rocm_bake.local.daemons import alive, reap
from rocm_bake.ports import port_in_use

#: A process whose main thread exits on its own (the thread ``exit`` syscall, not ``exit_group``) while another thread
#: keeps a listening socket for ``linger`` seconds: what a Go daemon looks like between its leader's exit and its last
#: thread's.
LEADER_GOES_FIRST = textwrap.dedent("""
    import ctypes, socket, sys, threading, time
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    print(listener.getsockname()[1], flush=True)
    threading.Thread(target=lambda: (time.sleep(float(sys.argv[1])), listener.close())).start()
    time.sleep(0.2)
    ctypes.CDLL(None, use_errno=True).syscall(60, 0)  # SYS_exit on x86-64: this thread only
""")


def leader_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


def test_a_process_whose_leader_is_a_zombie_is_alive_while_another_thread_still_holds_its_port() -> None:
    proc = subprocess.Popen([sys.executable, "-c", LEADER_GOES_FIRST, "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        deadline = time.monotonic() + 10
        while leader_state(proc.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert leader_state(proc.pid) == "Z", "the child's main thread never exited on its own"
        assert port_in_use(port), "the other thread's listener is gone already: the case is not set up"
        assert alive(proc.pid), "a zombie leader was taken for a gone process while its other thread holds the port"
        deadline = time.monotonic() + 10
        while alive(proc.pid) and time.monotonic() < deadline:
            reap(proc.pid)
            time.sleep(0.02)
        assert not alive(proc.pid)
        assert not port_in_use(port), "alive() said gone while the port was still held"
    finally:
        proc.kill()
        proc.wait()
