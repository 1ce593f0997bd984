"""Work done in slices, so that one large message never holds the event loop.

A long job (the rules over the tools of a 50,000-tool ``tools/list`` page) is written as a
generator that yields wherever it may pause and returns its value (:data:`Steps`). The sans-IO
code runs it a slice at a time (:func:`run_slice`) and hands back to its caller between slices;
code that may block runs it to the end (:func:`run_all`); async code runs it with a loop turn
between slices (:func:`run_sliced`).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import TypeVar

import anyio.lowlevel

T = TypeVar("T")

#: A job that yields where it may pause and returns a ``T``.
Steps = Generator[None, None, T]

#: How long a slice runs before the job hands back to the event loop, in seconds.
SLICE_SECONDS = 0.002
#: A text this large (bytes) is split, or written, in a slice of its own.
LARGE_TEXT = 1 << 20


class Unfinished(Exception):
    """The slice is over and the job is not: run the same generator again later."""


def run_all(job: Steps[T]) -> T:
    """Run ``job`` to its end and return its value (exceptions of the job propagate)."""
    while True:
        try:
            next(job)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


def run_slice(job: Steps[T], seconds: float = SLICE_SECONDS) -> T:
    """Run ``job`` for about ``seconds`` (at least one step) and return its value if it ended.

    Raises:
        Unfinished: the time is up and the job has more to do; call again with the same ``job``.
    """
    deadline = time.perf_counter() + seconds
    while True:
        try:
            next(job)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if time.perf_counter() >= deadline:
            raise Unfinished


async def run_sliced(job: Steps[T], seconds: float = SLICE_SECONDS) -> T:
    """Run ``job`` to its end a slice at a time, letting the event loop run between slices."""
    while True:
        try:
            return run_slice(job, seconds)
        except Unfinished:
            await anyio.lowlevel.checkpoint()
