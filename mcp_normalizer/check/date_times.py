"""Date and time values that fail their schema's ``format`` (pure, no I/O): what ``check`` reports
for rule ``date_time_format``.

The rule moves ``format: date-time`` / ``date`` / ``time`` out of an ``outputSchema`` for clients
that assert formats, before any result is seen: a precaution, not a fault of the server. The fault
is a value that does not conform: a date-time without a time-zone offset (``2026-12-03T09:30:00``),
or not RFC 3339 at all. This module finds those, checked as the TS SDK's Ajv with ajv-formats checks
them ("full" mode: ``date-time`` and ``time`` need an offset, ``Z`` or ``+hh:mm``; ``t`` or a space
between date and time), so ``2026-12-03T09:30:00Z`` is never reported (RFC 3339 section 5.6).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, UnknownType
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from ..types import JSON
from ..wire.pointer import format_pointer

FORMATS = ("date-time", "date", "time")
_DATE = re.compile(r"(\d{4})-(\d\d)-(\d\d)", re.ASCII)
_TIME = re.compile(r"(\d\d):(\d\d):(\d\d)(?:\.\d+)?(?:[zZ]|[+-](\d\d)(?::?(\d\d))?)", re.ASCII)
_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
#: At most this many findings per result (a list of a million naive date-times is one fault).
MAX_FOUND = 20


def is_date(text: str) -> bool:
    """True for an RFC 3339 ``full-date`` (``2024-02-29``; the month's days, leap years counted)."""
    match = _DATE.fullmatch(text)
    if match is None:
        return False
    year, month, day = (int(part) for part in match.groups())
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= month <= 12 and 1 <= day <= (_DAYS[month - 1] if month != 2 or leap else 28)


def is_time(text: str) -> bool:
    """True for an RFC 3339 ``full-time``: ``hh:mm:ss``, optional fraction, a required offset (a
    leap second ``:60`` allowed)."""
    match = _TIME.fullmatch(text)
    if match is None:
        return False
    hour, minute, second = (int(part) for part in match.groups()[:3])
    tz_hour, tz_minute = (int(part or 0) for part in match.groups()[3:])
    return hour <= 23 and minute <= 59 and second <= 60 and tz_hour <= 23 and tz_minute <= 59


def is_date_time(text: str) -> bool:
    """True for an RFC 3339 ``date-time`` (``2026-12-03T09:30:00Z``, ``2026-12-03 09:30:00.5+01:00``)."""
    parts = re.split(r"[tT\s]", text)
    return len(parts) == 2 and is_date(parts[0]) and is_time(parts[1])


_CHECKER = FormatChecker(formats=())
for _name, _check in zip(FORMATS, (is_date_time, is_date, is_time), strict=True):
    _CHECKER.checks(_name)(lambda value, check=_check: not isinstance(value, str) or check(value))


def failing_formats(value: JSON, schema: JSON) -> Iterator[tuple[str, str]]:
    """The (JSON pointer, format) of each value of ``value`` that fails a date or time ``format``
    of ``schema`` (its own ``$schema`` dialect, 2020-12 when it has none), at most
    :data:`MAX_FOUND`. A schema the validator cannot read yields nothing."""
    if not isinstance(schema, dict):
        return
    try:
        cls = validator_for(schema, default=Draft202012Validator)
        found = 0
        for error in cls(schema, format_checker=_CHECKER).iter_errors(value):
            if error.validator == "format" and error.validator_value in FORMATS:
                yield format_pointer(tuple(error.absolute_path)), str(error.validator_value)
                found += 1
                if found >= MAX_FOUND:
                    return
    except (SchemaError, UnknownType, Unresolvable, RecursionError, TypeError, ValueError):
        return
