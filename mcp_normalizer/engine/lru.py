"""``SizedLRU``: a mapping bounded by the summed sizes of its values, least recently used out first.

The normalizer's caches of listed tools and catalog entries take one lookup and one insert per tool
of every cold ``tools/list``: 100,000 of each for a 50,000-tool list. ``cachetools.LRUCache`` costs
about a microsecond an insert in Python-level bookkeeping; this class does the same with one
:class:`collections.OrderedDict` (C) and a running total, a third of that.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
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
        old = data.pop(key, None)
        if old is not None:
            self.size -= self._sizeof(old)
        data[key] = value
        self.size += size
        while self.size > self.max_size:
            _, gone = data.popitem(last=False)
            self.size -= self._sizeof(gone)

    def clear(self) -> None:
        """Forget every value."""
        self._data.clear()
        self.size = 0
