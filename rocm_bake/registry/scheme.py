"""Which scheme reaches a registry: HTTPS, or plain HTTP for a loopback registry that does not speak TLS.

Also names the certificate failure under a transport error, so the client can
say which CA bundle to set instead of retrying.
"""

from __future__ import annotations

import socket
import ssl

from rocm_bake.loopback import is_loopback, split_host_port


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
