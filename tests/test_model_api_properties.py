"""Generated schemas through the proxy's listing path: each model-API family takes what its host gets
(issue 39, must-show, property-based).

Hypothesis writes ``inputSchema``s around one feature each (decimals, exponents and huge integers;
unicode property names; deep nesting; ``$ref`` cycles through ``$defs``; enums of mixed types;
tuples, 2020-12 and draft-07; ``anyOf`` with a never branch) on a clean base, or several at once.
The proxy's pure listing path (:meth:`mcp_normalizer.engine.normalize.Normalizer.tools_list` with
the shipped rules) lists the tool for a host of each family (``clientInfo`` as in
:mod:`tests.test_model_api_profiles`; ``openai-strict``: ``openai-agents``' client, the Python SDK's
``mcp``), and:

- the family's judge (:mod:`tests.model_api_judges`) refuses nothing of what is listed, or the tool
  is withheld and the family refuses the server's own tool;
- the listing is valid JSON (no NaN, string keys, the same after a round trip);
- every value of the server's ``inputSchema`` is kept where it was, or kept in the tool's
  ``_meta`` under the proxy's keys (a renamed key found through a name map there).

The (family, feature) pairs a family still refuses through the proxy today are ``xfail(strict=True)``
in :data:`KNOWN_REFUSED` (the examples are derandomized, so each pair fails or passes the same way on
every run): a repair that lands makes its entry fail until it is removed.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules import withhold
from mcp_normalizer.engine.rules.clients import profile_for

from .model_api_judges import JUDGES
from .support import PROPERTY, contains_value, leaves

pytestmark = pytest.mark.pure

ERA = "2025-11-25"
PREFIX = "dev.mcp-normalizer/"
ORIGINAL_NAME = PREFIX + "original-name"
#: Who lists, per family (hosts.toml client_names; openai-agents' client gives the SDK's default).
CLIENTS: dict[str, dict[str, str]] = {
    "anthropic": {"name": "claude-code", "version": "2.1.332"},
    "openai": {"name": "codex-mcp-client", "version": "0.171.0"},
    "openai-strict": {"name": "mcp", "version": "0.1.0"},
    "gemini": {"name": "gemini-cli-mcp-client", "version": "0.61.0"},
}
#: Modest (4 families x 9 features, each example through the listing path and a real converter), the
#: same examples on every run, and no shrinking: a failing example is shown as drawn.
EXAMPLES = settings(PROPERTY, max_examples=25, derandomize=True, phases=[Phase.explicit, Phase.generate])

# -- strategies ------------------------------------------------------------------------------------

NUMBERS = st.one_of(
    st.sampled_from([12.5, 0.1, 2.5e-3, 1e-7, 1e300, -0.0, 123456789012345678901234, 2**70, -(2**63), 0]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**80), max_value=2**80),
)
ASCII_KEYS = st.sampled_from(["a", "b", "query", "limit", "page_size", "x1", "_id", "Name"])
UNICODE_KEYS = st.one_of(
    st.sampled_from(
        ["caf\u00e9", "\u540d\u524d", "x y", "\U0001f600", "a.b", "a-b", "\u043a\u043b\u044e\u0447", "k" * 70]
    ),
    st.text(min_size=1, max_size=6),
)
CLEAN_LEAVES: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {"type": "string"},
        {"type": "string", "maxLength": 64, "description": "caf\u00e9 \u2713 \u20ac"},
        {"type": "integer"},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "string", "enum": ["a", "b\u00e9"]},
        {"type": "array", "items": {"type": "string"}},
    ]
)


def objects(inner: st.SearchStrategy[Any], keys: st.SearchStrategy[str] = ASCII_KEYS) -> st.SearchStrategy[Any]:
    """Object schemas of 1 to 3 ``properties`` of ``inner`` named from ``keys``, some required."""

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        properties = draw(st.dictionaries(keys, inner, min_size=1, max_size=3))
        required = draw(st.lists(st.sampled_from(sorted(properties)), unique=True, max_size=len(properties)))
        node: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            node["required"] = required
        return node

    return build()


CLEAN = st.recursive(
    CLEAN_LEAVES,
    lambda inner: st.one_of(objects(inner), st.builds(lambda i: {"type": "array", "items": i}, inner)),
    max_leaves=5,
)


@st.composite
def placed(draw: st.DrawFn, feature: st.SearchStrategy[Any]) -> dict[str, Any]:
    """A clean object root with ``feature``'s node at a drawn place: a root property, a nested
    object's property, array items or an anyOf arm beside a null."""
    node = draw(feature)
    where = draw(st.sampled_from(["root", "nested", "items", "anyOf"]))
    if where == "nested":
        node = {"type": "object", "properties": {"inner": node}, "required": ["inner"]}
    elif where == "items":
        node = {"type": "array", "items": node}
    elif where == "anyOf":
        node = {"anyOf": [node, {"type": "null"}]}
    root = draw(objects(CLEAN))
    return {**root, "properties": {**root["properties"], "f": node}}


