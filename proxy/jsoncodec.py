"""Lossless JSON decoding and encoding for messages the proxy may rewrite.

A rewrite must not change any value the proxy does not mean to change, numbers included. orjson is
exact for documents whose numbers are all integers within 64 bits, and it is the fast path for
them. A document holding a float literal, a long integer or ``-0`` is decoded by the standard
library instead, every such number keeping its literal text: floats as :class:`RawFloat` (a
``float``, so validation sees the usual value; ``1.10`` stays ``1.10``, ``1e400`` stays ``1e400``),
integers beyond 64 bits and ``-0`` as :class:`RawInt`. Encoding writes those texts back verbatim.
Non-standard literals (``NaN``, ``Infinity``) are rejected: such a document is not JSON (RFC 8259
section 6) and passes through the proxy untouched.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from .errors import DecodeError
from .types import JSON

# needs_exact() searches a copy of the text with JSON whitespace removed, digits mapped to "0",
# "e"/"E" to "." and the bytes a number token may follow (":", ",", "[") to "S"; a sentinel "S"
# stands for the start of the text. Plain substring searches (C speed) then find the candidates.
# Text inside strings (an "S" letter, digits after a comma) can only give a false "yes": the exact
# path, slower and never wrong.
_CLASSES = bytes.maketrans(b"0123456789eE:,[", b"0000000000..SSS")
_WHITESPACE = b" \t\r\n"
_DIGIT, _MINUS, _START = 48, 45, 83
_QUIET_GC_BYTES = 64 * 1024  # smaller documents make too few containers to start a collection
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


class RawFloat(float):
    """A JSON number with a fraction or exponent, remembering how it was written."""

    __slots__ = ("text",)
    text: str


class RawInt(int):
    """A JSON integer orjson cannot write back as written (beyond 64 bits, or ``-0``)."""

    text: str


def _parse_float(text: str) -> float:
    value = RawFloat(text)
    value.text = text
    return value


def _parse_int(text: str) -> int:
    value = int(text)
    if _INT_MIN <= value <= _INT_MAX and text != "-0":
        return value
    raw = RawInt(value)
    raw.text = text
    return raw


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _default(value: Any) -> Any:
    if isinstance(value, RawFloat | RawInt):
        return orjson.Fragment(value.text.encode())
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def needs_exact(raw: bytes) -> bool:
    """Whether ``raw`` may hold a number orjson would not give back as written: a float literal, an
    integer of 19 or more digits, or ``-0``. False means orjson decodes it exactly (the fast path).

    Never false for such a number; may be true for such text inside a string (only costs speed).
    Linear in ``len(raw)``: one ``bytes.translate`` and substring searches.
    """
    classes = b"S" + raw.translate(_CLASSES, _WHITESPACE)
    for needle in (b"0.", b"0" * 19):  # a digit run ending in . e E, or 19 digits: is it a number token?
        at = classes.find(needle)
        while at != -1:
            start = at
            while classes[start - 1] == _DIGIT:
                start -= 1
            if classes[start - 1] == _MINUS:
                start -= 1
            if classes[start - 1] == _START:
                return True
            at = classes.find(needle, at + len(needle))
    at = classes.find(b"S-0")
    while at != -1:  # -0 alone (a following digit is not JSON; a following . was found above)
        if at + 3 == len(classes) or classes[at + 3] != _DIGIT:
            return True
        at = classes.find(b"S-0", at + 3)
    return False


def loads(data: bytes | bytearray | memoryview | str) -> JSON:
    """Decode one JSON text (RFC 8259) without losing any number's value or spelling.

    Args:
        data: UTF-8 bytes or a str holding exactly one JSON value.

    Returns:
        The decoded value: dict, list, str, bool, None, int, and on the exact path
        :class:`RawFloat` / :class:`RawInt` for numbers that must keep their text.

    Raises:
        DecodeError: the text is not JSON (not UTF-8 included, RFC 8259 section 8.1), or holds
            ``NaN``/``Infinity``.
    """
    try:
        raw = data.encode() if isinstance(data, str) else bytes(data)
    except UnicodeEncodeError:
        raise DecodeError("not JSON: a lone surrogate") from None
    with _no_collection(len(raw)):
        if not needs_exact(raw):
            try:
                return orjson.loads(raw)
            except orjson.JSONDecodeError:
                pass  # let the exact decoder give the verdict
        try:
            # Decoded here, strictly: json.loads(bytes) would guess UTF-16 or UTF-32 (RFC 8259 8.1: UTF-8).
            text = raw.decode("utf-8")
            return json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise DecodeError(f"not JSON: {exc}") from None


@contextmanager
def _no_collection(size: int) -> Iterator[None]:
    """Pause the cyclic garbage collector while a large document is decoded.

    Decoding makes only new, acyclic containers, yet each few hundred of them start a collection,
    and the older generations' ones walk every live object: that doubled the time to decode a
    1 MiB result. The collector is left as found (an embedding app may have turned it off).
    """
    if size < _QUIET_GC_BYTES or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def dumps(value: JSON) -> bytes:
    """Encode ``value`` as compact UTF-8 JSON (no insignificant whitespace, raw non-ASCII); numbers
    decoded by :func:`loads` are written exactly as they were.

    Raises:
        DecodeError: the value cannot be written as valid JSON (for example a lone surrogate, or
            nesting deeper than the interpreter can walk).
    """
    try:
        return orjson.dumps(value, default=_default, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
    except orjson.JSONEncodeError as exc:
        if "recursion" not in str(exc).lower():
            raise DecodeError(f"cannot encode as JSON: {exc}") from None
    except TypeError as exc:
        raise DecodeError(f"cannot encode as JSON: {exc}") from None
    try:  # nested beyond orjson's 255 levels: the exact, slower way
        return "".join(_pieces(value)).encode("utf-8")
    except (RecursionError, UnicodeEncodeError, TypeError) as exc:
        raise DecodeError(f"cannot encode as JSON: {type(exc).__name__}") from None


def _pieces(value: JSON) -> list[str]:
    """The compact JSON text of ``value`` in pieces (standard library string escaping)."""
    if isinstance(value, dict):
        parts = ["{"]
        for index, (key, member) in enumerate(value.items()):
            parts += [("," if index else "") + json.dumps(key, ensure_ascii=False) + ":", *_pieces(member)]
        return [*parts, "}"]
    if isinstance(value, list):
        parts = ["["]
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            parts += _pieces(item)
        return [*parts, "]"]
    if isinstance(value, RawFloat | RawInt):
        return [value.text]
    if isinstance(value, str):
        return [json.dumps(value, ensure_ascii=False)]
    if value is None or isinstance(value, bool | int):
        return [json.dumps(value)]
    if isinstance(value, float):
        return [orjson.dumps(value).decode()]
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def fingerprint(value: JSON) -> bytes:
    """A canonical encoding of ``value`` (sorted keys) to compare or cache JSON values by content.

    Raises:
        DecodeError: the value cannot be encoded (too deep, lone surrogates).
    """
    try:
        return orjson.dumps(value, default=_default, option=orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise DecodeError(f"cannot encode as JSON: {exc}") from None
