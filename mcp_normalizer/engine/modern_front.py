"""The modern front, sans-IO: 2026-07-28 clients (stateless) of a legacy upstream (sessions, ``initialize``).

The other direction of :mod:`mcp_normalizer.engine.era_bridge`. A 2026-07-28 host that falls back to
``initialize`` when a server refuses ``server/discover`` needs nothing (its traffic passes through);
a host that does not fall back (a client pinned to 2026-07-28: the TS client 2.x with
``versionNegotiation: {mode: {pin}}``, the Python ``mcp`` ``Client(mode="2026-07-28")``) reaches no
legacy server. With the operator's consent (``[proxy] serve_modern_hosts``) the proxy speaks the
legacy era for it (``S2026-07-28/basic/versioning.mdx``, the two forms in
``S2025-11-25/basic/lifecycle.mdx`` and ``S2026-07-28/basic/index.mdx``):

====================================== =====================================================================
2026-07-28 client sends                the front
====================================== =====================================================================
``server/discover``                    opens (or reuses) the client's legacy session upstream: ``initialize``
                                       with the client's capabilities and ``clientInfo`` from the request's
                                       ``_meta`` at the newest legacy version, ``notifications/initialized``;
                                       answers ``DiscoverResult`` from the ``InitializeResult``
any other request                      carried over that session: the protocol fields of ``_meta`` removed
                                       (``progressToken`` and every other member kept), a minted id, the
                                       session's ``Mcp-Session-Id`` and ``MCP-Protocol-Version``; the
                                       result gets the members the era requires (``resultType``, and on a
                                       list ``ttlMs: 0``/``cacheScope: "private"``, the values the rule
                                       ``era_fields`` gives an absent one)
(on the request's stream)              ``notifications/progress`` passes (its token the client's current
                                       one), ``notifications/message`` passes when the request asked for a
                                       ``logLevel``, ``ping`` is answered upstream; ``elicitation/create``,
                                       ``sampling/createMessage`` and ``roots/list`` end the client's
                                       request with ``input_required`` (``requestState``: a token the front
                                       minted); list-changed notifications go to the session's listeners
a retry (``requestState``)             the answers in ``inputResponses`` go upstream as the legacy
                                       responses, and the still-open upstream stream goes on to the retry
``subscriptions/listen``               the session's ``GET`` stream: the acknowledgement first, then each
                                       notification the filter asked for, ``subscriptionId`` in ``_meta``
====================================== =====================================================================

A request's ``logLevel`` becomes the session's ``logging/setLevel`` when it differs (and the
server declared ``logging``); the URIs a listen filter names in ``resourceSubscriptions`` are
subscribed in the session (``resources/subscribe``) and stay subscribed while it lives; the client
closing a request's stream cancels the request upstream (``notifications/cancelled``, the legacy
way); a request's stream that ends after an event id and before its response is resumed with
``GET`` and ``Last-Event-ID`` (2025-11-25 SSE polling).

One session per client key (:func:`client_key`: the ``Authorization`` digest, the ``clientInfo``
name and the declared capabilities), bounded in number, ended when idle; a session the upstream no
longer knows (404) is opened again. A question waits for the client's retry at most
``input_timeout`` seconds. Whether the upstream is legacy-only is learned once (:func:`is_refusal`)
or said by the operator. This module holds the rules and the state (:class:`FrontCore`);
:mod:`mcp_normalizer.hop.modern_front` does the I/O. Nothing here reads a socket or a clock: ``now``
is passed in (seconds, monotonic).
"""

from __future__ import annotations

import hashlib
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..types import JSON, JSONObject
from ..wire.eras import FIRST_STATELESS, NEWEST_LEGACY, era_of
from ..wire.jsoncodec import Raw, dumps, loads
from ..wire.jsonrpc import id_key
from ..wire.modern import (
    CLIENT_CAPABILITIES_META,
    CLIENT_INFO_META,
    LOG_LEVEL_META,
    PROTOCOL_VERSION_META,
    SERVER_INFO_META,
    SUBSCRIPTION_ID_META,
)
from .rules.era_fields import FILLED, missing