NUMBER_NODES = st.builds(
    lambda kind, low, high, default: {"type": kind, "minimum": low, "maximum": high, "default": default},
    st.sampled_from(["number", "integer"]),
    NUMBERS,
    NUMBERS,
    NUMBERS,
)


@st.composite
def unicode_keyed(draw: st.DrawFn) -> dict[str, Any]:
    """An object whose property names (at the root, and maybe nested) are unicode or punctuated."""
    nested = draw(objects(CLEAN_LEAVES, UNICODE_KEYS))
    root: dict[str, Any] = draw(objects(st.one_of(CLEAN_LEAVES, st.just(nested)), UNICODE_KEYS))
    return root


@st.composite
def deep(draw: st.DrawFn) -> dict[str, Any]:
    """Objects nested 8 to 40 deep (16 to 80 JSON levels), a clean leaf at the bottom. (From 49
    objects down, openai-agents' own depth guard, 100 JSON levels, raises before its strict
    conversion and the agent lists none of the server's tools: not generated, no proxy repair.)"""
    node: dict[str, Any] = dict(draw(CLEAN_LEAVES))
    for depth in range(draw(st.integers(8, 40))):
        key = draw(ASCII_KEYS)
        node = {"type": "object", "properties": {key: node}, **({"required": [key]} if depth % 2 else {})}
    return {"type": "object", "properties": {"tree": node}}


@st.composite
def ref_cycles(draw: st.DrawFn) -> dict[str, Any]:
    """A ``$defs`` cycle: a linked list, a tree, or two definitions naming each other."""
    shape = draw(st.sampled_from(["list", "tree", "mutual"]))
    if shape == "list":
        defs = {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "number"},
                    "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                },
                "required": ["value"],
            }
        }
    elif shape == "tree":
        defs = {
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
            }
        }
    else:
        defs = {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}, "n": {"type": "integer"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "s": {"type": "string"}}},
        }
    first = next(iter(defs))
    root = draw(objects(CLEAN))
    return {**root, "properties": {**root["properties"], "f": {"$ref": f"#/$defs/{first}"}}, "$defs": defs}


MIXED = st.sampled_from([1, "one", None, True, 12.5, 1e-7, 123456789012345678901234, "caf\u00e9", False, 0])
MIXED_ENUMS = st.one_of(
    st.builds(lambda values: {"enum": values}, st.lists(MIXED, min_size=2, max_size=5, unique_by=repr)),
    st.builds(
        lambda values: {"type": ["integer", "string", "null"], "enum": [*values, "x", 7]},
        st.lists(st.sampled_from([1, "one", None, 0]), max_size=3, unique_by=repr),
    ),
    st.builds(
        lambda values: {"type": "integer", "enum": values}, st.lists(st.integers(-5, 2**70), min_size=1, max_size=4)
    ),
    st.builds(lambda values: {"type": "number", "enum": values}, st.lists(NUMBERS, min_size=1, max_size=4)),
)
TUPLES = st.one_of(
    st.builds(
        lambda arms: {"type": "array", "prefixItems": arms, "items": False},
        st.lists(CLEAN_LEAVES, min_size=1, max_size=3),
    ),
    st.builds(lambda arms: {"type": "array", "prefixItems": arms}, st.lists(CLEAN_LEAVES, min_size=1, max_size=3)),
    st.builds(
        lambda arms, extra: {"type": "array", "items": arms, "additionalItems": extra},
        st.lists(CLEAN_LEAVES, min_size=1, max_size=3),
        st.one_of(st.just(False), CLEAN_LEAVES),
    ),
)
NEVER_ANYOF = st.builds(
    lambda arm, described: {"anyOf": [{"not": {}}, arm], **({"description": "zod \u2713"} if described else {})},
    CLEAN,
    st.booleans(),
)

#: One strategy per feature, each an ``inputSchema`` that has it.
FEATURES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "plain": objects(CLEAN),
    "numbers": placed(NUMBER_NODES),
    "unicode_keys": unicode_keyed(),
    "deep_nesting": deep(),
    "ref_cycles": ref_cycles(),
    "mixed_enums": placed(MIXED_ENUMS),
    "tuples": placed(TUPLES),
    "never_anyof": placed(NEVER_ANYOF),
}
FEATURES["together"] = st.builds(
    lambda parts: {
        "type": "object",
        "properties": {f"p{i}": part for i, part in enumerate(parts)},
        "$defs": {k: v for part in parts for k, v in part.get("$defs", {}).items()},
    },
    st.lists(
        st.one_of(*(FEATURES[name] for name in ("numbers", "mixed_enums", "tuples", "never_anyof"))),
        min_size=2,
        max_size=3,
    ),
)

