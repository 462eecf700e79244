"""A real ``docker-registry`` per test module, and a push helper for it.

Images are built here in Python (tar layers, config, manifest) and pushed
over the registry's own HTTP API, so the fetch side is tested against what a
real registry stores and serves. If the binary is missing the tests FAIL,
naming the apt package: they never skip.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import socket
import ssl
import struct
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rocm_bake.errors import RocmBakeError
from rocm_bake.registry.manifest import DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST
from rocm_bake.registry.scheme import scheme_for
from rocm_bake.local.registry_server import start_registry
from rocm_bake.registry.tls import RegistryTls, ensure_tls

from tests import services
from tests.retry_fixtures import no_waits  # noqa: F401 - re-exported fixture

OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
LAYER_TYPES = {
    ("oci", "gzip"): "application/vnd.oci.image.layer.v1.tar+gzip",
    ("oci", "none"): "application/vnd.oci.image.layer.v1.tar",
    ("oci", "zstd"): "application/vnd.oci.image.layer.v1.tar+zstd",
    ("docker", "gzip"): "application/vnd.docker.image.rootfs.diff.tar.gzip",
}


@dataclass
class Registry:
    """A running registry: its address, its storage root, and its TLS (None: plain http on loopback)."""

    address: str
    root: Path
    tls: RegistryTls | None = None

    def get(self, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> httpx.Response:
        """A request to the registry; over TLS, trusting only the test's CA (never plain http)."""
        if self.tls is None:
            return httpx.request(method, f"http://{self.address}{path}", headers=headers, timeout=30)
        trusted = ssl.create_default_context(cafile=str(self.tls.ca_cert))
        return httpx.request(method, f"https://{self.address}{path}", headers=headers, verify=trusted, timeout=30)

    def blob_path(self, digest: str) -> Path:
        """Where the registry keeps a blob: under the storage root its config.yml names, in the filesystem
        driver's own layout (``docker/registry/v2/blobs/sha256/ab/abcd…/data``)."""
        config = yaml.safe_load((self.root / "config.yml").read_text(encoding="utf-8"))
        hexd = digest.split(":", 1)[1]
        storage = Path(config["storage"]["filesystem"]["rootdirectory"])
        return storage / "docker" / "registry" / "v2" / "blobs" / "sha256" / hexd[:2] / hexd / "data"


def running_registry(root: Path, tls: RegistryTls | None = None, htpasswd: Path | None = None) -> Iterator[str]:
    """A real docker-registry on a free loopback port, stored under ``root``; its address while it runs.

    Plain HTTP unless ``tls`` (then https with that certificate, as ``make registry`` serves); with
    ``htpasswd`` (and ``tls``) it asks for a login from that file.
    """
    services.require("docker-registry")
    try:
        running = start_registry(root, tls=tls, htpasswd=htpasswd)
    except RocmBakeError as exc:
        pytest.fail(f"cannot start the real registry these tests need: {exc}")
    try:
        yield running.address
    finally:
        running.stop()


def write_htpasswd(path: Path, username: str, password: str) -> Path:
    """An htpasswd file with one bcrypt entry, as ``htpasswd -B`` writes (the registry takes bcrypt only); made
    with the C library's crypt(3), so the test does not trust code of its own to hash."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

        hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 4))
    if not (hashed or "").startswith("$2"):
        pytest.fail("this libc's crypt(3) makes no bcrypt hash: the htpasswd registry cannot be tested")
    path.write_text(f"{username}:{hashed}\n", encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def registry(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """The module's own real registry on a free loopback port: plain http, or https from a CA of the test's own
    when the module sets ``REGISTRY_TLS = True`` (as ``make registry`` serves)."""
    tls = ensure_tls(tmp_path_factory.mktemp("tls")) if getattr(request.module, "REGISTRY_TLS", False) else None
    root = tmp_path_factory.mktemp("registry")
    for address in running_registry(root, tls):
        yield Registry(address, root, tls)


def reset_connection(handler: BaseHTTPRequestHandler) -> None:
    """Answer nothing and close with a TCP RST (SO_LINGER 0): what a dropped connection looks like to a client."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.close_connection = True
    handler.connection.close()


# -- building layers -----------------------------------------------------------


@dataclass
class Entry:
    """One tar member: a file (``data``), ``dir``, ``symlink`` or ``hardlink``."""

    name: str
    data: bytes = b""
    kind: str = "file"
    linkname: str = ""


def wheel(dist: str, version: str = "1.0") -> str:
    return f"{dist}-{version}-py3-none-any.whl"


