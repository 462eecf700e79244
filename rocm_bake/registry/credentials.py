"""Registry credentials the Docker way: ``$DOCKER_CONFIG/config.json``, read as the Docker CLI reads it.

``docker login`` (and ``make farm``) writes the login there, and BuildKit's
push through buildx already reads it; the wheel fetch, the wheels provider's
``read`` and ``refresh``, ``rocm-bake wheels fetch`` and every registry check
read it through this module, so one login serves them all. The order is the
CLI's: ``credHelpers[<registry>]``, else ``credsStore``, names a helper
``docker-credential-<name>`` on PATH, run as ``<helper> get`` with the server
address on stdin (a JSON ``{"ServerURL", "Username", "Secret"}`` on stdout;
``Username`` ``<token>`` makes ``Secret`` an identity token; "credentials not
found in native keychain" means none); else ``auths[<registry>]`` (base64
``auth`` of ``user:password``, or ``username``/``password``, or
``identitytoken``), an exact key first, then keys written as URLs.
$ROCM_BAKE_REGISTRY_USERNAME/_PASSWORD override all of it.

A secret never leaves this module in text: ``Credential``'s repr names only
where it came from, and no message quotes a helper's output or a file's
contents.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from rocm_bake.errors import RocmBakeError

ENV_USERNAME = "ROCM_BAKE_REGISTRY_USERNAME"
ENV_PASSWORD = "ROCM_BAKE_REGISTRY_PASSWORD"
HELPER_PREFIX = "docker-credential-"
#: A helper's username that marks its secret as an identity token (docker/cli's nativeStore).
TOKEN_USERNAME = "<token>"
#: What a helper prints when it has nothing for the server (docker-credential-helpers' ErrCredentialsNotFound).
NOT_FOUND = "credentials not found in native keychain"
#: Docker Hub's names, and the key ``docker login`` stores its login under.
DOCKER_HUB = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
DOCKER_HUB_KEY = "https://index.docker.io/v1/"
HELPER_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Credential:
    """A login for one registry: a username and password, or an identity token (``username`` None).

    ``source`` says where it was found, for messages; the secret is kept out of repr."""

    username: str | None
    secret: str = field(repr=False)
    source: str

    @property
    def is_token(self) -> bool:
        return self.username is None


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``."""
    env = os.environ if environ is None else environ
    base = Path(env["DOCKER_CONFIG"]) if env.get("DOCKER_CONFIG") else Path.home() / ".docker"
    return base / "config.json"


def server_key(registry: str) -> str:
    """The address the Docker CLI files a registry's login under: ``host[:port]``, Docker Hub's URL for Hub."""
    return DOCKER_HUB_KEY if registry in DOCKER_HUB else registry


def hostname_of(key: str) -> str:
    """An ``auths`` key as a host[:port] (docker/cli's ConvertToHostname): ``https://r.example/v2/`` is ``r.example``."""
    if "://" in key:
        parts = urlsplit(key)
        if parts.hostname:
            return parts.netloc.rpartition("@")[2]
    return key.split("/", 1)[0]


