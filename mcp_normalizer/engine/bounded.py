"""Bounded maps on the hot paths, with no Python-level bookkeeping a request pays for.

- :class:`SizedLRU`: bounded by the summed sizes of its values, least recently used out first.
  The normalizer's caches of listed tools and catalog entries take one lookup and one insert per
  tool of every cold ``tools/list``: 100,000 of each for a 50,000-tool list.
  ``cachetools.LRUCache`` costs about a microsecond an insert in Python bookkeeping; this class
  does the same with one :class:`collections.OrderedDict` (C) and a running total, a third of that.
- :class:`ExpiringMap`: at most so many entries, each for so many seconds. A legacy session's
  requests wait in one until answered (a write and a removal per ``tools/call``):
  ``cachetools.TTLCache`` costs 3 µs for the pair, a plain ``dict`` of (value, deadline) 0.3 µs.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, ItemsView, Iterator, MutableMapping, ValuesView
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class SizedLRU(Generic[K, V]):
    """Values by key, at most ``max_size`` in all by ``sizeof``; the least recently read or
    written go first when an insert passes the bound.

    Args:
        max_size: the bound on the sum of ``sizeof(value)`` over the values held (any unit).
        sizeof: the size of one value (called once when it is inserted, once when it leaves).

    A value larger than ``max_size`` alone is not kept (the insert does nothing); ``None`` is not
    a value (:meth:`get` answers it for a key not held). Not thread-safe: one event loop owns it.
    """

    __slots__ = ("_data", "_sizeof", "max_size", "size")

    def __init__(self, max_size: int, sizeof: Callable[[V], int]) -> None:
        self._data: OrderedDict[K, V] = OrderedDict()
        self._sizeof = sizeof
        self.max_size = max_size
        #: The sum of the sizes of the values held.
        self.size = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or ``None``."""
        data = self._data
        value = data.get(key)
        if value is not None:
            data.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        size = self._sizeof(value)
        if size > self.max_size:
            return
        data = self._data
        if key in data:  # (rare: a test for it costs less than a pop on every insert)
            self.size -= self._sizeof(data.pop(key))
        data[key] = value
        self.size += size
        if self.size > self.max_size:
            self._shrink()

    def _shrink(self) -> None:
        """Drop the least recently used values until the sizes are within the bound."""
        data = self._data
        while self.size > self.max_size:
            _, gone = data.popitem(last=False)
            self.size -= self._sizeof(gone)

    def clear(self) -> None:
        """Forget every value."""
        self._data.clear()
        self.size = 0


class ExpiringMap(MutableMapping[K, V]):
    """At most ``max_entries`` values by key, each kept ``ttl`` seconds after it was written
    (monotonic clock): an expired value reads as absent, and past the bound the value written
    longest ago goes (a write makes a key the newest; a read does not).

    Args:
        max_entries: the bound on the number of values held (at least 1).
        ttl: seconds a value lives after its write.
        clock: the clock (seconds; ``time.monotonic``).

    Not thread-safe: one event loop owns it.
    """

    __slots__ = ("_clock", "_data", "max_entries", "ttl")

    def __init__(self, max_entries: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._data: dict[K, tuple[V, float]] = {}  # in the order written: deadlines ascend
        self.max_entries = max(1, max_entries)
        self.ttl = ttl
        self._clock = clock

    def __setitem__(self, key: K, value: V) -> None:
        data = self._data
        now = self._clock()
        data.pop(key, None)
        data[key] = (value, now + self.ttl)
        oldest = next(iter(data))
        if len(data) > self.max_entries or data[oldest][1] <= now:
            del data[oldest]  # (the expired are the oldest: one goes with each write, the rest later)

    def __getitem__(self, key: K) -> V:
        found = self._data.get(key)
        if found is None:
            raise KeyError(key)
        if found[1] <= self._clock():
            del self._data[key]
            raise KeyError(key)
        return found[0]

    def __delitem__(self, key: K) -> None:
        del self._data[key]

    def _live(self) -> dict[K, tuple[V, float]]:
        """The values held, the expired ones dropped first (they are the oldest: from the front)."""
        data = self._data
        now = self._clock()
        while data:
            oldest = next(iter(data))
            if data[oldest][1] > now:
                break
            del data[oldest]
        return data

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._live()))  # (a copy: the map may change while its keys are read)

    def __len__(self) -> int:
        return len(self._live())

    def __bool__(self) -> bool:
        data = self._data  # (the newest is the last to expire)
        return bool(data) and next(reversed(data.values()))[1] > self._clock()

    def items(self) -> ItemsView[K, V]:
        """The live ``(key, value)`` pairs, oldest written first, read at one instant (a copy)."""
        return {key: value for key, (value, _) in self._live().items()}.items()

    def values(self) -> ValuesView[V]:
        """The live values, oldest written first, read at one instant (a copy)."""
        return {key: value for key, (value, _) in self._live().items()}.values()

    def popitem(self) -> tuple[K, V]:
        """Remove and return the newest live ``(key, value)``.

        Raises:
            KeyError: nothing live is held.
        """
        data = self._live()
        if not data:
            raise KeyError("popitem(): the map is empty")
        key, (value, _) = data.popitem()
        return key, value