def tar_bytes(entries: list[Entry]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.mtime = 0
            if entry.kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif entry.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, entry.linkname
                tar.addfile(info)
            elif entry.kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, entry.linkname
                tar.addfile(info)
            else:
                info.size, info.mode = len(entry.data), 0o644
                tar.addfile(info, io.BytesIO(entry.data))
    return buf.getvalue()


@dataclass
class Layer:
    entries: list[Entry]
    created_by: str = "COPY /dist/*.whl /wheels/ # buildkit"
    compression: str = "gzip"
    raw: bytes | None = None  # pre-built uncompressed tar (for the bench)
    blob: bytes | None = None  # pre-built compressed blob of ``raw`` (e.g. several zstd frames)


@dataclass
class Pushed:
    repo: str
    tag: str | None
    digest: str
    size: int
    media_type: str
    layers: list[dict[str, Any]]
    config: dict[str, Any]
    manifest_bytes: int

    def ref(self, address: str) -> str:
        return f"{address}/{self.repo}:{self.tag}" if self.tag else f"{address}/{self.repo}@{self.digest}"


def digest_of(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def base_url(address: str) -> str:
    """``https://`` for a TLS registry (trusted through SSL_CERT_FILE), ``http://`` for a plain loopback one."""
    return f"{scheme_for(address)}://{address}"


def push_blob(address: str, repo: str, data: bytes) -> str:
    digest = digest_of(data)
    base = base_url(address)
    with httpx.Client(timeout=120) as client:
        start = client.post(f"{base}/v2/{repo}/blobs/uploads/")
        assert start.status_code == 202, start.text
        location = start.headers["Location"]
        if location.startswith("/"):
            location = f"{base}{location}"
        sep = "&" if "?" in location else "?"
        done = client.put(
            f"{location}{sep}digest={digest}", content=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        assert done.status_code == 201, done.text
    return digest


def put_manifest(address: str, repo: str, reference: str, body: bytes, media_type: str) -> str:
    resp = httpx.put(
        f"{base_url(address)}/v2/{repo}/manifests/{reference}", content=body,
        headers={"Content-Type": media_type}, timeout=30,
    )
    assert resp.status_code == 201, resp.text
    return digest_of(body)


def compress(tar: bytes, compression: str) -> bytes:
    if compression == "gzip":
        return gzip.compress(tar, compresslevel=1, mtime=0)
    if compression == "none":
        return tar
    if compression == "zstd":  # a real zstd frame, from the zstd CLI (independent of the code under test)
        return zstd_cli(tar)
    raise ValueError(compression)


def zstd_cli(data: bytes, *args: str) -> bytes:
    """``data`` compressed by the zstd CLI (Debian's ``zstd``): a producer independent of the code under test."""
    import shutil
    import subprocess

    if shutil.which("zstd") is None:
        pytest.fail("the zstd CLI builds these tests' zstd layers: apt-get install zstd")
    return subprocess.run(["zstd", "-q", "-c", *args], input=data, capture_output=True, check=True).stdout


def push_image(
    address: str,
    repo: str,
    tag: str | None,
    layers: list[Layer],
    *,
    fmt: str = "oci",
    architecture: str = "amd64",
    history: bool = True,
) -> Pushed:
    """Push layers, config and an image manifest (OCI or Docker schema 2)."""
    descs: list[dict[str, Any]] = []
    diff_ids: list[str] = []
    for layer in layers:
        tar = layer.raw if layer.raw is not None else tar_bytes(layer.entries)
        blob = layer.blob if layer.blob is not None else compress(tar, layer.compression)
        diff_ids.append(digest_of(tar))
        descs.append({"mediaType": LAYER_TYPES[(fmt, layer.compression)], "digest": push_blob(address, repo, blob), "size": len(blob)})
    config: dict[str, Any] = {
        "architecture": architecture, "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    if history:
        config["history"] = [{"created_by": "WORKDIR /", "empty_layer": True}] + [
            {"created_by": layer.created_by} for layer in layers
        ]
    config_bytes = json.dumps(config).encode()
    config_desc = {
        "mediaType": OCI_CONFIG if fmt == "oci" else DOCKER_CONFIG,
        "digest": push_blob(address, repo, config_bytes), "size": len(config_bytes),
    }
    media_type = OCI_MANIFEST if fmt == "oci" else DOCKER_MANIFEST
    manifest = {"schemaVersion": 2, "mediaType": media_type, "config": config_desc, "layers": descs}
    body = json.dumps(manifest).encode()
    digest = put_manifest(address, repo, tag or digest_of(body), body, media_type)
    return Pushed(repo, tag, digest, len(body), media_type, descs, config_desc, len(body))


def push_index(address: str, repo: str, tag: str, children: dict[str, Pushed], *, fmt: str = "oci") -> Pushed:
    """Push an index / manifest list over already-pushed images, keyed ``os/arch``."""
    media_type = OCI_INDEX if fmt == "oci" else DOCKER_LIST
    entries = []
    for platform, child in children.items():
        os_name, arch = platform.split("/")
        entries.append({"mediaType": child.media_type, "digest": child.digest, "size": child.size,
                        "platform": {"os": os_name, "architecture": arch}})
    body = json.dumps({"schemaVersion": 2, "mediaType": media_type, "manifests": entries}).encode()
    digest = put_manifest(address, repo, tag, body, media_type)
    return Pushed(repo, tag, digest, len(body), media_type, [], {}, len(body))


# -- an auth / fault-injecting proxy in front of the real registry ---------------


#: An injected "status" that answers nothing and resets the connection.
RESET = 0


@dataclass
class ProxyState:
    upstream: str
    mode: str = "bearer"  # bearer | basic | none
    username: str = "ci"
    password: str = "s3cret"
    token: str = "tok-123"
    #: statuses to answer once each, in order, before forwarding (e.g. [429, 503]); RESET drops the connection.
    inject: list[int] = field(default_factory=list)
    #: the same for the /token realm
    token_inject: list[int] = field(default_factory=list)
    always: int | None = None
    retry_after: str = "0"
    token_requests: list[dict[str, str]] = field(default_factory=list)
    injected: list[int] = field(default_factory=list)
    forwarded: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def make_handler(state: ProxyState, port_box: list[int]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _basic_ok(self) -> bool:
            expected = base64.b64encode(f"{state.username}:{state.password}".encode()).decode()
            return self.headers.get("Authorization") == f"Basic {expected}"

        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _token(self) -> None:
            from urllib.parse import parse_qs, urlparse

            query = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
            state.token_requests.append(query)
            with state.lock:
                status = state.token_inject.pop(0) if state.token_inject else None
            if status is not None:
                state.injected.append(status)
                if status == RESET:
                    reset_connection(self)
                else:
                    self._send(status, b"{}", {"Retry-After": state.retry_after})
                return
            if not self._basic_ok():
                self._send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}')
                return
            self._send(200, json.dumps({"token": state.token}).encode(), {"Content-Type": "application/json"})

        def _authorized(self) -> bool:
            if state.mode == "none":
                return True
            if state.mode == "basic":
                if self._basic_ok():
                    return True
                self._send(401, b"{}", {"WWW-Authenticate": 'Basic realm="test"'})
                return False
            if self.headers.get("Authorization") == f"Bearer {state.token}":
                return True
            repo = self.path.split("/v2/", 1)[-1].rsplit("/manifests/", 1)[0].rsplit("/blobs/", 1)[0]
            realm = f"http://127.0.0.1:{port_box[0]}/token"
            challenge = f'Bearer realm="{realm}",service="test-registry",scope="repository:{repo}:pull"'
            self._send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', {"WWW-Authenticate": challenge})
            return False

        def _forward(self) -> None:
            if self.path.startswith("/token"):
                self._token()
                return
            if not self._authorized():
                return
            with state.lock:
                status = state.inject.pop(0) if state.inject else state.always
            if status is not None:
                state.injected.append(status)
                if status == RESET:
                    reset_connection(self)
                    return
                self._send(status, b"{}", {"Retry-After": state.retry_after} if state.retry_after else None)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("accept",)}
            with httpx.stream(self.command, f"http://{state.upstream}{self.path}", headers=headers, timeout=60) as resp:
                state.forwarded += 1
                self.send_response(resp.status_code)
                for k, v in resp.headers.items():
                    if k.lower() in ("content-type", "content-length", "docker-content-digest", "location"):
                        self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    for chunk in resp.iter_raw():
                        self.wfile.write(chunk)

        do_GET = _forward
        do_HEAD = _forward

    return Handler


@pytest.fixture
def proxy(registry: Registry) -> Iterator[tuple[str, ProxyState]]:
    """A loopback proxy (with its own /token realm) in front of the real registry."""
    state = ProxyState(upstream=registry.address)
    port_box = [0]
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state, port_box))
    port_box[0] = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{port_box[0]}", state
    server.shutdown()
    server.server_close()
