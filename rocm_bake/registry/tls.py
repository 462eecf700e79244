"""TLS for the local registry: a CA made once per checkout and a server certificate for loopback.

Why TLS on loopback: the docker-build provider reads registries over https
only (``refresh`` has no insecure option, pulumi/pulumi-docker-build#324), so
against a plain-http registry it warns and leaves the state unchanged, and a
wiped registry goes unnoticed. With TLS, ``refresh`` sees what the registry
really holds.

Everything is made with the ``openssl`` CLI into one directory (``make``:
``.rocm-bake/tls``; tests: their temp dir):

* ``ca.pem`` / ``ca-key.pem``: the CA, made once (the key 0600, never copied),
  name-constrained to the loopback names and addresses it signs for; one
  made without constraints (before they were added) is replaced, once, saying so;
* ``registry.pem`` / ``registry-key.pem``: the server certificate for
  ``127.0.0.1``, ``::1`` and ``localhost``, remade when missing, expiring or
  not signed by this CA;
* ``bundle.pem``: the roots this machine already trusts plus ``ca.pem``, for
  ``SSL_CERT_FILE`` (Go's crypto/x509 in the docker-build plugin, httpx,
  OpenSSL-based clients): with it nothing that trusted the system roots
  stops trusting them;
* ``bundle-<hash>.pem``: the same for a caller whose own ``SSL_CERT_FILE``
  names other roots (a host that exports one, a test's bundle), named by
  content so concurrent callers never rewrite each other's.

``python -m rocm_bake.registry.tls DIR`` makes (or checks) them and prints
the paths; ``--trust DIR`` prints the bundle for the caller's environment
(``.tools/bin/pulumi`` and make export it as ``SSL_CERT_FILE``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rocm_bake.errors import RocmBakeError

APT_PACKAGE = "openssl"
CA_DAYS = 3650
SERVER_DAYS = 825
#: A server certificate expiring sooner than this is remade.
RENEW_BEFORE_S = 30 * 24 * 3600
#: Where Go's crypto/x509 looks for the system roots on Linux, in its order (root_linux.go).
SYSTEM_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
)
LOOPBACK_NAMES = "IP:127.0.0.1,IP:::1,DNS:localhost"
#: What the CA may vouch for: loopback only. Every process under .tools/bin/pulumi trusts it (SSL_CERT_FILE),
#: the GitHub providers included, so a leaked CA key must not be able to stand in for any other host.
CA_NAME_CONSTRAINTS = ("nameConstraints=critical,permitted;IP:127.0.0.0/255.0.0.0,"
                       "permitted;IP:::1/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,permitted;DNS:localhost")


@dataclass(frozen=True)
class RegistryTls:
    """The files of one checkout's (or one test's) registry TLS."""

    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca-key.pem"

    @property
    def server_cert(self) -> Path:
        return self.dir / "registry.pem"

    @property
    def server_key(self) -> Path:
        return self.dir / "registry-key.pem"

    @property
    def bundle(self) -> Path:
        return self.dir / "bundle.pem"


def openssl(*args: str, input_bytes: bytes | None = None) -> bytes:
    """Run the openssl CLI; a failure is one line naming the step."""
    binary = shutil.which("openssl")
    if binary is None:
        raise RocmBakeError(f"openssl not found: install the Debian package {APT_PACKAGE!r} "
                            f"(`make setup` does) to make the local registry's TLS certificates")
    result = subprocess.run([binary, *args], input=input_bytes, capture_output=True)
    if result.returncode != 0:
        detail = result.stderr.decode(errors="replace").strip().splitlines()
        raise RocmBakeError(f"openssl {args[0]} failed: {detail[-1] if detail else f'exit {result.returncode}'}")
    return result.stdout


def write_atomically(path: Path, data: bytes, mode: int) -> None:
    """Write through a unique temp file and rename: a reader sees the old or the new file, never half of one.

    mkstemp creates it 0600, so a key is never readable by others, not even for a moment.
    """
    fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(partial, mode)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def write_private(path: Path, data: bytes) -> None:
    write_atomically(path, data, 0o600)


def write_public(path: Path, data: bytes) -> None:
    write_atomically(path, data, 0o644)


def new_key() -> bytes:
    return openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")


def make_ca(tls: RegistryTls, name: str = "rocm-bake local registry CA",
            constraints: str = CA_NAME_CONSTRAINTS) -> None:
    """A CA of its own (key 0600), its common name ``name`` plus a random suffix: no two CAs look alike.

    ``constraints`` (an openssl ``nameConstraints`` extension) bound what it may vouch for: loopback by default.
    """
    write_private(tls.ca_key, new_key())
    subject = f"/O=rocm-bake/CN={name} {secrets.token_hex(4)}"
    cert = openssl(
        "req", "-x509", "-new", "-key", str(tls.ca_key), "-subj", subject, "-days", str(CA_DAYS), "-sha256",
        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
        "-addext", constraints,
    )
    write_public(tls.ca_cert, cert)


def ca_constrained(tls: RegistryTls) -> bool:
    """The CA carries a critical name-constraints extension: a CA made before they were added carries none."""
    shown = openssl("x509", "-in", str(tls.ca_cert), "-noout", "-ext", "nameConstraints")
    return b"X509v3 Name Constraints: critical" in shown


def server_cert_valid(tls: RegistryTls) -> bool:
    """The server certificate exists, chains to this CA and does not expire within RENEW_BEFORE_S."""
    if not (tls.server_cert.is_file() and tls.server_key.is_file()):
        return False
    try:
        openssl("verify", "-CAfile", str(tls.ca_cert), str(tls.server_cert))
        openssl("x509", "-in", str(tls.server_cert), "-noout", "-checkend", str(RENEW_BEFORE_S))
    except RocmBakeError:
        return False
    return True


def make_server_cert(tls: RegistryTls) -> None:
    """A leaf for the loopback names, signed by the CA."""
    issue_leaf(tls, tls.server_key, tls.server_cert, "127.0.0.1", LOOPBACK_NAMES, "serverAuth")


def issue_leaf(tls: RegistryTls, key: Path, cert: Path, common_name: str, names: str | None, usage: str) -> None:
    """A new key (0600) and a certificate for it signed by ``tls``'s CA.

    ``names`` are the subjectAltNames (``IP:...,DNS:...``; Go ignores the CN),
    ``usage`` the extendedKeyUsage (``serverAuth``, ``clientAuth`` or both).
    """
    write_private(key, new_key())
    csr = openssl("req", "-new", "-key", str(key), "-subj", f"/O=rocm-bake/CN={common_name}")
    extensions = "\n".join([
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature",
        f"extendedKeyUsage={usage}",
        *([f"subjectAltName={names}"] if names else []),
        "subjectKeyIdentifier=hash",
        "authorityKeyIdentifier=keyid:always",
    ]) + "\n"
    with tempfile.NamedTemporaryFile("w", suffix=".cnf", dir=key.parent) as extfile:
        extfile.write(extensions)
        extfile.flush()
        signed = openssl(
            "x509", "-req", "-CA", str(tls.ca_cert), "-CAkey", str(tls.ca_key),
            "-set_serial", f"0x{secrets.token_hex(16)}", "-days", str(SERVER_DAYS), "-sha256",
            "-extfile", extfile.name, input_bytes=csr,
        )
    write_public(cert, signed)


def system_roots(tls: RegistryTls) -> Path | None:
    """The roots the caller trusts now: its own SSL_CERT_FILE (unless one of ours), else the system's, else certifi's."""
    own = os.environ.get("SSL_CERT_FILE")
    if own and Path(own).is_file() and Path(own).resolve().parent != tls.dir:
        return Path(own)
    for candidate in SYSTEM_BUNDLES:
        if Path(candidate).is_file():
            return Path(candidate)
    try:
        import certifi
    except ImportError:
        return None
    return Path(certifi.where())


def bundle_text(tls: RegistryTls) -> bytes:
    """The caller's roots and our CA, so SSL_CERT_FILE adds trust and takes none away."""
    roots = system_roots(tls)
    base = roots.read_bytes() if roots is not None else b""
    if base and not base.endswith(b"\n"):
        base += b"\n"
    return base + b"# rocm-bake local registry CA\n" + tls.ca_cert.read_bytes()


