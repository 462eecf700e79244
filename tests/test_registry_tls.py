"""The local registry over TLS: the CA made once, the real ``docker-registry`` serving https, and who trusts it.

``make registry`` serves TLS because the docker-build provider reads
registries over https only (its ``refresh`` cannot see a plain-http one); the
lifecycle (tests/test_lifecycle.py) runs the engine, BuildKit and the plugin
against such a registry and wipes it. Here: the certificates themselves, our
client choosing https for a TLS loopback registry and http for a plain one,
trusting the CA through ``SSL_CERT_FILE``, and refusing (without retrying or
falling back to http) a certificate it does not trust.
"""

from __future__ import annotations

import io
import socket
import ssl
import stat
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.registry.client import RegistryClient
from rocm_bake.registry.reference import parse_ref
from rocm_bake.registry.scheme import scheme_for, speaks_tls
from rocm_bake.registry.extract import fetch_wheels
from rocm_bake.ports import free_port
from rocm_bake.registry.tls import SYSTEM_BUNDLES, RegistryTls, ensure_tls, make_server_cert

from tests.registry_fixtures import (  # noqa: F401 - fixtures
    Entry,
    Layer,
    Registry,
    no_waits,
    push_image,
    registry,
    running_registry,
    wheel,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import builder as builder_tool  # noqa: E402  (tools/builder.py: make builder's own code)

TAG = "gfx950-rocm10.1.0"


@pytest.fixture(scope="module")
def registry_tls(tmp_path_factory: pytest.TempPathFactory) -> RegistryTls:
    return ensure_tls(tmp_path_factory.mktemp("tls"))


#: This module's fixtures that start a docker-registry (tests/conftest.py marks their tests ``services``).
SERVICE_FIXTURES = {"tls_registry"}


@pytest.fixture(scope="module")
def tls_registry(tmp_path_factory: pytest.TempPathFactory, registry_tls: RegistryTls) -> Iterator[Registry]:
    root = tmp_path_factory.mktemp("tls-registry")
    for address in running_registry(root, registry_tls):
        yield Registry(address, root)


def openssl_text(*args: str) -> str:
    return subprocess.run(["openssl", *args], capture_output=True, text=True, check=True).stdout


def test_ca_is_made_once_with_private_keys_and_a_loopback_certificate(tmp_path: Path) -> None:
    tls = ensure_tls(tmp_path / "tls")
    ca = tls.ca_cert.read_bytes()
    for key in (tls.ca_key, tls.server_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
    assert stat.S_IMODE(tls.dir.stat().st_mode) == 0o700
    sans = openssl_text("x509", "-in", str(tls.server_cert), "-noout", "-ext", "subjectAltName")
    assert "IP Address:127.0.0.1" in sans and "DNS:localhost" in sans, sans
    openssl_text("verify", "-CAfile", str(tls.ca_cert), str(tls.server_cert))

    again = ensure_tls(tmp_path / "tls")
    assert again.ca_cert.read_bytes() == ca, "the CA is made once, not per run"
    tls.server_cert.unlink()
    ensure_tls(tmp_path / "tls")
    assert tls.ca_cert.read_bytes() == ca and tls.server_cert.is_file(), "a missing server cert is remade, same CA"

    other = ensure_tls(tmp_path / "other")
    tls.server_cert.write_bytes(other.server_cert.read_bytes())  # signed by another CA: remade
    ensure_tls(tmp_path / "tls")
    openssl_text("verify", "-CAfile", str(tls.ca_cert), str(tls.server_cert))


def test_the_ca_signs_only_for_the_loopback_names(tmp_path: Path) -> None:
    """Trusted by the whole Pulumi process tree (SSL_CERT_FILE), the CA must not be able to vouch for GitHub."""
    tls = ensure_tls(tmp_path / "tls")
    constraints = openssl_text("x509", "-in", str(tls.ca_cert), "-noout", "-ext", "nameConstraints")
    assert "critical" in constraints and "IP:127.0.0.0/255.0.0.0" in constraints and "DNS:localhost" in constraints \
        and "IP:0:0:0:0:0:0:0:1/FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF" in constraints, constraints
    key = tmp_path / "github-key.pem"
    key.write_bytes(subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
                                   capture_output=True, check=True).stdout)
    csr = subprocess.run(["openssl", "req", "-new", "-key", str(key), "-subj", "/CN=api.github.com"],
                         capture_output=True, check=True).stdout
    ext = tmp_path / "ext.cnf"
    ext.write_text("subjectAltName=DNS:api.github.com\nbasicConstraints=critical,CA:FALSE\n")
    forged = tmp_path / "github.pem"
    forged.write_bytes(subprocess.run(["openssl", "x509", "-req", "-CA", str(tls.ca_cert), "-CAkey", str(tls.ca_key),
                                       "-set_serial", "7", "-days", "1", "-extfile", str(ext)],
                                      input=csr, capture_output=True, check=True).stdout)
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(tls.ca_cert), str(forged)],
                              capture_output=True, text=True)
    assert verified.returncode != 0 and "permitted subtree violation" in verified.stdout + verified.stderr, \
        verified.stdout + verified.stderr
    openssl_text("verify", "-CAfile", str(tls.ca_cert), str(tls.server_cert))  # its own leaf still verifies


