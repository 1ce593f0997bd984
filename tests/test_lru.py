"""``SizedLRU``: bounded by the sizes of its values, least recently used out first."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_normalizer.engine.lru import SizedLRU

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
