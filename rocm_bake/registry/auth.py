"""Registry authentication: the login a registry asks for, and the header that answers its challenges.

Anonymous, HTTP basic, or the Docker token flow (a 401 with
``WWW-Authenticate: Bearer realm=…,service=…,scope=…`` → GET the realm, retry
with the token; an identity token is POSTed as an OAuth2 refresh token, as
the Docker CLI does), as GHCR and Docker Hub answer. The login is looked up
only when the registry asks for one, the Docker way
(``rocm_bake.registry.credentials``: ``$DOCKER_CONFIG/config.json``, its
credential helpers, or the ``ROCM_BAKE_REGISTRY_*`` override).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

from rocm_bake.errors import RocmBakeError
from rocm_bake.http_waits import http_timeout, redact_url
from rocm_bake.loopback import is_loopback
from rocm_bake.registry.credentials import ENV_PASSWORD, ENV_USERNAME, Credential, looked_in, lookup
from rocm_bake.retry import Retryable, RetryPolicy

#: The OAuth2 client id sent with an identity token (the token server logs it).
CLIENT_ID = "rocm-bake"


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """Split ``Bearer realm="…",service="…",scope="…"`` into scheme and params."""
    scheme, _, rest = header.strip().partition(" ")
    params = {k.lower(): v for k, v in re.findall(r'(\w+)="([^"]*)"', rest)}
    return scheme.lower(), params


class RegistryAuth:
    """One registry's login and the ``Authorization`` header that answers its challenges.

    The token realm is fetched with the client's connection and retry policy;
    ``transport_failure`` and ``status_failure`` are the client's, so a token
    request fails the way any other request does.
    """

    def __init__(
        self,
        registry: str,
        username: str | None,
        password: str | None,
        http: httpx.Client,
        retry: RetryPolicy,
        timeout_s: float,
        transport_failure: Callable[[httpx.TransportError], Retryable],
        status_failure: Callable[[httpx.Response], Retryable],
    ) -> None:
        self.registry, self.http, self.retry, self.timeout_s = registry, http, retry, timeout_s
        self.transport_failure, self.status_failure = transport_failure, status_failure
        #: A login the caller gave (both empty: anonymous) is used as given; else it is looked up on demand.
        self.given = username is not None or password is not None
        self._credential = Credential(username, password, "the caller") if username and password else None
        self.tokens: dict[str, str] = {}
        self.header: dict[str, str] = {}

    @property
    def credential(self) -> Credential | None:
        """The login for this registry, looked up once, when the registry first asks for one."""
        if not self.given:
            self._credential = lookup(self.registry)
            self.given = True
        return self._credential

    @property
    def sent(self) -> Credential | None:
        """The login requests carry so far (None: anonymous, or not looked up yet)."""
        return self._credential if self.given else None

    def no_login(self) -> str:
        return f"no login for {self.registry} in {looked_in(self.registry)} (docker login {self.registry}, or set " \
               f"{ENV_USERNAME}/{ENV_PASSWORD})"

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
                raise self.transport_failure(exc) from exc
            if resp.status_code >= 500 or resp.status_code == 429:
                raise self.status_failure(resp)
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

    def answer(self, response: httpx.Response, what: str) -> bool:
        """Answer a 401 challenge; False when there is nothing new to try."""
        scheme, params = parse_challenge(response.headers.get("WWW-Authenticate", ""))
        if scheme == "bearer":
            key = params.get("scope", "")
            if self.header.get("Authorization") == f"Bearer {self.tokens.get(key)}":
                return False  # this token was just refused
            self.tokens[key] = self._token(params, what)
            self.header = {"Authorization": f"Bearer {self.tokens[key]}"}
            return True
        if scheme == "basic" and not self.header:
            login = self.credential
            if login is None:
                return False
            if login.is_token:
                raise RocmBakeError(f"{what}: {self.registry} asks for a username and password, and the login "
                                    f"from {login.source} is an identity token")
            pair = base64.b64encode(f"{login.username}:{login.secret}".encode()).decode()
            self.header = {"Authorization": f"Basic {pair}"}
            return True
        return False
