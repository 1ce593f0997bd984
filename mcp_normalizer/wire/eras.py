"""The MCP protocol eras: one record per known version, and the one way an unknown version is read.

Every question the proxy asks of a protocol version goes through :func:`era_of`, on the HTTP path
and the stdio upstream alike; nothing else compares version strings. The answers, per version
(sources are paths in ``github.com/modelcontextprotocol/modelcontextprotocol``, ``S<v>`` =
``docs/specification/<v>``, ``T<v>`` = ``schema/<v>/schema.ts``):

========== ======== ============== ============================ ==================================
version    sessions structured any list_changed on any stream  fields a list result requires
========== ======== ============== ============================ ==================================
2024-11-05 yes      no (absent)    yes                          none
2025-03-26 yes      no (absent)    yes                          none
2025-06-18 yes      no (object)    yes                          none
2025-11-25 yes      no (object)    yes                          none
2026-07-28 no       yes            no (``subscriptions/listen``) ``resultType``, ``ttlMs``, ``cacheScope``
========== ======== ============== ============================ ==================================

**Unknown versions** (one policy, the same everywhere; ``docs/how-it-works.md``, Protocol eras):

- ``None`` or ``""`` (no version named: no ``MCP-Protocol-Version`` header, no ``_meta`` protocol
  version, no ``initialize``) is 2025-03-26, what a server "SHOULD assume" then
  (``S2025-06-18/basic/transports.mdx``, Protocol Version Header);
- a date (``YYYY-MM-DD``) the registry does not know is the newest known era not after it (versions
  are dates and each era keeps what it introduced): ``2027-01-01`` is 2026-07-28, ``2025-09-01`` is
  2025-06-18; a date before every known one is the oldest, 2024-11-05;
- any other string (``draft-2027``, the specification's ``DRAFT-2026-v1``) names a draft of a version
  to come, which follows every released one: it is the newest era, 2026-07-28.

That is the conservative reading: for an unknown version the proxy rewrites, caches and trusts the
least (no wrapping of a ``structuredContent`` the era allows, a tool list reused only for its
``ttlMs``, no session counted as a witness), and it never answers for the upstream: a request of an
unknown modern version goes to the server, whose ``UnsupportedProtocolVersionError`` (``-32022``,
with the versions it supports) is what a dual-era client needs to pick one
(``S2026-07-28/basic/versioning.mdx``), where a proxy's own "session required" would send it back to
``initialize``.

Cost: a known version (and ``None``) is one dict lookup; an unknown one is read once and remembered
(a bounded cache, so a client that sends many versions holds no memory).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

#: Members every result of the era requires.
_RESULT_TYPE = frozenset({"resultType"})
#: Members a complete list result (and ``server/discover``, ``resources/read``) requires (SEP-2549).
_CACHEABLE = frozenset({"resultType", "ttlMs", "cacheScope"})
#: The methods whose complete results are cacheable in 2026-07-28 (``server/utilities/caching.mdx``).
CACHEABLE_METHODS = frozenset(
    {"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)


@dataclass(frozen=True, slots=True)
class Era:
    """What one protocol version means for the proxy.

    Attributes:
        version: the protocol version (``YYYY-MM-DD``).
        sessions: the era opens with ``initialize`` and may keep a session (``Mcp-Session-Id``, a
            ``GET`` stream, ``DELETE``); when false the era is stateless: every request carries the
            protocol fields in ``params._meta`` (``io.modelcontextprotocol/protocolVersion``,
            ``clientCapabilities``, ``clientInfo``) and no session exists.
        structured_any: ``structuredContent`` may be any JSON value and ``outputSchema`` any JSON
            Schema (SEP-2106); when false ``structuredContent`` must be an object and
            ``outputSchema`` have ``type: "object"`` at its root (or the era has neither).
        list_changed_anywhere: a server may send ``notifications/tools/list_changed`` unasked, on any
            stream of the session; when false only on a ``subscriptions/listen`` stream that asked.
        result_fields: members every result of the era requires.
        list_fields: members a complete result of a list method (:data:`CACHEABLE_METHODS`) requires.
        source: where the specification says so.
    """

    version: str
    sessions: bool
    structured_any: bool
    list_changed_anywhere: bool
    result_fields: frozenset[str]
    list_fields: frozenset[str]
    source: str

    @property
    def stateless(self) -> bool:
        """The era carries its protocol fields in every request's ``_meta`` (no handshake, no session)."""
        return not self.sessions

    @property
    def lists_expire(self) -> bool:
        """A tool list is reused only for its ``ttlMs`` (absent or negative: 0), never until invalidated."""
        return "ttlMs" in self.list_fields


