"""The soak's per-response checks: exactly one response, the caller's id and nonce, the right rewrite.

Each call is judged ``ok``, ``lost`` (no response, or progress events missing), ``duplicated`` (a
response or progress event more than once, or a nonce answered twice in the run), ``mismatched``
(wrong id or nonce, invalid JSON, wrong content type, a result other than the expected one) or
``error`` (an HTTP error status or a JSON-RPC error).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from . import fixture
from .client import Response, sse_messages

OK, LOST, DUPLICATED, MISMATCHED, ERROR = "ok", "lost", "duplicated", "mismatched", "error"
VERDICTS = (OK, LOST, DUPLICATED, MISMATCHED, ERROR)


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of call in the soak's mix.

    Attributes:
        name: label.
        tool: the tool called (its name decides JSON or SSE, see :data:`bench.fixture.SSE_TOOLS`).
        expected: the result a client must get through the normalizer, given the nonce.
        weight: relative frequency in the mix.
        progress: progress events to ask for (SSE only), ``gap_ms`` apart.
        gap_ms: milliseconds between progress events.
    """

    name: str
    tool: str
    expected: Callable[[str], dict[str, Any]]
    weight: int
    progress: int = 0
    gap_ms: float = 0.0

    @property
    def sse(self) -> bool:
        """Whether the upstream answers this kind with an SSE stream."""
        return self.tool in fixture.SSE_TOOLS

    def arguments(self, nonce: str) -> dict[str, Any]:
        """The call's arguments."""
        if self.progress:
            return {"nonce": nonce, "count": self.progress, "gap_ms": self.gap_ms}
        return {"nonce": nonce}


#: The soak's mix: JSON and SSE, conforming and rewritten results, progress.
MIX = (
    Kind("json-ok", fixture.SMALL, fixture.small_result, 3),
    Kind("json-rewrite", fixture.PROBLEM, fixture.rewritten_problem_result, 2),
    Kind("sse-ok", fixture.SMALL_SSE, fixture.small_result, 2),
    Kind("sse-rewrite", fixture.PROBLEM_SSE, fixture.rewritten_problem_result, 2),
    Kind("sse-progress", fixture.PROGRESS, fixture.small_result, 1, progress=5, gap_ms=2.0),
)


@dataclass
class Tally:
    """Verdict counts over the run, with a few example reasons per verdict.

    Attributes:
        counts: calls per verdict.
        by_kind: calls per kind of call.
        reasons: count per (verdict, reason).
        seen: nonces answered so far (a second answer is a duplicate).
        progress_events: progress notifications received.
    """

    counts: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)
    reasons: Counter[tuple[str, str]] = field(default_factory=Counter)
    seen: set[str] = field(default_factory=set)
    progress_events: int = 0

    def add(self, kind: Kind, verdict: str, reason: str = "") -> None:
        """Record one call's verdict."""
        self.counts[verdict] += 1
        self.by_kind[kind.name] += 1
        if verdict != OK:
            self.reasons[(verdict, reason)] += 1

    @property
    def calls(self) -> int:
        """Calls judged."""
        return sum(self.counts.values())

    @property
    def failures(self) -> int:
        """Calls not ``ok``."""
        return self.calls - self.counts[OK]


def check(kind: Kind, request_id: int, nonce: str, response: Response, tally: Tally) -> tuple[str, str]:
    """Judge one complete response to a call of ``kind``; returns ``(verdict, reason)``."""
    if response.status != 200:
        return ERROR, f"HTTP {response.status}"
    wanted = "text/event-stream" if kind.sse else "application/json"
    if response.content_type != wanted:
        return MISMATCHED, f"content type {response.content_type!r}, expected {wanted}"
    if kind.sse:
        verdict, reason, message = _from_stream(kind, request_id, nonce, response.body, tally)
        if verdict != OK:
            return verdict, reason
    else:
        try:
            message = orjson.loads(response.body)
        except orjson.JSONDecodeError:
            return MISMATCHED, "invalid JSON"
        if not isinstance(message, dict) or message.get("id") != request_id:
            return MISMATCHED, "wrong id"
    return _result(kind, nonce, message, tally)


def _from_stream(kind: Kind, request_id: int, nonce: str, body: bytes, tally: Tally) -> tuple[str, str, dict[str, Any]]:
    """The one response in an SSE body, after checking the progress events before it."""
    responses: list[dict[str, Any]] = []
    progress: list[Any] = []
    for data in sse_messages(bytearray(body)):
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            return MISMATCHED, "invalid JSON in an event", {}
        if not isinstance(message, dict):
            return MISMATCHED, "an event that is not a JSON-RPC message", {}
        if message.get("method") == "notifications/progress":
            params = message.get("params") or {}
            if params.get("progressToken") != nonce:
                return MISMATCHED, "another call's progress", {}
            if responses:
                return MISMATCHED, "progress after the response", {}
            progress.append(params.get("progress"))
        elif "id" in message:
            if message["id"] != request_id:
                return MISMATCHED, "another call's response (wrong id)", {}
            responses.append(message)
        else:
            return MISMATCHED, f"unexpected message {str(message.get('method'))[:40]}", {}
    tally.progress_events += len(progress)
    expected = list(range(1, kind.progress + 1))
    if len(set(progress)) < len(progress):
        return DUPLICATED, "a progress event twice", {}
    if progress != expected:
        return LOST, f"progress {len(progress)} of {kind.progress} events, in order", {}
    if not responses:
        return LOST, "stream ended without the response", {}
    if len(responses) > 1:
        return DUPLICATED, "the response twice in one stream", {}
    return OK, "", responses[0]


def _result(kind: Kind, nonce: str, message: dict[str, Any], tally: Tally) -> tuple[str, str]:
    if "error" in message:
        return ERROR, f"JSON-RPC error {str(message['error'])[:80]}"
    result = message.get("result")
    if result != kind.expected(nonce):
        if nonce.encode() not in orjson.dumps(result):
            return MISMATCHED, "another call's nonce"
        return MISMATCHED, "not the expected (rewritten) result"
    if nonce in tally.seen:
        return DUPLICATED, "a nonce answered twice"
    tally.seen.add(nonce)
    return OK, ""
