"""``ToolSet``, one listing's tools: a page learned at once (``extend``) is the set its tools added
one by one (``add``) make: the same entries by name in the same order, the same key once sealed
(the entries' identities, in list order, duplicates included), the same size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_normalizer.engine.catalog import ToolEntry, ToolSet

pytestmark = pytest.mark.pure

# few names, so that a page often lists one twice (the later entry wins, in the first one's place)
_ENTRIES = st.lists(
    st.builds(ToolEntry, st.sampled_from(["a", "b", "c", "d", "é", "x" * 80]), size=st.integers(0, 10**6)),
    max_size=30,
)


def _added(entries: list[ToolEntry], names: dict[str, str] | None = None) -> ToolSet:
    tools = ToolSet(names=names)
    for entry in entries:
        tools.add(entry)
    return tools


@given(_ENTRIES, _ENTRIES)
def test_a_page_extended_at_once_is_the_page_added_a_tool_at_a_time(
    first: list[ToolEntry], second: list[ToolEntry]
) -> None:
    one_by_one = _added(first + second, {"z": "a"})
    at_once = ToolSet(names={"z": "a"})
    at_once.extend(first)
    at_once.extend(second)
    assert list(at_once.items()) == list(one_by_one.items())
    assert [e is f for e, f in zip(at_once.values(), one_by_one.values(), strict=True)] == [True] * len(one_by_one)
    assert at_once.sealed().key == one_by_one.sealed().key and at_once.size == one_by_one.size
    assert ToolSet(first + second, {"z": "a"}).sealed().key == one_by_one.key


def test_the_key_tells_the_order_and_the_duplicates_apart() -> None:
    a, b = ToolEntry("a", size=1), ToolEntry("b", size=1)
    keys = {_added(entries).sealed().key for entries in ([a, b], [b, a], [a, b, a], [a, b, b])}
    assert len(keys) == 4
    merged = _added([a]).merged(_added([b, a]))
    assert list(merged) == ["a", "b"] and merged["a"] is a and merged.sealed().key == _added([a, b, a]).sealed().key
