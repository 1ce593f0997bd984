"""Field data, judged and written exactly (hypothesis): decimals, exponent forms, ``-0``, ``1.10``,
23-digit integers, unicode and escapes, nulls at every depth.

- ``loads`` gives the plain values the standard library gives (clients judge those);
- ``is_valid``, ``violations`` and python-jsonschema agree on them, for schemas with decimal bounds,
  enums and ``multipleOf``;
- a :class:`~mcp_normalizer.wire.jsoncodec.Codec` writes a changed copy with every number spelled as it was,
  wherever it stays and wherever a rule moves it (checked against an oracle that keeps spellings);
- through the transformer, every rule that rewrites keeps every number of the input as written,
  and a conforming result passes byte-identical with no log line.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from typing import Any

import jsonschema
import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.engine.audit import AuditLog
from mcp_normalizer.engine.exchange import Exchange
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules.base import set_at
from mcp_normalizer.engine.schema import SchemaCompiler, SchemaUnusable
from mcp_normalizer.engine.scopes import ScopeStore
from mcp_normalizer.engine.transform import ResponseTransformer
from mcp_normalizer.engine.typed import compile_typed
from mcp_normalizer.errors import DecodeError
from mcp_normalizer.types import JSON
from mcp_normalizer.wire.jsoncodec import Codec, Raw, dumps, loads, spliced
from mcp_normalizer.wire.jsonrpc import PendingRequest

from .support import capture_rewrites, feed_all, object_schemas

pytestmark = pytest.mark.pure

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- how the field writes JSON -------------------------------------------------------------------

#: Numbers as servers write them: shortest forms, padded decimals, exponents both cases, -0, long integers.
NUMBER_TEXT = st.one_of(
    st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    st.sampled_from(
        [
            "12.5",
            "12.50",
            "1.10",
            "-0",
            "-0.0",
            "0.1",
            "1e-7",
            "1E5",
            "100.0",
            "2.5E-3",
            "123456789012345678901234",
            "-99999999999999999999999",
            "18446744073709551616",
            "3.14159265358979323846264338",
            "5e-324",
            "1.7976931348623157e308",
            "0.30000000000000004",
        ]
    ),
).filter(lambda text: math.isfinite(float(text)))  # 1E400 is covered on its own below
#: Text with what breaks naive code: quotes, backslashes, controls, non-ASCII, astral characters.
TEXT = st.one_of(
    st.sampled_from(["", "scope", "12.50", "2024-01-05T10:00:00", "-0", "naïve café", "\U0001f680 launch", 'a "q"']),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
)
SPACE = st.sampled_from(["", " ", "\n  ", "\t", "\r\n"])
NAMES = st.sampled_from(["total", "scope", "items", "n", "price", "név", "a/b", "~x", "\U0001f511", "id"])


@st.composite
def string_texts(draw: st.DrawFn, value: st.SearchStrategy[str] = TEXT) -> str:
    """A JSON string literal, escaped the ways encoders do (``\\u00e9`` or raw UTF-8, ``\\/``)."""
    text = json.dumps(draw(value), ensure_ascii=draw(st.booleans()))
    return text.replace("/", "\\/") if draw(st.booleans()) else text


@st.composite
def json_texts(draw: st.DrawFn, depth: int = 0) -> str:
    """A JSON text as a field server writes it: any number spelling, nulls at every depth."""
    kind = draw(st.integers(0, 5 if depth < 4 else 2))
    if kind == 0:
        return draw(NUMBER_TEXT)
    if kind == 1:
        return draw(string_texts())
    if kind == 2:
        return draw(st.sampled_from(["null", "true", "false", "null"]))
    items = draw(st.lists(json_texts(depth + 1), max_size=4))
    if kind == 3:
        return "[" + ",".join(draw(SPACE) + item + draw(SPACE) for item in items) + "]"
    keys = draw(st.lists(NAMES, min_size=len(items), max_size=len(items), unique=True))
    members = (
        f"{draw(SPACE)}{draw(string_texts(st.just(key)))}{draw(SPACE)}:{draw(SPACE)}{item}"
        for key, item in zip(keys, items, strict=True)
    )
    return "{" + ",".join(members) + "}"


DOCUMENTS = st.one_of(json_texts(), json_texts(2)).map(lambda text: text.encode())

# -- a reading of JSON text that keeps spellings: the oracle -----------------------------------

_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|(true|false|null)|([{}\[\],:]))')


def tokens(text: bytes) -> list[tuple[str, Any]]:
    """The tokens of a JSON text: numbers as written, strings decoded, whitespace dropped."""
    out: list[tuple[str, Any]] = []
    source, at = text.decode(), 0
    while at < len(source.rstrip()):
        match = _TOKEN.match(source, at)
        assert match is not None, source[at : at + 40]
        string, number, literal, mark = match.groups()
        if string is not None:
            out.append(("string", json.loads(string)))
        elif number is not None:
            out.append(("number", number))
        else:
            out.append(("mark", literal or mark))
        at = match.end()
    return out


def numbers_in(text: bytes) -> Counter[str]:
    """Every number literal of a JSON text, and every string that holds one (a number a rule turned
    into its text): how many times each spelling occurs."""
    found: Counter[str] = Counter()
    for kind, value in tokens(text):
        if kind == "number" or (kind == "string" and re.fullmatch(r"-?\d+(\.\d+)?([eE][+-]?\d+)?", value)):
            found[value] += 1
    return found


class Spelled(str):
    """A number in the oracle: its text."""


def oracle(text: bytes) -> Any:
    """``text`` decoded with every number kept as its spelling."""
    return json.loads(text, parse_float=Spelled, parse_int=Spelled, parse_constant=Spelled)


def write(value: Any) -> bytes:
    """The oracle's compact writer."""
    if isinstance(value, Spelled):
        return value.encode()
    if isinstance(value, dict):
        return b"{" + b",".join(json.dumps(k).encode() + b":" + write(v) for k, v in value.items()) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(write(v) for v in value) + b"]"
    return json.dumps(value).encode()


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every location in ``value``, the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, member in value.items():
            found += paths(member, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        if not isinstance(value, dict | list):
            raise TypeError("no such place")
        value = value[step]
    return value


def plain(value: Any) -> Any:
    """An oracle value as the plain value loads gives."""
    if isinstance(value, Spelled):
        return json.loads(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


# -- decoding and judging -------------------------------------------------------------------------


@PROPERTY
@given(text=DOCUMENTS)
def test_loads_gives_the_plain_values_the_standard_library_gives(text: bytes) -> None:
    value = loads(text)
    expected = json.loads(text)
    assert value == expected
    assert [type(leaf) for leaf in _leaves(value)] == [type(leaf) for leaf in _leaves(expected)]


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for member in value.values() for leaf in _leaves(member)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


@pytest.mark.parametrize("text", [b"1E400", b'{"total": -1e400}', b"[1, 2e999]"])
def test_a_number_beyond_the_double_range_is_not_decoded(text: bytes) -> None:
    """Clients disagree on it (JavaScript: Infinity; jsonschema-rs: null): such a message passes untouched."""
    with pytest.raises(DecodeError):
        loads(text)


LEAF_SCHEMAS = st.one_of(
    st.sampled_from(
        [
            {"type": "number"},
            {"type": "integer"},
            {"type": "string"},
            {"type": ["string", "null"]},
            {"type": "number", "minimum": 12.5},
            {"type": "number", "exclusiveMaximum": 1.1},
            {"type": "number", "maximum": 1e-7},
            {"type": "integer", "maximum": 18446744073709551615},
            {"type": "integer", "minimum": -9223372036854775808},
            {"multipleOf": 3},
            {"multipleOf": 0.01},
            {"multipleOf": 2.5},
            {"enum": [1.1, 12.5, "12.50", 0, None]},
            {"const": 12.5},
            {"const": 0},
            {"enum": [123456789012345678901234, 1e23]},
            {"type": "string", "minLength": 2, "maxLength": 5},
            {"type": "string", "pattern": "^[0-9.]+$"},
            {},
            {"not": {"type": "null"}},
            # the typed check's subset: bounds it rounds for integers, kinds it unites, enums it types
            {"type": "integer", "minimum": 0.5, "exclusiveMaximum": 10.5},
            {"type": "integer", "exclusiveMinimum": -3, "maximum": 9007199254740991},
            {"type": ["integer", "null"], "minimum": 0},
            {"type": ["number", "integer"], "exclusiveMinimum": 0},
            {"type": "number", "minimum": -9007199254740991, "maximum": 1.5e15},
            {"type": "boolean"},
            {"type": "null"},
            {"type": "array"},
            {"type": "array", "minItems": 1, "items": {"type": "number"}},
            {"type": "object"},
            {"type": "object", "additionalProperties": False},
            {"enum": ["a", "1.10", None]},
            {"type": "string", "enum": ["a", "12.50", None]},
            {"const": None},
            {"type": "string", "maxLength": 1, "format": "date-time", "description": "ünïcode"},
        ]
    ),
)
SCHEMAS = st.recursive(
    LEAF_SCHEMAS,
    lambda inner: st.one_of(
        object_schemas(inner, NAMES),
        st.builds(lambda items, most: {"type": "array", "items": items, "maxItems": most}, inner, st.integers(0, 4)),
        st.builds(lambda branches: {"anyOf": branches}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda branches: {"oneOf": branches}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=8,
)


@PROPERTY
@given(schema=SCHEMAS, text=DOCUMENTS)
def test_is_valid_violations_and_python_jsonschema_agree_on_real_data(schema: Any, text: bytes) -> None:
    """Also on the undecoded text: the typed check says yes only where python-jsonschema does."""
    value = loads(text)
    reference = jsonschema.Draft202012Validator(schema).is_valid(value)
    typed = compile_typed(schema)
    if typed is not None and typed.accepts(text):
        assert reference, "the typed check accepted what the schema rejects"
    try:
        compiled = SchemaCompiler().compile(schema)
        verdict = compiled.is_valid(value)
        found = compiled.violations(value)
        on_text = compiled.is_valid(Raw(text)), compiled.violations(Raw(text)) == []
    except SchemaUnusable:
        return
    assert verdict == (not found) == reference == on_text[0] == on_text[1], (verdict, found, reference, on_text)


def test_the_decimal_that_once_slipped_through_is_valid() -> None:
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    compiled = SchemaCompiler().compile(schema)
    for text in (b'{"total": 12}', b'{"total": 12.5}', b'{"total": 1.10}', b'{"total": 1E-7}', b'{"total": -0}'):
        assert compiled.is_valid(loads(text)) and compiled.violations(loads(text)) == [], text


# -- writing a changed copy ---------------------------------------------------------------------


@PROPERTY
@given(text=DOCUMENTS, data=st.data())
def test_a_changed_copy_keeps_every_number_as_written_where_it_stays_and_where_it_moves(
    text: bytes, data: st.DataObject
) -> None:
    codec = Codec()
    value = codec.loads(text)
    new, expected = _edited(value, oracle(text), data)
    out = codec.splice(new, value)
    assert json.loads(out) == plain(expected)
    assert tokens(out) == tokens(write(expected))


@PROPERTY
@given(text=DOCUMENTS, canonical=st.booleans(), data=st.data())
def test_a_changed_copy_written_from_its_text_is_the_codecs_splice(
    text: bytes, canonical: bool, data: st.DataObject
) -> None:
    """:func:`spliced` (one encoder pass when the text is the encoder's own spelling) writes what
    :meth:`Codec.splice` writes, byte for byte, for texts in the encoder's spelling and not."""
    if canonical:
        text = dumps(loads(text))
    codec = Codec()
    value = codec.loads(text)
    new, _ = _edited(value, oracle(text), data)
    assert spliced(new, value, text) == codec.splice(new, value)


@pytest.mark.parametrize(
    "value",
    [
        math.nan,
        [math.inf],
        {"type": ["string", "null"], "maximum": -math.inf},
        ["null", "a:null", {"deep": [1, {"x": math.nan}]}],
    ],
)
def test_a_non_finite_number_is_refused_wherever_it_is_beside_null_strings(value: Any) -> None:
    """The encoder writes a non-finite float as a ``null`` value: :func:`dumps` refuses it
    (a ``"null"`` string, as in a nullable ``type`` union, is no reason to look, and no cover)."""
    with pytest.raises(DecodeError, match="non-finite"):
        dumps(value)


def test_null_strings_and_null_values_are_written_as_they_are() -> None:
    assert dumps({"type": ["string", "null"], "default": None}) == b'{"type":["string","null"],"default":null}'
    assert dumps(None) == b"null" and dumps([None, "null"]) == b'[null,"null"]'


def _edited(value: Any, spelled: Any, data: st.DataObject) -> tuple[Any, Any]:
    """A changed copy of ``value`` as a rule makes one (up to three places replaced, some of the
    old values moved under ``"moved"``), and the oracle's reading of what it must write."""
    everywhere = paths(value)
    edits = data.draw(st.lists(st.sampled_from(everywhere[1:]), max_size=3)) if len(everywhere) > 1 else []
    new, expected = value, spelled
    moved: list[Any] = []
    for path in edits:
        try:
            piece, oracle_piece = at(new, path), at(expected, path)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced what held it
        if data.draw(st.booleans()):  # move it out (a rule keeping an original in _meta)
            moved.append((piece, oracle_piece))
        replacement = data.draw(st.sampled_from([None, "X", 12.5, {"fresh": [1.5, None]}]))
        new, expected = set_at(new, path, replacement), set_at(expected, path, replacement)
    if moved and isinstance(new, dict):  # kept beside the rest, as rules keep originals in _meta
        new = {**new, "moved": [piece for piece, _ in moved]}
        # Moved ints are written canonically (``-0`` as ``0``) unless inside a moved original container.
        originals = {id(node) for node in _containers(value)}
        expected = {**expected, "moved": [_moved_ints(p, o, originals) for p, o in moved]}
    return new, expected


def _containers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value, *(node for member in value.values() for node in _containers(member))]
    if isinstance(value, list):
        return [value, *(node for item in value for node in _containers(item))]
    return []


def _moved_ints(piece: Any, spelled: Any, originals: set[int]) -> Any:
    """The oracle of a moved piece: an original (unchanged) container keeps every spelling; in a
    changed copy that moved, ints are canonical at any depth (the documented limit)."""
    if isinstance(piece, dict | list) and id(piece) in originals:
        return spelled
    return _canonical_ints(spelled)


def _canonical_ints(spelled: Any) -> Any:
    if isinstance(spelled, dict):
        return {key: _canonical_ints(value) for key, value in spelled.items()}
    if isinstance(spelled, list):
        return [_canonical_ints(value) for value in spelled]
    if isinstance(spelled, Spelled) and re.fullmatch(r"-?\d+", spelled):
        return Spelled(str(int(spelled)))
    return spelled


def test_an_unchanged_value_is_written_as_its_own_bytes() -> None:
    text = b'{ "total" : 12.50, "rows": [ {"n": -0, "x": 1E5} ] }'
    codec = Codec()
    value = codec.loads(text)
    assert codec.splice(value, value) == text
    assert codec.dumps(value) == text
    changed = {**value, "note": "x"}
    assert codec.splice(changed, value) == b'{"total":12.50,"rows":[ {"n": -0, "x": 1E5} ],"note":"x"}'


# -- through the transformer -----------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "total": {"type": "number"},
        "scope": {"type": "string"},
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"price": {"type": "number"}, "qty": {"type": "integer"}, "label": {"type": "string"}},
            },
        },
    },
}
TOOL = {"name": "t", "inputSchema": {"type": "object"}, "outputSchema": SCHEMA}
DECLARED = NormalizerConfig.from_mapping({"tools": {"t": {"nullable": ["/scope", "/rows/*/label"]}}})


