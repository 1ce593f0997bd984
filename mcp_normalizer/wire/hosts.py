"""Which ``Host`` and ``Origin`` values a request may carry (DNS-rebinding protection); pure, no I/O.

A browser page on ``http://rebind.evil.example`` whose name is made to resolve to 127.0.0.1 can
reach a server listening on loopback; its requests carry ``Host: rebind.evil.example`` (and an
``Origin`` of that page). MCP servers MUST validate ``Origin`` (Streamable HTTP, every era;
2025-11-25 makes it a 403), and the MCP SDKs check ``Host`` on loopback. The proxy rewrites
``Host`` to the upstream's, so it must check before it does, or the upstream's own check is void.

:class:`HostPolicy` decides per request. With no lists configured, a request that arrived on a
loopback address (the connection's local address, ``scope["server"]``) must name a loopback host
(``localhost``, ``127.0.0.1``, ``[::1]``, any port) and, when it has an ``Origin``, a loopback
origin; on other addresses nothing is checked. ``allowed_hosts`` / ``allowed_origins`` replace
those defaults everywhere (``*`` allows any). Patterns are ``name``, ``name:port`` or ``name:*``
for hosts and ``scheme://name[:port|:*]`` for origins, compared case-insensitively.
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from typing import Literal

#: Which header a request was refused for.
Refused = Literal["host", "origin"]

LOOPBACK_HOSTS = ("localhost:*", "127.0.0.1:*", "[::1]:*")
LOOPBACK_ORIGINS = tuple(f"{scheme}://{host}" for scheme in ("http", "https") for host in LOOPBACK_HOSTS)


@lru_cache(maxsize=256)
def is_loopback(address: str | None) -> bool:
    """True for a loopback IP address (``127.0.0.0/8``, ``::1``, v4-mapped ones too)."""
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


_NAME = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]*[a-z0-9])?|\[[0-9a-f:.]+\]")
_PORT = re.compile(r"(?::(?:[0-9]{1,5}|\*))?")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*://")


def host_pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be an ``allowed_hosts`` entry (``*``, ``name``, ``name:port``,
    ``name:*``; a name is a DNS name, an IPv4 address or a bracketed IPv6 one), ``None`` when it can.
    A pattern that could never match (``http://x``, ``*.example.com``, ``x/``) would refuse every
    request with 421."""
    text = pattern.strip().lower()
    if text == "*":
        return None
    name = _NAME.match(text)
    if name is None or _PORT.fullmatch(text, name.end()) is None:
        return f"{pattern!r} is not name, name:port or name:* (no scheme, path or wildcard in the name)"
    return None


def origin_pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be an ``allowed_origins`` entry (``*`` or ``scheme://name[:port|:*]``),
    ``None`` when it can. An origin without a scheme never matches: every ``Origin`` would get 403."""
    text = pattern.strip().lower().rstrip("/")
    if text == "*":
        return None
    scheme = _SCHEME.match(text)
    if scheme is None:
        return f"{pattern!r} has no scheme: origins are scheme://name[:port|:*]"
    problem = host_pattern_problem(text[scheme.end() :])
    return None if problem is None else f"{pattern!r} is not scheme://name[:port|:*]"


class _Patterns:
    """A set of ``name[:port|:*]`` patterns (the name part may carry a ``scheme://``)."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.any = "*" in patterns
        self.exact: set[str] = set()
        self.any_port: set[str] = set()
        for pattern in patterns:
            pattern = pattern.strip().lower().rstrip("/")
            if pattern.endswith(":*"):
                self.any_port.add(pattern[:-2])
            else:
                self.exact.add(pattern)

    def match(self, value: str) -> bool:
        value = value.strip().lower()
        if self.any or value in self.exact:
            return True
        name = _without_port(value)
        return name in self.any_port


def _without_port(value: str) -> str:
    """``value`` without a trailing ``:port`` (an IPv6 literal keeps its brackets)."""
    head, sep, port = value.rpartition(":")
    if sep and port.isdigit() and (not head.startswith("[") or head.endswith("]")) and "]" not in port:
        return head
    return value


class HostPolicy:
    """Decides whether a request's ``Host`` and ``Origin`` are acceptable.

    Args:
        allowed_hosts: ``Host`` patterns; empty: loopback hosts on loopback connections, any elsewhere.
        allowed_origins: ``Origin`` patterns; empty: loopback origins on loopback connections, any elsewhere.
    """

    def __init__(self, allowed_hosts: tuple[str, ...] = (), allowed_origins: tuple[str, ...] = ()) -> None:
        self._hosts = _Patterns(allowed_hosts) if allowed_hosts else None
        self._origins = _Patterns(allowed_origins) if allowed_origins else None
        self._loopback_hosts = _Patterns(LOOPBACK_HOSTS)
        self._loopback_origins = _Patterns(LOOPBACK_ORIGINS)

    def check(self, host: str | None, origin: str | None, local_address: str | None) -> Refused | None:
        """``None`` when the request may pass; else the header that may not: ``"host"`` (answered
        with 421) or ``"origin"`` (403); :mod:`mcp_normalizer.ops.refusals` has the causes.

        Args:
            host: the ``Host`` header (``None`` when absent: HTTP/1.0 clients).
            origin: the ``Origin`` header, when present.
            local_address: the address the connection arrived on (``scope["server"][0]``).
        """
        loopback = None
        hosts = self._hosts
        if hosts is None:
            loopback = is_loopback(local_address)
            hosts = self._loopback_hosts if loopback else None
        if hosts is not None and not hosts.match(host or ""):
            return "host"
        if origin is None:
            return None
        origins = self._origins
        if origins is None:
            loopback = is_loopback(local_address) if loopback is None else loopback
            origins = self._loopback_origins if loopback else None
        if origins is not None and not origins.match(origin):
            return "origin"
        return None