def write_bundle(tls: RegistryTls) -> None:
    text = bundle_text(tls)
    if not tls.bundle.is_file() or tls.bundle.read_bytes() != text:
        write_public(tls.bundle, text)


def trust_bundle(directory: Path) -> Path:
    """The bundle for this caller's SSL_CERT_FILE (or the system roots) plus the CA made in ``directory``.

    Never makes the CA: without one (no ``make registry`` yet) it is an error.
    """
    tls = RegistryTls(directory.resolve())
    if not tls.ca_cert.is_file():
        raise RocmBakeError(f"no registry CA in {tls.dir}: `make registry` makes it")
    text = bundle_text(tls)
    if tls.bundle.is_file() and tls.bundle.read_bytes() == text:
        return tls.bundle
    path = tls.dir / f"bundle-{hashlib.sha256(text).hexdigest()[:16]}.pem"
    if not path.is_file():
        write_public(path, text)
    return path


def ensure_tls(directory: Path) -> RegistryTls:
    """Make the CA once, the server certificate when needed, and the bundle; return their paths."""
    tls = RegistryTls(directory.resolve())
    tls.dir.mkdir(parents=True, exist_ok=True)
    tls.dir.chmod(0o700)
    if not (tls.ca_cert.is_file() and tls.ca_key.is_file()):
        make_ca(tls)
    elif not ca_constrained(tls):
        make_ca(tls)
        print(f"rocm-bake: registry TLS in {tls.dir}: the CA had no name constraints (made before they were "
              f"added): replaced it with a loopback-only one and reissued the registry certificate", file=sys.stderr)
    if not server_cert_valid(tls):
        make_server_cert(tls)
    write_bundle(tls)
    return tls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocm_bake.registry.tls", description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="where the CA, certificate and bundles are kept (.rocm-bake/tls)")
    parser.add_argument("--trust", action="store_true",
                        help="only print the SSL_CERT_FILE bundle for this environment (the CA must exist)")
    args = parser.parse_args(argv)
    try:
        if args.trust:
            print(trust_bundle(args.dir))
            return 0
        tls = ensure_tls(args.dir)
    except (RocmBakeError, OSError) as exc:
        print(f"rocm-bake: error: registry TLS in {args.dir}: {exc}", file=sys.stderr)
        return 2
    print(f"registry TLS: CA {tls.ca_cert}, server certificate {tls.server_cert}, SSL_CERT_FILE bundle {tls.bundle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
