"""A small OCI distribution (Docker Registry v2) pull client on httpx.

Only what fetching wheels needs: resolve a ref to a manifest (OCI image,
Docker schema 2, OCI index or Docker manifest list → linux/amd64), and stream
blobs with their sha256 verified as the bytes arrive. No Docker daemon.

Auth: anonymous, HTTP basic, or the Docker token flow (a 401 with
``WWW-Authenticate: Bearer realm=…,service=…,scope=…`` → GET the realm, retry
with the token; an identity token is POSTed as an OAuth2 refresh token, as
the Docker CLI does), as GHCR and Docker Hub answer. The login is looked up
only when the registry asks for one, the Docker way
(``rocm_bake.registry.credentials``: ``$DOCKER_CONFIG/config.json``, its
credential helpers, or the ``ROCM_BAKE_REGISTRY_*`` override). 5xx and 429 are retried with
``Retry-After`` or exponential backoff; 401/403/404 are clear errors.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel

from rocm_bake import progress
from rocm_bake.errors import RocmBakeError
from rocm_bake.registry.credentials import ENV_PASSWORD, ENV_USERNAME, Credential, looked_in, lookup
from rocm_bake.http_waits import (
    DEFAULT_TIMEOUT_S,
    describe,
    hopeless,
    http_timeout,
    redact,
    redact_url,
    retry_after_seconds,
)
from rocm_bake.loopback import is_loopback, split_host_port
from rocm_bake.retry import RetryPolicy, Retryable

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
IMAGE_MANIFESTS = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
INDEX_MANIFESTS = frozenset({OCI_INDEX, DOCKER_LIST})
ACCEPT = ", ".join([OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST])

#: The platform every image here is built for (components/images.py).
PLATFORM_OS = "linux"
PLATFORM_ARCH = "amd64"

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
REPO = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")
CHUNK = 1 << 20
#: A drop after this many new bytes resumes at once with a fresh retry count (the link works, it is just long).
RESUME_FRESH_BYTES = 1 << 20
#: Blobs smaller than this (configs, small layers) get no progress line.
PROGRESS_MIN_BYTES = 1 << 20
MAX_MANIFEST_BYTES = 4 << 20
#: The OAuth2 client id sent with an identity token (the token server logs it).
CLIENT_ID = "rocm-bake"


class ImageRef(BaseModel):
    """``registry/repository[:tag][@sha256:…]``, parsed."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What to ask the registry for: the digest when pinned, else the tag."""
        return self.digest or self.tag or ""

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.registry}/{self.repository}{tag}{digest}"


def parse_ref(ref: str) -> ImageRef:
    """Parse a fully-qualified image ref; the registry host must be explicit."""
    text = ref.strip()
    scheme, has_scheme, rest = text.partition("://")
    if "@" in (rest if has_scheme else text).split("/", 1)[0]:  # user:password@registry/...: never echoed or sent
        raise RocmBakeError(f"image ref {redact(text)!r}: credentials in an image ref are refused; "
                            f"set {ENV_USERNAME}/{ENV_PASSWORD}")
    if has_scheme and "/" not in scheme:
        raise RocmBakeError(f"image ref {text!r}: an image ref has no scheme; drop {scheme}:// "
                            f"(write HOST[:PORT]/REPOSITORY[:TAG][@DIGEST])")
    name, _, digest = text.partition("@")
    if digest and not DIGEST.match(digest):
        raise RocmBakeError(f"image ref {ref!r}: digest {digest!r} is not sha256:<64 hex>")
    registry, slash, rest = name.partition("/")
    if not slash or not ("." in registry or ":" in registry or registry == "localhost"):
        raise RocmBakeError(
            f"image ref {ref!r} names no registry host: expected HOST[:PORT]/REPOSITORY[:TAG][@DIGEST], "
            f"e.g. 127.0.0.1:5000/team/image:v1"
        )
    repository, tag = rest, None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        repository, _, tag = rest.rpartition(":")
        if not TAG.match(tag):
            raise RocmBakeError(f"image ref {ref!r}: tag {tag!r} is not a valid tag")
    if not REPO.match(repository):
        raise RocmBakeError(f"image ref {ref!r}: repository {repository!r} is not a valid name")
    return ImageRef(registry=registry, repository=repository, tag=tag, digest=digest or None)


