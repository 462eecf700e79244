"""Honest diagnoses: each way a GitHub or registry call fails is named as what it is.

DNS, a refused connection and TLS are never retried and never blamed on a
degraded GitHub; a timeout, 401, 403, 5xx and a rate limit each say theirs.
"""

from __future__ import annotations

import io

import pytest

from rocm_bake.errors import RocmBakeError
from rocm_bake.ports import free_port
from rocm_bake.publish.github import GitHubClient, GitHubEndpoints
from rocm_bake.registry.client import RegistryClient
from tests.fake_github import FakeGitHub
from tests.publish_fixtures import gh, make_client, no_waits  # noqa: F401 - fixtures
from tests.retry_fixtures import hung_server  # noqa: F401 - fixture


def github_error(api_url: str, **kw) -> str:
    client = GitHubClient("octo/r", "tok", GitHubEndpoints(api_url=api_url), **kw)
    with pytest.raises(RocmBakeError) as caught:
        client.get_release_by_tag("x")
    return str(caught.value)


def test_github_dns_failure_is_named(no_waits: io.StringIO) -> None:
    message = github_error("https://nonexistent.invalid")
    assert "DNS lookup failed: nonexistent.invalid does not resolve" in message
    assert "degraded" not in message and "gave up" not in message and no_waits.getvalue() == ""  # not retried


def test_github_connection_refused_is_named(no_waits: io.StringIO) -> None:
    port = free_port()
    message = github_error(f"http://127.0.0.1:{port}")
    assert f"connection refused: nothing is listening at 127.0.0.1:{port}" in message
    assert "degraded" not in message and no_waits.getvalue() == ""


def test_github_tls_error_is_named(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    port = gh.api_url.rsplit(":", 1)[1]  # a plain-http server spoken to in TLS
    message = github_error(f"https://127.0.0.1:{port}")
    assert f"TLS error talking to 127.0.0.1:{port}" in message and "degraded" not in message


def test_github_timeout_is_named(hung_server: str, no_waits: io.StringIO) -> None:
    message = github_error(f"http://{hung_server}", timeout=0.3)
    assert "no answer in 0.3 s (timed out" in message and "degraded" not in message


def test_github_401_403_5xx_and_rate_limit_are_named(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    with pytest.raises(RocmBakeError, match="401 Bad credentials: the token was rejected"):
        make_client(gh, token="ghp_wrong").get_release_by_tag("x")
    gh.inject("POST", r"/releases$", 403, body={"message": "Resource not accessible by personal access token"})
    with pytest.raises(RocmBakeError, match="403 Resource not accessible .*: the token needs contents:write"):
        make_client(gh).create_release("t", "n", "b")
    gh.inject("GET", r"/releases/tags/", 502, times=100)
    with pytest.raises(RocmBakeError, match=r"gave up after 2 attempts .*HTTP 502; GitHub may be degraded"):
        make_client(gh, max_attempts=2).get_release_by_tag("x")
    gh.state.faults.clear()
    gh.inject_primary_rate_limit("GET", r"/releases/tags/", reset_in=7200)
    with pytest.raises(RocmBakeError, match=r"rate limit \(primary, resets in \d+ s\)"):
        make_client(gh, max_wait=60).get_release_by_tag("x")


def test_registry_dns_and_refused_are_named(no_waits: io.StringIO) -> None:
    with pytest.raises(RocmBakeError, match="registry nonexistent.invalid:5000: DNS lookup failed: "
                                            "nonexistent.invalid does not resolve"):
        RegistryClient("nonexistent.invalid:5000").get_manifest("rocm-bake/torch", "gfx950-rocm10.1.0")
    port = free_port()
    with pytest.raises(RocmBakeError, match=f"connection refused: nothing is listening at 127.0.0.1:{port}"):
        RegistryClient(f"127.0.0.1:{port}").get_manifest("rocm-bake/torch", "gfx950-rocm10.1.0")
    assert no_waits.getvalue() == ""  # named at once, never retried
