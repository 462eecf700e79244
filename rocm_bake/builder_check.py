"""Is the buildx builder a stack names alive? Named with its socket or endpoint when it is not.

With buildkitd dead, the docker-build provider says only "context deadline
exceeded". buildx keeps each builder as a JSON file in
``$BUILDX_CONFIG/instances/<name>`` (``~/.docker/buildx`` by default); its
nodes' endpoints are ``unix://`` sockets or ``tcp://`` addresses, which can
be tried in milliseconds without building anything; a ``tcp://`` node with
TLS options (``cacert``/``cert``/``key``) is tried with a TLS session of
them, so a certificate the node refuses is named too.
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


def builder_nodes(name: str, env: dict[str, str] | None = None) -> tuple[str, list[tuple[str, dict[str, str]]]] | None:
    """(driver, [(endpoint, driver options)]) buildx records for builder ``name``; None when none is registered."""
    path = buildx_config_dir(env) / "instances" / name
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    nodes = [n for n in data.get("Nodes") or [] if isinstance(n, dict)]
    return str(data.get("Driver") or ""), [
        (str(n.get("Endpoint") or ""), {str(k): str(v) for k, v in (n.get("DriverOpts") or {}).items()})
        for n in nodes]


#: HTTP/2's client preface: buildkitd speaks gRPC, and answers it with its SETTINGS once the TLS session is accepted.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _tls_problem(sock: socket.socket, opts: dict[str, str], host: str) -> str | None:
    """None when the node accepts a TLS session with the builder's ``cacert``/``cert``/``key``; else why not.

    With TLS 1.3 a server refuses a client certificate only after the
    handshake, so the preface is sent and one byte read: the server's
    SETTINGS when it took us, its alert when it did not.
    """
    import ssl

    try:
        context = ssl.create_default_context(cafile=opts.get("cacert") or None)
        if opts.get("cert") and opts.get("key"):
            context.load_cert_chain(opts["cert"], opts["key"])
    except (OSError, ssl.SSLError) as exc:
        return f"its TLS files (cacert/cert/key) cannot be read: {exc}"
    context.set_alpn_protocols(["h2"])
    try:
        with context.wrap_socket(sock, server_hostname=opts.get("servername") or host) as tls:
            tls.sendall(H2_PREFACE)
            tls.recv(1)
    except ssl.SSLCertVerificationError as exc:
        return f"its certificate is not one its cacert {opts.get('cacert')} verifies ({exc.verify_message})"
    except ssl.SSLError as exc:
        return (f"it refused the TLS session ({exc.reason or exc}): the CA it trusts did not sign the client "
                f"certificate {opts.get('cert') or '(none given)'}")
    except OSError as exc:
        return f"it dropped the TLS session: {exc.strerror or exc}"
    return None


def _try(endpoint: str, timeout_s: float, opts: dict[str, str] | None = None) -> str | None:
    """None when something accepts a connection at ``endpoint`` (and its TLS session, with TLS options); else
    what is wrong with it."""
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
            with socket.create_connection((parts.hostname, parts.port or 1234), timeout=timeout_s) as sock:
                if opts and (opts.get("cacert") or opts.get("cert")):
                    return _tls_problem(sock, opts, parts.hostname)
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
    found = builder_nodes(name, env)
    where = buildx_config_dir(env)
    if found is None:
        return (f"buildx builder {name!r} is not registered in {where} (rocm-bake:builder names it; "
                f"`make builder` registers rocm-bake's own)")
    driver, endpoints = found
    if driver not in CHECKED_DRIVERS:
        return None
    for endpoint, opts in endpoints:
        problem = _try(endpoint, timeout_s, opts)
        if problem is not None:
            return f"buildx builder {name!r} ({driver}, {endpoint}): {problem}{restart_hint(name)}"
    return None


def restart_hint(name: str) -> str:
    """How to bring builder ``name`` back, when it is rocm-bake's own (``make builder`` starts that one); a
    team's or a farm's builder (another host's buildkitd) gets none: ``make builder`` would not revive it."""
    from rocm_bake.checkout import BUILDER_PREFIX, DEFAULT_BUILDER

    own = name == DEFAULT_BUILDER or name.startswith(BUILDER_PREFIX)
    return "; `make builder` starts rocm-bake's own" if own else ""