class Descriptor(BaseModel):
    mediaType: str = ""
    digest: str
    size: int
    annotations: dict[str, str] | None = None
    platform: dict[str, Any] | None = None


class ResolvedImage(BaseModel):
    """A ref resolved to one linux/amd64 image manifest."""

    ref: str
    #: Digest of what the ref names (the index, when it is one).
    manifest_digest: str
    #: Digest of the linux/amd64 image manifest actually used.
    image_digest: str
    media_type: str
    config: Descriptor
    layers: list[Descriptor]


def speaks_tls(host: str, port: int, timeout_s: float = 5.0) -> bool:
    """Whether ``host:port`` completes a TLS handshake; only the protocol is probed, the certificate is checked later.

    A plain-HTTP server answers a ClientHello with an HTTP 400 or a close,
    which fails the handshake. A server that never answers, or nothing
    listening, is not proven TLS: loopback keeps its plain-HTTP default and
    the real request says what is wrong.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            with context.wrap_socket(sock):
                return True
    except OSError:  # ssl.SSLError included
        return False


#: The longest a loopback registry may take to show whether it speaks TLS.
PROBE_TIMEOUT_S = 10.0


def scheme_for(registry: str, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """HTTPS, except a loopback registry that does not speak TLS (probed, as Docker and containerd do for localhost).

    The local registry ``make registry`` starts serves TLS from the
    checkout's CA (trusted through ``SSL_CERT_FILE``); a loopback one that
    serves plain HTTP (a registry test's, a user's own) is still reached.
    Off loopback it is always HTTPS, never probed.
    """
    host, port = split_host_port(registry)
    if not is_loopback(host) or port is None:
        return "https"
    return "https" if speaks_tls(host, port, min(timeout_s, PROBE_TIMEOUT_S)) else "http"


def untrusted_certificate(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate-verification failure under a transport error, if that is what it is."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLCertVerificationError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """Split ``Bearer realm="…",service="…",scope="…"`` into scheme and params."""
    scheme, _, rest = header.strip().partition(" ")
    params = {k.lower(): v for k, v in re.findall(r'(\w+)="([^"]*)"', rest)}
    return scheme.lower(), params


def _range_start(content_range: str | None) -> int | None:
    """The first byte of a ``Content-Range: bytes START-END/TOTAL`` answer."""
    if not content_range or not content_range.startswith("bytes "):
        return None
    try:
        return int(content_range[6:].split("-", 1)[0])
    except ValueError:
        return None


class VerifyingReader:
    """A read()-able view of a blob stream that checks size and sha256.

    The digest is checked when the stream ends; reading past the declared
    size is refused, so a registry cannot feed an endless stream.
    """

    def __init__(self, chunks: Iterator[bytes], digest: str, size: int, what: str) -> None:
        self.chunks = chunks
        self.expected = digest
        self.size = size
        self.what = what
        self.hash = hashlib.sha256()
        self.seen = 0
        self.buffer = b""
        self.pos = 0
        self.done = False

    def _next(self) -> bytes | None:
        try:
            chunk = next(self.chunks)
        except StopIteration:
            self._finish()
            return None
        except httpx.HTTPError as exc:
            raise RocmBakeError(f"{self.what}: transfer failed after {self.seen} bytes: {exc}") from exc
        self.seen += len(chunk)
        if self.seen > self.size:
            raise RocmBakeError(f"{self.what}: registry sent more than the declared {self.size} bytes")
        self.hash.update(chunk)
        return chunk

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        actual = f"sha256:{self.hash.hexdigest()}"
        if self.seen != self.size:
            raise RocmBakeError(f"{self.what}: got {self.seen} bytes, manifest declares {self.size}")
        if actual != self.expected:
            raise RocmBakeError(f"{self.what}: digest mismatch: manifest says {self.expected}, content is {actual}")

    def read(self, n: int | None = -1) -> bytes:
        parts: list[bytes] = []
        need = -1 if n is None or n < 0 else n
        while need != 0:
            avail = len(self.buffer) - self.pos
            if avail == 0:
                chunk = self._next()
                if chunk is None:
                    break
                self.buffer, self.pos = chunk, 0
                continue
            take = avail if need < 0 else min(avail, need)
            parts.append(self.buffer[self.pos : self.pos + take])
            self.pos += take
            if need > 0:
                need -= take
        return b"".join(parts)

    def drain(self) -> None:
        """Read to the end so the digest is checked (tar stops before EOF padding ends)."""
        self.buffer, self.pos = b"", 0
        while self._next() is not None:
            pass
        self._finish()


class RegistryClient:
    """Pull-side client for one registry host; counts every byte fetched.

    Retries follow the one policy of ``rocm_bake.retry`` (5xx, 429 with its
    ``Retry-After``, dropped or reset connections, one more try after a
    timeout), each wait a visible line; ``retries`` is the number of retries
    after the first attempt and ``budget_s`` the total time one call may take.
    """

    def __init__(
        self,
        registry: str,
        *,
        username: str | None = None,
        password: str | None = None,
        retries: int = 5,
        backoff_s: float = 0.5,
        budget_s: float = 600.0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if "@" in registry:
            raise RocmBakeError(f"registry {redact(registry)!r}: credentials in a registry address are refused; "
                                f"set {ENV_USERNAME}/{ENV_PASSWORD}")
        self.registry = registry
        self.timeout_s = timeout_s
        self.base = f"{scheme_for(registry, timeout_s)}://{registry}"
        #: A login the caller gave (both empty: anonymous) is used as given; else it is looked up on demand.
        self.given = username is not None or password is not None
        self._credential = Credential(username, password, "the caller") if username and password else None
        self.retry = RetryPolicy(attempts=retries + 1, budget_s=budget_s, wait_initial_s=backoff_s)
        self.http = httpx.Client(timeout=http_timeout(timeout_s), follow_redirects=True)
        self.tokens: dict[str, str] = {}
        self.auth_header: dict[str, str] = {}
        self.bytes_fetched = 0

    def close(self) -> None:
        self.http.close()

    @property
    def credential(self) -> Credential | None:
        """The login for this registry, looked up once, when the registry first asks for one."""
        if not self.given:
            self._credential = lookup(self.registry)
            self.given = True
        return self._credential

    def no_login(self) -> str:
        return f"no login for {self.registry} in {looked_in(self.registry)} (docker login {self.registry}, or set " \
               f"{ENV_USERNAME}/{ENV_PASSWORD})"

    def __enter__(self) -> "RegistryClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport -------------------------------------------------------

    def _transport_failure(self, exc: httpx.TransportError) -> Retryable:
        """A retryable failure, except what retrying cannot fix: an untrusted certificate (say what will), a DNS
        failure, a refused connection or another TLS error (each named at once)."""
        untrusted = untrusted_certificate(exc)
        if untrusted is not None:
            raise RocmBakeError(
                f"{self.base}: TLS certificate not trusted ({untrusted.verify_message or untrusted.reason}): "
                f"set SSL_CERT_FILE to a bundle holding its CA (for the local registry, `make registry` writes "
                f".rocm-bake/tls/bundle.pem)"
            ) from None
        named = hopeless(exc)
        if named is not None:
            raise RocmBakeError(f"registry {self.registry}: {named}") from None
        return Retryable(describe(exc, self.timeout_s), timed_out=isinstance(exc, httpx.TimeoutException))

    @staticmethod
    def _status_failure(response: httpx.Response) -> Retryable:
        """A 5xx or 429, with the server's ``Retry-After`` (seconds or an HTTP date) when it sent one."""
        status = response.status_code
        reason = f"HTTP {status}" + (" (rate limited)" if status == 429 else "")
        return Retryable(reason, wait_s=retry_after_seconds(response.headers.get("Retry-After")))

    def _token(self, params: dict[str, str], what: str) -> str:
        realm = params.get("realm")
        if not realm:
            raise RocmBakeError(f"{what}: Bearer challenge from {self.registry} has no realm")
        shown = redact_url(realm)
        query = {k: params[k] for k in ("service", "scope") if k in params}
        login = self.credential
        parts = urlsplit(realm)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RocmBakeError(f"{what}: token realm {shown!r} from {self.registry} is not an http(s) URL")
        if login and parts.scheme == "http" and not is_loopback(parts.hostname):
            raise RocmBakeError(f"{what}: token realm {shown} is plain http off loopback: refusing to send "
                                f"the login from {login.source} in clear")

        def once() -> httpx.Response:
            timeout = http_timeout(self.timeout_s, metadata=True)
            try:
                if login is not None and login.is_token:  # OAuth2: the identity token is a refresh token
                    form = {**query, "grant_type": "refresh_token", "refresh_token": login.secret,
                            "client_id": CLIENT_ID}
                    resp = self.http.post(realm, data=form, timeout=timeout)
                else:
                    auth = (login.username or "", login.secret) if login is not None else None
                    resp = self.http.get(realm, params=query, auth=auth, timeout=timeout)
            except httpx.TransportError as exc:
                raise self._transport_failure(exc) from exc
            if resp.status_code >= 500 or resp.status_code == 429:
                raise self._status_failure(resp)
            return resp

        resp = self.retry.call(f"{what}: token realm {shown}", once)
        if resp.status_code in (401, 403):
            who = (f"{'with an identity token' if login.is_token else f'as {login.username!r}'} from {login.source}"
                   if login else f"anonymously: {self.no_login()}")
            raise RocmBakeError(f"{what}: token realm {shown} refused a token {who}: HTTP {resp.status_code}")
        if resp.status_code != 200:
            raise RocmBakeError(f"{what}: token realm {shown} answered HTTP {resp.status_code}")
        try:
            body = resp.json()
        except ValueError:
            body = None
        token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
        if not token:
            raise RocmBakeError(f"{what}: token realm {shown} returned no token")
        return str(token)

    def _authorize(self, response: httpx.Response, what: str) -> bool:
        """Answer a 401 challenge; False when there is nothing new to try."""
        scheme, params = parse_challenge(response.headers.get("WWW-Authenticate", ""))
        if scheme == "bearer":
            key = params.get("scope", "")
            if self.auth_header.get("Authorization") == f"Bearer {self.tokens.get(key)}":
                return False  # this token was just refused
            self.tokens[key] = self._token(params, what)
            self.auth_header = {"Authorization": f"Bearer {self.tokens[key]}"}
            return True
        if scheme == "basic" and not self.auth_header:
            login = self.credential
            if login is None:
                return False
            if login.is_token:
                raise RocmBakeError(f"{what}: {self.registry} asks for a username and password, and the login "
                                    f"from {login.source} is an identity token")
            pair = base64.b64encode(f"{login.username}:{login.secret}".encode()).decode()
            self.auth_header = {"Authorization": f"Basic {pair}"}
            return True
        return False

    def _send(self, method: str, url: str, what: str, headers: dict[str, str] | None, stream: bool) -> httpx.Response:
        """One attempt, auth challenges answered on the way: a 2xx response, a clear error, or ``Retryable``."""
        auth_tries = 0
        timeout = http_timeout(self.timeout_s, metadata=not stream)
        while True:
            request = self.http.build_request(method, url, headers={**(headers or {}), **self.auth_header},
                                              timeout=timeout)
            try:
                response = self.http.send(request, stream=True)
            except httpx.TransportError as exc:
                raise self._transport_failure(exc) from exc
            status = response.status_code
            if status == 401 and auth_tries < 2:
                response.close()
                auth_tries += 1
                if self._authorize(response, what):
                    continue
                self._raise(response, what)
            if status >= 500 or status == 429:
                response.close()
                raise self._status_failure(response)
            if status >= 300:
                response.close()
                self._raise(response, what)
            return response

    @contextmanager
    def _request(self, method: str, path: str, what: str, headers: dict[str, str] | None = None,
                 stream: bool = False) -> Iterator[httpx.Response]:
        """Send with auth and the retry policy; yield a 2xx response, its body still to be read.

        ``stream`` bodies (blobs) are bounded by inactivity (``--timeout``);
        metadata answers by ``METADATA_TIMEOUT_S`` at most.
        """
        url = f"{self.base}{path}"
        response = self.retry.call(what, lambda: self._send(method, url, what, headers, stream))
        try:
            yield response
        finally:
            response.close()

    def _raise(self, response: httpx.Response, what: str) -> None:
        status = response.status_code
        login = self._credential if self.given else None
        sent = f"the login from {login.source}" if login is not None else None
        hint = {
            401: f"authentication required: it refused {sent}" if sent else
                 f"authentication required: {self.no_login()}",
            403: f"access denied for {sent}" if sent else "access denied anonymously",
            404: "not found (wrong repository, tag or digest?)",
        }.get(status, "unexpected status")
        raise RocmBakeError(f"{what}: {self.registry} answered HTTP {status}: {hint}")

    # -- manifests -------------------------------------------------------

    def get_manifest(self, repository: str, reference: str) -> tuple[str, str, dict[str, Any]]:
        """GET a manifest; return (digest, media type, parsed JSON), digest-checked."""
        what = f"manifest {self.registry}/{repository}@{reference}" if reference.startswith("sha256:") else f"manifest {self.registry}/{repository}:{reference}"
        with self._request("GET", f"/v2/{repository}/manifests/{reference}", what, {"Accept": ACCEPT}) as resp:
            body = b""
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > MAX_MANIFEST_BYTES:
                    raise RocmBakeError(f"{what}: larger than {MAX_MANIFEST_BYTES} bytes")
            header_digest = resp.headers.get("Docker-Content-Digest")
            content_type = resp.headers.get("Content-Type", "").split(";")[0].strip()
        self.bytes_fetched += len(body)
        digest = f"sha256:{hashlib.sha256(body).hexdigest()}"
        if reference.startswith("sha256:") and digest != reference:
            raise RocmBakeError(f"{what}: digest mismatch: content is {digest}")
        if header_digest and header_digest.startswith("sha256:") and header_digest != digest:
            raise RocmBakeError(f"{what}: digest mismatch: registry says {header_digest}, content is {digest}")
        try:
            manifest = json.loads(body)
        except ValueError as exc:
            raise RocmBakeError(f"{what}: not JSON: {exc}") from exc
        if not isinstance(manifest, dict):
            raise RocmBakeError(f"{what}: not a manifest (a JSON {type(manifest).__name__}, not an object)")
        media_type = manifest.get("mediaType") or content_type
        return digest, media_type, manifest

    def resolve_digest(self, ref: ImageRef) -> str:
        """The digest a ref names, by HEAD (no body fetched); pinned refs need no request."""
        if ref.digest:
            return ref.digest
        what = f"manifest {ref}"
        with self._request("HEAD", f"/v2/{ref.repository}/manifests/{ref.reference}", what, {"Accept": ACCEPT}) as resp:
            digest = resp.headers.get("Docker-Content-Digest")
        if digest and DIGEST.match(digest):
            return digest
        return self.get_manifest(ref.repository, ref.reference)[0]

    def resolve_image(self, ref: ImageRef) -> ResolvedImage:
        """Resolve to the linux/amd64 image manifest, following an index."""
        digest, media_type, manifest = self.get_manifest(ref.repository, ref.reference)
        top = digest
        if media_type in INDEX_MANIFESTS:
            child = pick_platform(manifest, str(ref))
            digest, media_type, manifest = self.get_manifest(ref.repository, child.digest)
        if media_type not in IMAGE_MANIFESTS:
            raise RocmBakeError(
                f"{ref}: manifest media type {media_type!r} is not an OCI or Docker schema 2 image "
                f"(schema 1 and artifacts are not supported)"
            )
        if not isinstance(manifest.get("config"), dict) or not isinstance(manifest.get("layers", []), list):
            fields = ", ".join(repr(k[:40]) for k in list(manifest)[:8]) or "no fields"
            raise RocmBakeError(f"{ref}: malformed image manifest: an image manifest needs a 'config' descriptor "
                                f"and a 'layers' list (this one has {fields})")
        try:
            config = Descriptor.model_validate(manifest["config"])
            layers = [Descriptor.model_validate(layer) for layer in manifest.get("layers", [])]
        except (KeyError, ValueError) as exc:
            raise RocmBakeError(f"{ref}: malformed image manifest: {exc}") from exc
        for desc in [config, *layers]:
            if not DIGEST.match(desc.digest):
                raise RocmBakeError(f"{ref}: blob digest {desc.digest!r} is not sha256:<64 hex>")
        return ResolvedImage(
            ref=str(ref), manifest_digest=top, image_digest=digest, media_type=media_type,
            config=config, layers=layers,
        )

    # -- blobs -------------------------------------------------------------

    @contextmanager
    def open_blob(self, repository: str, desc: Descriptor) -> Iterator[VerifyingReader]:
        """Stream a blob; the reader raises on a size or sha256 mismatch at EOF."""
        what = f"blob {self.registry}/{repository}@{desc.digest}"
        chunks = self._blob_chunks(repository, desc, what)
        if desc.size < PROGRESS_MIN_BYTES:  # configs and manifests: no progress line
            try:
                yield VerifyingReader(chunks, desc.digest, desc.size, what)
            finally:
                chunks.close()
            return
        with progress.track(f"{repository} layer {desc.digest[7:19]}", desc.size) as advance:

            def counted() -> Iterator[bytes]:
                for chunk in chunks:
                    advance(len(chunk))
                    yield chunk

            try:
                yield VerifyingReader(counted(), desc.digest, desc.size, what)
            finally:
                chunks.close()

    def _blob_chunks(self, repository: str, desc: Descriptor, what: str) -> Iterator[bytes]:
        """The blob's bytes, resuming a dropped connection with ``Range`` from the byte it reached.

        A multi-GB layer is not thrown away for a dropped connection. A registry
        that ignores ``Range`` (answers 200) gets a clean restart: the bytes we
        already passed on are skipped in the new stream. Either way the reader
        verifies the sha256 of the whole blob. A drop after new bytes arrived
        resumes at once with a fresh retry count; one before any backs off.
        """
        path = f"/v2/{repository}/blobs/{desc.digest}"
        reached = [0]

        def transfer() -> Iterator[bytes]:
            sent = start = reached[0]
            headers = {"Range": f"bytes={sent}-"} if sent else None
            with self._request("GET", path, what, headers=headers, stream=True) as resp:
                skip = 0
                if sent:
                    first = _range_start(resp.headers.get("Content-Range")) if resp.status_code == 206 else None
                    if first is None:
                        skip = sent  # Range ignored: the whole blob again; drop what we already have
                    elif first != sent:
                        raise RocmBakeError(f"{what}: asked to resume at byte {sent}, got byte {first}")
                chunks = resp.iter_raw()  # as the bytes arrive: a chunker would lose its buffer on a drop
                while True:
                    try:
                        chunk = next(chunks)
                    except StopIteration:
                        return
                    except httpx.TransportError as exc:  # a reset, a cut, or --timeout of silence
                        raise Retryable(
                            f"connection dropped after {sent} of {desc.size} bytes ({describe(exc, self.timeout_s)})",
                            timed_out=isinstance(exc, httpx.TimeoutException),
                            progressed=sent - start >= RESUME_FRESH_BYTES,
                        ) from exc
                    self.bytes_fetched += len(chunk)  # off the wire, so a restart's repeated bytes count too
                    if skip:
                        cut = min(skip, len(chunk))
                        chunk, skip = chunk[cut:], skip - cut
                        if not chunk:
                            continue
                    sent += len(chunk)
                    reached[0] = sent
                    yield chunk

        yield from self.retry.stream(what, transfer)

    def get_blob_json(self, repository: str, desc: Descriptor) -> dict[str, Any]:
        if desc.size > MAX_MANIFEST_BYTES:
            raise RocmBakeError(f"config blob {desc.digest} is {desc.size} bytes; refusing")
        with self.open_blob(repository, desc) as reader:
            data = reader.read()
            reader.drain()
        try:
            return json.loads(data)
        except ValueError as exc:
            raise RocmBakeError(f"config blob {desc.digest}: not JSON: {exc}") from exc


def pick_platform(index: dict[str, Any], what: str) -> Descriptor:
    """The linux/amd64 entry of an index (attestation manifests are ignored)."""
    seen: list[str] = []
    for raw in index.get("manifests", []):
        desc = Descriptor.model_validate(raw)
        platform = desc.platform or {}
        seen.append(f"{platform.get('os', '?')}/{platform.get('architecture', '?')}")
        if (desc.annotations or {}).get("vnd.docker.reference.type") == "attestation-manifest":
            continue
        if platform.get("os") == PLATFORM_OS and platform.get("architecture") == PLATFORM_ARCH:
            return desc
    raise RocmBakeError(
        f"{what}: index has no {PLATFORM_OS}/{PLATFORM_ARCH} image (platforms: {', '.join(seen) or 'none'})"
    )
