"""A free loopback TCP port, the one helper for it (servers we start, tests that need a port nobody answers on)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1 and nothing holds now (it may be taken again later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
