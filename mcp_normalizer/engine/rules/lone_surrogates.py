"""Rule ``lone_surrogates``: strings holding unpaired UTF-16 surrogate escapes.

Fault kind ``invalid_unicode`` (``cases/faults.md``, "Kinds from the 2026 reports";
microsoft/playwright-mcp#1410, #1498): a server cuts a string between the two halves of a
surrogate pair (``"\\ud83d"`` with no low half) and writes the half as a JSON escape. RFC 8259
section 8.2 leaves such strings' behaviour unpredictable; strict decoders reject the whole message
(the Python SDK client: invalid JSON; the proxy's own decoder too), and model APIs reject every
later turn of the conversation that holds one. Each unpaired ``\\uD800``-``\\uDFFF`` escape becomes
``\\uFFFD`` (the replacement character, what a UTF-16 decoder substitutes); valid pairs and every
other byte stay as they are. The repair works on the message text before anything decodes it, so
it applies to every message of a response; the log line gives the count.
"""

from __future__ import annotations

import re

from .base import Rewrite, Rule

#: Every backslash escape, left to right (so an escaped backslash is never read as the start of
#: another escape): a surrogate pair, a lone surrogate, or any other escape.
_ESCAPE = re.compile(
    rb"\\(?:(u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|(u[dD][89a-fA-F][0-9a-fA-F]{2})|.)", re.DOTALL
)
_MAYBE = re.compile(rb"\\u[dD][89a-fA-F]")
_REPLACEMENT = rb"\ufffd"


def may_hold(data: bytes) -> bool:
    """True when ``data`` may hold an unpaired surrogate escape (one search; false positives only)."""
    return _MAYBE.search(data) is not None


def repair(data: bytes) -> tuple[bytes, int] | None:
    """``data`` (a JSON text) with each unpaired surrogate escape replaced by ``\\ufffd``, and the
    count; ``None`` when it has none (checked with one search in the common case)."""
    if _MAYBE.search(data) is None:
        return None
    count = 0

    def replace(match: re.Match[bytes]) -> bytes:
        nonlocal count
        if match.group(2) is None:
            return match.group(0)
        count += 1
        return _REPLACEMENT

    out = _ESCAPE.sub(replace, data)
    return (out, count) if count else None


def rewrite(count: int) -> Rewrite:
    """The log record of a repair of ``count`` unpaired surrogates."""
    reason = f"{count} unpaired UTF-16 surrogate escape(s): invalid Unicode (RFC 8259 section 8.2)"
    return Rewrite("lone_surrogates", "replaced unpaired surrogates with U+FFFD", (), reason)


RULE = Rule(
    name="lone_surrogates",
    kind="invalid_unicode",
    summary="Each unpaired UTF-16 surrogate escape (\\ud83d alone) in a response becomes \\ufffd; valid pairs kept.",
)