@st.composite
def near_texts(draw: st.DrawFn, schema: Any) -> str:
    """A value for ``schema`` written as a field server writes it: right, or with the field's faults
    (null for a value, numbers as strings and back, extra members), numbers in any spelling."""
    fault = draw(st.integers(0, 6))
    if fault == 0:
        return "null"
    kind = schema.get("type")
    if kind == "object":
        members = [
            f"{json.dumps(name)}:{draw(near_texts(sub))}"
            for name, sub in schema["properties"].items()
            if draw(st.integers(0, 3))
        ]
        if fault == 1:
            members.append(f'"extra":{draw(json_texts(2))}')
        return "{" + draw(SPACE) + ",".join(members) + "}"
    if kind == "array":
        return "[" + ",".join(draw(near_texts(schema["items"])) for _ in range(draw(st.integers(0, 3)))) + "]"
    if kind == "number":
        number = draw(NUMBER_TEXT)
        return json.dumps(number) if fault == 1 else number
    if kind == "integer":
        number = draw(st.sampled_from(["7", "-0", "123456789012345678901234", "0"]))
        return json.dumps(number) if fault == 1 else number
    if fault == 1:
        return draw(NUMBER_TEXT)  # a number where a string is declared
    return draw(string_texts())


def transform(body: bytes, config: NormalizerConfig) -> bytes:
    normalizer = Normalizer(config)
    state = ScopeStore().state("s")
    state.catalog.learn(normalizer.tools_list({"tools": [TOOL]}, None).entries, first_page=True)
    exchange = Exchange({("n", 1): PendingRequest("tools/call", tool="t")}, "2025-11-25", "s", state)
    transformer = ResponseTransformer(exchange, normalizer, AuditLog("test"), slice_seconds=0)
    transformer.start(200, [(b"content-type", b"application/json")])
    return feed_all(transformer, body)


