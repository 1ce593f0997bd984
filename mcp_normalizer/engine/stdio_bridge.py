"""The era bridge over stdio, sans-IO: a legacy host in front of a stdio server that speaks only 2026-07-28.

``mcp-normalizer stdio -- CMD`` starts a server a host could not use when the host speaks only the
legacy eras (``initialize``, a session) and the server only 2026-07-28 (no ``initialize``; over
stdio every request carries its protocol fields in ``params._meta``; the server asks for input
with an ``InputRequiredResult`` instead of sending requests; ``S2026-07-28/basic/index.mdx``,
``S2026-07-28/basic/patterns/mrtr.mdx``, ``S2026-07-28/basic/patterns/cancellation.mdx``). This is
the HTTP bridge's core (:class:`~mcp_normalizer.engine.era_bridge.BridgedSession` makes every
translation) driven line by line for the one session a stdio server is:

======================================== =================================================================
the host sends                           the bridge
======================================== =================================================================
``initialize``                           ``auto``: to the server as it came; a JSON-RPC error for it is
                                         followed by ``server/discover`` (the host's capabilities and
                                         ``clientInfo``, an id the bridge mints); a result naming a
                                         stateless version turns bridging on and the host gets
                                         :func:`~mcp_normalizer.engine.era_bridge.initialize_result`,
                                         else the server's error as it came. ``2026-07-28``: only
                                         ``server/discover`` is sent. A server that answers
                                         ``initialize`` is never bridged (every later line passes).
``notifications/initialized``            not sent; the server's list changes and subscribed resources
                                         are listened to (``subscriptions/listen``, if it has any)
``ping``, ``logging/setLevel``,          answered by the session (the level goes with every request,
``resources/(un)subscribe``              a changed subscription restarts the listen request)
a request                                in the stateless form, under the host's id (first round)
its ``input_required`` result            each question goes to the host as the legacy request it is,
                                         under an id the bridge mints; with every answer the request
                                         goes again: a new id, ``inputResponses``, ``requestState``
``notifications/cancelled``              for the request's upstream id in flight (stdio cancels with
                                         the notification in 2026-07-28 too); while the host is being
                                         asked, its questions are cancelled instead
======================================== =================================================================

The server's notifications (progress, log messages, list changes) pass; those of the listen request
lose its ``subscriptionId``; its acknowledgement, its end (``notifications/cancelled`` from the
server, or a result) and every answer to an id the bridge minted and no longer waits for are not
relayed. Results and errors keep the server's bytes (numbers as written: ``12.50``, ``1e-7``): only
the envelope and the members the era adds (``resultType``, ``ttlMs``, ``cacheScope``) change.

Bounded: at most ``max_in_flight`` bridged requests in flight or waiting for the host's answers (a
request past it is answered with an error at once) and ``max_asks`` questions to the host
unanswered. A batch from the host (2025-03-26) is taken apart: 2026-07-28 has none.

:class:`StdioBridge` takes lines and returns a :class:`Relay` (lines for the server, lines for the
host, notes for the log); :mod:`mcp_normalizer.hop.stdio_wrapper` writes them, and runs every line
for the host through the rules (:class:`~mcp_normalizer.engine.stdio_session.StdioSession`) as a
native server's line. No I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

from ..errors import DecodeError
from ..types import JSON, JSONObject
from ..wire.jsoncodec import Raw, dumps, loads, split_array, split_object
from ..wire.jsonrpc import IdKey, id_key
from ..wire.modern import SUBSCRIPTION_ID_META
from .era_bridge import (
    MAX_ROUNDS,
    MAX_SESSION_BYTES,
    SESSION_PREFIX,
    Ask,
    BridgedSession,
    Complete,
    discover_request,
    initialize_result,
    is_refusal,
    legacy_notification,
    stateless_version,
)

__all__ = ["MAX_ASKS", "MAX_IN_FLIGHT", "Relay", "StdioBridge"]

#: Bridged requests in flight at once (sent, or waiting for the host's answers to the server's questions).
MAX_IN_FLIGHT = 1024
#: Questions to the host (``elicitation/create``, ``sampling/createMessage``, ``roots/list``) unanswered at once.
MAX_ASKS = 256
#: The notifications of a legacy host that 2026-07-28 does not define (never sent to the server).
LEGACY_NOTIFICATIONS = frozenset(
    {
        "notifications/initialized",
        "notifications/roots/list_changed",
        "notifications/progress",  # (2026-07-28: only the server reports progress)
        "notifications/elicitation/complete",
    }
)
_STATELESS = "2026-07-28"

State = Literal["waiting", "initializing", "discovering", "bridging", "off"]


@dataclass(slots=True)
class Relay:
    """What one line becomes.

    Attributes:
        to_server: lines to write to the server, in order (without newlines).
        to_client: lines for the host, in order (without newlines): each still goes through the rules.
        notes: what the log should say (the bridge turned on, a refused listen request).
    """

    to_server: list[bytes] = field(default_factory=list)
    to_client: list[bytes] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Flight:
    """One host request the bridge carries: its legacy form, and where it is."""

    message: JSONObject  # the host's request (params shallow: members other than ``_meta`` undecoded)
    host_key: IdKey
    upstream_key: IdKey | None = None  # the id it is in flight under (None: the host is being asked)
    rounds: int = 0
    asks: dict[IdKey, str] = field(default_factory=dict)  # minted id -> its ``inputRequests`` key
    answers: dict[IdKey, JSONObject] = field(default_factory=dict)
    state: JSON = None


class StdioBridge:
    """The era bridge of one stdio session (see the module docstring).

    Args:
        mode: ``[proxy] upstream_era``: ``auto`` (bridge once the server refused ``initialize`` and
            answered ``server/discover``), ``2026-07-28`` (always bridge; ``initialize`` never sent)
            or ``legacy`` (never: every line passes).
        max_in_flight: bridged requests in flight at once.
        max_asks: questions to the host unanswered at once.

    Attributes:
        state: ``waiting`` (for the host's ``initialize``), ``initializing`` (the server has it),
            ``discovering`` (``server/discover`` sent), ``bridging`` or ``off`` (every line passes).
        session: the bridged session, once bridging.
        version: the 2026-07-28-era version spoken to the server, once known.
    """

    def __init__(self, mode: str = "auto", *, max_in_flight: int = MAX_IN_FLIGHT, max_asks: int = MAX_ASKS) -> None:
        self.mode = mode
        self.max_in_flight = max_in_flight
        self.max_asks = max_asks
        self.state: State = "off" if mode == "legacy" else "waiting"
        self.session: BridgedSession | None = None
        self.version: str | None = _STATELESS if mode == _STATELESS else None
        self._minted = 0
        self._initialize: JSONObject | None = None  # the host's initialize, while it is being answered
        self._refusal: bytes | None = None  # the server's error for it (auto), given back if discover fails
        self._probe: IdKey | None = None  # the id of the server/discover in flight
        self._probed: str | None = None  # the version it was sent for
        self._listen: IdKey | None = None  # the subscriptions/listen request open
        self._filter = -1  # the session's filter_version it was opened for
        self._by_upstream: dict[IdKey, _Flight] = {}
        self._by_host: dict[IdKey, _Flight] = {}
        self._by_ask: dict[IdKey, _Flight] = {}

    @property
    def active(self) -> bool:
        """Lines must go through the bridge (``False``: every line passes as it came)."""
        return self.state != "off"

    @property
    def bridging(self) -> bool:
        """The host is bridged to a 2026-07-28 server now."""
        return self.state == "bridging"

    # -- the host's lines ---------------------------------------------------------------------

    def from_client(self, line: bytes) -> Relay:
        """What a line from the host becomes (see :class:`Relay`). A line that is not a JSON-RPC
        message goes to the server as it came (its business, as without the bridge)."""
        if self.state == "off":
            return Relay([line])
        if self.state != "bridging":
            return self._before(line)
        message = _shallow(line)
        if message is None:
            items = _items(line)
            if items is None:
                return Relay([line])
            relay = Relay()
            for item in items:
                one = self.from_client(item)
                relay.to_server += one.to_server
                relay.to_client += one.to_client
                relay.notes += one.notes
            return relay
        method = message.get("method")
        if not isinstance(method, str):
            return self._host_answer(line, message)
        if "id" not in message:
            return self._host_notification(line, message, method)
        return self._host_request(message)

    def _before(self, line: bytes) -> Relay:
        """A host line before bridging: only ``initialize`` is looked at."""
        if b"initialize" not in line or self.state != "waiting":
            return Relay([line])
        message = _whole(line)
        if message is None or message.get("method") != "initialize" or id_key(message.get("id")) is None:
            return Relay([line])
        self._initialize = message
        if self.mode == _STATELESS:
            return Relay([self._discover(_STATELESS)])
        self.state = "initializing"
        return Relay([line])

    def _discover(self, version: str) -> bytes:
        assert self._initialize is not None
        request = discover_request(self._initialize, version)
        request["id"] = self._mint("discover")
        self._probe = id_key(request["id"])
        self._probed = version
        self.state = "discovering"
        return dumps(request)

    def _host_answer(self, line: bytes, message: JSONObject) -> Relay:
        """The host's response: to one of the server's questions, or (not minted) the server's."""
        key = id_key(_decoded(message.get("id")))
        flight = self._by_ask.pop(key, None) if key is not None else None
        if flight is None:
            return Relay() if _is_minted(key) else Relay([line])  # (a question cancelled, answered late)
        assert key is not None  # (found under it)
        flight.answers[key] = message
        if len(flight.answers) < len(flight.asks):
            return Relay()
        responses: JSONObject = {}
        for ask, answer in flight.answers.items():
            if "result" not in answer:
                error = _decoded(answer.get("error"))
                text = error.get("message") if isinstance(error, dict) else None
                reason = f"the client could not answer the server's {flight.asks[ask]!r} request: {text}"
                self._land(flight)
                return Relay(to_client=[dumps(_error(flight.message.get("id"), reason))])
            responses[flight.asks[ask]] = answer["result"]
        return self._retry(flight, responses)

    def _host_notification(self, line: bytes, message: JSONObject, method: str) -> Relay:
        session = self.session
        assert session is not None
        if method == "notifications/initialized":
            return self._listen_again()
        if method == "notifications/cancelled":
            return self._cancel(message)
        if method in LEGACY_NOTIFICATIONS:
            return Relay()
        return Relay([dumps(session.stateless(message))])

    def _host_request(self, message: JSONObject) -> Relay:
        session = self.session
        assert session is not None
        rid = message.get("id")
        key = id_key(rid)
        filters = session.filter_version
        local = session.local_answer(message)
        if local is not None:
            relay = Relay(to_client=[dumps(local)])
            if session.filter_version != filters and self._filter >= 0:  # (listening since initialized)
                more = self._listen_again()
                relay.to_server += more.to_server
            return relay
        if key is None:
            return Relay(to_client=[dumps(_error(rid, "a request id must be a string or an integer", -32600))])
        if len(self._by_host) >= self.max_in_flight:
            reason = f"the proxy carries at most {self.max_in_flight} requests to this server at once"
            return Relay(to_client=[dumps(_error(rid, reason))])
        if key in self._by_host or key in self._by_upstream:
            return Relay(to_client=[dumps(_error(rid, "a request with this id is already in flight", -32600))])
        flight = _Flight(message, key, upstream_key=key)
        self._by_host[key] = flight
        self._by_upstream[key] = flight
        return Relay([dumps(session.stateless(message))])

    def _cancel(self, message: JSONObject) -> Relay:
        """``notifications/cancelled`` from the host: for the request's upstream id, or its questions."""
        session = self.session
        assert session is not None
        params = _decoded(message.get("params"))
        params = params if isinstance(params, dict) else {}
        key = id_key(params.get("requestId"))
        flight = self._by_host.get(key) if key is not None else None
        if flight is None:
            return Relay()  # answered already, or never ours (receivers MAY ignore it)
        upstream = flight.upstream_key
        self._land(flight)
        if upstream is not None:
            notice: JSONObject = {"method": "notifications/cancelled", "params": {**params, "requestId": upstream[1]}}
            return Relay([dumps(session.stateless(notice))])
        relay = Relay()
        for ask in flight.asks:
            if ask not in flight.answers:
                cancelled = {"requestId": ask[1], "reason": "the request was cancelled"}
                relay.to_client.append(
                    dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled})
                )
        return relay

    def _listen_again(self) -> Relay:
        """(Re)open the ``subscriptions/listen`` request for the session's filter, ending the open one."""
        session = self.session
        assert session is not None
        relay = Relay()
        if self._listen is not None:
            notice: JSONObject = {"method": "notifications/cancelled", "params": {"requestId": self._listen[1]}}
            relay.to_server.append(dumps(session.stateless(notice)))
            self._listen = None
        request = session.listen_request(self._mint("listen"))
        self._filter = session.filter_version
        if request is not None:
            self._listen = id_key(request["id"])
            relay.to_server.append(dumps(request))
        return relay

    # -- the server's lines ---------------------------------------------------------------------

    def from_server(self, line: bytes) -> Relay:
        """What a line from the server becomes (see :class:`Relay`). A line that is not one JSON-RPC
        message goes to the host's side as it came, where the rules tell noise from messages."""
        if self.state in ("off", "waiting"):
            return Relay(to_client=[line])
        message = _shallow(line)
        if message is None:
            return Relay(to_client=[line])
        if self.state == "initializing":
            return self._initialize_answer(line, message)
        if self.state == "discovering":
            return self._discover_answer(line, message)
        method = message.get("method")
        if isinstance(method, str):
            return self._server_notification(line, message, method)
        key = id_key(_decoded(message.get("id")))
        flight = self._by_upstream.pop(key, None) if key is not None else None
        if flight is None:
            if _is_minted(key):
                return self._stale(key, message)
            return Relay(to_client=[line])  # a cancelled request's late answer, as without the bridge
        flight.upstream_key = None
        return self._outcome(flight, message)

    def _initialize_answer(self, line: bytes, message: JSONObject) -> Relay:
        assert self._initialize is not None
        if "method" in message or id_key(_decoded(message.get("id"))) != id_key(self._initialize.get("id")):
            return Relay(to_client=[line])
        if is_refusal(0, message):
            self._refusal = line
            return Relay([self._discover(_STATELESS)])
        self.state = "off"  # a server that answers initialize: a native session, never bridged
        self._initialize = None
        return Relay(to_client=[line])

    def _discover_answer(self, line: bytes, message: JSONObject) -> Relay:
        assert self._initialize is not None and self._probed is not None
        if "method" in message or id_key(_decoded(message.get("id"))) != self._probe:
            return Relay(to_client=[line])
        self._probe = None
        result = _decoded(message.get("result"))
        discovered = result if isinstance(result, dict) else None
        version = self.version if self.mode == _STATELESS else stateless_version(discovered)
        if discovered is not None and version is not None and version != self._probed:
            return Relay([self._discover(version)])  # asked again in the version it speaks
        initialize, refusal = self._initialize, self._refusal
        self._initialize = self._refusal = None
        if discovered is None or version is None:
            self.state = "waiting"  # (a host that tries again is probed again)
            if refusal is not None:
                return Relay(to_client=[refusal])
            error = _decoded(message.get("error"))
            text = error.get("message") if isinstance(error, dict) else "no DiscoverResult"
            reason = f"the 2026-07-28 server did not answer server/discover: {text}"
            return Relay(to_client=[dumps(_error(initialize.get("id"), reason))])
        params = initialize.get("params")
        params = params if isinstance(params, dict) else {}
        try:
            kept = len(dumps([params.get("capabilities"), params.get("clientInfo")]))
        except DecodeError:
            kept = MAX_SESSION_BYTES + 1  # (a lone surrogate: nothing a session can send on)
        if kept > MAX_SESSION_BYTES:
            self.state = "waiting"
            reason = f"the client's capabilities and info are {kept} bytes; a session keeps at most {MAX_SESSION_BYTES}"
            return Relay(to_client=[dumps(_error(initialize.get("id"), reason, -32602))])
        answer = initialize_result(initialize, discovered)
        info = params.get("clientInfo")
        capabilities = params.get("capabilities")
        self.session = BridgedSession(
            id=SESSION_PREFIX + "stdio",
            version=version,
            legacy_version=str(answer["protocolVersion"]),
            capabilities=capabilities if isinstance(capabilities, dict) else {},
            client_info=info if isinstance(info, dict) else None,
            server_capabilities=_object(discovered.get("capabilities")),
            credential=None,
        )
        self.version = version
        self.state = "bridging"
        note = (
            f"the server answered server/discover for {version}"
            + (" after refusing initialize" if refusal is not None else "")
            + f": the host is bridged ({answer['protocolVersion']} to {version})"
        )
        response = {"jsonrpc": "2.0", "id": initialize.get("id"), "result": answer}
        return Relay(to_client=[dumps(response)], notes=[note])

    def _server_notification(self, line: bytes, message: JSONObject, method: str) -> Relay:
        if "id" in message:
            return Relay(to_client=[line])  # a request (2026-07-28 has none over stdio): the host's business
        if method == "notifications/cancelled":
            params = _decoded(message.get("params"))
            key = id_key(params.get("requestId")) if isinstance(params, dict) else None
            if _is_minted(key):
                if key == self._listen:
                    self._listen = None
                    return Relay(notes=["the server ended the subscriptions/listen request"])
                return Relay()
            return Relay(to_client=[line])
        if b"subscriptions/acknowledged" not in line and SUBSCRIPTION_ID_META.encode() not in line:
            return Relay(to_client=[line])  # progress, a log message: as it came, byte for byte
        whole = _whole(line)
        out = legacy_notification(whole) if whole is not None else None
        if out is None:
            return Relay()
        return Relay(to_client=[line if out is whole else dumps(out)])

    def _stale(self, key: IdKey | None, message: JSONObject) -> Relay:
        """An answer to an id the bridge minted and waits for no longer (a listen request's end, a
        cancelled retry): never the host's."""
        if key is not None and key == self._listen:
            self._listen = None
            error = _decoded(message.get("error"))
            if isinstance(error, dict):
                return Relay(notes=[f"the server refused subscriptions/listen: {error.get('message')}"])
            return Relay(notes=["the server ended the subscriptions/listen request"])
        return Relay()

    def _outcome(self, flight: _Flight, response: JSONObject) -> Relay:
        session = self.session
        assert session is not None
        outcome = session.answer(flight.message, _result_of(response))
        if isinstance(outcome, Complete):
            self._land(flight)
            return Relay(to_client=[dumps(outcome.message)])
        return self._ask(flight, outcome)

    def _ask(self, flight: _Flight, ask: Ask) -> Relay:
        if not ask.requests:
            flight.state = ask.state
            return self._retry(flight, {})
        waiting = len(self._by_ask)
        if waiting + len(ask.requests) > self.max_asks:
            self._land(flight)
            reason = f"the server asked {len(ask.requests)} questions; the proxy keeps at most {self.max_asks} open"
            return Relay(to_client=[dumps(_error(flight.message.get("id"), reason))])
        flight.asks = dict(ask.keys)
        flight.answers = {}
        flight.state = ask.state
        for key in flight.asks:
            self._by_ask[key] = flight
        return Relay(to_client=[dumps(request) for request in ask.requests])

    def _retry(self, flight: _Flight, responses: JSONObject) -> Relay:
        session = self.session
        assert session is not None
        for key in flight.asks:
            self._by_ask.pop(key, None)
        flight.asks, flight.answers = {}, {}
        flight.rounds += 1
        if flight.rounds > MAX_ROUNDS:
            self._land(flight)
            reason = f"the server asked for input more than {MAX_ROUNDS} times"
            return Relay(to_client=[dumps(_error(flight.message.get("id"), reason))])
        new_id = self._mint(f"retry.{flight.rounds}")
        upstream = id_key(new_id)
        assert upstream is not None
        flight.upstream_key = upstream
        self._by_upstream[upstream] = flight
        return Relay([dumps(session.retry(flight.message, new_id, responses, flight.state))])

    def _land(self, flight: _Flight) -> None:
        """The request is done (answered, failed or cancelled): forget it."""
        self._by_host.pop(flight.host_key, None)
        if flight.upstream_key is not None:
            self._by_upstream.pop(flight.upstream_key, None)
            flight.upstream_key = None
        for key in flight.asks:
            self._by_ask.pop(key, None)

    def _mint(self, what: str) -> str:
        self._minted += 1
        return f"{SESSION_PREFIX}{what}.{self._minted}"

    # -- the wrapper's questions ----------------------------------------------------------------

    def forget(self, key: IdKey | None) -> IdKey | None:
        """The host's id of the request the bridge carries under the server's id ``key``, which is
        then forgotten (the wrapper answers a line it cannot relay, too long or not a message, with
        an error for it); ``None`` when the bridge carries no request under ``key``."""
        flight = self._by_upstream.get(key) if key is not None else None
        if flight is None:
            return None
        self._land(flight)
        return flight.host_key

    def unanswered(self) -> list[IdKey]:
        """The host's requests the bridge carries and the server never answered (the server
        exited): each needs an error. They are forgotten."""
        keys = list(self._by_host)
        self._by_host.clear()
        self._by_upstream.clear()
        self._by_ask.clear()
        return keys


