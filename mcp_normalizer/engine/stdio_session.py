"""One MCP stdio session between a client and a server, sans-IO: JSON-RPC lines in, lines out.

MCP ``basic/transports.mdx``, stdio: the client writes JSON-RPC messages to the server's stdin and
reads the server's stdout, one UTF-8 message per line, no embedded newline; the server may log on
stderr; anything else on stdout is not a message. A stdio server is one session, whatever era it
speaks (the era is the ``protocolVersion`` its ``initialize`` result chose, else what a request's
``_meta`` names).

:class:`StdioSession` is the core the stdio wrapper (:mod:`mcp_normalizer.hop.stdio_wrapper`) drives:

- :meth:`StdioSession.from_client` takes a line from the client: the requests the rules watch are
  remembered until answered (as the middleware remembers a POST's), a ``tools/call`` for a name
  rule ``tool_names`` advertised goes to the server under the server's name (the one
  request-rewriting path, :mod:`mcp_normalizer.engine.request_rewrite`); the line to write comes back.
- :meth:`StdioSession.from_server` takes a line from the server and returns a
  :class:`ServerLine`: each message goes through a :class:`~mcp_normalizer.engine.transform.ResponseTransformer`
  exactly as an SSE event of a legacy stream does (the same rules, logs, learning; a
  ``list_changed`` before the result that taught a lesson), and comes back as the lines to write.
  A line that is not a JSON-RPC message (a server that logs to stdout) is never a client's: it is
  returned as :attr:`ServerLine.noise` for the log.

No I/O, no clock beyond the transformer's slices: a long message is worked on in slices
(:attr:`ServerLine.busy`), and the driver lets the loop run between them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import DecodeError
from ..types import JSON
from ..wire.jsoncodec import loads, split_array
from ..wire.jsonrpc import TOOLS_CALL, IdKey, PendingRequest, answering, id_key, inspect_request, read_envelope
from ..wire.sse import parse_event
from .audit import AuditLog
from .exchange import Exchange
from .normalize import Normalizer
from .request_rewrite import argument_keys, enum_places, rename_calls
from .rules.clients import UNKNOWN, ClientProfile, profile_for
from .rules.lone_surrogates import may_hold as may_hold_surrogate
from .scopes import ScopeStore
from .transform import ResponseTransformer

#: Words that make a message worth the transformer's look though it answers no watched request
#: (as :mod:`mcp_normalizer.engine.transform` decides for an SSE event).
_NOTICES = (b"list_changed", b"notifications/tasks")
_BOM = b"\xef\xbb\xbf"
_EVENT_HEADERS = [(b"content-type", b"text/event-stream")]
_PREFIX = b"event: message\ndata: "
_END = b"\n\n"


@dataclass(slots=True)
class ServerLine:
    """What one line of the server becomes.

    Attributes:
        lines: the lines to write to the client, in order (without newlines).
        noise: the line when it is not a JSON-RPC message (for the log; nothing goes to the client).
        busy: the transformer is in the middle of a long message: call :meth:`resume` after
            letting the loop run, until it is ``False``.
    """

    lines: list[bytes] = field(default_factory=list)
    noise: bytes | None = None
    busy: bool = False
    _transformer: ResponseTransformer | None = None
    _out: bytes = b""
    _event: bytes = b""
    _line: bytes = b""

    def resume(self) -> None:
        """Go on with a long message (see :attr:`busy`)."""
        assert self._transformer is not None
        self._out += self._transformer.resume()
        self._settle()

    def _settle(self) -> None:
        t = self._transformer
        assert t is not None
        if t.busy or t.stalled:
            self.busy = True
            return
        self.busy = False
        self.lines = _unframed(self._out, self._event, self._line)


class StdioSession:
    """The watched state of one stdio session (see the module docstring).

    Args:
        normalizer: the rules (:class:`~mcp_normalizer.engine.normalize.Normalizer`).
        audit: where rewrites are logged.
        max_line: the longest message rewritten, in bytes; a longer one passes as it came.
    """

    def __init__(self, normalizer: Normalizer, audit: AuditLog, *, max_line: int) -> None:
        self.normalizer = normalizer
        self.audit = audit
        self.max_line = max_line
        self.store = ScopeStore()
        self.state = self.store.state("stdio")
        #: The client's requests the rules watch, until the server answers them.
        self.pending: dict[IdKey, PendingRequest] = {}
        self.era: str | None = None
        self.client: ClientProfile = UNKNOWN
        #: The era the server side speaks when it is not the client's (the era bridge), for the logs.
        self.upstream_eras: list[str] | None = None
        self._initialize: IdKey | None = None  # the id of the client's initialize request

    # -- client -> server ---------------------------------------------------------------------

    def from_client(self, line: bytes) -> bytes:
        """The line to write to the server for ``line`` from the client (renamed calls under the
        server's tool names; everything else as it came)."""
        if b'"method"' not in line and b"\\u" not in line:
            return line  # a response or garbage: the server's business
        self._initialized(line)
        info = inspect_request(line, [])
        if info is None:
            return line
        if info.client_info is not None:
            self.client = profile_for(info.client_info)
        if info.era is not None and self.era is None:
            self.era = info.era
        pending = info.pending
        exchange = self._exchange(pending)
        calls = {r.tool for r in pending.values() if r.method == TOOLS_CALL and r.tool is not None}
        names = exchange.names(self.normalizer.config, calls) or {}
        config = self.normalizer.config
        keys = argument_keys(exchange, pending, names, lambda tool: config.tool(tool).model_api)
        enums = enum_places(exchange, pending, names, lambda tool: config.tool(tool).model_api)
        renamed = rename_calls(line, pending, names, keys, enums) if names or keys or enums else None
        if renamed is not None:
            line, pending, _ = renamed
        self.pending.update(pending)
        return line

    def _initialized(self, line: bytes) -> None:
        """Remember an ``initialize`` request's id (its result names the era) and its client."""
        if b'"initialize"' not in line:
            return
        try:
            message = loads(line)
        except DecodeError:
            return
        if not isinstance(message, dict) or message.get("method") != "initialize":
            return
        self._initialize = id_key(message.get("id"))
        params = message.get("params")
        if isinstance(params, dict):
            self.client = profile_for(params.get("clientInfo"))
            version = params.get("protocolVersion")
            self.era = version if isinstance(version, str) else self.era

    # -- server -> client ---------------------------------------------------------------------

    def from_server(self, line: bytes) -> ServerLine:
        """What ``line`` from the server becomes (see :class:`ServerLine`). A line that is not one
        whole JSON value in UTF-8 (a log line, two messages run together, invalid bytes) is
        :attr:`ServerLine.noise`: the client never sees it."""
        line = line.removeprefix(_BOM)  # (a BOM means nothing inside a stream; never relayed)
        stripped = line.lstrip()
        if not stripped:
            return ServerLine()  # an empty line: nothing to relay
        if stripped[:1] not in (b"{", b"["):
            return ServerLine(noise=line)
        if len(line) > self.max_line:  # not rewritten, but only a whole message is relayed
            return ServerLine([line]) if self._long_message(line) else ServerLine(noise=line)
        try:
            message = loads(line)
        except DecodeError:
            return ServerLine(noise=line)
        if not _is_jsonrpc(message):
            return ServerLine(noise=line)  # JSON, but no message (``{}``, ``[]``, a logged object)
        pending, sole = self._answered(message)
        if not pending and not any(word in line for word in _NOTICES) and not may_hold_surrogate(line):
            return ServerLine([line])  # what the transformer passes untouched, without its cost
        exchange = self._exchange(pending, sole)
        transformer = ResponseTransformer(
            exchange, self.normalizer, self.audit, max_json_bytes=self.max_line, max_event_bytes=self.max_line + 64
        )
        transformer.start(200, _EVENT_HEADERS)
        event = _PREFIX + line + _END
        result = ServerLine(_transformer=transformer, _event=event, _line=line)
        result._out = transformer.feed(event) + transformer.finish()
        result._settle()
        return result

    def _long_message(self, line: bytes) -> bool:
        """Is ``line`` (longer than :attr:`max_line`) one JSON-RPC message or a batch of them? Read
        without building it (only ids and methods are decoded); the requests it answers are no
        longer pending."""
        try:
            items = split_array(line) if line.lstrip()[:1] == b"[" else [line]
            envelopes = [read_envelope(item) for item in items]
        except DecodeError:
            return False
        if not envelopes or not all(e.response or isinstance(e.method, str) for e in envelopes):
            return False
        for envelope in envelopes:
            key = id_key(envelope.id) if envelope.response else None
            if key is not None:
                self.pending.pop(key, None)
        return True

    def answered_long(self, head: bytes, tail: bytes) -> None:
        """A message longer than :attr:`max_line` went to the client as it came: the request it
        answers (by :func:`long_line_id`) is no longer pending."""
        key = long_line_id(head, tail)
        if key is not None:
            self.pending.pop(key, None)

    def _answered(self, message: JSON) -> tuple[dict[IdKey, PendingRequest], IdKey | None]:
        """The watched requests ``message`` (a response, or a batch of them) answers, taken out of
        :attr:`pending`, and the one whose id it spells otherwise (``"1"`` for ``1``: rule
        ``jsonrpc_id`` stamps the request's own); an ``initialize`` result also sets the era."""
        found: dict[IdKey, PendingRequest] = {}
        sole: IdKey | None = None
        for one in message if isinstance(message, list) else [message]:
            if not isinstance(one, dict) or "method" in one or "id" not in one:
                continue  # a request or notification of the server's, or not a message
            key = id_key(one["id"])
            if key is not None and key == self._initialize:
                self._initialize = None
                result = one.get("result")
                version = result.get("protocolVersion") if isinstance(result, dict) else None
                self.era = version if isinstance(version, str) else self.era
            answers = answering(one["id"], self.pending)
            if answers is not None and answers == key:
                found[key] = self.pending.pop(key)
            elif answers is not None and not isinstance(message, list):
                sole = answers  # the request's id in another type (one rule: wire.jsonrpc.same_value)
                found[sole] = self.pending.pop(sole)
        return found, sole

    def _exchange(self, pending: dict[IdKey, PendingRequest], sole: IdKey | None = None) -> Exchange:
        return Exchange(
            pending,
            self.era,
            "stdio",
            self.state,
            self.store.public,
            sole=sole,
            client=self.normalizer.config.for_client(self.client),
            private=True,
            upstream_eras=self.upstream_eras,
        )


def _is_jsonrpc(message: JSON) -> bool:
    """Is ``message`` a JSON-RPC message (an object naming ``jsonrpc``) or a batch of them?"""
    if isinstance(message, dict):
        return "jsonrpc" in message
    return isinstance(message, list) and bool(message) and all(isinstance(m, dict) and "jsonrpc" in m for m in message)


_STRING = rb'"(?:[^"\\]|\\.)*"'
_SCALAR = rb"(?:" + _STRING + rb"|-?\d[\d.eE+-]*|true|false|null)"
_MEMBER = rb"\s*" + _STRING + rb"\s*:\s*" + _SCALAR + rb"\s*"
_ID_VALUE = rb'("(?:[^"\\]|\\.)*"|-?\d+)'
#: ``"id"`` among the scalar members that open a message (``{"jsonrpc":"2.0","id":1,"result":...``).
_HEAD_ID = re.compile(rb"\A\s*\{(?:" + _MEMBER + rb",)*?\s*\"id\"\s*:\s*" + _ID_VALUE)
#: ``"id"`` among the scalar members that close one (``...},"jsonrpc":"2.0","id":3}``): nothing but
#: scalars between it and the last brace, so it is a member of the message itself.
_TAIL_ID = re.compile(rb"[,{]\s*\"id\"\s*:\s*" + _ID_VALUE + rb"\s*(?:," + _MEMBER + rb")*\}\s*\Z")


_HEAD_METHOD = re.compile(rb"\A\s*\{(?:" + _MEMBER + rb",)*?\s*\"method\"\s*:")
_TAIL_METHOD = re.compile(rb"[,{]\s*\"method\"\s*:\s*" + _SCALAR + rb"\s*(?:," + _MEMBER + rb")*\}\s*\Z")


def long_line_id(head: bytes, tail: bytes) -> IdKey | None:
    """The id key of a message too long to read whole, from its first and last bytes (``head``,
    ``tail``: a few KiB each), when its top-level ``"id"`` sits among the scalar members that open
    or close it (every SDK writes it there); ``None`` when neither shows it."""
    if _HEAD_METHOD.match(head) or _TAIL_METHOD.search(tail):
        return None  # a request of the server's (sampling, elicitation): it answers nothing
    found = _HEAD_ID.match(head) or _TAIL_ID.search(tail)
    if found is None:
        return None
    try:
        return id_key(loads(found.group(1)))
    except DecodeError:
        return None


def request_id(head: bytes, tail: bytes) -> IdKey | None:
    """The id key of a client's request too long to read whole (as :func:`long_line_id`, but a
    message with a ``method`` counts: here it is the request); ``None`` when neither end shows it
    (a notification, or a message that cannot be read)."""
    found = _HEAD_ID.match(head) or _TAIL_ID.search(tail)
    if found is None:
        return None
    try:
        return id_key(loads(found.group(1)))
    except DecodeError:
        return None


def _unframed(out: bytes, event: bytes, line: bytes) -> list[bytes]:
    """The lines of the transformer's output ``out`` for the one ``event`` fed (``line`` framed)."""
    if out == event:
        return [line]  # untouched: the line as it came, byte for byte
    lines: list[bytes] = []
    for block in out.split(_END):
        if not block.strip():
            continue
        data = parse_event(block + _END).data
        if data is not None:
            # A spliced value may keep the server's own line breaks (promoted pretty-printed JSON):
            # outside strings they are whitespace (inside one JSON escapes them), and a stdio
            # message must not hold one (basic/transports.mdx).
            lines.append(data.replace(b"\n", b" ") if b"\n" in data else data)
    return lines


__all__ = ["ServerLine", "StdioSession"]
