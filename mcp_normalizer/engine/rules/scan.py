"""``ToolScan``: what a ``Tool`` holds, read from its compact JSON text, so that a ``tools/list``
rule that cannot change a tool costs a substring search instead of a walk of its schemas.

Each rule with a schema walk has a *gate* (:attr:`mcp_normalizer.engine.rules.base.Rule.tool_gate`):
``gate(scan, ctx)`` is ``False`` only when the rule's ``on_tool`` hook would return ``None`` for
that tool and context. A gate looks for the keys and values its rule reacts to in the tool's
canonical text (:func:`~mcp_normalizer.wire.jsoncodec.fingerprint`: compact, every key and string
written the one way the encoder writes it). There, ``"$ref":`` can only be a key named ``$ref``
(inside a string every quote is escaped, and a string followed by a colon is a key) and a boolean
value is always just after a ``:``, ``[`` or ``,``; a needle found elsewhere (a key of ``_meta``, a
property named ``nullable``) only makes the gate run the rule, which then finds nothing.

When the text cannot be had (a value the encoder refuses) or the tool nests deeper than the schema
walks allow (:data:`WALK_DEPTH`: the walk would raise and the tool is a fault), every gate opens:
the rules run as they would without gates. ``tests/test_tool_gates.py`` holds the gates to their
contract over generated schemas and the fault corpus.
"""

from __future__ import annotations

import re

from ...errors import DecodeError
from ...types import JSONObject
from ...wire.jsoncodec import fingerprint

#: JSON nesting (opening brackets, counted in the text: an upper bound on the depth) past which
#: no gate closes: :func:`~mcp_normalizer.engine.rules.schemas.map_schema` raises past 192 path
#: steps, and a path step is at least one nesting level.
WALK_DEPTH = 190

_BOOLEAN = re.compile(rb"[:\[,](?:true|false)")
#: What gates look for in a tool's whole text, found in one pass (:meth:`ToolScan.has`): each is
#: the text after a key's opening quote (the key, its closing quote and colon, maybe a value).
TOKENS = (
    b'$ref":',
    b'$schema":',
    b'$defs":',
    b'definitions":',
    b'anyOf":',
    b'oneOf":',
    b'allOf":',
    b'prefixItems":',
    b'nullable":true',
    b'properties":null',
    b'properties":[]',
    b'required":null',
    b'required":[',
    b'required":true',
    b'required":false',
    b'format":"date',
    b'format":"time"',
)
#: Each token with its opening quote: what :meth:`ToolScan.has` looks for.
_NEEDLES = {token: b'"' + token for token in TOKENS}


class ToolScan:
    """One tool's canonical text and its schemas', made when first asked for.

    Attributes:
        tool: the tool scanned (a ``tools/list`` member, decoded).
    """

    __slots__ = ("_found", "_text", "_texts", "_whole", "tool")

    def __init__(self, tool: JSONObject) -> None:
        self.tool = tool
        self._text: bytes | None | bool = False  # False: not made yet; None: cannot be made
        self._whole: bytes | None | bool = False
        self._texts: dict[str, bytes | None] = {}
        self._found: dict[bytes, bool] = {}

    @property
    def text(self) -> bytes | None:
        """The tool's :func:`~mcp_normalizer.wire.jsoncodec.fingerprint` (``None``: the encoder
        refuses it); what the catalog and the lessons key the tool by, too."""
        text = self._text
        if text is False:
            try:
                text = fingerprint(self.tool)
            except DecodeError:
                text = None
            self._text = text
        return text  # type: ignore[return-value]

    @property
    def whole(self) -> bytes | None:
        """:attr:`text` for the gates to search (``None``: none, or it nests past :data:`WALK_DEPTH`)."""
        whole = self._whole
        if whole is False:
            whole = self.text
            if whole is not None and whole.count(b"{") + whole.count(b"[") > WALK_DEPTH:
                whole = None
            self._whole = whole
        return whole  # type: ignore[return-value]

    def has(self, *tokens: bytes) -> bool:
        """True when the tool's text holds one of ``tokens`` (each one of :data:`TOKENS`, after
        a quote), or when it cannot be searched.

        Raises:
            ValueError: a token not in :data:`TOKENS` (it would never be found: a gate asking for
                it would close wrongly).
        """
        found = self._found
        for token in tokens:
            there = found.get(token)
            if there is None:
                needle = _NEEDLES.get(token)
                if needle is None:
                    raise ValueError(f"not a scan token: {token!r}")
                whole = self.whole
                there = found[token] = whole is None or needle in whole  # (a substring search: C speed)
            if there:
                return True
        return False

    def schema_has(self, key: str, needle: bytes) -> bool:
        """True when the tool's ``key`` schema (``inputSchema``, ``outputSchema``) holds ``needle``
        in its text, or when it cannot be searched; ``False`` when the tool has no such object."""
        if self.whole is None:
            return True
        if key not in self._texts:
            schema = self.tool.get(key)
            try:
                self._texts[key] = fingerprint(schema) if isinstance(schema, dict) else b""
            except DecodeError:  # pragma: no cover - the whole tool encoded, so does a part of it
                self._texts[key] = None
        text = self._texts[key]
        return text is None or needle in text

    def schema_text(self, key: str) -> bytes | None:
        """The canonical text of the tool's ``key`` schema (``b""``: no such object), ``None`` when
        it cannot be searched (every needle is then to be taken as found)."""
        self.schema_has(key, b"")  # (makes the text, once)
        return self._texts.get(key) if self.whole is not None else None

    def search(self, pattern: re.Pattern[bytes]) -> bool:
        """True when ``pattern`` matches somewhere in the tool's text, or when it cannot be searched."""
        whole = self.whole
        return whole is None or pattern.search(whole) is not None

    def has_boolean(self) -> bool:
        """True when a ``true`` or ``false`` value may be in the tool (or it cannot be searched)."""
        whole = self.whole
        return whole is None or _BOOLEAN.search(whole) is not None
