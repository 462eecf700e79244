"""What the registry and GitHub clients share about HTTP: timeouts, Retry-After, URLs safe to show.

A server that accepts the connection and never answers must fail the command
within a bound the user can set (``--timeout``), and every wait or retry is a
visible line (``rocm_bake.retry``): minutes of silence look like a hang.

Timeouts are tuned per call. Connecting is quick or it is not going to happen
(10 s). A metadata call (a manifest, a token, a GitHub API answer) is small and
answered in seconds, so its read waits at most ``METADATA_TIMEOUT_S`` (GitHub
itself ends any API request that takes over 10 s). A stream (a layer download,
an asset upload) is bounded by inactivity, never by total time: each read or
write may wait ``--timeout``, and a 3 GB layer takes as long as it takes while
bytes keep coming.
"""

from __future__ import annotations

import argparse
import email.utils
import re
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rocm_bake.loopback import is_loopback

#: Connecting is quick or it is not going to happen.
CONNECT_TIMEOUT_S = 10.0
#: Default inactivity bound for streamed reads and writes (``--timeout`` changes it).
DEFAULT_TIMEOUT_S = 60.0
#: A metadata call's answer waits at most this long (or ``--timeout``, when shorter).
METADATA_TIMEOUT_S = 20.0


def positive_seconds(value: str) -> float:
    """``--timeout SECONDS`` as argparse parses it: a positive number, at most a day."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 < seconds <= 86400:
        raise argparse.ArgumentTypeError(f"{value!r}: expected seconds between 0 and 86400")
    return seconds


def http_timeout(read_s: float = DEFAULT_TIMEOUT_S, *, metadata: bool = False) -> Any:
    """An ``httpx.Timeout``: connect fast, then bound each read/write by inactivity, not by total time.

    ``metadata`` calls wait at most ``METADATA_TIMEOUT_S`` for their answer;
    streams wait ``read_s`` (``--timeout``) between any two chunks.
    """
    import httpx

    read = min(read_s, METADATA_TIMEOUT_S) if metadata else read_s
    return httpx.Timeout(read, connect=min(CONNECT_TIMEOUT_S, read), pool=CONNECT_TIMEOUT_S)


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``, for messages."""
    parts = urlsplit(url)
    if not (parts.username or parts.password):
        return url
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def check_service_url(url: str) -> str:
    """A URL a credential may be sent to: https, or plain http to loopback only; no credentials in it.

    The message never quotes the URL (it may hold a secret): the caller names
    the key or option it came from.
    """
    parts = urlsplit(url.replace("{owner}", "owner").replace("{repo}", "repo"))
    try:
        host = parts.hostname
        parts.port  # noqa: B018 - a port out of range or not a number raises here
    except ValueError:
        raise ValueError("not a URL with a valid host and port") from None
    if parts.scheme not in ("https", "http") or not host:
        raise ValueError("expected an https URL such as https://api.github.com")
    if parts.username or parts.password:
        raise ValueError("credentials in a URL are refused (they would be shown and logged); set GITHUB_TOKEN")
    if parts.scheme == "http" and not is_loopback(host):
        raise ValueError("plain http is allowed only to loopback (127.0.0.1, ::1, localhost); use https")
    return url


USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)?[^\s/@'\"]+@(?=[^\s/@]+)")


def redact(text: str) -> str:
    """Every ``user:password@`` (with or without a scheme) in ``text`` replaced by ``***@``."""
    return USERINFO.sub(lambda m: f"{m['scheme'] or ''}***@", text)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds, whether given as a number or as an HTTP date (RFC 9110 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _causes(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return seen


def _where(exc: BaseException) -> str:
    """``host:port`` of the request that failed (never its userinfo), or '' when httpx did not record it."""
    try:
        url = exc.request.url  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        return ""
    return f"{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}"


def hopeless(exc: BaseException) -> str | None:
    """What a transport failure is, when retrying cannot help: DNS, a refused connection, TLS; None otherwise.

    Each is named as what it is, never as "the server may be degraded": a
    host that does not resolve, nothing listening on the port, or a
    certificate that does not verify will be the same a second later.
    """
    import socket
    import ssl

    where = _where(exc)
    for cause in _causes(exc):
        if isinstance(cause, socket.gaierror):
            host = where.rsplit(":", 1)[0] or "the host"
            return f"DNS lookup failed: {host} does not resolve ({cause.strerror or cause})"
        if isinstance(cause, ConnectionRefusedError):
            return f"connection refused: nothing is listening at {where or 'that address'}"
        if isinstance(cause, ssl.SSLError):
            detail = getattr(cause, "verify_message", None) or getattr(cause, "reason", None) or str(cause)
            return f"TLS error talking to {where or 'the server'}: {detail}"
    return None


def describe(exc: BaseException, timeout_s: float | None = None) -> str:
    """A transport failure in words a person reads at 3 a.m."""
    import httpx

    named = hopeless(exc)
    if named is not None:
        return named

    if isinstance(exc, httpx.ConnectTimeout):
        return "could not connect (timed out)"
    if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout)):
        bound = f" in {timeout_s:g} s" if timeout_s is not None else ""
        return f"no answer{bound} (timed out; --timeout sets the bound)"
    if isinstance(exc, httpx.PoolTimeout):
        return "no free connection (timed out)"
    text = str(exc) or "the connection closed"
    return redact(f"{type(exc).__name__}: {text}")
