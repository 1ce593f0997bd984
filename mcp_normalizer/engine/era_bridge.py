"""The era bridge, sans-IO: legacy clients (sessions, ``initialize``) of a 2026-07-28 upstream (stateless).

A server that speaks only 2026-07-28 answers no ``initialize``: every legacy host (Gemini CLI and
Codex on TS SDK 1.x, Claude Code with ``MCP_SDK_GENERATION=v1``, the 2025 SDK clients) fails on it.
The bridge makes such a server look like a legacy one to them, and keeps its requests in the form
the server speaks (``S2026-07-28/basic/versioning.mdx``; the two forms in
``S2025-11-25/basic/lifecycle.mdx`` and ``S2026-07-28/basic/index.mdx``):

====================================== =====================================================================
legacy client sends                    the bridge
====================================== =====================================================================
``initialize``                         asks the server ``server/discover`` (with the client's capabilities
                                       and info) and answers it itself: the client's version when the
                                       registry knows it as a session era, the server's capabilities,
                                       ``serverInfo`` and ``instructions``; a session is minted and kept
``notifications/initialized``          accepted (202), nothing sent
``ping``                               answered ``{}`` (2026-07-28 has no ping)
``logging/setLevel``                   kept in the session; each later request carries it as
                                       ``_meta["io.modelcontextprotocol/logLevel"]``
``resources/(un)subscribe``            kept in the session: the URIs of the ``subscriptions/listen`` filter
any other request                      sent upstream with the session's protocol fields in ``params._meta``
                                       (version, the client's capabilities and info, the log level) and
                                       the ``Mcp-*`` headers; the result loses the members only the new era
                                       has (``resultType``, ``ttlMs``, ``cacheScope``)
an ``input_required`` result           each of its ``inputRequests`` goes to the client as the legacy
                                       request it is (``elicitation/create``, ``sampling/createMessage``,
                                       ``roots/list``) under an id the bridge mints; with every answer the
                                       request is sent again, a new id, ``inputResponses`` and the
                                       ``requestState`` as it came (``S2026-07-28/basic/patterns/mrtr.mdx``)
``notifications/cancelled``            the upstream request's stream is closed (how 2026-07-28 cancels)
``GET`` (the session's stream)         ``subscriptions/listen`` with the filter the server's capabilities
                                       allow; its notifications lose ``subscriptionId``; the
                                       acknowledgement is not forwarded
``DELETE``                             the session ends
====================================== =====================================================================

This module holds the rules and the sessions (:class:`LegacyBridge`: bounded, idle ones expire);
:mod:`mcp_normalizer.hop.era_bridge` does the I/O. Nothing here reads a socket or a clock: ``now``
is passed in (seconds, monotonic).
"""

from __future__ import annotations

import hashlib
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import DecodeError
from ..types import JSON, JSONObject
from ..wire.eras import ERAS, era_of, known
from ..wire.jsoncodec import dumps
from ..wire.jsonrpc import IdKey, id_key
from ..wire.modern import (
    CLIENT_CAPABILITIES_META,
    CLIENT_INFO_META,
    LOG_LEVEL_META,
    PROTOCOL_VERSION_META,
    SERVER_INFO_META,
    SUBSCRIPTION_ID_META,
    header_params,
)

__all__ = [
    "ASKING_METHODS",
    "SESSION_PREFIX",
    "Ask",
    "BridgedSession",
    "Complete",
    "LegacyBridge",
    "TooLarge",
    "discover_request",
    "initialize_result",
    "legacy_notification",
    "legacy_result",
    "stateless_version",
]

