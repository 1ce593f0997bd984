"""Lossless JSON decoding and encoding for messages the proxy may rewrite.

orjson is the fast path. It silently turns integers outside [-2**63, 2**64) into floats, so a
document that holds a long run of digits is decoded by the standard library instead, with every
number kept exactly: big integers as :class:`BigInt`, every float literal as :class:`decimal.Decimal`,
and both written back verbatim. Non-standard literals (``NaN``, ``Infinity``) are rejected: such a
document is not JSON (RFC 8259 section 6) and passes through the proxy untouched.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import orjson

from .errors import DecodeError
from .types import JSON

# A run this long may be an integer beyond 64 bits or a float beyond double precision.
_LONG_NUMBER = re.compile(rb"\d{17}")
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


class BigInt(int):
    """An integer outside orjson's 64-bit range, re-emitted with all its digits."""


def _parse_int(text: str) -> int:
    value = int(text)
    return value if _INT_MIN <= value <= _INT_MAX else BigInt(value)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _default(value: Any) -> Any:
    if isinstance(value, BigInt):
        return orjson.Fragment(int.__repr__(value).encode())
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value).encode())
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def loads(data: bytes | bytearray | memoryview | str) -> JSON:
    """Decode one JSON text (RFC 8259) without losing any number.

    Args:
        data: UTF-8 bytes or a str holding exactly one JSON value.

    Returns:
        The decoded value: dict, list, str, int (``BigInt`` beyond 64 bits), float or
        ``Decimal`` (slow path only), bool or None.

    Raises:
        DecodeError: the text is not JSON, or holds ``NaN``/``Infinity``.
    """
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if _LONG_NUMBER.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # let the exact decoder give the verdict (it also reads numbers orjson refuses)
    try:
        return json.loads(raw, parse_int=_parse_int, parse_float=Decimal, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"not JSON: {exc}") from None


def dumps(value: JSON) -> bytes:
    """Encode ``value`` as compact UTF-8 JSON (no insignificant whitespace, raw non-ASCII).

    Raises:
        DecodeError: the value cannot be written as valid JSON (for example a lone surrogate).
    """
    try:
        return orjson.dumps(value, default=_default, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise DecodeError(f"cannot encode as JSON: {exc}") from None
