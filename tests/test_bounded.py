"""The bounded maps: ``SizedLRU`` (by the sizes of its values, least recently used out first) and
``ExpiringMap`` (by count and age)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_normalizer.engine.bounded import ExpiringMap, SizedLRU

pytestmark = pytest.mark.pure


def test_the_least_recently_used_go_first_and_a_read_counts_as_a_use() -> None:
    cache: SizedLRU[str, bytes] = SizedLRU(10, len)
    cache["a"], cache["b"], cache["c"] = b"aaa", b"bbb", b"ccc"
    assert cache.get("a") == b"aaa"  # a is now the most recent
    cache["d"] = b"ddd"  # 12 > 10: b goes
    assert "b" not in cache and [k for k in "acd" if k in cache] == ["a", "c", "d"]
    assert cache.size == 9 and len(cache) == 3


def test_a_replaced_value_is_counted_once_and_a_value_above_the_bound_is_not_kept() -> None:
    cache: SizedLRU[str, bytes] = SizedLRU(10, len)
    cache["a"] = b"aaaa"
    cache["a"] = b"aa"
    assert cache.size == 2 and cache.get("a") == b"aa"
    cache["big"] = b"x" * 11
    assert "big" not in cache and cache.get("a") == b"aa" and cache.size == 2
    cache.clear()
    assert len(cache) == 0 and cache.size == 0 and cache.get("a") is None


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 6), st.booleans()), max_size=60))
def test_it_holds_what_a_plain_model_holds(ops: list[tuple[str, int, bool]]) -> None:
    """Against a list kept in use order: the same keys, the same values, the bound always kept."""
    cache: SizedLRU[str, bytes] = SizedLRU(12, len)
    model: list[tuple[str, bytes]] = []
    for key, size, read in ops:
        if read:
            found = next((value for k, value in model if k == key), None)
            if found is not None:
                model = [(k, v) for k, v in model if k != key] + [(key, found)]
            assert cache.get(key) == found
            continue
        value = key.encode() * size
        if len(value) <= 12:
            model = [(k, v) for k, v in model if k != key] + [(key, value)]
            while sum(len(v) for _, v in model) > 12:
                model.pop(0)
        cache[key] = value
        assert cache.size == sum(len(v) for _, v in model) <= 12
        assert {k: cache.get(k) for k, _ in model} == dict(model)  # (read in use order: the order stays)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_expired_value_reads_as_absent_everywhere() -> None:
    clock = _Clock()
    pending: ExpiringMap[str, int] = ExpiringMap(10, 5.0, clock)
    pending["a"] = 1
    clock.now += 3
    pending["b"] = 2
    assert pending.get("a") == 1 and pending["b"] == 2 and "a" in pending and len(pending) == 2
    clock.now += 2.5  # a is 5.5 s old, b 2.5 s
    assert pending.get("a") is None and "a" not in pending and pending.pop("a", None) is None
    with pytest.raises(KeyError):
        pending["a"]
    assert list(pending) == ["b"] and list(pending.items()) == [("b", 2)] and bool(pending)
    clock.now += 10
    assert not pending and len(pending) == 0 and pending.pop("b", 7) == 7


def test_past_the_bound_the_value_written_longest_ago_goes_and_a_write_renews() -> None:
    pending: ExpiringMap[str, int] = ExpiringMap(2, 60.0, _Clock())
    pending["a"], pending["b"] = 1, 2
    pending["a"] = 3  # a is now the newest
    pending["c"] = 4
    assert list(pending) == ["a", "c"] and pending["a"] == 3
    assert pending.pop("a") == 3 and list(pending) == ["c"]


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from("abcde"), st.sampled_from(["set", "pop", "get", "tick"])), max_size=60))
def test_it_holds_what_a_plain_model_of_deadlines_holds(ops: list[tuple[str, str]]) -> None:
    clock = _Clock()
    pending: ExpiringMap[str, int] = ExpiringMap(3, 4.0, clock)
    model: dict[str, tuple[int, float]] = {}  # key -> (value, deadline), in write order
    for step, (key, op) in enumerate(ops):
        live = {k: v for k, (v, deadline) in model.items() if deadline > clock.now}
        if op == "set":
            model.pop(key, None)
            model[key] = (step, clock.now + 4.0)
            if len(model) > 3:
                del model[next(iter(model))]
            pending[key] = step
        elif op == "pop":
            assert pending.pop(key, None) == live.get(key)
            model.pop(key, None)
        elif op == "get":
            assert pending.get(key) == live.get(key)
        else:
            clock.now += 1.5
        live = {k: v for k, (v, deadline) in model.items() if deadline > clock.now}
        assert dict(pending.items()) == live and len(pending) == len(live)


class _Ticking(_Clock):
    """A clock that moves on at every read (an entry may expire between two reads of one call)."""

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_a_view_is_read_at_one_instant_and_never_raises_for_an_entry_expiring_meanwhile() -> None:
    clock = _Ticking()
    pending: ExpiringMap[str, int] = ExpiringMap(10, 2.5, clock)
    pending["a"], pending["b"] = 1, 2  # written at 101 and 102: deadlines 103.5 and 104.5
    assert list(pending.items()) == [("a", 1), ("b", 2)]  # read at 103
    assert list(pending.values()) == [2]  # read at 104: a has expired, b has not
    with pytest.raises(KeyError):
        pending.popitem()  # read at 105: nothing is live


def test_length_and_truth_drop_the_expired_without_walking_the_live() -> None:
    clock = _Clock()
    pending: ExpiringMap[int, int] = ExpiringMap(1000, 1000.5, clock)
    for i in range(1000):
        clock.now = float(i)
        pending[i] = i  # deadline i + 1000.5
    assert len(pending) == 1000 and bool(pending)
    clock.now = 1500.0  # the first 500 have expired
    assert len(pending) == 500 and len(pending._data) == 500 and bool(pending)
    clock.now = 5000.0
    assert not pending and len(pending) == 0
    with pytest.raises(KeyError):
        pending.popitem()
