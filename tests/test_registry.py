"""The registry client and server: refs, auth, retries, against the real registry."""

from __future__ import annotations

import email.utils
import hashlib
import http.server
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.ports import free_port
from rocm_bake.local import registry_server
from rocm_bake.registry.extract import fetch_wheels
from rocm_bake.registry.auth import parse_challenge
from rocm_bake.registry.client import RegistryClient
from rocm_bake.registry.reference import parse_ref
from rocm_bake.registry.scheme import scheme_for
from rocm_bake.registry.tags import check_ref_for_arch, image_tag, tag_arch_set

from tests.registry_fixtures import (  # noqa: F401 - fixtures
    RESET,
    Entry,
    Layer,
    ProxyState,
    Registry,
    no_waits,
    proxy,
    push_image,
    registry,
    wheel,
)

TAG = "gfx950-rocm10.1.0"


def test_image_tag_names_the_arch_set_and_reads_back_to_it() -> None:
    fat = ArchSet("gfx950;gfx1201")
    assert image_tag(ArchSet("gfx950"), "10.1.0") == "gfx950-rocm10.1.0"
    assert image_tag(fat, "10.1.0") == "gfx950_gfx1201-rocm10.1.0"
    assert tag_arch_set(image_tag(fat, "10.1.0")) == fat and tag_arch_set("gfx950-rocm10.1.0") == "gfx950"
    with pytest.raises(RocmBakeError, match="not X.Y.Z"):
        image_tag(ArchSet("gfx950"), "10.1")
    with pytest.raises(RocmBakeError, match="unknown architecture 'gfx951'"):
        tag_arch_set("gfx951-rocm10.1.0")


def test_parse_ref() -> None:
    ref = parse_ref("127.0.0.1:5000/rocm-bake/torch:gfx950-rocm10.1.0")
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == ("127.0.0.1:5000", "rocm-bake/torch", "gfx950-rocm10.1.0", None)
    digest = "sha256:" + "ab" * 32
    both = parse_ref(f"ghcr.io/org/torch:gfx950-rocm10.1.0@{digest}")
    assert (both.registry, both.tag, both.digest, both.reference) == ("ghcr.io", "gfx950-rocm10.1.0", digest, digest)
    assert str(both) == f"ghcr.io/org/torch:gfx950-rocm10.1.0@{digest}"
    with pytest.raises(RocmBakeError, match="names no registry host"):
        parse_ref("rocm-bake/torch:gfx950-rocm10.1.0")
    with pytest.raises(RocmBakeError, match="not sha256"):
        parse_ref("127.0.0.1:5000/torch@sha256:abc")
    with pytest.raises(RocmBakeError, match="not a valid name"):
        parse_ref("127.0.0.1:5000/Torch:gfx950-rocm10.1.0")


def test_check_ref_for_arch() -> None:
    assert check_ref_for_arch(f"127.0.0.1:5000/rocm-bake/torch:{TAG}", ArchSet("gfx950")).tag == TAG
    pinned = check_ref_for_arch("127.0.0.1:5000/rocm-bake/torch@sha256:" + "0" * 64, ArchSet("gfx950"))
    assert pinned.tag is None and pinned.digest
    with pytest.raises(RocmBakeError, match="whichever architecture was pushed last"):
        check_ref_for_arch("127.0.0.1:5000/rocm-bake/torch:latest", ArchSet("gfx950"))
    with pytest.raises(RocmBakeError, match="tagged for gfx1151, not gfx950"):
        check_ref_for_arch("127.0.0.1:5000/rocm-bake/torch:gfx1151-rocm10.1.0", ArchSet("gfx950"))
    fat = ArchSet("gfx950;gfx1201")
    assert check_ref_for_arch("127.0.0.1:5000/rocm-bake/torch:gfx950_gfx1201-rocm10.1.0", fat).tag
    with pytest.raises(RocmBakeError, match="tagged for gfx950, not gfx950;gfx1201"):
        check_ref_for_arch(f"127.0.0.1:5000/rocm-bake/torch:{TAG}", fat)  # one arch's wheels are not the fat build's


