"""Is the buildx builder a stack names alive? Named with its socket or endpoint when it is not.

With buildkitd dead, the docker-build provider says only "context deadline
exceeded". buildx keeps each builder as a JSON file in
``$BUILDX_CONFIG/instances/<name>`` (``~/.docker/buildx`` by default); its
nodes' endpoints are ``unix://`` sockets or ``tcp://`` addresses, which can
be tried in milliseconds without building anything.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

#: Drivers whose endpoint is a socket or address we can try; others (docker-container, kubernetes) are named only.
CHECKED_DRIVERS = ("remote",)


def buildx_config_dir(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env["BUILDX_CONFIG"]) if env.get("BUILDX_CONFIG") else Path.home() / ".docker" / "buildx"


def builder_endpoints(name: str, env: dict[str, str] | None = None) -> tuple[str, list[str]] | None:
    """(driver, node endpoints) buildx records for builder ``name``; None when no such builder is registered."""
    path = buildx_config_dir(env) / "instances" / name
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    nodes = data.get("Nodes") or []
    return str(data.get("Driver") or ""), [str(n.get("Endpoint") or "") for n in nodes if isinstance(n, dict)]


def _try(endpoint: str, timeout_s: float) -> str | None:
    """None when something accepts a connection at ``endpoint``; else what is wrong with it."""
    parts = urlsplit(endpoint)
    try:
        if parts.scheme == "unix":
            path = parts.path or parts.netloc
            if not Path(path).exists():
                return f"its socket {path} does not exist (buildkitd is not running)"
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout_s)
                sock.connect(path)
            return None
        if parts.scheme == "tcp" and parts.hostname:
            with socket.create_connection((parts.hostname, parts.port or 1234), timeout=timeout_s):
                return None
    except ConnectionRefusedError:
        return f"nothing is listening at {endpoint} (buildkitd is dead)"
    except socket.timeout:
        return f"{endpoint} does not answer within {timeout_s:g} s"
    except OSError as exc:
        return f"cannot reach {endpoint}: {exc.strerror or exc}"
    return None  # another scheme: not ours to judge


def builder_problem(name: str, env: dict[str, str] | None = None, timeout_s: float = 3.0) -> str | None:
    """One line naming builder ``name`` and its socket or endpoint when it is missing or dead; None when alive."""
    found = builder_endpoints(name, env)
    where = buildx_config_dir(env)
    if found is None:
        return (f"buildx builder {name!r} is not registered in {where} (rocm-bake:builder names it; "
                f"`make builder` registers rocm-bake's own)")
    driver, endpoints = found
    if driver not in CHECKED_DRIVERS:
        return None
    for endpoint in endpoints:
        problem = _try(endpoint, timeout_s)
        if problem is not None:
            return f"buildx builder {name!r} ({driver}, {endpoint}): {problem}; `make builder` starts rocm-bake's own"
    return None
