"""A small GitHub REST client for publishing: releases, release assets, Git Data API.

Plain httpx rather than a GitHub SDK: publishing needs only a dozen
endpoints, three configurable bases (API, uploads host, web/download host)
and retry behaviour we control. Every endpoint follows GitHub's documented contract (REST API version 2022-11-28):

* Uploads go to the uploads host, ``POST /repos/{o}/{r}/releases/{id}/assets?name=``
  with the raw bytes, ``Content-Type`` and ``Content-Length``; a duplicate
  name is ``422`` with ``errors[].code == "already_exists"``; "When an
  upstream failure occurs, you will receive a 502 Bad Gateway status. This
  may leave an empty asset with a state of ``starter``."
* Primary rate limit: ``403``/``429`` with ``x-ratelimit-remaining: 0`` — wait
  until ``x-ratelimit-reset`` (epoch seconds). Secondary: ``retry-after``
  (seconds, or an HTTP date), or at least a minute when neither header is sent.
* ``5xx`` and dropped or reset connections are retried with jittered
  exponential backoff, then a clear error naming the request.
* A renamed repository: GitHub answers the old name with a redirect to the
  repository by id (301 for reads). Reads follow it, so the old and the new
  name find one and the same release; httpx drops the token on a redirect
  to another origin. Writes never follow one (the stack would go on naming a
  repository that is no longer called so): the error names the new name and
  the setting to change.

Waiting and retrying follow the one policy of ``rocm_bake.retry`` (stamina),
each wait a visible line; a rate limit whose reset lies beyond the retry
budget is a clear error at once, not an hour of silence.

The token is sent only as ``Authorization: Bearer``; it never appears in an
error message, a repr, or a log line, and it never travels over plain http
off loopback (``GitHubEndpoints`` refuses such a URL, and one with
credentials in it, without echoing them).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, model_validator

from rocm_bake import progress
from rocm_bake.errors import RocmBakeError
from rocm_bake.http_waits import (
    check_service_url,
    DEFAULT_TIMEOUT_S,
    describe,
    hopeless,
    http_timeout,
    redact,
    retry_after_seconds,
)
from rocm_bake.retry import RetryPolicy, Retryable

API_VERSION = "2022-11-28"
#: "Each file included in a release must be under 2 GiB."
MAX_ASSET_BYTES = 2 * 1024**3
#: "Each release can have up to 1000 assets."
MAX_RELEASE_ASSETS = 1000
#: GitHub refuses any file over 100 MB in git.
MAX_GIT_BLOB_BYTES = 100 * 1024**2
#: A secondary limit without headers: "wait for at least one minute".
SECONDARY_DEFAULT_WAIT = 60.0
UPLOAD_CHUNK = 1 << 20


class GitHubEndpoints(BaseModel):
    """Where each part of GitHub lives; all four are configurable so a loopback fake can stand in."""

    api_url: str = "https://api.github.com"
    uploads_url: str = "https://uploads.github.com"
    web_url: str = "https://github.com"
    #: ``{owner}``/``{repo}`` are filled in; GitHub Pages for a project repo.
    pages_url: str = "https://{owner}.github.io/{repo}"

    @model_validator(mode="after")
    def _safe_urls(self) -> "GitHubEndpoints":
        """No credentials in a URL (they would be echoed in errors and logs: use GITHUB_TOKEN), and plain
        http only to loopback: the token travels with every API call and must never cross a network in clear."""
        for name in ("api_url", "uploads_url", "web_url", "pages_url"):
            try:
                check_service_url(getattr(self, name))
            except ValueError as exc:
                raise ValueError(f"GitHub {name}: {exc}") from None
        return self

    def download_base(self, repo: str, tag: str) -> str:
        """A release's asset download prefix (what the gh-pages index hrefs point at)."""
        return f"{self.web_url.rstrip('/')}/{repo}/releases/download/{quote(tag)}/"

    def pages_base(self, repo: str) -> str:
        owner, name = repo.split("/", 1)
        return self.pages_url.format(owner=owner, repo=name).rstrip("/") + "/"


