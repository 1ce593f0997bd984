"""JSON for messages the proxy may rewrite: plain values to judge, the original bytes to write.

Decoding gives plain Python values only (``dict``, ``list``, ``str``, ``int`` of any size, ``float``,
``bool``, ``None``), so every validator, rule and test sees the numbers the clients see (MCP's
clients parse JSON numbers as IEEE doubles; 23-digit integers stay exact Python ints here, as in the
Python SDK). How a number was *written* (``1.10``, ``1e-7``, ``-0``, ``100.0`` vs ``1E2``) is not
kept in the values: a :class:`Codec` remembers, by identity, the bytes each value it decoded came
from, and writes a rewritten message by copying every part no rule changed byte for byte (splicing)
and encoding only what is new. Parts a rule moved elsewhere (an error's ``structuredContent`` into
``_meta``, a replaced value into ``original-values``) keep their bytes too.

Numbers outside the double range (``1e400``) and the non-standard literals (``NaN``, ``Infinity``)
make a document undecodable here (:class:`~mcp_normalizer.errors.DecodeError`): clients disagree on them
(JavaScript reads ``1e400`` as ``Infinity``, jsonschema-rs as ``null``), so such a message passes
through untouched. A message with a lone surrogate escape (``"\\ud800"``, RFC 8259 section 8.2:
not interoperable) is decoded but cannot be written back, so it is never rewritten.

Decoding large documents makes many containers at once; :func:`quiet_gc` keeps the cyclic garbage
collector from walking them while a message is handled (see its docstring).
"""

from __future__ import annotations

import gc
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import msgspec

from ..errors import DecodeError
from ..types import JSON

#: Undecoded JSON text: a member the proxy did not need to look into. Encoding writes it verbatim.
Raw = msgspec.Raw

_DECODE = msgspec.json.Decoder()
_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])
_ENCODE = msgspec.json.Encoder()
_SORTED = msgspec.json.Encoder(order="sorted")
_QUIET_GC_BYTES = 64 * 1024  # smaller documents make too few containers to start a collection


def loads(data: bytes | bytearray | memoryview | str | Raw) -> JSON:
    """Decode one JSON text (RFC 8259) into plain Python values.

    Args:
        data: UTF-8 bytes (or a str, or a :data:`Raw`) holding exactly one JSON value.

    Returns:
        dict, list, str, int (exact, any size), float, bool or None.

    Raises:
        DecodeError: not JSON, not UTF-8 (RFC 8259 section 8.1), a number outside the double
            range, a lone surrogate escape, or nesting deeper than the decoder's limit.
    """
    if isinstance(data, str):
        try:
            data = data.encode()
        except UnicodeEncodeError:
            raise DecodeError("not JSON: a lone surrogate") from None
    if isinstance(data, bytearray):
        data = bytes(data)
    try:
        return _DECODE.decode(data)
    except (msgspec.DecodeError, ValueError, RecursionError) as exc:
        reason = str(exc)
    return _strict_loads(data, reason)