__all__ = [
    "ASKING_METHODS",
    "FRONT_PREFIX",
    "INPUT_METHODS",
    "MODERN_ERRORS",
    "Ask",
    "Envelope",
    "Final",
    "FrontSession",
    "FrontCore",
    "Parked",
    "Relay",
    "ToClient",
    "ToListeners",
    "ToUpstream",
    "acknowledged",
    "client_key",
    "discover_result",
    "envelope_of",
    "initialize_request",
    "is_refusal",
    "legacy_request",
    "listen_filter",
    "listen_notification",
    "modern_result",
]

#: Every id and ``requestState`` the front mints starts with this.
FRONT_PREFIX = "mcpn-front."
#: The JSON-RPC errors only a 2026-07-28 server answers with (``S2026-07-28/basic/index.mdx``, Error
#: Codes): ``HeaderMismatch``, ``MissingRequiredClientCapability``, ``UnsupportedProtocolVersion``.
MODERN_ERRORS = frozenset({-32020, -32021, -32022})
#: The methods whose result may be ``input_required`` (``S2026-07-28/basic/patterns/mrtr.mdx``).
ASKING_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
#: The legacy server-to-client requests an ``input_required`` result may carry.
INPUT_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
#: The request ``_meta`` members that are the 2026-07-28 envelope (a legacy server reads none).
PROTOCOL_FIELDS = (PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META, CLIENT_INFO_META, LOG_LEVEL_META)
#: Notifications a listener may ask for, and the filter member that asks
#: (``S2026-07-28/basic/patterns/subscriptions.mdx``).
LISTEN_NOTIFICATIONS = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
    "notifications/resources/updated": "resourceSubscriptions",
}
#: The capability whose ``listChanged`` lets a filter member through.
_FILTER_CAPABILITY = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}
#: HTTP statuses with which a legacy server refuses a 2026-07-28 request (no session, no such method).
_REFUSING_STATUSES = frozenset({400, 404, 405, 406})
#: JSON-RPC errors that say a request was not run (Invalid Request, Method not found).
_NOT_RUN = frozenset({-32600, -32601})
#: The version the front answers for (the first stateless era).
FIRST_MODERN = FIRST_STATELESS.version
#: What an absent era member means (the rule ``era_fields``'s values, decoded).
_ABSENT_MEANS: dict[str, JSON] = {name: loads(value) for name, value in FILLED}


def _object(value: JSON) -> JSONObject:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Envelope:
    """The 2026-07-28 protocol fields of one request (``S2026-07-28/basic/index.mdx``, ``_meta``).

    Attributes:
        version: ``io.modelcontextprotocol/protocolVersion``.
        capabilities: ``clientCapabilities`` (``{}`` when absent).
        client_info: ``clientInfo``, or ``None``.
        log_level: ``logLevel``, or ``None`` (then no ``notifications/message`` for the request).
    """

    version: str
    capabilities: JSONObject
    client_info: JSONObject | None
    log_level: str | None


def envelope_of(message: JSON) -> Envelope | None:
    """The envelope of a request whose ``params._meta`` names a stateless version; ``None`` for any
    other message (a legacy request, a notification's absent ``_meta``, a batch)."""
    if not isinstance(message, dict):
        return None
    meta = _object(_object(message.get("params")).get("_meta"))
    version = meta.get(PROTOCOL_VERSION_META)
    if not isinstance(version, str) or not era_of(version).stateless:
        return None
    info = meta.get(CLIENT_INFO_META)
    level = meta.get(LOG_LEVEL_META)
    return Envelope(
        version,
        _object(meta.get(CLIENT_CAPABILITIES_META)),
        info if isinstance(info, dict) else None,
        level if isinstance(level, str) else None,
    )


