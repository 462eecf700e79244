"""Loopback: the only hosts plain http may carry a credential, an install line or a page link to.

An IP literal in 127.0.0.0/8, ``::1``, or exactly ``localhost``. Judged on
the literal, never on a prefix: ``127.0.0.1.evil.example`` is a DNS name
whoever owns ``evil.example`` answers for. Standard library only, so the
deploy script and ``tools/`` share this one definition.
"""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """``host`` (IPv6 with or without brackets) is an address in 127.0.0.0/8, ``::1``, or the name ``localhost``."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_host_port(registry: str) -> tuple[str, int | None]:
    """``host:port`` / ``[::1]:port`` / ``host`` → (host without brackets, port or None)."""
    if registry.startswith("["):
        host, _, rest = registry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    host, sep, port = registry.rpartition(":")
    if sep and port.isdigit():
        return host, int(port)
    return registry, None


def is_loopback_registry(registry: str) -> bool:
    """A registry ``host[:port]`` (IPv6 in brackets) on this machine."""
    return is_loopback(split_host_port(registry)[0])
