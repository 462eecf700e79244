"""A server that accepts the connection and never answers: a clear error within the bound, and visible retries.

The hung server is a real loopback socket that accepts and then says nothing.
In-process tests run stamina's testing mode (no backoff slept); the timeouts
themselves are real, and the CLI tests wait for real.
"""

from __future__ import annotations

import io
import os
import time

import pytest

from rocm_bake import progress
from rocm_bake.errors import RocmBakeError
from rocm_bake.http_waits import retry_after_seconds
from rocm_bake.publish.github import GitHubClient, GitHubEndpoints
from rocm_bake.registry.client import RegistryClient
from rocm_bake.registry.reference import parse_ref

from tests.retry_fixtures import hung_server, no_waits  # noqa: F401 - fixtures


def test_github_client_gives_up_on_a_hung_api_within_the_bound(hung_server: str, no_waits: io.StringIO) -> None:
    client = GitHubClient("octo/r", "tok", GitHubEndpoints(api_url=f"http://{hung_server}"), timeout=0.3)
    started = time.monotonic()
    with pytest.raises(RocmBakeError, match=r"gave up after 2 attempts in [0-9.]+ s: no answer in 0.3 s \(timed out"):
        client.get_release_by_tag("wheels-gfx950-rocm10.1.0")
    assert time.monotonic() - started < 3  # one more try after a timeout, then out: 2 x 0.3 s, not 5 x 300 s
    [line] = no_waits.getvalue().splitlines()
    assert "no answer in 0.3 s" in line and line.endswith("(attempt 2 of 5)"), line


def test_github_upload_to_a_hung_host_gives_up_within_the_bound(hung_server: str, no_waits: io.StringIO,
                                                               tmp_path) -> None:
    """A stream (the upload body) is bounded by inactivity too: the host never reads, never answers."""
    asset = tmp_path / "big.whl"
    asset.write_bytes(b"\0" * (8 << 20))
    endpoints = GitHubEndpoints(api_url=f"http://{hung_server}", uploads_url=f"http://{hung_server}")
    client = GitHubClient("octo/r", "tok", endpoints, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(RocmBakeError, match=r"no answer in 0.3 s"):
        client.upload_asset(1, asset.name, asset)
    assert time.monotonic() - started < 3


def test_registry_client_gives_up_on_a_hung_registry_within_the_bound(hung_server: str,
                                                                      no_waits: io.StringIO) -> None:
    client = RegistryClient(hung_server, timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(RocmBakeError, match=r"gave up after 2 attempts in [0-9.]+ s: no answer in 0.3 s"):
        client.resolve_digest(parse_ref(f"{hung_server}/rocm-bake/torch:gfx950-rocm10.1.0"))
    assert time.monotonic() - started < 3
    [line] = no_waits.getvalue().splitlines()
    assert "no answer in 0.3 s" in line and line.endswith("(attempt 2 of 6)"), line


@pytest.mark.parametrize("command", ["wheels", "publish"])
def test_the_cli_fails_on_a_hung_server_within_timeout(hung_server: str, tmp_path, command: str) -> None:
    """Through the CLI, real waits and all: --timeout 1 means an error in seconds, with a line while it waits."""
    import subprocess
    import sys

    if command == "wheels":
        argv = ["wheels", "fetch", "--arch", "gfx950", "--image", f"{hung_server}/rocm-bake/torch:gfx950-rocm10.1.0",
                "--out", str(tmp_path / "dist"), "--timeout", "1"]
    else:
        dist = build_index_for_publish(tmp_path)
        argv = ["publish", "--arch", "gfx950", "--dist", str(dist), "--repo", "octo/r", "--api-url",
                f"http://{hung_server}", "--timeout", "1", "--dry-run"]
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "rocm_bake", *argv], capture_output=True, text=True, timeout=60,
                            env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()} | {"GITHUB_TOKEN": "t"})
    elapsed = time.monotonic() - started
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert "no answer in 1 s (timed out; --timeout sets the bound): waiting" in lines[0], lines
    assert lines[-1].startswith("rocm-bake: error: ") and "gave up after 2 attempts" in lines[-1], lines
    assert elapsed < 10, elapsed  # 2 x 1 s of silence + one backoff (under 1.5 s) + start-up


def test_quiet_silences_the_retry_lines(hung_server: str, no_waits: io.StringIO) -> None:
    progress.set_quiet(True)
    try:
        client = GitHubClient("octo/r", "tok", GitHubEndpoints(api_url=f"http://{hung_server}"), timeout=0.2)
        with pytest.raises(RocmBakeError):
            client.get_release_by_tag("x")
    finally:
        progress.set_quiet(False)
    assert no_waits.getvalue() == ""


def build_index_for_publish(tmp_path):
    from tests.publish_fixtures import build_arch_index

    build_arch_index(tmp_path, "gfx950", ["torch"])
    return tmp_path / "dist"


@pytest.mark.parametrize("value, seconds", [("7", 7.0), ("0", 0.0), ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
                                            ("soon", None), ("", None)])
def test_retry_after_as_seconds_or_http_date(value: str, seconds: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert retry_after_seconds(value, now=now) == seconds


@pytest.mark.parametrize("url, message", [
    ("http://api.example.com", "plain http is allowed only to loopback"),
    ("https://user:hunter2@api.example.com", "credentials in a URL are refused"),
    ("ftp://api.example.com", "expected an https URL"),
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
