"""A small OCI distribution (Docker Registry v2) pull client on httpx.

Only what fetching wheels needs: resolve a ref to a manifest (OCI image,
Docker schema 2, OCI index or Docker manifest list → linux/amd64), and stream
blobs with their sha256 verified as the bytes arrive. No Docker daemon.

Its parts live beside it, one concern a module: ``reference`` (image refs),
``manifest`` (media types, descriptors, the platform pick), ``scheme`` (HTTPS,
or plain HTTP for a loopback registry without TLS), ``auth`` (the login and
the challenge answers), ``reader`` (digest-checked blob reads). 5xx and 429
are retried with ``Retry-After`` or exponential backoff; 401/403/404 are clear
errors.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from rocm_bake import progress
from rocm_bake.errors import RocmBakeError
from rocm_bake.http_waits import DEFAULT_TIMEOUT_S, describe, hopeless, http_timeout, redact, retry_after_seconds
from rocm_bake.registry.auth import RegistryAuth
from rocm_bake.registry.credentials import ENV_PASSWORD, ENV_USERNAME
from rocm_bake.registry.manifest import (
    ACCEPT,
    IMAGE_MANIFESTS,
    INDEX_MANIFESTS,
    Descriptor,
    ResolvedImage,
    pick_platform,
)
from rocm_bake.registry.reader import VerifyingReader
from rocm_bake.registry.reference import DIGEST, ImageRef
from rocm_bake.registry.scheme import scheme_for, untrusted_certificate
from rocm_bake.retry import RetryPolicy, Retryable

CHUNK = 1 << 20
#: A drop after this many new bytes resumes at once with a fresh retry count (the link works, it is just long).
RESUME_FRESH_BYTES = 1 << 20
#: Blobs smaller than this (configs, small layers) get no progress line.
PROGRESS_MIN_BYTES = 1 << 20
MAX_MANIFEST_BYTES = 4 << 20


def _range_start(content_range: str | None) -> int | None:
    """The first byte of a ``Content-Range: bytes START-END/TOTAL`` answer."""
    if not content_range or not content_range.startswith("bytes "):
        return None
    try:
        return int(content_range[6:].split("-", 1)[0])
    except ValueError:
        return None


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
        self.retry = RetryPolicy(attempts=retries + 1, budget_s=budget_s, wait_initial_s=backoff_s)
        self.http = httpx.Client(timeout=http_timeout(timeout_s), follow_redirects=True)
        self.auth = RegistryAuth(registry, username, password, self.http, self.retry, timeout_s,
                                 self._transport_failure, self._status_failure)
        self.bytes_fetched = 0

    def close(self) -> None:
        self.http.close()

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

    def _send(self, method: str, url: str, what: str, headers: dict[str, str] | None, stream: bool) -> httpx.Response:
        """One attempt, auth challenges answered on the way: a 2xx response, a clear error, or ``Retryable``."""
        auth_tries = 0
        timeout = http_timeout(self.timeout_s, metadata=not stream)
        while True:
            request = self.http.build_request(method, url, headers={**(headers or {}), **self.auth.header},
                                              timeout=timeout)
            try:
                response = self.http.send(request, stream=True)
            except httpx.TransportError as exc:
                raise self._transport_failure(exc) from exc
            status = response.status_code
            if status == 401 and auth_tries < 2:
                response.close()
                auth_tries += 1
                if self.auth.answer(response, what):
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
        login = self.auth.sent
        sent = f"the login from {login.source}" if login is not None else None
        hint = {
            401: f"authentication required: it refused {sent}" if sent else
                 f"authentication required: {self.auth.no_login()}",
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