@PROPERTY
@given(structured=near_texts(SCHEMA), text=st.booleans(), error=st.booleans(), declared=st.booleans())
def test_every_rule_that_rewrites_keeps_every_number_as_written(
    structured: str, text: bool, error: bool, declared: bool
) -> None:
    content = '[{"type":"text","text":"summary"}]' if text else "[]"
    flag = ',"isError":true' if error else ""
    body = f'{{"jsonrpc":"2.0","id":1,"result":{{"content":{content},"structuredContent":{structured}{flag}}}}}'
    source = body.encode()
    assume(all(math.isfinite(float(n)) for n in numbers_in(source)))
    with capture_rewrites() as log:
        out = transform(source, DECLARED if declared else NormalizerConfig())
    assert json.loads(out)["id"] == 1
    missing = numbers_in(source) - numbers_in(out)
    # only an int that a rule moved by itself may lose its sign of zero (documented): "-0" -> "0"
    assert set(missing) <= {"-0"}, (missing, out)
    if out == source:
        assert not [line for line in log.rewrites() if line.get("event") == "rewrite"]
    else:
        assert log.rewrites(), "a changed message without a log line"


@pytest.mark.parametrize(
    "structured",
    [
        b'{"total": 12.5, "scope": "a", "rows": [{"price": 1.10, "qty": 3}, {"price": 1E-7, "qty": -0}]}',
        b'{"total":123456789012345678901234.5,"rows":[{"price":2.50E+3,"label":"caf\\u00e9 \\ud83d\\ude80"}]}',
        b'{ "total" : 0.30000000000000004 }',
    ],
)
def test_a_conforming_decimal_result_passes_byte_identical_with_no_log_line(structured: bytes) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"structuredContent":%s}}'
    source = body % structured
    with capture_rewrites() as log, _no_warnings():
        assert transform(source, DECLARED) == source
    assert log.rewrites() == []