#: Every session id the bridge mints starts with this (visible ASCII): after a restart the proxy
#: still knows an id as one of its own (gone: 404, so the client initializes again) and never
#: sends it to a server that knows no sessions.
SESSION_PREFIX = "mcpn-bridge."
#: The methods whose result may be ``input_required`` (``S2026-07-28/basic/patterns/mrtr.mdx``).
ASKING_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
#: Members only a 2026-07-28 result has (``resultType``; SEP-2549 ``ttlMs``/``cacheScope``).
MODERN_RESULT_MEMBERS = ("resultType", "ttlMs", "cacheScope")
#: The legacy requests an ``input_required`` result may carry.
INPUT_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
#: Rounds of ``input_required`` one request may go through before the bridge gives up (a server that
#: keeps asking).
MAX_ROUNDS = 16
#: ``subscriptions/listen`` filter member per capability that lists change
#: (``S2026-07-28/basic/patterns/subscriptions.mdx``).
_LIST_FILTERS = (
    ("tools", "toolsListChanged"),
    ("prompts", "promptsListChanged"),
    ("resources", "resourcesListChanged"),
)
_SESSION_VERSIONS = tuple(era.version for era in ERAS if era.sessions)
_NEWEST_SESSION_ERA = _SESSION_VERSIONS[-1]
#: Resource URIs one session may subscribe to (each goes into every listen filter).
MAX_SUBSCRIPTIONS = 1024
#: Bytes of what one session keeps of its client (capabilities, clientInfo, subscribed URIs, as
#: JSON): the client chooses them, so the bound is what keeps sessions x size bounded. Real clients
#: declare a few hundred bytes.
MAX_SESSION_BYTES = 64 * 1024
#: ``x-mcp-header`` declarations kept (tools whose calls need ``Mcp-Param-*`` headers).
MAX_DECLARED_TOOLS = 4096


def stateless_version(discovered: JSON) -> str | None:
    """The newest version in a ``server/discover`` result's ``supportedVersions`` that the registry
    knows as a stateless era, or ``None`` (none: the bridge does not speak the server's era; a
    version the registry only reads as one, a draft among them, is not spoken for a client)."""
    if not isinstance(discovered, dict):
        return None
    versions = discovered.get("supportedVersions")
    if not isinstance(versions, list):
        return None
    stateless = [v for v in versions if isinstance(v, str) and known(v) and era_of(v).stateless]
    return max(stateless) if stateless else None


def discover_request(initialize: JSONObject, version: str) -> JSONObject:
    """The ``server/discover`` request that stands for a legacy client's ``initialize`` (same id; the
    client's capabilities and info in ``_meta``)."""
    params = initialize.get("params")
    params = params if isinstance(params, dict) else {}
    meta: JSONObject = {
        PROTOCOL_VERSION_META: version,
        CLIENT_CAPABILITIES_META: _object(params.get("capabilities")),
    }
    if isinstance(params.get("clientInfo"), dict):
        meta[CLIENT_INFO_META] = params["clientInfo"]
    return {"jsonrpc": "2.0", "id": initialize.get("id"), "method": "server/discover", "params": {"_meta": meta}}


def initialize_result(initialize: JSONObject, discovered: JSONObject) -> JSONObject:
    """The ``InitializeResult`` a legacy client gets from a server's ``DiscoverResult``.

    The version is the client's own when the registry knows it as a session era, else the newest
    session era (``S2025-11-25/basic/lifecycle.mdx``: the server answers with another version it
    supports); ``serverInfo`` is the one the discover result names in its ``_meta`` (else a
    top-level ``serverInfo``, else a name that says it is unknown); ``capabilities`` and
    ``instructions`` are the server's.
    """
    params = initialize.get("params")
    asked = params.get("protocolVersion") if isinstance(params, dict) else None
    version = asked if isinstance(asked, str) and asked in _SESSION_VERSIONS else _NEWEST_SESSION_ERA
    meta = discovered.get("_meta")
    info = meta.get(SERVER_INFO_META) if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        info = discovered.get("serverInfo")  # (a server that names itself as a legacy result does)
    result: JSONObject = {
        "protocolVersion": version,
        "capabilities": _object(discovered.get("capabilities")),
        "serverInfo": info if isinstance(info, dict) else {"name": "unnamed 2026-07-28 server", "version": "unknown"},
    }
    if isinstance(discovered.get("instructions"), str):
        result["instructions"] = discovered["instructions"]
    return result