def read_config(path: Path) -> dict[str, object]:
    """The config file's top level; an absent file is an empty config. A bad one is one line naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise RocmBakeError(f"{path}: unreadable ({exc.__class__.__name__})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RocmBakeError(f"{path}: not JSON (line {getattr(exc, 'lineno', '?')})") from None
    if not isinstance(data, dict):
        raise RocmBakeError(f"{path}: the top level must be an object")
    return data


def from_auths(registry: str, auths: object, path: Path) -> Credential | None:
    """The ``auths`` entry for ``registry``: its exact key, else a key that is a URL of the same host."""
    if not isinstance(auths, dict):
        raise RocmBakeError(f"{path}: 'auths' must be an object of registry -> login")
    key = server_key(registry)
    entry = auths.get(key)
    if entry is None:
        entry = next((v for k, v in auths.items() if hostname_of(str(k)) == hostname_of(key)), None)
    if entry is None:
        return None
    where = f"{path} (auths)"
    if not isinstance(entry, dict):
        raise RocmBakeError(f"{where}: the entry for {registry} must be an object")
    username, password = entry.get("username") or None, entry.get("password") or None
    if entry.get("auth"):
        try:
            username, sep, password = base64.b64decode(str(entry["auth"]), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            sep = ""
        if not sep:
            raise RocmBakeError(f"{where}: the 'auth' of {registry} is not base64 of USER:PASSWORD")
    if username and password:
        return Credential(str(username), str(password), where)
    if entry.get("identitytoken"):
        return Credential(None, str(entry["identitytoken"]), where)
    return None  # an entry with no login in it (a credsStore's email-only record)


def from_helper(registry: str, name: str, path: Path, key: str) -> Credential | None:
    """``docker-credential-<name> get`` with the server address on stdin, as the Docker CLI calls it."""
    program = HELPER_PREFIX + name
    where = f"{program} ({key} in {path})"
    found = shutil.which(program)
    if found is None:
        raise RocmBakeError(f"registry {registry}: credential helper {program} is not on PATH ({key} in {path} "
                            f"names it)")
    try:
        done = subprocess.run([found, "get"], input=server_key(registry), capture_output=True, text=True,
                              timeout=HELPER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RocmBakeError(f"registry {registry}: {where} did not answer within {HELPER_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise RocmBakeError(f"registry {registry}: {where} could not run ({exc.strerror or exc})") from None
    if done.returncode != 0:
        if done.stdout.strip() == NOT_FOUND:
            return None
        # its output is never quoted: a helper may echo what it was handed
        raise RocmBakeError(f"registry {registry}: {where} failed (exit {done.returncode})")
    try:
        answer = json.loads(done.stdout)
        username, secret = answer.get("Username"), answer.get("Secret")
    except (ValueError, AttributeError):
        raise RocmBakeError(f"registry {registry}: {where} answered with something other than its JSON") from None
    if not (isinstance(secret, str) and secret):
        return None
    if username == TOKEN_USERNAME:
        return Credential(None, secret, where)
    if not (isinstance(username, str) and username):
        return None
    return Credential(username, secret, where)


def helper_for(registry: str, config: Mapping[str, object], path: Path) -> tuple[str, str] | None:
    """(helper name, the key naming it) for ``registry``: ``credHelpers[<registry>]``, else ``credsStore``."""
    helpers = config.get("credHelpers") or {}
    if not isinstance(helpers, dict):
        raise RocmBakeError(f"{path}: 'credHelpers' must be an object of registry -> helper name")
    key = server_key(registry)
    if helpers.get(key):
        return str(helpers[key]), f"credHelpers[{key!r}]"
    if config.get("credsStore"):
        return str(config["credsStore"]), "credsStore"
    return None


def lookup(registry: str, environ: Mapping[str, str] | None = None) -> Credential | None:
    """The login for ``registry`` (``host[:port]``): the environment override, else the Docker config's."""
    env = os.environ if environ is None else environ
    if env.get(ENV_USERNAME) and env.get(ENV_PASSWORD):
        return Credential(env[ENV_USERNAME], env[ENV_PASSWORD], f"${ENV_USERNAME}/${ENV_PASSWORD}")
    path = config_path(env)
    config = read_config(path)
    helper = helper_for(registry, config, path)
    if helper is not None:
        return from_helper(registry, helper[0], path, helper[1])
    return from_auths(registry, config.get("auths") or {}, path)


def looked_in(registry: str, environ: Mapping[str, str] | None = None) -> str:
    """Where ``lookup`` looked for ``registry``'s login, for the message saying it found none."""
    path = config_path(environ)
    try:
        helper = helper_for(registry, read_config(path), path)
    except RocmBakeError:
        helper = None
    return f"{HELPER_PREFIX}{helper[0]} ({helper[1]} in {path})" if helper else str(path)