def test_scheme_and_challenge(registry: Registry) -> None:
    port = registry.address.rsplit(":", 1)[1]
    # a plain-http loopback registry is still reached (test_registry_tls.py: a TLS one gets https)
    assert scheme_for(registry.address) == "http" and scheme_for(f"localhost:{port}") == "http"
    assert scheme_for("ghcr.io") == "https" and scheme_for("ghcr.io:443") == "https"
    scheme, params = parse_challenge('Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:o/r:pull"')
    assert scheme == "bearer" and params == {"realm": "https://ghcr.io/token", "service": "ghcr.io", "scope": "repository:o/r:pull"}


def wheel_image(registry: Registry, repo: str, data: bytes) -> str:
    name = wheel("torch", "2.15.0")
    push_image(registry.address, repo, TAG, [Layer([Entry("wheels", kind="dir"), Entry(f"wheels/{name}", data)])])
    return name


def test_bearer_token_auth_with_429_and_503_retried(
    registry: Registry, proxy: tuple[str, ProxyState], tmp_path: Path, no_waits: io.StringIO
) -> None:
    address, state = proxy
    name = wheel_image(registry, "rocm-bake/authed", b"behind a token" * 100)
    state.inject = [429, 503]
    client = RegistryClient(address, username="ci", password="s3cret")
    result = fetch_wheels(ArchSet("gfx950"), [f"{address}/rocm-bake/authed:{TAG}"], tmp_path, clients={address: client})
    assert [w.name for w in result.wheels] == [name]
    assert (tmp_path / "wheels" / "gfx950" / name).read_bytes() == b"behind a token" * 100
    assert state.injected == [429, 503]
    assert state.token_requests[0] == {"service": "test-registry", "scope": "repository:rocm-bake/authed:pull"}
    assert len(state.token_requests) == 1  # the token is reused, not fetched per request
    lines = no_waits.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "HTTP 429 (rate limited): waiting" in lines[0] and lines[0].endswith("(attempt 2 of 6)")
    assert "HTTP 503: waiting" in lines[1] and lines[1].endswith("(attempt 3 of 6)")
    client.close()


def test_bearer_token_refused_without_credentials(
    registry: Registry, proxy: tuple[str, ProxyState], tmp_path: Path
) -> None:
    address, _ = proxy
    wheel_image(registry, "rocm-bake/private", b"x")
    client = RegistryClient(address, username="", password="")
    with pytest.raises(RocmBakeError, match="refused a token anonymously.*ROCM_BAKE_REGISTRY_USERNAME"):
        fetch_wheels(ArchSet("gfx950"), [f"{address}/rocm-bake/private:{TAG}"], tmp_path, clients={address: client})
    assert not (tmp_path / "wheels").exists()


def test_basic_auth(registry: Registry, proxy: tuple[str, ProxyState], tmp_path: Path) -> None:
    address, state = proxy
    state.mode = "basic"
    name = wheel_image(registry, "rocm-bake/basic", b"basic")
    good = RegistryClient(address, username="ci", password="s3cret")
    fetch_wheels(ArchSet("gfx950"), [f"{address}/rocm-bake/basic:{TAG}"], tmp_path, clients={address: good})
    assert (tmp_path / "wheels" / "gfx950" / name).read_bytes() == b"basic"
    bad = RegistryClient(address, username="ci", password="wrong")
    with pytest.raises(RocmBakeError, match="HTTP 401: authentication required"):
        bad.resolve_digest(parse_ref(f"{address}/rocm-bake/basic:{TAG}"))


def test_persistent_5xx_gives_up_with_a_clear_error(
    registry: Registry, proxy: tuple[str, ProxyState], tmp_path: Path, no_waits: io.StringIO
) -> None:
    address, state = proxy
    state.mode, state.always = "none", 503
    client = RegistryClient(address, retries=2)
    with pytest.raises(RocmBakeError, match=r"manifest .*/rocm-bake/any:gfx950-rocm10.1.0: gave up after 3 attempts "
                                            r"in [0-9.]+ s: HTTP 503$"):
        fetch_wheels(ArchSet("gfx950"), [f"{address}/rocm-bake/any:{TAG}"], tmp_path, clients={address: client})
    assert state.injected == [503, 503, 503]
    assert no_waits.getvalue().count("HTTP 503: waiting") == 2
    assert not (tmp_path / "wheels").exists()