def legacy_result(result: JSON) -> JSON:
    """A 2026-07-28 ``complete`` result as a legacy client reads it: without the members only that
    era has (``resultType``, ``ttlMs``, ``cacheScope``); everything else as it came."""
    if not isinstance(result, dict) or not any(k in result for k in MODERN_RESULT_MEMBERS):
        return result
    return {k: v for k, v in result.items() if k not in MODERN_RESULT_MEMBERS}


def legacy_notification(message: JSONObject) -> JSONObject | None:
    """A notification of a ``subscriptions/listen`` stream as a legacy session's GET stream carries it:
    ``None`` for the stream's acknowledgement (nothing the legacy era knows), else without the
    ``subscriptionId`` its ``_meta`` carries (an empty ``_meta`` then goes too)."""
    if message.get("method") == "notifications/subscriptions/acknowledged":
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(params, dict) or not isinstance(meta, dict) or SUBSCRIPTION_ID_META not in meta:
        return message
    rest = {k: v for k, v in meta.items() if k != SUBSCRIPTION_ID_META}
    new_params = {k: v for k, v in params.items() if k != "_meta"}
    if rest:
        new_params["_meta"] = rest
    return {**message, "params": new_params}


def _size(value: JSON) -> int:
    """Bytes of ``value`` as JSON (a value JSON cannot carry, a lone surrogate, by its repr)."""
    try:
        return len(dumps(value))
    except DecodeError:
        return len(repr(value))


def _object(value: JSON) -> JSONObject:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Complete:
    """The request is answered: ``message`` goes to the client (a legacy result or an error)."""

    message: JSONObject


@dataclass(frozen=True, slots=True)
class Ask:
    """The server needs input first (``input_required``).

    Attributes:
        requests: the legacy requests to send to the client, each under an id the bridge minted.
        keys: for each of those ids, the ``inputRequests`` key its answer goes under.
        state: the ``requestState`` to echo, or ``None``.
    """

    requests: list[JSONObject]
    keys: dict[IdKey, str]
    state: JSON