def client_key(credential: str | None, envelope: Envelope) -> str:
    """The key of the legacy session a client's requests share: a digest of the ``Authorization``
    digest (``None``: none), the ``clientInfo`` name and the declared capabilities (canonical JSON).
    Two clients alike in all three share one session; a session's capabilities are the ones its
    ``initialize`` declared, so clients that declare others get their own."""
    name = envelope.client_info.get("name") if envelope.client_info else None
    text = b"\0".join(
        [(credential or "").encode(), dumps(name if isinstance(name, str) else ""), _canonical(envelope.capabilities)]
    )
    return hashlib.blake2b(text, digest_size=16).hexdigest()


def _canonical(value: JSON) -> bytes:
    if isinstance(value, dict):
        items = sorted(value.items())
        return b"{" + b",".join(dumps(k) + b":" + _canonical(v) for k, v in items) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(_canonical(v) for v in value) + b"]"
    return dumps(value)


def initialize_request(envelope: Envelope, rid: str) -> JSONObject:
    """The legacy ``initialize`` that opens a client's session: the newest legacy version, the
    client's capabilities and ``clientInfo`` (a name saying it is unknown when the client gave none:
    ``clientInfo`` is required there, a SHOULD in 2026-07-28)."""
    info = envelope.client_info or {"name": "unnamed 2026-07-28 client", "version": "unknown"}
    params: JSONObject = {
        "protocolVersion": NEWEST_LEGACY.version,
        "capabilities": envelope.capabilities,
        "clientInfo": info,
    }
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}


#: What follows a successful ``initialize`` (``S2025-11-25/basic/lifecycle.mdx``).
INITIALIZED: JSONObject = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def discover_result(initialized: JSONObject) -> JSONObject:
    """The ``DiscoverResult`` a 2026-07-28 client gets from a legacy ``InitializeResult``
    (``S2026-07-28/server/discover.mdx``): the one version the front speaks for the server, the
    server's capabilities and instructions, nothing to cache across clients (``ttlMs: 0``,
    ``private``) and ``serverInfo`` in ``_meta``."""
    result: JSONObject = {
        "supportedVersions": [FIRST_MODERN],
        "capabilities": _object(initialized.get("capabilities")),
    }
    if isinstance(initialized.get("instructions"), str):
        result["instructions"] = initialized["instructions"]
    result.update(ttlMs=0, cacheScope="private", resultType="complete")
    info = initialized.get("serverInfo")
    if isinstance(info, dict):
        result["_meta"] = {SERVER_INFO_META: info}
    return result


def legacy_request(message: JSONObject, upstream_id: JSON) -> JSONObject:
    """A 2026-07-28 request as the legacy session carries it: ``upstream_id`` for its id, the
    envelope's members out of ``params._meta`` (an empty ``_meta`` goes too; ``progressToken`` and
    every other member stay), no ``inputResponses``/``requestState`` (the answers go as responses)."""
    params = {k: v for k, v in _object(message.get("params")).items() if k not in ("inputResponses", "requestState")}
    meta = params.pop("_meta", None)
    if isinstance(meta, dict):
        rest = {k: v for k, v in meta.items() if k not in PROTOCOL_FIELDS}
        if rest:
            params["_meta"] = rest
    out: JSONObject = {"jsonrpc": "2.0", "id": upstream_id, "method": message.get("method")}
    if params or "params" in message:
        out["params"] = params
    return out


def modern_result(method: str, result: JSON) -> JSON:
    """A legacy result as a 2026-07-28 client reads it: the members the era requires where absent,
    with the values the spec gives an absent one (:func:`~mcp_normalizer.engine.rules.era_fields.missing`:
    ``resultType: "complete"``, and ``ttlMs: 0``, ``cacheScope: "private"`` on the cacheable methods).
    The front fills them itself (a translation, not a repair): bridged traffic is never at the mercy
    of the rule being off or in report-only mode, and the rule finds nothing left to fill."""
    if not isinstance(result, dict):
        return result
    members = {k: Raw(dumps(v)) for k, v in result.items() if k in ("resultType", "ttlMs", "cacheScope")}
    absent = missing(members, method, FIRST_MODERN)
    if not absent:
        return result
    return {**result, **{name: _ABSENT_MEANS[name] for name in absent}}


