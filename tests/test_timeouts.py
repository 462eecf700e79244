"""A server that accepts the connection and never answers: a clear error within the bound, and visible retries (17.4).

The hung server is a real loopback socket that accepts and then says nothing.
Backoff sleeps are recorded instead of slept; the timeouts themselves are real.
"""

from __future__ import annotations

import io
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from rocm_bake import progress
from rocm_bake.errors import RocmBakeError
from rocm_bake.http_waits import retry_after_seconds
from rocm_bake.publish.github import GitHubClient, GitHubEndpoints
from rocm_bake.registry.client import RegistryClient, parse_ref


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


@pytest.fixture
def stderr_lines() -> Iterator[io.StringIO]:
    captured = io.StringIO()
    progress.set_stream(captured)
    progress.set_quiet(False)
    yield captured
    progress.set_stream(None)


def test_github_client_gives_up_on_a_hung_api_within_the_bound(hung_server: str, stderr_lines: io.StringIO) -> None:
    sleeps: list[float] = []
    client = GitHubClient("octo/r", "tok", GitHubEndpoints(api_url=f"http://{hung_server}"), timeout=0.3,
                          max_attempts=3, sleep=sleeps.append)
    started = time.monotonic()
    with pytest.raises(RocmBakeError, match=r"gave up after 3 attempts: no answer in 0.3 s \(timed out"):
        client.get_release_by_tag("wheels-gfx950-rocm10.1.0")
    assert time.monotonic() - started < 5  # 3 x 0.3 s of silence, not 3 x 300 s
    lines = stderr_lines.getvalue().splitlines()
    assert len(lines) == 2 and all("no answer in 0.3 s" in line and "retrying in" in line for line in lines)
    assert "try 2 of 3" in lines[0] and "try 3 of 3" in lines[1]
    assert len(sleeps) == 2


def test_registry_client_gives_up_on_a_hung_registry_within_the_bound(hung_server: str, stderr_lines: io.StringIO,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr("rocm_bake.registry.client.time.sleep", sleeps.append)
    client = RegistryClient(hung_server, retries=2, timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(RocmBakeError, match=r"gave up after 3 tries: no answer in 0.3 s"):
        client.resolve_digest(parse_ref(f"{hung_server}/rocm-bake/torch:gfx950-rocm10.1.0"))
    assert time.monotonic() - started < 5
    assert len(sleeps) == 2 and stderr_lines.getvalue().count("retrying in") == 2


def test_quiet_silences_the_retry_lines(hung_server: str, stderr_lines: io.StringIO) -> None:
    progress.set_quiet(True)
    try:
        client = GitHubClient("octo/r", "tok", GitHubEndpoints(api_url=f"http://{hung_server}"), timeout=0.2,
                              max_attempts=2, sleep=lambda _s: None)
        with pytest.raises(RocmBakeError):
            client.get_release_by_tag("x")
    finally:
        progress.set_quiet(False)
    assert stderr_lines.getvalue() == ""


@pytest.mark.parametrize("value, seconds", [("7", 7.0), ("0", 0.0), ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
                                            ("soon", None), ("", None)])
def test_retry_after_as_seconds_or_http_date(value: str, seconds: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert retry_after_seconds(value, now=now) == seconds


@pytest.mark.parametrize("url, message", [
    ("http://api.example.com", "plain http is allowed only to loopback"),
    ("https://user:hunter2@api.example.com", "credentials in a URL are refused"),
    ("ftp://api.example.com", "expected an https:// URL"),
])
def test_github_endpoints_refuse_cleartext_tokens_and_never_echo_credentials(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        GitHubEndpoints(api_url=url)
    assert "hunter2" not in str(caught.value)


def test_cli_refuses_a_credentialed_api_url_without_echoing_it(tmp_path) -> None:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "rocm_bake", "publish", "--arch", "gfx950", "--dist",
                             str(tmp_path), "--repo", "o/r", "--api-url", "https://me:s3cret@api.example.com"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "credentials in a URL are refused" in result.stderr
    assert "s3cret" not in result.stderr + result.stdout and "Traceback" not in result.stderr