def old_style_ca(tls: RegistryTls) -> None:
    """A CA (and its registry leaf) as they were made before name constraints were added: none."""
    tls.ca_key.write_bytes(openssl_text("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256").encode())
    tls.ca_key.chmod(0o600)
    tls.ca_cert.write_text(openssl_text(
        "req", "-x509", "-new", "-key", str(tls.ca_key), "-subj", "/O=rocm-bake/CN=old CA", "-days", "30",
        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash"))
    make_server_cert(tls)


def test_a_ca_made_without_name_constraints_is_replaced_once_saying_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A checkout's CA from before the constraints were added would otherwise vouch for any host until removed by
    hand: loading the TLS material replaces it and reissues the leaf it signed, in one line, touching nothing else."""
    tls = RegistryTls(tmp_path / "tls")
    tls.dir.mkdir(mode=0o700)
    old_style_ca(tls)
    old = {path: path.read_bytes() for path in (tls.ca_cert, tls.ca_key, tls.server_cert)}
    other = tls.dir / "bundle-0123456789abcdef.pem"
    other.write_bytes(b"a caller's bundle")
    capsys.readouterr()

    ensure_tls(tls.dir)
    said = capsys.readouterr()
    assert said.out == "" and said.err == (
        f"rocm-bake: registry TLS in {tls.dir}: the CA had no name constraints (made before they were added): "
        "replaced it with a loopback-only one and reissued the registry certificate\n"), said
    constraints = openssl_text("x509", "-in", str(tls.ca_cert), "-noout", "-ext", "nameConstraints")
    assert "critical" in constraints and "DNS:localhost" in constraints, f"the CA kept no constraints: {constraints}"
    assert all(path.read_bytes() != data for path, data in old.items()), "CA, its key and the leaf all made anew"
    assert stat.S_IMODE(tls.ca_key.stat().st_mode) == 0o600
    openssl_text("verify", "-CAfile", str(tls.ca_cert), str(tls.server_cert))
    assert tls.bundle.read_bytes().rstrip().endswith(tls.ca_cert.read_bytes().rstrip())
    assert other.read_bytes() == b"a caller's bundle", "nothing else in the directory changes"

    kept = {path: path.read_bytes() for path in (tls.ca_cert, tls.ca_key, tls.server_cert)}
    ensure_tls(tls.dir)
    assert capsys.readouterr().err == "" and all(path.read_bytes() == data for path, data in kept.items()), \
        "a constrained CA is kept, silently"


@pytest.mark.services
def test_a_registry_running_when_its_certificate_is_reissued_is_restarted_with_the_new_one(tmp_path: Path) -> None:
    """`make registry` loads the TLS material (replacing a CA without constraints), then finds its registry
    running: one started before would go on serving a leaf that the bundle's CA no longer vouches for."""
    from rocm_bake.registry.local import ours, start, stop_registry

    tls, root, port = ensure_tls(tmp_path / "tls"), tmp_path / "registry", free_port()
    try:
        start(root, port, tls.dir)
        first = ours(root)
        assert start(root, port, tls.dir).startswith("registry already running") and ours(root) == first
        old_style_ca(tls)
        ensure_tls(tls.dir)
        start(root, port, tls.dir)
        assert ours(root) not in (None, first), "the registry kept serving the certificate it started with"
        trusted = ssl.create_default_context(cafile=str(tls.ca_cert))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock, \
                trusted.wrap_socket(sock, server_hostname="127.0.0.1") as served:
            assert served.getpeercert() is not None
        assert start(root, port, tls.dir).startswith("registry already running"), "restarted with nothing new"
    finally:
        stop_registry(root)


def test_bundle_keeps_the_system_roots_and_adds_our_ca(registry_tls: RegistryTls,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    system = next((Path(p) for p in SYSTEM_BUNDLES if Path(p).is_file()), None)
    if system is None:
        pytest.fail(f"no system CA bundle in {SYSTEM_BUNDLES}: install ca-certificates")
    ensure_tls(registry_tls.dir)
    bundle = registry_tls.bundle.read_bytes()
    assert bundle.startswith(system.read_bytes()), "SSL_CERT_FILE must not take the system roots away"
    assert bundle.rstrip().endswith(registry_tls.ca_cert.read_bytes().rstrip())
    context = ssl.create_default_context(cafile=str(registry_tls.bundle))
    assert len(context.get_ca_certs()) > 100


def test_registry_serves_https_with_our_certificate(tls_registry: Registry, registry_tls: RegistryTls) -> None:
    trusted = ssl.create_default_context(cafile=str(registry_tls.ca_cert))
    assert httpx.get(f"https://{tls_registry.address}/v2/", verify=trusted).status_code == 200
    port = tls_registry.address.rsplit(":", 1)[1]
    assert httpx.get(f"https://localhost:{port}/v2/", verify=trusted).status_code == 200
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"https://{tls_registry.address}/v2/", verify=ssl.create_default_context(cafile=None))


def test_client_picks_https_for_a_tls_loopback_registry_and_http_for_a_plain_one(
    tls_registry: Registry, registry: Registry
) -> None:
    assert speaks_tls(*split(tls_registry.address)) and scheme_for(tls_registry.address) == "https"
    assert not speaks_tls(*split(registry.address)) and scheme_for(registry.address) == "http"
    assert scheme_for("registry.example.com:5000") == "https", "off loopback it is always https, never probed"
    assert scheme_for(f"127.0.0.1:{free_port()}") == "http", "nothing listening is not proven TLS: loopback default"


def split(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def test_fetch_over_tls_trusting_the_ca_through_ssl_cert_file(
    tls_registry: Registry, registry_tls: RegistryTls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(registry_tls.bundle))
    name = wheel("torch", "2.15.0")
    pushed = push_image(tls_registry.address, "rocm-bake/torch", TAG,
                        [Layer([Entry("wheels", kind="dir"), Entry(f"wheels/{name}", b"over tls" * 64)])])
    ref = f"{tls_registry.address}/rocm-bake/torch:{TAG}"
    with RegistryClient(tls_registry.address) as client:
        assert client.base == f"https://{tls_registry.address}"
        assert client.resolve_digest(parse_ref(ref)) == pushed.digest
    result = fetch_wheels(ArchSet("gfx950"), [ref], tmp_path)
    assert [w.name for w in result.wheels] == [name]
    assert (tmp_path / "wheels" / "gfx950" / name).read_bytes() == b"over tls" * 64


def test_an_untrusted_certificate_is_one_clear_error_without_retries_or_http(
    tls_registry: Registry, registry_tls: RegistryTls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    no_waits: io.StringIO,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(registry_tls.bundle))
    push_image(tls_registry.address, "rocm-bake/untrusted", TAG, [Layer([Entry(f"wheels/{wheel('x')}", b"x")])])
    monkeypatch.delenv("SSL_CERT_FILE")  # certifi's roots only: our CA is not among them
    ref = f"{tls_registry.address}/rocm-bake/untrusted:{TAG}"
    with pytest.raises(RocmBakeError) as caught:
        fetch_wheels(ArchSet("gfx950"), [ref], tmp_path)
    message = str(caught.value)
    assert f"https://{tls_registry.address}: TLS certificate not trusted" in message, message
    assert "SSL_CERT_FILE" in message and ".rocm-bake/tls/bundle.pem" in message
    assert no_waits.getvalue() == "", "retrying cannot fix an untrusted certificate"
    assert not (tmp_path / "wheels").exists()


def test_builder_trusts_the_ca_and_speaks_tls_to_loopback(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    tls_config = tomllib.loads(builder_tool.config_text(["127.0.0.1:5001"], ca))
    # http = false: without it BuildKit speaks plain HTTP to any 127.0.0.1 port
    assert tls_config["registry"]["127.0.0.1:5001"] == {"http": False, "ca": [str(ca)]}
    plain = tomllib.loads(builder_tool.config_text(["127.0.0.1:5001"]))
    assert plain["registry"]["127.0.0.1:5001"] == {"http": True, "insecure": True}
    with pytest.raises(SystemExit, match="not a loopback registry"):
        builder_tool.config_text(["registry.example.com:5000"])


def test_pulumi_wrapper_adds_the_checkouts_ca_to_whatever_ssl_cert_file_names(tmp_path: Path,
                                                                            registry_tls: RegistryTls) -> None:
    """.tools/bin/pulumi as tools/engines.py writes it, with ``env`` standing in for the real CLI.

    Hosts often export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt and tests export their own CA's
    bundle: keeping either alone would leave the checkout's CA untrusted (refresh blind again, the wheel
    fetch refused); replacing the test's would leave the test's CA untrusted. The wrapper adds ours to it.
    """
    import engines as engines_tool

    wrapper = tmp_path / "pulumi"
    wrapper.write_text(engines_tool.WRAPPER.format(cli="/usr/bin/env", real="/usr/bin/env", root=tmp_path))
    wrapper.chmod(0o755)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(ROOT / ".venv" / "bin" / "python")
    base = {"PATH": "/usr/bin:/bin", "PULUMI_CONFIG_PASSPHRASE": "x", "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "false"}

    def seen(env: dict[str, str]) -> str | None:
        out = subprocess.run([str(wrapper)], env=env, capture_output=True, text=True, check=True).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line).get("SSL_CERT_FILE")

    assert seen(base) is None, "no registry TLS made yet: nothing to add"
    assert seen({**base, "SSL_CERT_FILE": str(registry_tls.bundle)}) == str(registry_tls.bundle)
    ours = ensure_tls(tmp_path / ".rocm-bake" / "tls")
    assert seen(base) == str(ours.bundle)
    ca = ours.ca_cert.read_bytes()
    for own in (Path("/etc/ssl/certs/ca-certificates.crt"), registry_tls.bundle):
        bundle = Path(seen({**base, "SSL_CERT_FILE": str(own)}) or "")
        assert bundle.parent == ours.dir, bundle
        text = bundle.read_bytes()
        assert text.startswith(own.read_bytes()) and ca in text, f"{bundle} must hold {own}'s roots and our CA"


def test_bundle_holds_the_roots_of_the_callers_own_ssl_cert_file(tmp_path: Path, registry_tls: RegistryTls,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "corporate.pem"
    own.write_bytes(registry_tls.ca_cert.read_bytes())  # any PEM root the caller already trusts
    monkeypatch.setenv("SSL_CERT_FILE", str(own))
    tls = ensure_tls(tmp_path / "tls")
    assert tls.bundle.read_bytes().startswith(own.read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.bundle))  # already ours: the system roots, not a bundle of a bundle
    ensure_tls(tmp_path / "tls")
    assert tls.bundle.read_bytes().count(b"# rocm-bake local registry CA") == 1