@dataclass(slots=True)
class BridgedSession:
    """One legacy client's session with a 2026-07-28 server, kept by the bridge.

    Attributes:
        id: the ``Mcp-Session-Id`` minted for it.
        version: the 2026-07-28-era version spoken to the server.
        legacy_version: the version the client and the bridge agreed in ``initialize``.
        capabilities: the client's capabilities (sent with every request).
        client_info: the client's ``clientInfo`` (sent with every request), or ``None``.
        server_capabilities: the server's, from ``server/discover``.
        credential: a digest of the ``Authorization`` that opened the session (``None``: none); a
            request with another is no request of this session.
        log_level: the level ``logging/setLevel`` asked for, or ``None``.
        subscriptions: the resource URIs ``resources/subscribe`` named, in order.
        last_used: when the session was last used (monotonic seconds).
        busy: requests and streams of the session in flight (an idle session has none).
        filter_version: bumped whenever the listen filter changes (a listening stream restarts).
    """

    id: str
    version: str
    legacy_version: str
    capabilities: JSONObject
    client_info: JSONObject | None
    server_capabilities: JSONObject
    credential: str | None
    log_level: str | None = None
    subscriptions: list[str] = field(default_factory=list)
    last_used: float = 0.0
    busy: int = 0
    filter_version: int = 0
    _asked: int = 0

    # -- requests the bridge answers itself ----------------------------------------------------

    def local_answer(self, message: JSONObject) -> JSONObject | None:
        """The response to a request the session answers itself (``ping``, ``logging/setLevel``,
        ``resources/subscribe``/``unsubscribe``, a second ``initialize``), or ``None`` for a request
        that goes to the server."""
        method = message.get("method")
        params = _object(message.get("params"))
        rid = message.get("id")
        if method == "ping":
            return _result(rid, {})
        if method == "logging/setLevel":
            level = params.get("level")
            if not isinstance(level, str):
                return _error(rid, -32602, "logging/setLevel needs a level")
            self.log_level = level
            return _result(rid, {})
        if method in ("resources/subscribe", "resources/unsubscribe"):
            uri = params.get("uri")
            if not isinstance(uri, str):
                return _error(rid, -32602, f"{method} needs a uri")
            if not _object(self.server_capabilities.get("resources")).get("subscribe"):
                return _error(rid, -32601, "the server offers no resource subscriptions")
            if method == "resources/subscribe" and uri not in self.subscriptions:
                if len(self.subscriptions) >= MAX_SUBSCRIPTIONS:
                    return _error(rid, -32603, f"at most {MAX_SUBSCRIPTIONS} resource subscriptions per session")
                if self.kept_bytes + len(uri.encode("utf-8", "surrogatepass")) + 4 > MAX_SESSION_BYTES:
                    return _error(rid, -32603, f"a session keeps at most {MAX_SESSION_BYTES} bytes of subscriptions")
                self.subscriptions.append(uri)
                self.filter_version += 1
            elif method == "resources/unsubscribe" and uri in self.subscriptions:
                self.subscriptions.remove(uri)
                self.filter_version += 1
            return _result(rid, {})
        if method == "initialize":
            return _error(rid, -32600, "this session is already initialized")
        return None

    # -- requests that go to the server ---------------------------------------------------------

    @property
    def kept_bytes(self) -> int:
        """Bytes the session keeps of its client (its capabilities, info and subscriptions as JSON)."""
        return _size([self.capabilities, self.client_info, self.subscriptions, self.log_level])

    def stateless(self, message: JSONObject, new_id: JSON = None) -> JSONObject:
        """``message`` in the 2026-07-28 form: the session's protocol fields in ``params._meta`` (the
        client's own ``_meta`` members kept, ``progressToken`` among them), and ``new_id`` as its id
        when given."""
        params = dict(_object(message.get("params")))
        meta = dict(_object(params.get("_meta")))
        meta[PROTOCOL_VERSION_META] = self.version
        meta[CLIENT_CAPABILITIES_META] = self.capabilities
        if self.client_info is not None:
            meta[CLIENT_INFO_META] = self.client_info
        if self.log_level is not None:
            meta[LOG_LEVEL_META] = self.log_level
        params["_meta"] = meta
        out: JSONObject = {"jsonrpc": "2.0"}
        if "id" in message:
            out["id"] = message["id"] if new_id is None else new_id
        out["method"] = message.get("method")
        out["params"] = params
        return out

    def retry(self, message: JSONObject, new_id: JSON, responses: JSONObject, state: JSON) -> JSONObject:
        """The request ``message`` sent again after an ``input_required`` result: a new id, the
        answers under ``inputResponses``, the ``requestState`` as it came (absent when it was)."""
        out = self.stateless(message, new_id)
        params = out["params"]
        assert isinstance(params, dict)
        params["inputResponses"] = responses
        if state is not None:
            params["requestState"] = state
        else:
            params.pop("requestState", None)
        return out

    def answer(self, message: JSONObject, response: JSONObject) -> Complete | Ask:
        """What the server's ``response`` to ``message`` (the client's request, legacy form) means for
        the client: :class:`Complete` with the legacy response (the client's id), or :class:`Ask`."""
        rid = message.get("id")
        if "result" not in response:
            return Complete({**response, "id": rid})
        result = response["result"]
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            return self._ask(rid, result)
        return Complete({"jsonrpc": "2.0", "id": rid, "result": legacy_result(result)})

    def _ask(self, rid: JSON, result: JSONObject) -> Complete | Ask:
        asks = result.get("inputRequests")
        if not isinstance(asks, dict) or not asks:
            if result.get("requestState") is not None:  # state only: the retry carries no answers
                return Ask([], {}, result.get("requestState"))
            return Complete(_error(rid, -32603, "the server asked for input without saying what (inputRequests)"))
        requests: list[JSONObject] = []
        keys: dict[IdKey, str] = {}
        for key, ask in asks.items():
            if not isinstance(ask, dict) or ask.get("method") not in INPUT_METHODS:
                method = ask.get("method") if isinstance(ask, dict) else None
                return Complete(
                    _error(rid, -32603, f"the server asked for input a legacy client cannot give ({method!r})")
                )
            self._asked += 1
            ask_id = f"{SESSION_PREFIX}ask.{self._asked}"
            request: JSONObject = {"jsonrpc": "2.0", "id": ask_id, "method": ask["method"]}
            if "params" in ask:
                request["params"] = ask["params"]
            requests.append(request)
            key_of = id_key(ask_id)
            assert key_of is not None
            keys[key_of] = key
        return Ask(requests, keys, result.get("requestState"))

    def listen_request(self, rid: JSON) -> JSONObject | None:
        """The ``subscriptions/listen`` request for the session's GET stream: a list that changes for
        each capability the server declared ``listChanged`` for, and the subscribed resources; ``None``
        when there is nothing to listen to (the GET is then answered 405, as a legacy server without a
        stream answers it)."""
        caps = self.server_capabilities
        notifications: JSONObject = {}
        for capability, member in _LIST_FILTERS:
            if _object(caps.get(capability)).get("listChanged"):
                notifications[member] = True
        if self.subscriptions:
            notifications["resourceSubscriptions"] = list(self.subscriptions)
        if not notifications:
            return None
        return self.stateless({"id": rid, "method": "subscriptions/listen", "params": {"notifications": notifications}})


