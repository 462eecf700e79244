"""Loopback TCP ports, the one home for them: a free one (servers we start, tests), and whether one answers."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1 and nothing holds now (it may be taken again later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0