#: What each family still refuses through the proxy today, by feature (``xfail(strict=True)``).
KNOWN_REFUSED: dict[tuple[str, str], str] = {}
#: Where the listing for a family's host still loses a value of the server's schema (neither in
#: place nor in ``_meta``), by feature (``xfail(strict=True)``).
KNOWN_LOST: dict[tuple[str, str], str] = {}

# -- the checks ------------------------------------------------------------------------------------


def listed(tool: dict[str, Any], family: str) -> dict[str, Any] | None:
    """The proxy's listing of ``tool`` for ``family``'s host (``None``: withheld); openai-agents,
    which names no host, with ``[normalizer] model_api = "openai-strict"`` naming its family."""
    config = NormalizerConfig.shipped()
    if family == "openai-strict":
        config = dataclasses.replace(config, model_api=family)
    client = config.for_client(profile_for(CLIENTS[family]))
    normalizer = Normalizer(config)
    result = normalizer.tools_list({"tools": [tool]}, ERA, client)
    tools = result.result["tools"]
    assert json.loads(json.dumps(result.result, allow_nan=False)) == result.result  # valid JSON
    named = [t for t in tools if (t.get("_meta") or {}).get(ORIGINAL_NAME, t.get("name")) == tool["name"]]
    assert len(named) <= 1 and len(tools) == len(named), tools
    if named and normalizer.withholds and withhold.withheld(named[0], client) is not None:
        return None  # rule withhold_tools, as the engine's tools/list path runs it after every repair
    return named[0] if named else None


def _at(document: Any, path: tuple[Any, ...]) -> tuple[bool, Any]:
    for step in path:
        if isinstance(document, dict) and step in document:
            document = document[step]
        elif isinstance(document, list) and isinstance(step, int) and 0 <= step < len(document):
            document = document[step]
        else:
            return False, None
    return True, document


def _same(a: Any, b: Any) -> bool:
    return bool(a == b and type(a) is type(b))


def lost_values(original: dict[str, Any], out: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The paths of the server's ``inputSchema`` values neither in place (a renamed key followed
    through any name map the proxy keeps in ``_meta``) nor kept in the tool's ``_meta``."""
    meta = {key: value for key, value in (out.get("_meta") or {}).items() if key.startswith(PREFIX)}
    renamed: dict[str, set[str]] = {}
    for value in meta.values():
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            for advertised, own in value.items():
                renamed.setdefault(own, set()).add(advertised)
    lost = []
    for path, value in leaves(original.get("inputSchema"), ("inputSchema",)):
        paths = [path]
        for i, step in enumerate(path):
            if isinstance(step, str) and step in renamed:
                paths += [(*p[:i], new, *p[i + 1 :]) for p in list(paths) for new in renamed[step]]
        if any(found and _same(there, value) for found, there in (_at(out, p) for p in paths)):
            continue
        if not contains_value(meta, value):
            lost.append(path)
    return lost


def _tool(schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": "generated_tool", "description": "g\u00e9n\u00e9r\u00e9", "inputSchema": schema}


def _cases(known: dict[tuple[str, str], str]) -> list[Any]:
    cases = []
    for family in CLIENTS:
        for feature in FEATURES:
            why = known.get((family, feature))
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            cases.append(pytest.param(family, feature, id=f"{family}-{feature}", marks=marks))
    return cases


@pytest.mark.parametrize(("family", "feature"), _cases(KNOWN_REFUSED))
@EXAMPLES
@given(data=st.data())
def test_the_family_takes_what_the_proxy_lists_for_its_host(family: str, feature: str, data: st.DataObject) -> None:
    judge = JUDGES[family]
    tool = _tool(data.draw(FEATURES[feature], label="inputSchema"))
    out = listed(tool, family)
    if out is None:  # withheld: only a tool the family refuses as the server wrote it
        assert judge.refused(tool), "withheld a tool the family takes"
        return
    assert not judge.refused(out), (judge.refused(out), out)


@pytest.mark.parametrize(("family", "feature"), _cases(KNOWN_LOST))
@EXAMPLES
@given(data=st.data())
def test_the_listing_keeps_every_original_value_in_place_or_in_meta(
    family: str, feature: str, data: st.DataObject
) -> None:
    tool = _tool(data.draw(FEATURES[feature], label="inputSchema"))
    out = listed(tool, family)
    if out is not None:
        assert not lost_values(tool, out), (lost_values(tool, out), out)