def _result(rid: JSON, result: JSONObject) -> JSONObject:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: JSON, code: int, message: str) -> JSONObject:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def credential_of(authorization: str | None) -> str | None:
    """A digest of an ``Authorization`` header value (``None`` for none): what binds a session to
    the credentials that opened it, without keeping them."""
    if authorization is None:
        return None
    return hashlib.blake2b(authorization.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


Lookup = Literal["ours", "gone", "foreign"]


class TooLarge(ValueError):
    """What a client asks a session to keep is over :data:`MAX_SESSION_BYTES`."""


class LegacyBridge:
    """The bridged sessions of one upstream, and what the bridge learned of the upstream's era.

    One owner: the hop's :class:`~mcp_normalizer.hop.era_bridge.EraBridge`. Bounded: at most
    ``max_sessions`` sessions (a new one past it ends the longest-idle idle one; when every session
    is busy, the oldest); a session idle for ``idle_timeout`` seconds ends (``0``: never).

    Args:
        mode: ``auto`` (bridge once the upstream refused ``initialize`` and answered
            ``server/discover``), ``2026-07-28`` (bridge every legacy client) or ``legacy`` (never).
        max_sessions: sessions kept at once.
        idle_timeout: seconds an idle session is kept.
    """

    def __init__(self, mode: str = "auto", *, max_sessions: int = 10_000, idle_timeout: float = 3600.0) -> None:
        self.mode = mode
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.sessions: OrderedDict[str, BridgedSession] = OrderedDict()
        #: The stateless version the upstream speaks, once known (``None``: not known to be bridged).
        self.upstream_version: str | None = "2026-07-28" if mode == "2026-07-28" else None
        #: ``x-mcp-header`` declarations per tool name, from the ``tools/list`` results seen.
        self.declared: OrderedDict[str, dict[str, tuple[str, ...]]] = OrderedDict()
        self.ended = 0  # sessions ended by the bounds (evicted or expired)

    @property
    def bridging(self) -> bool:
        """Legacy clients are bridged now (the operator said so, or the upstream showed it)."""
        return self.mode != "legacy" and self.upstream_version is not None

    @property
    def may_probe(self) -> bool:
        """A refused ``initialize`` may be followed by a ``server/discover`` probe."""
        return self.mode == "auto" and self.upstream_version is None

    def learned(self, version: str) -> None:
        """The upstream answered ``server/discover`` for ``version`` after refusing ``initialize``."""
        if self.mode != "legacy":
            self.upstream_version = version

    def forget(self) -> None:
        """What was learned of the upstream no longer holds (``auto`` only): new legacy clients are
        not bridged until a refused ``initialize`` teaches it again; sessions already open stay."""
        if self.mode == "auto":
            self.upstream_version = None

    def open(
        self, initialize: JSONObject, discovered: JSONObject, version: str, *, credential: str | None, now: float
    ) -> tuple[BridgedSession, JSONObject]:
        """A new session for a legacy client's ``initialize`` answered by ``discovered``.

        Returns:
            The session, and the ``InitializeResult`` for the client.

        Raises:
            TooLarge: the client's capabilities and info are over :data:`MAX_SESSION_BYTES` as JSON.
        """
        params = _object(initialize.get("params"))
        kept = _size([params.get("capabilities"), params.get("clientInfo")])
        if kept > MAX_SESSION_BYTES:
            raise TooLarge(
                f"the client's capabilities and info are {kept} bytes; a session keeps at most {MAX_SESSION_BYTES}"
            )
        self.expire(now)
        while len(self.sessions) >= self.max_sessions:
            self._evict()
        result = initialize_result(initialize, discovered)
        info = params.get("clientInfo")
        session = BridgedSession(
            id=SESSION_PREFIX + secrets.token_hex(16),
            version=version,
            legacy_version=str(result["protocolVersion"]),
            capabilities=_object(params.get("capabilities")),
            client_info=info if isinstance(info, dict) else None,
            server_capabilities=_object(discovered.get("capabilities")),
            credential=credential,
            last_used=now,
        )
        self.sessions[session.id] = session
        return session, result

    def lookup(self, session_id: str, credential: str | None, now: float) -> tuple[Lookup, BridgedSession | None]:
        """The session ``session_id`` names for a request with ``credential``.

        Returns:
            ``("ours", session)`` (touched: now its last use); ``("gone", None)`` for an id the bridge
            minted that it no longer keeps (ended, expired, another process's, or opened with other
            credentials: the client gets 404 and initializes again); ``("foreign", None)`` for an
            id the bridge never minted (the upstream's business).
        """
        if not session_id.startswith(SESSION_PREFIX):
            return "foreign", None
        self.expire(now)
        session = self.sessions.get(session_id)
        if session is None or session.credential != credential:
            return "gone", None
        session.last_used = now
        self.sessions.move_to_end(session_id)
        return "ours", session

    def close(self, session_id: str) -> BridgedSession | None:
        """End a session (``DELETE``); the session, or ``None`` when it was not kept."""
        return self.sessions.pop(session_id, None)

    def expire(self, now: float) -> list[BridgedSession]:
        """End the sessions idle longer than ``idle_timeout``; the ones ended."""
        if self.idle_timeout <= 0:
            return []
        gone: list[BridgedSession] = []
        for session in list(self.sessions.values()):  # least recently used first
            if now - session.last_used <= self.idle_timeout:
                break
            if session.busy:
                continue
            gone.append(session)
            del self.sessions[session.id]
        self.ended += len(gone)
        return gone

    def _evict(self) -> None:
        victim = next((s for s in self.sessions.values() if not s.busy), None)
        if victim is None:
            victim = next(iter(self.sessions.values()))
        del self.sessions[victim.id]
        self.ended += 1

    # -- what the upstream's tool listings declare ------------------------------------------------

    def saw_tools(self, result: JSON) -> None:
        """Keep the ``x-mcp-header`` declarations of a ``tools/list`` result's tools (bounded)."""
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list):
            return
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            found = header_params(tool.get("inputSchema"))
            name = tool["name"]
            if found:
                self.declared[name] = found
                self.declared.move_to_end(name)
                while len(self.declared) > MAX_DECLARED_TOOLS:
                    self.declared.popitem(last=False)
            else:
                self.declared.pop(name, None)

    def declared_for(self, message: JSONObject) -> dict[str, tuple[str, ...]] | None:
        """The ``x-mcp-header`` declarations of the tool a ``tools/call`` names, if any are known."""
        if message.get("method") != "tools/call":
            return None
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        return self.declared.get(name) if isinstance(name, str) else None


def is_refusal(status: int, body: Any) -> bool:
    """An upstream's answer to a legacy ``initialize`` that may mean "I speak only 2026-07-28": an HTTP
    error status (400, 404, 405, 406) or a JSON-RPC error for the request. A success never is."""
    if status in (400, 404, 405, 406):
        return True
    return isinstance(body, dict) and "error" in body and "result" not in body