def github_endpoints(**given: str | None) -> GitHubEndpoints:
    """``GitHubEndpoints`` from the given URLs (None: the default), refused in one line that never shows one.

    pydantic's own message would print ``input_value=`` (a URL with a token in
    it); this names the field and the rule only.
    """
    from pydantic import ValidationError

    from rocm_bake.problems import problem_lines

    try:
        return GitHubEndpoints(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        raise RocmBakeError("; ".join(problem_lines(exc.errors(), lambda loc: "GitHub endpoints",
                                                    [v for v in given.values() if v]))) from None


class Asset(BaseModel):
    id: int
    name: str
    size: int
    state: str = "uploaded"
    label: str | None = None
    #: ``sha256:<hex>``; GitHub computes it for assets uploaded since mid-2025.
    digest: str | None = None
    browser_download_url: str | None = None

    @property
    def sha256(self) -> str | None:
        if self.digest and self.digest.startswith("sha256:"):
            return self.digest.removeprefix("sha256:")
        return None


class Release(BaseModel):
    id: int
    tag_name: str
    name: str | None = None
    draft: bool = False
    upload_url: str | None = None
    html_url: str | None = None


class TreeEntry(BaseModel):
    path: str
    mode: str
    type: str
    sha: str
    size: int | None = None


class GitHubHTTPError(RocmBakeError):
    """A GitHub answer we do not retry; carries the status and the parsed error codes."""

    def __init__(self, message: str, status: int, codes: list[str], *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.codes = codes
        #: status 0 only: no answer within ``--timeout`` (rather than a reset connection)
        self.timed_out = timed_out


@dataclass
class Counters:
    """What a client actually did, so tests and reports can say "zero uploads"."""

    requests: int = 0
    uploads: int = 0
    deletes: int = 0
    blobs: int = 0
    commits: int = 0
    ref_updates: int = 0
    releases_created: int = 0
    waits: list[float] = field(default_factory=list)


def _error_codes(response: httpx.Response) -> tuple[str, list[str]]:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200], []
    if not isinstance(body, dict):
        return str(body)[:200], []
    codes = [e.get("code", "") for e in body.get("errors", []) if isinstance(e, dict)]
    return str(body.get("message", ""))[:200], codes


class GitHubClient:
    """One repository's REST client; rate limits, 5xx and dropped connections go through one retry policy.

    ``max_attempts`` bounds the attempts of one call, ``max_wait`` its total
    time (a rate-limit reset further away is a clear error at once),
    ``backoff`` the first backoff; ``timeout`` the silence a request may meet.
    ``clock`` reads ``x-ratelimit-reset`` (epoch seconds) against now.
    """

    def __init__(
        self,
        repo: str,
        token: str | None,
        endpoints: GitHubEndpoints | None = None,
        *,
        clock: Callable[[], float] = time.time,
        max_attempts: int = 5,
        backoff: float = 1.0,
        max_wait: float = 3600.0,
        timeout: float = DEFAULT_TIMEOUT_S,
        token_source: str | None = None,
        repo_source: str = "rocm-bake:githubRepo",
    ) -> None:
        if repo.count("/") != 1 or not all(repo.split("/")):
            raise RocmBakeError(f"GitHub repo {repo!r}: expected OWNER/NAME")
        self.repo = repo
        self.endpoints = endpoints or GitHubEndpoints()
        self.clock = clock
        self.counters = Counters()
        self.retry = RetryPolicy(attempts=max_attempts, budget_s=max_wait, wait_initial_s=backoff,
                                 wait_max_s=60.0, on_wait=self.counters.waits.append)
        self._has_token = bool(token)
        #: Where the token came from, named in a 401 (several sources exist; the one that won is what was sent).
        self.token_source = token_source
        #: Where ``repo`` came from, named when GitHub says the repository now has another name.
        self.repo_source = repo_source
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION,
                   "User-Agent": "rocm-bake"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout
        self._http = httpx.Client(headers=headers, timeout=http_timeout(timeout), follow_redirects=False)

    @property
    def max_attempts(self) -> int:
        return self.retry.attempts

    def __repr__(self) -> str:  # never the token
        return f"GitHubClient({self.repo!r}, api={self.endpoints.api_url!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "GitHubClient":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ transport

    def api(self, path: str) -> str:
        return f"{self.endpoints.api_url.rstrip('/')}/repos/{self.repo}{path}"

    def _rate_limit(self, response: httpx.Response) -> Retryable | None:
        """A rate-limited answer as a retry with GitHub's own wait, or None when it is not one.

        Primary: ``x-ratelimit-remaining: 0`` → until ``x-ratelimit-reset``.
        Secondary: ``retry-after`` (seconds or an HTTP date), else "wait for at
        least one minute". A plain 403 is permissions, not a limit.
        """
        if response.status_code not in (403, 429):
            return None
        headers = response.headers
        if headers.get("retry-after"):
            after = retry_after_seconds(headers["retry-after"], now=self.clock())  # seconds or an HTTP date
            wait = SECONDARY_DEFAULT_WAIT if after is None else after
            return Retryable(f"rate limit (secondary, retry-after {headers['retry-after']})", wait_s=wait)
        if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
            try:
                wait = max(0.0, float(headers["x-ratelimit-reset"]) - self.clock()) + 1.0
            except ValueError:
                wait = SECONDARY_DEFAULT_WAIT
            return Retryable(f"rate limit (primary, resets in {wait:.0f} s)", wait_s=wait)
        message, _ = _error_codes(response)
        if response.status_code == 429 or "rate limit" in message.lower():
            return Retryable("rate limit (secondary)", wait_s=SECONDARY_DEFAULT_WAIT)
        return None

    def request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        content: Callable[[], Iterator[bytes]] | None = None,
        headers: dict[str, str] | None = None,
        ok: tuple[int, ...] = (200,),
        retry_5xx: bool = True,
    ) -> httpx.Response:
        """Send one request under the retry policy; raise on anything else not ``ok``.

        ``content`` is a factory so a retry re-reads the body from the start; a
        request with a body streams it (``--timeout`` bounds each write), one
        without is a metadata call (answered within seconds). ``retry_5xx=False``
        leaves 5xx and dropped connections to the caller (an upload may leave a
        ``starter`` asset to clean first); rate limits are still waited out.
        """
        what = f"GitHub {method} {redact(url.split('?')[0])}"
        timeout = http_timeout(self.timeout, metadata=content is None)

        def once() -> httpx.Response:
            self.counters.requests += 1
            try:
                response = self._http.request(
                    method, url, json=json, params=params, headers=headers, timeout=timeout,
                    content=content() if content is not None else None, follow_redirects=method == "GET",
                )
            except httpx.TransportError as exc:
                reason = describe(exc, self.timeout)
                if hopeless(exc) is not None:  # DNS, refused, TLS: the same on every try
                    raise GitHubHTTPError(f"{what}: {reason}", 0, []) from None
                if not retry_5xx:
                    raise GitHubHTTPError(f"{what}: {reason}", 0, [],
                                          timed_out=isinstance(exc, httpx.TimeoutException)) from None
                server_errors.clear()
                raise Retryable(reason, timed_out=isinstance(exc, httpx.TimeoutException)) from None
            if response.status_code in ok:
                return response
            limited = self._rate_limit(response)
            if limited is not None:
                server_errors.clear()
                raise limited
            if response.status_code >= 500 and retry_5xx:  # a 503 may say when to come back
                after = retry_after_seconds(response.headers.get("retry-after"), now=self.clock())
                server_errors.append(response.status_code)
                raise Retryable(f"HTTP {response.status_code}", wait_s=after)
            server_errors.clear()  # the last failure is what the final message explains
            raise self._http_error(what, response)

        server_errors: list[int] = []
        try:
            return self.retry.call(what, once)
        except GitHubHTTPError:
            raise
        except RocmBakeError as exc:
            if server_errors:  # only GitHub's own 5xx is blamed on GitHub; DNS, TLS, refused are named as such
                raise RocmBakeError(f"{exc}; GitHub may be degraded; try again later") from None
            raise

    def _http_error(self, what: str, response: httpx.Response) -> GitHubHTTPError:
        message, codes = _error_codes(response)
        status = response.status_code
        if status == 401:
            sent = f"the token sent was {self.token_source}" if self.token_source else \
                "GITHUB_TOKEN or rocm-bake:githubToken"
            hint = (f"the token was rejected (bad, expired or revoked): {sent}"
                    if self._has_token else "no token was given; set GITHUB_TOKEN")
            text = f"{what}: 401 {message or 'Requires authentication'}: {hint}"
        elif status in (403, 404) and self._has_token and what.startswith(("GitHub POST", "GitHub PATCH",
                                                                             "GitHub DELETE")):
            text = (f"{what}: {status} {message}: the token needs contents:write on {self.repo}")
        elif status in (301, 302, 307, 308):
            now = self._name_now()
            text = (f"{what}: {status}: the repository {self.repo} was renamed to {now} on GitHub, and a write "
                    f"never follows the old name: set {self.repo_source} to {now}" if now else
                    f"{what}: {status}: GitHub redirects the repository {self.repo} elsewhere (renamed, or moved to "
                    f"another owner), and a write never follows the old name: set {self.repo_source} to its new name")
        else:
            text = f"{what}: {status} {message}" + (f" ({', '.join(codes)})" if codes else "")
        return GitHubHTTPError(text, status, codes)

    def _name_now(self) -> str | None:
        """The repository's OWNER/NAME as GitHub answers it now (a read follows a rename); None if it cannot say."""
        try:
            response = self._http.get(f"{self.endpoints.api_url.rstrip('/')}/repos/{self.repo}",
                                      follow_redirects=True, timeout=http_timeout(self.timeout, metadata=True))
            name = response.json().get("full_name") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return name if isinstance(name, str) and name.count("/") == 1 and name != self.repo else None

    def _paged(self, url: str) -> Iterator[Any]:
        params: dict[str, Any] | None = {"per_page": 100}
        next_url: str | None = url
        while next_url:
            response = self.request("GET", next_url, params=params)
            yield from response.json()
            next_url = response.links.get("next", {}).get("url")
            params = None  # the Link URL carries them

    # ------------------------------------------------------------ releases

    def get_release_by_tag(self, tag: str) -> Release | None:
        try:
            return Release.model_validate(self.request("GET", self.api(f"/releases/tags/{quote(tag)}")).json())
        except GitHubHTTPError as exc:
            if exc.status == 404:
                return None
            raise

    def create_release(self, tag: str, name: str, body: str) -> Release:
        response = self.request(
            "POST", self.api("/releases"), ok=(201,),
            json={"tag_name": tag, "name": name, "body": body, "draft": False, "prerelease": False},
        )
        self.counters.releases_created += 1
        return Release.model_validate(response.json())

    def delete_release(self, release_id: int) -> None:
        """Delete a release (its assets go with it); one already gone is what we wanted."""
        try:
            self.request("DELETE", self.api(f"/releases/{release_id}"), ok=(204,))
        except GitHubHTTPError as exc:
            if exc.status != 404:
                raise

    def list_assets(self, release_id: int) -> list[Asset]:
        return [Asset.model_validate(a) for a in self._paged(self.api(f"/releases/{release_id}/assets"))]

    def delete_asset(self, asset_id: int) -> None:
        try:
            self.request("DELETE", self.api(f"/releases/assets/{asset_id}"), ok=(204,))
        except GitHubHTTPError as exc:
            if exc.status != 404:  # already gone is what we wanted
                raise
        self.counters.deletes += 1

    def upload_asset(self, release_id: int, name: str, path: Path,
                     content_type: str = "application/octet-stream") -> Asset:
        """One upload attempt, streamed from disk (5xx is the caller's to handle: it may leave a ``starter``)."""
        size = path.stat().st_size

        def body() -> Iterator[bytes]:
            with progress.track(f"upload {name}", size) as advance, open(path, "rb") as handle:
                while chunk := handle.read(UPLOAD_CHUNK):
                    advance(len(chunk))
                    yield chunk

        url = f"{self.endpoints.uploads_url.rstrip('/')}/repos/{self.repo}/releases/{release_id}/assets"
        response = self.request(
            "POST", f"{url}?name={quote(name)}", content=body, ok=(201,), retry_5xx=False,
            headers={"Content-Type": content_type, "Content-Length": str(size)},
        )
        self.counters.uploads += 1
        return Asset.model_validate(response.json())

    # ------------------------------------------------------------ git data

    def get_branch_head(self, branch: str) -> str | None:
        try:
            return self.request("GET", self.api(f"/git/ref/heads/{branch}")).json()["object"]["sha"]
        except GitHubHTTPError as exc:
            if exc.status in (404, 409):  # 409: the repository is empty
                return None
            raise

    def get_commit_tree(self, commit_sha: str) -> str:
        return self.request("GET", self.api(f"/git/commits/{commit_sha}")).json()["tree"]["sha"]

    def get_tree(self, tree_sha: str) -> list[TreeEntry]:
        body = self.request("GET", self.api(f"/git/trees/{tree_sha}"), params={"recursive": "1"}).json()
        if body.get("truncated"):
            raise RocmBakeError(f"GitHub tree {tree_sha} of {self.repo} is too large to list recursively")
        return [TreeEntry.model_validate(e) for e in body["tree"]]

    def get_blob(self, sha: str) -> bytes:
        """A blob's bytes (the Git Data API answers base64)."""
        body = self.request("GET", self.api(f"/git/blobs/{sha}")).json()
        if body.get("encoding") != "base64":
            return str(body.get("content", "")).encode()
        return base64.b64decode(body["content"])

    def create_blob(self, data: bytes) -> str:
        if len(data) > MAX_GIT_BLOB_BYTES:
            raise RocmBakeError(f"refusing a {len(data)} byte blob: GitHub refuses files over 100 MB in git")
        response = self.request("POST", self.api("/git/blobs"), ok=(201,),
                                json={"content": base64.b64encode(data).decode(), "encoding": "base64"})
        self.counters.blobs += 1
        return response.json()["sha"]

    def create_tree(self, base_tree: str | None, entries: list[dict[str, Any]]) -> str:
        body: dict[str, Any] = {"tree": entries}
        if base_tree:
            body["base_tree"] = base_tree
        return self.request("POST", self.api("/git/trees"), ok=(201,), json=body).json()["sha"]

    def create_commit(self, message: str, tree: str, parents: list[str]) -> str:
        response = self.request("POST", self.api("/git/commits"), ok=(201,),
                                json={"message": message, "tree": tree, "parents": parents})
        self.counters.commits += 1
        return response.json()["sha"]

    def set_branch(self, branch: str, sha: str, exists: bool) -> None:
        """Fast-forward ``branch`` (never forced: a concurrent writer makes this fail, not vanish)."""
        if exists:
            self.request("PATCH", self.api(f"/git/refs/heads/{branch}"), json={"sha": sha, "force": False})
        else:
            self.request("POST", self.api("/git/refs"), ok=(201,), json={"ref": f"refs/heads/{branch}", "sha": sha})
        self.counters.ref_updates += 1