def is_refusal(status: int, body: JSON, method: str = "server/discover") -> bool:
    """An upstream's answer to a 2026-07-28 ``method`` request that says "I speak no 2026-07-28":
    an HTTP 400, 404, 405 or 406 (a legacy server's "no session", "no such method"), or a JSON-RPC
    error, that is not a recognised 2026-07-28 error (:data:`MODERN_ERRORS`: those come from a
    2026-07-28 server, which is then not refusing the era). For ``server/discover``, which every
    2026-07-28 server implements, any other JSON-RPC error counts; for any other method only one
    that says the request was not run (``-32600``, ``-32601``): a tool that ran and failed must not
    run again over a session. A success never is; neither is any other status (401 and 403 are the
    credentials', 5xx the server's trouble)."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("code") in MODERN_ERRORS:
        return False
    if isinstance(body, dict) and "result" in body:
        return False
    if status in _REFUSING_STATUSES:
        return True
    if status != 200 or not isinstance(error, dict):
        return False
    return method == "server/discover" or error.get("code") in _NOT_RUN


# -- effects of one upstream message on a request's stream --------------------------------------------


@dataclass(frozen=True, slots=True)
class ToClient:
    """Send ``message`` to the client on its request's stream."""

    message: JSONObject


@dataclass(frozen=True, slots=True)
class ToUpstream:
    """POST ``message`` (the front's answer to a server request) to the session."""

    message: JSONObject


@dataclass(frozen=True, slots=True)
class ToListeners:
    """Hand ``message`` (a notification unrelated to the request) to the session's listeners."""

    message: JSONObject


@dataclass(frozen=True, slots=True)
class Ask:
    """The server asks the client (``key`` in ``inputRequests``, ``request`` the embedded request)."""

    key: str
    request: JSONObject


@dataclass(frozen=True, slots=True)
class Final:
    """The client's request is answered: ``message`` (its id, the 2026-07-28 form)."""

    message: JSONObject


Effect = ToClient | ToUpstream | ToListeners | Ask | Final


@dataclass(slots=True)
class FrontSession:
    """One client key's legacy session with the upstream.

    Attributes:
        key: the client key (:func:`client_key`).
        session_id: the ``Mcp-Session-Id`` the upstream minted (``None``: it minted none).
        version: the version the upstream agreed in ``initialize``.
        initialized: its ``InitializeResult``.
        log_level: the level last set with ``logging/setLevel`` (``None``: never).
        last_used: when the session was last used (monotonic seconds).
        busy: requests and listeners of the session in flight.
    """

    key: str
    session_id: str | None
    version: str
    initialized: JSONObject
    log_level: str | None = None
    last_used: float = 0.0
    busy: int = 0
    _minted: int = 0

    @property
    def capabilities(self) -> JSONObject:
        """The server's capabilities."""
        return _object(self.initialized.get("capabilities"))

    def mint_id(self, what: str = "rq") -> str:
        """A JSON-RPC id for a request of the front in this session (unique in it: clients that
        share the session may use the same ids)."""
        self._minted += 1
        return f"{FRONT_PREFIX}{what}.{self._minted}"

    def set_level(self, envelope: Envelope) -> JSONObject | None:
        """The ``logging/setLevel`` to send before a request that asks for another log level than
        the session's (the server declared ``logging``), else ``None``."""
        level = envelope.log_level
        if level is None or level == self.log_level or "logging" not in self.capabilities:
            return None
        self.log_level = level
        return {"jsonrpc": "2.0", "id": self.mint_id("level"), "method": "logging/setLevel", "params": {"level": level}}