def _shallow(line: bytes) -> JSONObject | None:
    """One JSON-RPC message with only its envelope decoded (``jsonrpc``, ``id``, ``method``, and a
    request's or notification's ``params`` but its ``arguments``), the rest as undecoded texts (a
    result, an error, the arguments: written back as they came), or ``None``."""
    stripped = line.lstrip()
    if stripped[:1] != b"{":
        return None
    try:
        members = split_object(line)
    except DecodeError:
        return None
    if "jsonrpc" not in members:
        return None
    message: dict[str, Any] = dict(members)
    try:
        for name in ("jsonrpc", "id", "method"):
            if name in members:
                message[name] = loads(members[name])
        if "params" in members and isinstance(message.get("method"), str):
            params: dict[str, Any] = dict(split_object(members["params"]))
            for name, text in params.items():
                if name != "arguments":  # (what the bridge reads: _meta, a level, a uri)
                    params[name] = loads(text)
            message["params"] = params
    except DecodeError:
        return None
    return message


def _result_of(response: JSONObject) -> JSONObject:
    """The server's response with its ``result`` as :meth:`BridgedSession.answer` reads it: the
    members undecoded but ``resultType`` (all of it when the server asks for input)."""
    raw = response.get("result")
    if not isinstance(raw, Raw):
        return response
    try:
        members = split_object(raw)
    except DecodeError:
        return response  # not an object: as it came
    kind = loads(members["resultType"]) if "resultType" in members else None
    if kind == "input_required":
        return {**response, "result": loads(raw)}
    result: dict[str, Any] = dict(members)
    if kind is not None:
        result["resultType"] = kind
    return {**response, "result": result}


def _decoded(value: Any) -> JSON:
    """``value`` decoded when it is an undecoded text (``None`` for one that is not JSON)."""
    if isinstance(value, Raw):
        try:
            return loads(value)
        except DecodeError:
            return None
    return cast(JSON, value)


def _whole(line: bytes) -> JSONObject | None:
    try:
        value = loads(line)
    except DecodeError:
        return None
    return value if isinstance(value, dict) else None


def _items(line: bytes) -> list[bytes] | None:
    """The messages of a batch line, each as its own line, or ``None``."""
    if line.lstrip()[:1] != b"[":
        return None
    try:
        return [bytes(item) for item in split_array(line)]
    except DecodeError:
        return None


def _is_minted(key: IdKey | None) -> bool:
    return key is not None and key[0] == "s" and str(key[1]).startswith(SESSION_PREFIX)


def _object(value: JSON) -> JSONObject:
    return value if isinstance(value, dict) else {}


def _error(rid: JSON, text: str, code: int = -32603) -> JSONObject:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": text}}
