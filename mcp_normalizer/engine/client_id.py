"""Who is asking: the client profile of every request, whatever the era; sans-IO.

Host repairs (:mod:`mcp_normalizer.engine.rules.host_profiles`) run for the client a request comes
from. The proxy names it, per request, by the first of these that it has:

1. the ``clientInfo`` the request carries: on 2026-07-28 every request's
   ``params._meta["io.modelcontextprotocol/clientInfo"]``; in the legacy eras the ``initialize``
   request's ``params.clientInfo``;
2. what that client said before (1. on an earlier request): on the same session (legacy
   ``Mcp-Session-Id``, :attr:`mcp_normalizer.engine.scopes.ScopeState.client`), else on the same
   connection, else with the same credentials (``Authorization`` and ``Cookie``) — this
   module's :class:`ClientMemory`. A legacy server that runs without sessions (FastMCP
   ``stateless_http``, a TypeScript server without a session id generator) has only the last two:
   its client's ``initialize`` is remembered for the connection it came on (kept with the
   connection, :data:`~mcp_normalizer.types.CONNECTION`, as long as it lasts: a later connection
   from the same address and port is another's, and no flood of other clients makes it forget)
   and for its credentials;
3. the ``User-Agent`` header, where it names a known host reliably (:data:`USER_AGENTS`).

A connection is not a client's behind a trusted proxy (``trusted_proxies``: it multiplexes many
clients over its connections), so it names none there. Credentials shared by two hosts name the
one that spoke last; a request that names its own client is never named by another's. Every name
is self-reported and only ever gets a client the output its host takes, the originals kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .bounded import ExpiringMap
from .rules.clients import UNKNOWN, ClientProfile, profile_for

#: ``User-Agent`` values that name a host reliably, with the ``clientInfo.name`` it sends: Claude
#: Code's remote MCP requests carry ``claude-code/<version> (cli)`` (quoted in
#: TypingMind/typingmind-mcp#25; obot-platform/obot#7205 reads the same to tell Claude Code). Its
#: start-up probes carry other, obfuscated strings (anthropics/claude-code#80191), which name no
#: one. No other host's HTTP ``User-Agent`` is known here (``reference/hosts.md``).
USER_AGENTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"claude-code/([0-9][0-9A-Za-z.+-]{0,63})(?:[ ;(]|$)"), "claude-code"),
)

#: Connections and credentials whose client the proxy remembers, and for how long after it was last
#: named or recalled there (seconds).
MAX_REMEMBERED = 10_000
REMEMBER_TTL = 3600.0


def from_user_agent(value: str | None) -> ClientProfile:
    """The client a ``User-Agent`` header names (:data:`USER_AGENTS`), :data:`UNKNOWN` for any other."""
    if not value:
        return UNKNOWN
    for pattern, name in USER_AGENTS:
        match = pattern.match(value)
        if match is not None:
            return profile_for({"name": name, "version": match.group(1)})
    return UNKNOWN


class ClientMemory:
    """The client last named (by its ``clientInfo``) with each credential (and, under another
    server than the proxy's, on each connection), bounded in entries of each kind and in time
    since it was last named or recalled (:class:`~mcp_normalizer.engine.bounded.ExpiringMap`).

    Keys are what :func:`connection_key` and :func:`credentials_key` make; a client that named no
    one is never remembered (it would hide a name given later)."""

    def __init__(self, max_entries: int = MAX_REMEMBERED, ttl: float = REMEMBER_TTL) -> None:
        self._max_entries, self._ttl = max_entries, ttl
        #: one map per kind of key (``connection``, ``credentials``): made-up credentials, which
        #: cost nothing, never push a connection out
        self._named: dict[str, ExpiringMap[str, ClientProfile]] = {}

    def __bool__(self) -> bool:
        """Whether any client named itself yet (else :meth:`recall` finds nothing, whatever the keys)."""
        return bool(self._named)

    def _map(self, key: str) -> ExpiringMap[str, ClientProfile]:
        kind = key.partition("\0")[0]
        found = self._named.get(kind)
        if found is None:
            found = self._named[kind] = ExpiringMap(self._max_entries, self._ttl)
        return found

    def remember(self, keys: Iterable[str | None], client: ClientProfile) -> None:
        """``client`` named itself on a request with these keys."""
        if client is UNKNOWN or client.name is None:
            return
        for key in keys:
            if key is not None:
                self._map(key)[key] = client

    def recall(self, keys: Iterable[str | None]) -> ClientProfile:
        """The client named before under the first of ``keys`` that has one, else :data:`UNKNOWN`.
        A client recalled is remembered anew under that key: it is kept while it is in use (a
        connection open for hours, a token in use), not only for the time since it named itself."""
        for key in keys:
            if key is None:
                continue
            named = self._map(key)
            found = named.get(key)
            if found is not None:
                named[key] = found
                return found
        return UNKNOWN


def connection_key(client: object, server: object) -> str | None:
    """The key of one connection under another server than the proxy's (whose listener gives each
    connection a place of its own, :data:`~mcp_normalizer.types.CONNECTION`): its ASGI
    ``scope["client"]`` and ``scope["server"]``; ``None`` when the server gives no peer."""
    if not isinstance(client, list | tuple) or len(client) < 2:
        return None
    return f"connection\0{client[0]}\0{client[1]}\0{server!r}"


def credentials_key(scope: str | None) -> str | None:
    """The key of one credential: ``scope``, the hashed scope of a request's ``Authorization`` and
    ``Cookie`` without a session (:func:`mcp_normalizer.engine.catalog.scope_key`), ``None`` when
    the request carried neither."""
    return None if scope is None else f"credentials\0{scope}"