@dataclass(slots=True)
class Relay:
    """One client request carried over a legacy session, through every ``input_required`` round.

    Attributes:
        method: the request's method.
        upstream_id: its id upstream.
        client_id: the id of the client request answered now (the retry's after a round).
        origin_token: the ``progressToken`` sent upstream (``None``: none).
        client_token: the ``progressToken`` of the client request answered now.
        logging: the client request asked for a ``logLevel``.
        asked: ``inputRequests`` key to the server's request id, for the questions out now.
        rounds: ``input_required`` rounds so far.
    """

    method: str
    upstream_id: str
    client_id: JSON
    origin_token: JSON = None
    client_token: JSON = None
    logging: bool = False
    asked: dict[str, JSON] = field(default_factory=dict)
    rounds: int = 0
    _keys: int = 0

    @classmethod
    def start(cls, message: JSONObject, upstream_id: str, envelope: Envelope) -> Relay:
        """The relay of the client request ``message`` sent upstream as ``upstream_id``."""
        token = _object(_object(message.get("params")).get("_meta")).get("progressToken")
        return cls(
            str(message.get("method")),
            upstream_id,
            message.get("id"),
            origin_token=token,
            client_token=token,
            logging=envelope.log_level is not None,
        )

    def on_message(self, message: JSONObject) -> Effect | None:
        """What one message of the upstream's stream means (``None``: nothing, it is dropped)."""
        method = message.get("method")
        if not isinstance(method, str):
            if id_key(message.get("id")) == id_key(self.upstream_id) and ("result" in message or "error" in message):
                return Final(self.final(message))
            return None
        if "id" in message:
            return self._request(method, message)
        if method == "notifications/progress":
            return ToClient(self._progress(message))
        if method == "notifications/message":
            return ToClient(message) if self.logging else None
        if method in LISTEN_NOTIFICATIONS:
            return ToListeners(message)
        return None  # 2026-07-28 carries no other notification on a request's stream

    def _request(self, method: str, message: JSONObject) -> Effect:
        rid = message.get("id")
        if method == "ping":
            return ToUpstream({"jsonrpc": "2.0", "id": rid, "result": {}})
        if method in INPUT_METHODS and self.method in ASKING_METHODS:
            self._keys += 1
            key = f"{method.split('/')[0]}-{self._keys}"
            self.asked[key] = rid
            request: JSONObject = {"method": method}
            if "params" in message:
                request["params"] = message["params"]
            return Ask(key, request)
        text = f"a 2026-07-28 client cannot be asked {method} during {self.method}"
        return ToUpstream({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": text}})

    def _progress(self, message: JSONObject) -> JSONObject:
        params = _object(message.get("params"))
        if self.client_token is None or self.client_token == self.origin_token:
            return message
        if params.get("progressToken") != self.origin_token:
            return message
        return {**message, "params": {**params, "progressToken": self.client_token}}

    def final(self, response: JSONObject) -> JSONObject:
        """The upstream's response as the client's: its id, a result in the 2026-07-28 form."""
        out: JSONObject = {**response, "id": self.client_id}
        if "result" in response:
            out["result"] = modern_result(self.method, response["result"])
        return out

    def input_required(self, asks: dict[str, JSONObject], token: str) -> JSONObject:
        """The ``input_required`` response to the client's request now (``S2026-07-28/basic/patterns/mrtr.mdx``)."""
        self.rounds += 1
        result: JSONObject = {"resultType": "input_required", "inputRequests": asks, "requestState": token}
        return {"jsonrpc": "2.0", "id": self.client_id, "result": result}

    def resume(self, retry: JSONObject) -> list[JSONObject]:
        """Take the client's retry (new id, ``inputResponses``): the legacy responses to POST upstream,
        one per question out (an error for a key the retry left unanswered)."""
        params = _object(retry.get("params"))
        answers = _object(params.get("inputResponses"))
        self.client_id = retry.get("id")
        token = _object(params.get("_meta")).get("progressToken")
        if token is not None:
            self.client_token = token
        out: list[JSONObject] = []
        for key, rid in self.asked.items():
            answer = answers.get(key)
            if isinstance(answer, dict):
                result = {k: v for k, v in answer.items() if k != "resultType"}
                out.append({"jsonrpc": "2.0", "id": rid, "result": result})
            else:
                error = {"code": -32603, "message": f"the client gave no answer for {key!r}"}
                out.append({"jsonrpc": "2.0", "id": rid, "error": error})
        self.asked = {}
        return out


# -- subscriptions/listen -------------------------------------------------------------------------------


def listen_filter(requested: JSON, capabilities: JSONObject) -> JSONObject:
    """The part of a ``subscriptions/listen`` filter the legacy server can honour: a list-changed
    member for each capability it declared ``listChanged`` for, the resource URIs when it declared
    ``resources.subscribe``."""
    asked = _object(requested)
    accepted: JSONObject = {}
    for member, capability in _FILTER_CAPABILITY.items():
        if asked.get(member) is True and _object(capabilities.get(capability)).get("listChanged"):
            accepted[member] = True
    uris = asked.get("resourceSubscriptions")
    if isinstance(uris, list) and _object(capabilities.get("resources")).get("subscribe"):
        accepted["resourceSubscriptions"] = [uri for uri in uris if isinstance(uri, str)]
    return accepted


def acknowledged(listen_id: JSON, accepted: JSONObject) -> JSONObject:
    """The first message of a listen stream: ``notifications/subscriptions/acknowledged`` with the
    accepted filter and the ``subscriptionId``."""
    params: JSONObject = {"notifications": accepted, "_meta": {SUBSCRIPTION_ID_META: listen_id}}
    return {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": params}


def listen_notification(message: JSONObject, listen_id: JSON, accepted: JSONObject) -> JSONObject | None:
    """A session notification as a listen stream carries it (``subscriptionId`` added to its
    ``_meta``), or ``None`` when the listener's filter did not ask for it."""
    member = LISTEN_NOTIFICATIONS.get(str(message.get("method")))
    if member is None or member not in accepted:
        return None
    params = _object(message.get("params"))
    if member == "resourceSubscriptions":
        uris = accepted["resourceSubscriptions"]
        if not isinstance(uris, list) or params.get("uri") not in uris:
            return None
    meta = {**_object(params.get("_meta")), SUBSCRIPTION_ID_META: listen_id}
    return {**message, "params": {**params, "_meta": meta}}


# -- the state ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Parked:
    """A request waiting for the client's retry: its relay, the I/O's handle on the still-open
    upstream call (opaque here), the client key that may claim it and the time it is abandoned."""

    relay: Relay
    handle: Any
    key: str
    deadline: float


class FrontCore:
    """The front's sessions and questions for one upstream, and what it learned of the upstream's era.

    One owner: the hop's :class:`~mcp_normalizer.hop.modern_front.ModernFront`. Bounded: at most
    ``max_sessions`` sessions (a new one past it ends the longest-idle idle one, else the oldest);
    a session idle ``idle_timeout`` seconds ends (``0``: never); at most ``max_parked`` questions wait
    (the oldest is abandoned past it), each at most ``input_timeout`` seconds.

    Args:
        consent: the operator's consent (``[proxy] serve_modern_hosts``); without it nothing is done.
        mode: ``[proxy] upstream_era``: ``auto`` (learned), ``legacy`` (legacy-only: served from the
            start) or ``2026-07-28`` (never served: the upstream speaks the era itself).
    """

    def __init__(
        self,
        *,
        consent: bool,
        mode: str = "auto",
        max_sessions: int = 10_000,
        idle_timeout: float = 3600.0,
        input_timeout: float = 300.0,
        max_parked: int = 10_000,
    ) -> None:
        self.consent = consent
        self.mode = mode
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.input_timeout = input_timeout
        self.max_parked = max_parked
        #: ``legacy``, ``2026-07-28`` or ``None`` (not known yet).
        self.upstream_era: str | None = {"legacy": "legacy", "2026-07-28": "2026-07-28"}.get(mode)
        self.sessions: OrderedDict[str, FrontSession] = OrderedDict()
        self.parked: OrderedDict[str, Parked] = OrderedDict()

    @property
    def active(self) -> bool:
        """2026-07-28 requests may be served (consent, and the upstream not known to speak the era)."""
        return self.consent and self.upstream_era != "2026-07-28"

    @property
    def serving(self) -> bool:
        """2026-07-28 requests are carried over legacy sessions now."""
        return self.consent and self.upstream_era == "legacy"

    def learned(self, era: str) -> None:
        """The upstream showed it speaks ``era`` (``legacy`` or ``2026-07-28``); once learned, kept."""
        if self.upstream_era is None:
            self.upstream_era = era

    # -- sessions --------------------------------------------------------------------------------

    def session(self, key: str, now: float) -> FrontSession | None:
        """The live session of ``key`` (touched), or ``None``."""
        session = self.sessions.get(key)
        if session is not None:
            session.last_used = now
            self.sessions.move_to_end(key)
        return session

    def add(self, session: FrontSession, now: float) -> list[FrontSession]:
        """Keep ``session`` for its key; the sessions ended to make room or by idleness (the I/O
        ends them upstream), the one it replaces among them."""
        ended = self.expire(now)
        replaced = self.sessions.pop(session.key, None)
        if replaced is not None:
            ended.append(replaced)
        while len(self.sessions) >= self.max_sessions:
            victim = next((s for s in self.sessions.values() if not s.busy), None) or next(iter(self.sessions.values()))
            ended.append(self.sessions.pop(victim.key))
        session.last_used = now
        self.sessions[session.key] = session
        return ended

    def drop(self, session: FrontSession) -> None:
        """Forget ``session`` (the upstream no longer knows it) if it is still the key's."""
        if self.sessions.get(session.key) is session:
            del self.sessions[session.key]

    def expire(self, now: float) -> list[FrontSession]:
        """End the sessions idle longer than ``idle_timeout``; the ones ended."""
        if self.idle_timeout <= 0:
            return []
        gone = [s for s in self.sessions.values() if not s.busy and now - s.last_used > self.idle_timeout]
        for session in gone:
            del self.sessions[session.key]
        return gone

    # -- questions waiting for the retry ---------------------------------------------------------

    def park(self, relay: Relay, handle: Any, key: str, now: float) -> tuple[str, list[Parked]]:
        """Keep ``relay`` (and ``handle``) for the client's retry: the ``requestState`` token minted
        for it, and the parked requests abandoned to make room (the I/O closes them)."""
        token = FRONT_PREFIX + secrets.token_urlsafe(24)
        dropped: list[Parked] = []
        while len(self.parked) >= self.max_parked:
            dropped.append(self.parked.popitem(last=False)[1])
        self.parked[token] = Parked(relay, handle, key, now + self.input_timeout)
        return token, dropped

    def claim(self, token: JSON, key: str, now: float) -> Parked | None:
        """The parked request a retry's ``requestState`` names, taken out; ``None`` when there is
        none (never minted, already claimed, abandoned) or another client key parked it."""
        if not isinstance(token, str):
            return None
        parked = self.parked.get(token)
        if parked is None or parked.key != key or now > parked.deadline:
            return None
        del self.parked[token]
        return parked

    def overdue(self, token: str, now: float) -> Parked | None:
        """The parked request ``token`` when its time is up (taken out), else ``None``."""
        parked = self.parked.get(token)
        if parked is None or now < parked.deadline:
            return None
        del self.parked[token]
        return parked
