"""Retries without waiting: stamina's testing mode, and the lines a user would have seen."""

from __future__ import annotations

import io
import threading
import socket
from collections.abc import Iterator

import pytest
import stamina

from rocm_bake import progress


@pytest.fixture
def no_waits() -> Iterator[io.StringIO]:
    """stamina's testing mode (every retry runs, no wait is slept, attempts stay the client's own)
    and the lines the user would see (``progress.note``), captured."""
    captured = io.StringIO()
    quiet = progress.is_quiet()
    progress.set_stream(captured)
    progress.set_quiet(False)
    with stamina.set_testing(True, attempts=1000, cap=True):
        yield captured
    progress.set_stream(None)
    progress.set_quiet(quiet)


@pytest.fixture
def hung_server() -> Iterator[str]:
    """host:port of a server that accepts every connection and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()