class _no_warnings:
    """Fail when the proxy logs at warning level or above (an ``unrepaired`` or a fault)."""

    def __enter__(self) -> None:
        self.seen: list[logging.LogRecord] = []
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = self.seen.append  # type: ignore[assignment]
        logging.getLogger("mcp_normalizer").addHandler(self.handler)

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("mcp_normalizer").removeHandler(self.handler)
        assert not self.seen, [record.getMessage() for record in self.seen]


def test_a_result_with_a_number_beyond_the_double_range_passes_untouched_without_a_fault() -> None:
    source = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"_meta":null,"structuredContent":{"total":1e400}}}'
    errors: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append  # type: ignore[assignment]
    logging.getLogger("mcp_normalizer").addHandler(handler)
    try:
        with capture_rewrites() as log:
            assert transform(source, NormalizerConfig()) == source
    finally:
        logging.getLogger("mcp_normalizer").removeHandler(handler)
    assert errors == [] and log.lines == []


def test_the_typed_check_accepts_field_results_that_conform_and_builds_no_values() -> None:
    """The fast path is taken: the bench's 1 MiB rows (decimals spelled as field servers spell
    them) and a small result pass it; a value the subset cannot judge is left to the validator."""
    from bench import fixture

    rows = orjson.dumps(fixture.large_result("n", 1 << 16, decimals=True)["structuredContent"])
    large = compile_typed(fixture.LARGE_SCHEMA)
    assert large is not None and large.accepts(rows)
    small = compile_typed(fixture.SMALL_SCHEMA)
    assert small is not None and small.accepts(orjson.dumps(fixture.small_structured("x")))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    check = compile_typed(schema)
    assert check is not None
    assert not check.accepts(b'{"n": 1.0}')  # an integer in JSON Schema; the validator says so
    assert SchemaCompiler().compile(schema).is_valid(Raw(b'{"n": 1.0}'))
    assert not check.accepts(b'{"n": 1, "n": "x"}') and not check.accepts(b'{"n": "1"}')
    assert compile_typed({"type": "string", "pattern": "^a"}) is None
    assert compile_typed({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}) is None
    # 0 == False, but python-jsonschema reads additionalProperties 0 as false: not translated
    assert compile_typed({"type": "object", "additionalProperties": 0}) is None
    # bytes that are not UTF-8 where msgspec skips (an unconstrained member, a name) or decodes
    not_utf8: list[tuple[JSON, bytes]] = [
        (True, b'["\xff"]'),
        ({"type": "object"}, b'{"\xff":1}'),
        ({"type": "object", "properties": {"a": {}}, "required": ["a"]}, b'{"a":"\xc3"}'),
        ({"type": "string", "maxLength": 1}, b'"\xed\xa0\x80"'),
    ]
    for schema, text in not_utf8:
        typed = compile_typed(schema)
        assert typed is not None and not typed.accepts(text), (schema, text)
    wide = {"type": "object", "properties": {f"p{i}": {"type": "object"} for i in range(5000)}}
    assert compile_typed(wide) is None  # not 5,000 classes: validated the usual way