def test_retry_after_is_honoured(registry: Registry, proxy: tuple[str, ProxyState]) -> None:
    """Not in testing mode: the wait is really slept (and jittered: at least what the server asked)."""
    address, state = proxy
    state.mode, state.inject, state.retry_after = "none", [429], "0.4"
    wheel_image(registry, "rocm-bake/slow", b"s")
    client = RegistryClient(address, backoff_s=0.0)
    start = time.monotonic()
    digest = client.resolve_digest(parse_ref(f"{address}/rocm-bake/slow:{TAG}"))
    assert 0.4 <= time.monotonic() - start < 3 and digest.startswith("sha256:")


def test_retry_after_as_an_http_date(registry: Registry, proxy: tuple[str, ProxyState], no_waits: io.StringIO) -> None:
    address, state = proxy
    state.mode, state.inject = "none", [503]
    state.retry_after = email.utils.formatdate(time.time() + 40, usegmt=True)
    wheel_image(registry, "rocm-bake/dated", b"d")
    assert RegistryClient(address).resolve_digest(parse_ref(f"{address}/rocm-bake/dated:{TAG}")).startswith("sha256:")
    line = no_waits.getvalue().strip()
    waited = float(re.search(r"waiting ([0-9.]+) s", line)[1])
    assert 37 <= waited <= 42, line  # the date, not the default backoff (under a second)


def test_a_wait_beyond_the_budget_is_refused_at_once(registry: Registry, proxy: tuple[str, ProxyState],
                                                     no_waits: io.StringIO) -> None:
    address, state = proxy
    state.mode, state.always, state.retry_after = "none", 429, "7200"
    with pytest.raises(RocmBakeError, match=r"HTTP 429 \(rate limited\): the server asks for a 72\d\d s wait, "
                                            r"more than the \d+ s left of the 600 s this run waits; try again later"):
        RegistryClient(address).resolve_digest(parse_ref(f"{address}/rocm-bake/any:{TAG}"))
    assert state.injected == [429] and no_waits.getvalue() == ""


def test_connection_resets_are_retried(registry: Registry, proxy: tuple[str, ProxyState], tmp_path: Path,
                                       no_waits: io.StringIO) -> None:
    address, state = proxy
    state.mode = "none"
    name = wheel_image(registry, "rocm-bake/resets", b"r" * 5000)
    state.inject = [RESET, RESET, RESET]  # the HEAD, then the manifest GET twice
    result = fetch_wheels(ArchSet("gfx950"), [f"{address}/rocm-bake/resets:{TAG}"], tmp_path, clients={address: RegistryClient(address)})
    assert [w.name for w in result.wheels] == [name] and state.injected == [RESET] * 3
    lines = no_waits.getvalue().splitlines()
    assert len(lines) == 3 and all(re.search(r"(ReadError|RemoteProtocolError|ConnectError).*: waiting", line)
                                   for line in lines), lines


def test_token_realm_failures_are_retried(registry: Registry, proxy: tuple[str, ProxyState],
                                          no_waits: io.StringIO) -> None:
    address, state = proxy
    wheel_image(registry, "rocm-bake/token-faults", b"t")
    state.token_inject = [503, RESET]
    client = RegistryClient(address, username="ci", password="s3cret")
    assert client.resolve_digest(parse_ref(f"{address}/rocm-bake/token-faults:{TAG}")).startswith("sha256:")
    lines = no_waits.getvalue().splitlines()
    assert len(lines) == 2 and all("token realm http://127.0.0.1:" in line for line in lines), lines
    assert len(state.token_requests) == 3


def test_a_registry_that_keeps_resetting_gives_up_with_a_clear_error(
    registry: Registry, proxy: tuple[str, ProxyState], tmp_path: Path, no_waits: io.StringIO
) -> None:
    address, state = proxy
    state.mode, state.always = "none", RESET
    with pytest.raises(RocmBakeError, match=r"manifest .*: gave up after 6 attempts in [0-9.]+ s: "
                                            r"(ReadError|RemoteProtocolError|ConnectError)"):
        fetch_wheels(ArchSet("gfx950"), [f"{address}/rocm-bake/any:{TAG}"], tmp_path, clients={address: RegistryClient(address)})
    assert len(state.injected) == 6 and no_waits.getvalue().count("(attempt ") == 5


