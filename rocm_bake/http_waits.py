"""What the registry and GitHub clients share about waiting: timeouts, Retry-After, and saying so.

A server that accepts the connection and never answers must fail the command
within a bound the user can set, and every wait or retry is a visible line:
minutes of silence look like a hang. Read timeouts are inactivity bounds (no
byte for that long), never a total: a 3 GB layer may take as long as it takes
while bytes keep coming.
"""

from __future__ import annotations

import argparse
import email.utils
import time
from typing import Any

from rocm_bake import progress

#: Connecting is quick or it is not going to happen.
CONNECT_TIMEOUT_S = 10.0
#: Default inactivity bound for reads and writes (``--timeout`` changes it).
DEFAULT_TIMEOUT_S = 60.0


def positive_seconds(value: str) -> float:
    """``--timeout SECONDS`` as argparse parses it: a positive number, at most a day."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 < seconds <= 86400:
        raise argparse.ArgumentTypeError(f"{value!r}: expected seconds between 0 and 86400")
    return seconds


def http_timeout(read_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """An ``httpx.Timeout``: connect fast, then bound each read/write by inactivity, not by total time."""
    import httpx

    return httpx.Timeout(read_s, connect=min(CONNECT_TIMEOUT_S, read_s), pool=CONNECT_TIMEOUT_S)


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


def describe(exc: BaseException, timeout_s: float | None = None) -> str:
    """A transport failure in words a person reads at 3 a.m."""
    import httpx

    if isinstance(exc, httpx.ConnectTimeout):
        return "could not connect (timed out)"
    if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout)):
        bound = f" in {timeout_s:g} s" if timeout_s is not None else ""
        return f"no answer{bound} (timed out; --timeout sets the bound)"
    return f"{type(exc).__name__}: {exc}"


def note_retry(what: str, reason: str, wait_s: float, next_try: int, tries: int) -> None:
    """One visible line per retry: what failed, why, how long we wait, which try comes next of how many."""
    progress.note(f"{what}: {reason}; retrying in {wait_s:.1f} s (try {next_try} of {tries})")