#: The known eras, oldest first.
ERAS: tuple[Era, ...] = (
    Era(
        "2024-11-05",
        sessions=True,
        structured_any=False,
        list_changed_anywhere=True,
        result_fields=frozenset(),
        list_fields=frozenset(),
        source="S2024-11-05/basic/transports.mdx (HTTP with SSE); T2024-11-05 CallToolResult (no structuredContent)",
    ),
    Era(
        "2025-03-26",
        sessions=True,
        structured_any=False,
        list_changed_anywhere=True,
        result_fields=frozenset(),
        list_fields=frozenset(),
        source="S2025-03-26/basic/transports.mdx (Streamable HTTP, Session Management); S2025-03-26/basic/index.mdx"
        " (Batching)",
    ),
    Era(
        "2025-06-18",
        sessions=True,
        structured_any=False,
        list_changed_anywhere=True,
        result_fields=frozenset(),
        list_fields=frozenset(),
        source="S2025-06-18/basic/transports.mdx (Session Management, Protocol Version Header);"
        " T2025-06-18 CallToolResult.structuredContent, Tool.outputSchema (objects)",
    ),
    Era(
        "2025-11-25",
        sessions=True,
        structured_any=False,
        list_changed_anywhere=True,
        result_fields=frozenset(),
        list_fields=frozenset(),
        source="S2025-11-25/basic/transports.mdx (Session Management, SSE polling);"
        " T2025-11-25 CallToolResult.structuredContent, Tool.outputSchema (objects)",
    ),
    Era(
        "2026-07-28",
        sessions=False,
        structured_any=True,
        list_changed_anywhere=False,
        result_fields=_RESULT_TYPE,
        list_fields=_CACHEABLE,
        source="S2026-07-28/basic/transports/streamable-http.mdx (stateless); S2026-07-28/basic/index.mdx"
        " (ResultType, _meta protocol fields); SEP-2106 (structuredContent any JSON value);"
        " S2026-07-28/server/utilities/caching.mdx (ttlMs, cacheScope); S2026-07-28/basic/patterns/subscriptions.mdx",
    ),
)

#: The scope key of the era the upstream side of a request speaks when it is not the client's (the
#: era bridge's): a list shared by every copy of the scope, the bridge appends the version it speaks
#: upstream (the access log, the rewrite log and the spans read its last item; empty: the same era).
UPSTREAM_ERA_KEY = "mcp_normalizer.upstream_era"

#: The known eras by version.
BY_VERSION: dict[str, Era] = {era.version: era for era in ERAS}
OLDEST = ERAS[0]
NEWEST = ERAS[-1]
#: The newest era with the ``initialize`` handshake (the spec's last "legacy" one).
NEWEST_LEGACY = [era for era in ERAS if era.sessions][-1]
#: The first era without sessions (the spec's "modern": 2026-07-28 and later).
FIRST_STATELESS = next(era for era in ERAS if era.stateless)
#: The era of an exchange that names no version (``S2025-06-18/basic/transports.mdx``: assume 2025-03-26).
UNNAMED = BY_VERSION["2025-03-26"]

_LOOKUP: dict[str | None, Era] = {None: UNNAMED, "": UNNAMED}
_LOOKUP.update(BY_VERSION)
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def era_of(version: str | None) -> Era:
    """The era of ``version``: its record when known, else the one the module's policy reads it as
    (``None``/``""``: 2025-03-26; an unknown date: the newest era not after it, the oldest before
    them all; anything else: the newest)."""
    era = _LOOKUP.get(version)
    return era if era is not None else _unknown(version or "")


def known(version: str | None) -> bool:
    """True when the registry has a record of ``version`` itself (not one it is read as)."""
    return version in BY_VERSION


@lru_cache(maxsize=256)
def _unknown(version: str) -> Era:
    text = version.strip()
    if not text:
        return UNNAMED
    if text in BY_VERSION:  # (spaces around a known version)
        return BY_VERSION[text]
    if _DATE.fullmatch(text):
        before = [era for era in ERAS if era.version <= text]
        return before[-1] if before else OLDEST
    return NEWEST