def test_credentials_in_a_ref_are_refused_and_never_echoed(tmp_path: Path) -> None:
    for ref in ("ci:s3cret@127.0.0.1:5000/rocm-bake/torch:gfx950-rocm10.1.0",
                "https://ci:s3cret@ghcr.io/o/torch:gfx950-rocm10.1.0"):
        with pytest.raises(RocmBakeError, match="credentials in an image ref are refused") as caught:
            check_ref_for_arch(ref, ArchSet("gfx950"))
        assert "s3cret" not in str(caught.value) and "ROCM_BAKE_REGISTRY_USERNAME" in str(caught.value)
    with pytest.raises(RocmBakeError, match="credentials in a registry address") as caught:
        RegistryClient("ci:s3cret@127.0.0.1:5000")
    assert "s3cret" not in str(caught.value)
    result = subprocess.run([sys.executable, "-m", "rocm_bake", "wheels", "fetch", "--arch", "gfx950", "--image",
                             "ci:s3cret@127.0.0.1:9/rocm-bake/torch:gfx950-rocm10.1.0", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)
    assert result.returncode == 2 and "credentials in an image ref are refused" in result.stderr
    assert "s3cret" not in result.stdout + result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("realm_host", ["203.0.113.7", "127.0.0.1.evil.example"])
def test_credentials_never_go_to_a_cleartext_token_realm_off_loopback(realm_host: str) -> None:
    """A registry may name any realm; a plain-http one elsewhere never gets the password (nor shows it)."""

    class Challenge(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Bearer realm="http://u:pw@{realm_host}/token",service="x"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Challenge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    try:
        client = RegistryClient(address, username="ci", password="s3cret", timeout_s=2)
        with pytest.raises(RocmBakeError, match=rf"token realm http://\*\*\*@{realm_host}/token is plain http off "
                                                r"loopback: refusing to send") as caught:
            client.resolve_digest(parse_ref(f"{address}/rocm-bake/torch:{TAG}"))
    finally:
        server.shutdown()
    assert "pw" not in str(caught.value) and "s3cret" not in str(caught.value)


def test_manifest_digest_verified_when_pinned(registry: Registry) -> None:
    wheel_image(registry, "rocm-bake/pin", b"p")
    client = RegistryClient(registry.address)
    digest, _, _ = client.get_manifest("rocm-bake/pin", TAG)
    assert client.resolve_digest(parse_ref(f"{registry.address}/rocm-bake/pin:{TAG}")) == digest
    revisions = registry.blob_path(digest)  # a manifest is stored as a blob too
    body = revisions.read_bytes()
    assert hashlib.sha256(body).hexdigest() == digest[7:]
    tampered = body.replace(b'"schemaVersion": 2', b'"schemaVersion":  2')  # same JSON, other bytes
    assert tampered != body
    revisions.write_bytes(tampered)
    with pytest.raises(RocmBakeError, match="digest mismatch"):
        client.get_manifest("rocm-bake/pin", digest)


def test_missing_binary_names_the_apt_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_server, "REGISTRY_BINARY", tmp_path / "no-such-registry")
    with pytest.raises(RocmBakeError, match="apt-get install docker-registry"):
        registry_server.start_registry(tmp_path / "root")


def test_server_cli_daemon_answers_v2(tmp_path: Path) -> None:
    port = free_port()
    root = tmp_path / "daemon"
    started = subprocess.run(
        [sys.executable, "-m", "rocm_bake.local.registry_server", "--port", str(port), "--root", str(root), "--daemon"],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent,
    )
    assert started.returncode == 0, started.stderr
    assert f"registry on 127.0.0.1:{port}" in started.stdout
    pid = int((root / "registry.pid").read_text())
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=5).status_code == 200
        config = (root / "config.yml").read_text()
        assert f"127.0.0.1:{port}" in config and str(root / "storage") in config
    finally:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
