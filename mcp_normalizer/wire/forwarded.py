"""Forwarding headers: who the client was, as the upstream should see it; pure, no I/O.

Behind the proxy the upstream's peer is the proxy. An upstream that trusts forwarding headers from
its local peers (uvicorn does from 127.0.0.1 by default) would then believe whatever a client
wrote in them, so the proxy never passes on ``X-Forwarded-For``, ``X-Forwarded-Proto``,
``X-Forwarded-Host``, ``X-Forwarded-Port``, ``X-Real-IP`` or ``Forwarded`` from a peer it does not
trust (``trusted_proxies``: addresses or networks of the load balancers in front of it).

With ``forwarded_headers`` on, it adds its own: the peer's address is appended to
``X-Forwarded-For`` and to RFC 7239 ``Forwarded`` (``for=...;proto=...;host=...``), and
``X-Forwarded-Proto`` / ``X-Forwarded-Host`` name the scheme and ``Host`` the client used (a
trusted peer's own values win: it saw the client first).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache

from ..types import RawHeaders

#: Headers that tell a server who the client was or what it asked, as some proxy in front saw it.
FORWARDING_HEADERS = frozenset(
    {
        b"forwarded",
        b"x-forwarded-for",
        b"x-forwarded-proto",
        b"x-forwarded-host",
        b"x-forwarded-port",
        b"x-forwarded-prefix",
        b"x-forwarded-server",
        b"x-forwarded-ssl",
        b"x-forwarded-scheme",
        b"x-real-ip",
        b"x-client-ip",
        b"true-client-ip",
        b"cf-connecting-ip",
        b"x-cluster-client-ip",
        b"x-original-url",
        b"x-rewrite-url",
    }
)


def is_forwarding(name: bytes) -> bool:
    """True for a forwarding header, also spelled with underscores (WSGI servers read
    ``X_Forwarded_For`` as ``X-Forwarded-For``)."""
    return name in FORWARDING_HEADERS or (b"_" in name and name.replace(b"_", b"-") in FORWARDING_HEADERS)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """``10.0.0.0/8``, ``192.168.1.7``, ``::1`` ... as networks.

    Raises:
        ValueError: a value that is not an IP address or network.
    """
    return tuple(ipaddress.ip_network(value.strip(), strict=False) for value in values)


class ForwardingPolicy:
    """Decides the forwarding headers of each request.

    Args:
        add: add the proxy's own forwarding headers (``forwarded_headers``).
        trusted: peers whose forwarding headers are kept (``trusted_proxies``).
    """

    def __init__(self, add: bool = False, trusted: tuple[Network, ...] = ()) -> None:
        self.add = add
        self.trusted = trusted
        self._trusts = lru_cache(maxsize=1024)(self._check)

    def _check(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        return any(ip in network for network in self.trusted)

    def trusts(self, address: str | None) -> bool:
        """True when ``address`` (a peer's IP) is a trusted proxy."""
        return bool(self.trusted) and address is not None and self._trusts(address)

    def client(self, headers: RawHeaders, peer: str | None) -> str | None:
        """The client's address: ``peer``, or when ``peer`` is a trusted proxy the last address of
        ``X-Forwarded-For`` that is not one (what the chain of trusted proxies saw connect)."""
        if not self.trusts(peer):
            return peer
        chain = b",".join(v for k, v in headers if k == b"x-forwarded-for")
        for node in reversed(chain.split(b",")):
            address = node.strip().decode("latin-1")
            if address and not self.trusts(address):
                return address
        return peer

    def apply(self, headers: RawHeaders, peer: str | None, scheme: str, host: str | None) -> RawHeaders:
        """``headers`` (request headers, names lower-case) with the forwarding headers decided.

        Args:
            headers: the headers to send upstream.
            peer: the client's address (``scope["client"][0]``).
            scheme: ``http`` or ``https``, as the client connected.
            host: the ``Host`` the client sent.
        """
        trusted = self.trusts(peer)
        if not trusted:
            headers = [(k, v) for k, v in headers if not is_forwarding(k)]
        if not self.add:
            return headers
        seen: dict[bytes, bytes] = {}
        for key, value in headers:  # a trusted chain may come in several lines: one list, in order
            if key in FORWARDING_HEADERS:
                seen[key] = seen[key] + b", " + value if key in seen else value
        kept = [(k, v) for k, v in headers if k not in (b"x-forwarded-for", b"forwarded")]
        node = (peer or "unknown").encode()
        chain = seen.get(b"x-forwarded-for")
        kept.append((b"x-forwarded-for", chain + b", " + node if chain else node))
        if b"x-forwarded-proto" not in seen:
            kept.append((b"x-forwarded-proto", scheme.encode()))
        if b"x-forwarded-host" not in seen and host:
            kept.append((b"x-forwarded-host", host.encode("latin-1")))
        element = b"for=" + _forwarded_node(node) + b";proto=" + scheme.encode()
        if host:
            element += b";host=" + _quoted(host.encode("latin-1"))
        earlier = seen.get(b"forwarded")
        kept.append((b"forwarded", earlier + b", " + element if earlier else element))
        return kept


def _forwarded_node(node: bytes) -> bytes:
    """An RFC 7239 node: IPv6 addresses are bracketed and quoted (section 6)."""
    return b'"[' + node + b']"' if b":" in node else node


_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _quoted(value: bytes) -> bytes:
    """An RFC 7239 value: a token as is, anything else (``host:port`` has a colon) quoted."""
    if value and all(c in _TOKEN for c in value):
        return value
    return b'"' + value.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