def _strict_loads(data: bytes | memoryview | Raw, reason: str) -> JSON:
    """The standard library's verdict on what msgspec refused: it takes a lone surrogate escape
    (``"\\ud800"``, valid JSON syntax that msgspec declines) and refuses everything else msgspec does."""
    try:
        return json.loads(bytes(data).decode("utf-8"), parse_float=_finite, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise DecodeError(f"not JSON: {reason}") from None


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number outside the double range")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


#: A text nesting deeper than the C decoder recurses (about 1,000 levels) is read again with a loop
#: only when it is at most this long and nests at most :data:`MAX_DEPTH` levels: the loop costs about
#: a microsecond a token, and a hostile 100,000-level ``tools/list`` must not hold every other
#: session for seconds. Past either bound the message passes through unread.
DEEP_BYTES = 64 * 1024
#: The deepest nesting the proxy reads (see :data:`DEEP_BYTES`).
MAX_DEPTH = 4096


def split_object(raw: bytes | memoryview | Raw) -> dict[str, Raw]:
    """The members of a JSON object as undecoded texts (one C pass; duplicate names: the last wins).

    When a member nests deeper than the decoder recurses, a text of at most :data:`DEEP_BYTES`
    is read again with a loop (grammar checked throughout, :data:`MAX_DEPTH` levels at most), so
    one hostile member of a small message does not hide the others.

    Raises:
        DecodeError: ``raw`` is not one JSON object, or nests too deep to read within the bounds.
    """
    try:
        return _OBJECT.decode(raw)
    except RecursionError:
        return {name: text for name, text in _split_deep(bytes(raw), object_=True) if name is not None}
    except (msgspec.DecodeError, ValueError) as exc:
        raise DecodeError(f"not a JSON object: {exc}") from None


def split_array(raw: bytes | memoryview | Raw) -> list[Raw]:
    """The items of a JSON array as undecoded texts (deep items cut out as by :func:`split_object`).

    Raises:
        DecodeError: ``raw`` is not one JSON array.
    """
    try:
        return _ARRAY.decode(raw)
    except RecursionError:
        return [text for _, text in _split_deep(bytes(raw), object_=False)]
    except (msgspec.DecodeError, ValueError) as exc:
        raise DecodeError(f"not a JSON array: {exc}") from None


def join_object(members: Mapping[str, Any]) -> bytes:
    """The JSON object of ``members`` (undecoded texts, as :func:`split_object` gives, or lists
    and objects of them), each text copied as it is; the inverse of :func:`split_object`.

    Raises:
        DecodeError: a name cannot be written (a lone surrogate).
    """
    return _encode(members)


def join_array(items: Sequence[Raw]) -> bytes:
    """The JSON array of ``items`` (undecoded texts), each copied as it is; the inverse of :func:`split_array`."""
    return _encode(items)


#: One JSON token after optional whitespace: a string, a number, a literal or a structural mark.
_TOKEN = re.compile(
    rb'[ \t\r\n]*(?:("[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*")'
    rb"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)|(true|false|null)|([\[\]{},:]))"
)
_WS = b" \t\r\n"


def _split_deep(raw: bytes, *, object_: bool) -> list[tuple[str | None, Raw]]:
    """The members (name, text) or items (``None``, text) of a JSON object or array, read with a
    loop instead of recursion, checking the whole text's grammar (RFC 8259): anything that is not
    exactly one valid JSON value of that kind raises, so nothing is cut, dropped or made up.

    Raises:
        DecodeError: the text is not one JSON object (or array) of valid JSON, is longer than
            :data:`DEEP_BYTES`, or nests deeper than :data:`MAX_DEPTH`.
    """
    kind = "object" if object_ else "array"
    if len(raw) > DEEP_BYTES:
        raise DecodeError(f"not read: a JSON {kind} of {len(raw)} bytes nesting deeper than the decoder recurses")
    stack: list[bytes] = []
    expect = "value"  # value | value-or-close | key | key-or-close | colon | comma-or-close
    out: list[tuple[str | None, Raw]] = []
    name: str | None = None
    start = pos = 0
    while True:
        match = _TOKEN.match(raw, pos)
        if match is None:
            raise DecodeError(f"not a JSON {kind}: bad syntax at byte {pos}")
        string, number, literal, mark = match.groups()
        at, pos = match.start(match.lastindex or 0), match.end()
        depth = len(stack)
        if depth == 0 and not stack and expect == "value":
            if mark != (b"{" if object_ else b"["):
                raise DecodeError(f"not a JSON {kind}")
            stack.append(mark)
            expect = "key-or-close" if object_ else "value-or-close"
            continue
        closes = mark in (b"]", b"}")
        if closes and expect in ("value-or-close", "key-or-close", "comma-or-close"):
            if (mark == b"]") != (stack[-1] == b"["):
                raise DecodeError(f"not a JSON {kind}: mismatched {mark.decode()}")
            stack.pop()
            if not stack:  # the outer value is closed: nothing may follow
                if raw[pos:].strip(_WS):
                    raise DecodeError(f"not a JSON {kind}: data after the end")
                return out
            if len(stack) == 1:
                out.append((name, Raw(raw[start:pos])))
            expect = "comma-or-close"
        elif expect in ("value", "value-or-close") and (mark in (b"[", b"{") or mark is None):
            if depth == 1:
                start = at
            if mark is not None:
                if depth >= MAX_DEPTH:
                    raise DecodeError(f"not read: a JSON {kind} nesting deeper than {MAX_DEPTH} levels")
                stack.append(mark)
                expect = "key-or-close" if mark == b"{" else "value-or-close"
            else:
                if depth == 1:
                    out.append((name, Raw(raw[start:pos])))
                expect = "comma-or-close"
        elif expect in ("key", "key-or-close") and string is not None:
            if depth == 1:
                name = json.loads(string)
            expect = "colon"
        elif expect == "colon" and mark == b":":
            expect = "value"
        elif expect == "comma-or-close" and mark == b",":
            expect = "key" if stack[-1] == b"{" else "value"
        else:
            raise DecodeError(f"not a JSON {kind}: unexpected token at byte {at}")


def _encode(value: Any, encoder: msgspec.json.Encoder = _ENCODE) -> bytes:
    try:
        return encoder.encode(value)
    except (TypeError, ValueError, OverflowError, RecursionError, UnicodeEncodeError) as exc:
        raise DecodeError(f"cannot encode as JSON: {type(exc).__name__}: {exc}") from None


def _check_finite(value: Any) -> Any:
    """``value`` unless it holds a non-finite float anywhere (encoders would write it as ``null``)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                raise DecodeError("cannot encode as JSON: a non-finite number")
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return value


def dumps(value: JSON) -> bytes:
    """Encode ``value`` as compact UTF-8 JSON (no insignificant whitespace, non-ASCII as is).

    Numbers are written in their shortest exact form (``1.1``, ``1e-7``); use :meth:`Codec.dumps`
    to keep the spelling of values decoded from a message.

    Raises:
        DecodeError: the value cannot be written as valid JSON (a lone surrogate, a non-finite
            float, a type JSON has no form for, nesting deeper than the encoder's limit).
    """
    out = _encode(value)
    if b"null" in out and (out == b"null" or _NULL_VALUE.search(out) is not None):
        _check_finite(value)  # a non-finite float is written as a null value; look for one
    return out


#: A ``null`` value in compact JSON (a ``"null"`` string is not one: a quote comes between).
_NULL_VALUE = re.compile(rb"[:\[,]null")


def fingerprint(value: JSON) -> bytes:
    """A canonical encoding of ``value`` (sorted keys) to compare or cache JSON values by content.

    Raises:
        DecodeError: the value cannot be encoded (too deep, lone surrogates).
    """
    return _encode(value, _SORTED)


def spliced(new: JSON, old: JSON, text: bytes | Raw) -> bytes:
    """``new``, a changed copy of ``old`` (decoded from ``text`` by :func:`loads`), written as
    :meth:`Codec.splice` writes it: every part ``new`` keeps of ``old`` with its bytes in ``text``.

    When ``text`` is what the encoder writes for ``old`` (compact, each string and number spelled
    the encoder's way: what pydantic, orjson and most servers send), each part's bytes are the
    encoder's, and ``new`` is encoded in one C pass; otherwise the parts are paired (:class:`Codec`).

    Raises:
        DecodeError: as :func:`dumps`.
    """
    data = text if isinstance(text, bytes) else bytes(text)
    if _encode(old) == data:
        return dumps(new)
    codec = Codec()
    codec.decoded(old, Raw(data))
    return codec.splice(new, old)


class Codec:
    """Decodes the JSON of one message and writes changed copies of it, keeping every byte it can.

    The codec remembers, by object identity and for as long as it lives (keep one per message),
    the text of every container and float it decoded, and the member texts of every container it
    split. :meth:`splice` writes ``new`` as a changed copy of ``old``: wherever ``new`` still holds
    ``old``'s objects their original bytes are copied, and below a changed container members are
    paired by name (items by position when the count is unchanged). :meth:`dumps` writes any
    value: the decoded parts it holds (moved there by a rule, or whole) are copied from their text.

    A float found nowhere among the remembered texts makes the codec index every value it decoded,
    once (one pass over the message), so a number moved from deep inside keeps its spelling too.
    Ints are never looked up by identity (small ints are shared objects): an int keeps its bytes
    where it stays, inside its container or a changed copy of it that stayed at its place, and is
    written canonically elsewhere (``-0`` becomes ``0`` where a rule moved it, or moved a changed
    copy of anything holding it).
    """

    __slots__ = ("_indexed", "_parts", "_roots", "_texts")

    def __init__(self) -> None:
        # id(value) -> (value, text or member texts); the value is held so that its id stays its own
        self._texts: dict[int, tuple[object, Raw]] = {}
        self._parts: dict[int, tuple[object, dict[str, Raw] | list[Raw]]] = {}
        self._roots: list[tuple[JSON, Raw]] = []
        self._indexed = False

    def loads(self, data: bytes | bytearray | memoryview | str | Raw) -> JSON:
        """Decode ``data`` (see :func:`loads`) and remember its text (a str: its UTF-8 bytes).

        Raises:
            DecodeError: as :func:`loads`.
        """
        if isinstance(data, str):
            try:
                data = data.encode()
            except UnicodeEncodeError:
                raise DecodeError("not JSON: a lone surrogate") from None
        raw = data if isinstance(data, Raw) else Raw(bytes(data))
        value = loads(raw)
        self.decoded(value, raw)
        return value

    def decoded(self, value: JSON, text: Raw) -> None:
        """Record that ``value`` was decoded from ``text`` (as :meth:`loads` does), so that
        :meth:`splice` copies the bytes of whatever a changed copy keeps of it."""
        self._remember(value, text)
        self._roots.append((value, text))

    def adopt(self, value: dict[str, Any] | list[Any], parts: dict[str, Raw] | list[Raw]) -> None:
        """Record that container ``value`` holds the values of ``parts`` (member texts from
        :func:`split_object` / :func:`split_array`), each decoded by :meth:`loads` or left a :data:`Raw`."""
        self._parts[id(value)] = (value, parts)

    def text_of(self, value: JSON) -> Raw | None:
        """The original text of a remembered container or float (a :data:`Raw` is its own), else ``None``."""
        if isinstance(value, Raw):
            return value
        found = self._texts.get(id(value))
        return found[1] if found is not None and found[0] is value else None

    def dumps(self, value: JSON) -> bytes:
        """Encode ``value``; the parts of it this codec decoded keep their original bytes.

        Raises:
            DecodeError: as :func:`dumps`.
        """
        text = self.text_of(value)
        if text is not None:
            return bytes(text)
        return _encode(self._free(value))

    def splice(self, new: JSON, old: JSON) -> bytes:
        """Encode ``new``, a copy of ``old`` (decoded or adopted by this codec) that rules may have changed.

        Raises:
            DecodeError: as :func:`dumps`.
        """
        # Two passes: pairing ``new`` with ``old`` splits every changed container first (remembering
        # all its members, those a rule moved away included); only then are the parts without a
        # counterpart written, so a value moved from anywhere below a change is found by identity.
        if new is old:
            text = self.text_of(old) or next((raw for value, raw in self._roots if value is old), None)
            if text is not None:
                return bytes(text)
        moved: list[tuple[dict[str, Any] | list[Any], str | int, Any]] = []
        skeleton = self._pair(new, old, moved)
        for holder, key, value in moved:
            holder[key] = self._free(value)  # type: ignore[index]
        return _encode(skeleton)

    # -- the skeleton: new containers holding Raw texts wherever original bytes are kept ---------

    def _remember(self, value: JSON, raw: Raw) -> None:
        if isinstance(value, dict | list | float):
            self._texts[id(value)] = (value, raw)

    def _pair(self, new: Any, old: Any, moved: list[tuple[Any, Any, Any]]) -> Any:
        """``new`` as a skeleton, paired with ``old``; parts with no counterpart go to ``moved``."""
        if new is old:
            text = self.text_of(old)
            if text is not None:
                return text
        parts = self._parts_of(old) if type(new) is type(old) and isinstance(new, dict | list) else None
        if isinstance(parts, dict):
            out: dict[str, Any] = {}
            for key, value in new.items():
                out[key] = None
                if key in old:
                    self._place(out, key, value, old[key], parts[key], moved)
                else:
                    moved.append((out, key, value))
            return out
        if isinstance(parts, list):
            items: list[Any] = [None] * len(new)
            if len(new) == len(old):
                for index, value in enumerate(new):
                    self._place(items, index, value, old[index], parts[index], moved)
            else:  # items were added or removed: each is found by identity
                moved.extend((items, index, value) for index, value in enumerate(new))
            return items
        return self._free(new)

    def _place(self, holder: Any, key: Any, value: Any, old: Any, text: Raw, moved: list[tuple[Any, Any, Any]]) -> None:
        """Put ``value`` into ``holder[key]``: ``text`` when it is ``old`` (whose text that is), a
        skeleton when it is a changed copy of it, else later (``moved``)."""
        if value is old:
            holder[key] = text
        elif type(value) is type(old) and isinstance(value, dict | list):
            holder[key] = self._pair(value, old, moved)
        else:
            moved.append((holder, key, value))

    def _parts_of(self, old: dict[str, Any] | list[Any]) -> dict[str, Raw] | list[Raw] | None:
        """The member texts of ``old`` (adopted, or split from its text, remembering each member)."""
        found = self._parts.get(id(old))
        if found is not None and found[0] is old:
            return found[1]
        text = self.text_of(old)
        if text is None:
            return None
        try:
            parts: dict[str, Raw] | list[Raw] = split_object(text) if isinstance(old, dict) else split_array(text)
        except DecodeError:
            return None
        pairs = parts.items() if isinstance(parts, dict) else enumerate(parts)
        if len(parts) != len(old):
            return None  # duplicate member names: the texts are not these values' own
        for key, member in pairs:
            self._remember(old[key], member)  # type: ignore[index]
        self._parts[id(old)] = (old, parts)
        return parts

    def _free(self, value: Any) -> Any:
        """``value`` ready to encode: remembered parts as their texts, the rest as it is."""
        if isinstance(value, dict | list | float | Raw):
            text = self.text_of(value)
            if text is None and isinstance(value, float) and not self._indexed:
                self._index()
                text = self.text_of(value)
            if text is not None:
                return text
            if isinstance(value, dict):
                return {key: self._free(member) for key, member in value.items()}
            if isinstance(value, list):
                return [self._free(item) for item in value]
            if isinstance(value, float) and not math.isfinite(value):
                raise DecodeError("cannot encode as JSON: a non-finite number")
        return value

    def _index(self) -> None:
        """Remember the text of every container and float of every decoded value (once)."""
        self._indexed = True
        stack: list[Any] = [value for value, _ in self._roots]
        stack += [value for value, _ in self._parts.values()]
        while stack:
            value = stack.pop()
            if isinstance(value, dict | list) and value and self._parts_of(value) is not None:
                stack.extend(value.values() if isinstance(value, dict) else value)


@contextmanager
def quiet_gc(size: int) -> Iterator[None]:
    """Pause the cyclic garbage collector while a message of ``size`` bytes is handled.

    Decoding a large document makes many new containers, none in a cycle; with the collector on,
    every few hundred of them start a collection, and each time the tree is promoted a generation
    the next collections walk all of it again (measured: a third of the proxy's CPU on 1 MiB
    results). Use it around the whole handling of one message, decoding to freeing: once the tree
    is freed, the allocation count is back where it was and no collection follows. Left as found
    when something else turned the collector off; small messages are not worth it.
    """
    if size < _QUIET_GC_BYTES or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def is_utf8(data: bytes) -> bool:
    """True when ``data`` is UTF-8 (bytes copied into a rewritten message must be: RFC 8259 8.1)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
