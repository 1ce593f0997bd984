"""Rule ``nullable``: places declared nullable accept ``null``, and invalid values there become ``null``.

Fault kind ``null_for_non_nullable`` (DESIGN section 3, rule 2). A place is declared nullable by a
JSON pointer pattern in the config (``/runtimes/*/scope`` for ``protean.list_runtimes``) or by an
OpenAPI 3.0 ``nullable: true`` in the ``outputSchema``. In ``tools/list`` the advertised schema
accepts ``null`` there (``["string", "null"]``, ``null`` added to an ``enum``); in results, a value
that violates the schema at such a place becomes ``null`` and the original is kept in ``_meta``
(``dev.mcp-normalizer/original-values``), so the result conforms to what the proxy advertised and
nothing is lost.
"""

from __future__ import annotations

from ...types import JSON, JSONObject
from ...wire.pointer import Path, PointerPattern, format_pointer, resolve
from ..schema import SchemaUnusable
from .base import ResultContext, Rewrite, Rule, ToolContext, set_at, with_original_values
from .scan import ToolScan
from .schemas import convert_openapi_nullable, widen_at

#: In a tool's text (:class:`~.scan.ToolScan`), what an OpenAPI ``nullable: true`` always holds.
OPENAPI_NULLABLE = b'nullable":true'


def declared_places(
    tool: JSONObject, configured: tuple[PointerPattern, ...], scan: ToolScan | None = None
) -> tuple[PointerPattern, ...]:
    """The nullable places of a tool: the configured patterns plus OpenAPI ``nullable: true`` places
    (``scan``: the tool's, when at hand: a tool without the keyword is not walked)."""
    schema = tool.get("outputSchema")
    if not isinstance(schema, dict) or (scan is not None and not scan.has(OPENAPI_NULLABLE)):
        return configured
    _, places, _ = convert_openapi_nullable(schema)
    found = {p.text: p for p in configured}
    for path in places:
        pattern = PointerPattern(format_pointer(path), tuple(str(step) for step in path))
        found.setdefault(pattern.text, pattern)
    return tuple(found.values())


def _advertise(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    schema = tool.get("outputSchema")
    if not isinstance(schema, dict):
        return None
    new_schema, _, converted = convert_openapi_nullable(schema)
    pointers: list[str] = []
    if converted:
        pointers.append("/outputSchema")
    # Deepest places first, so widening an outer place cannot hide an inner one.
    for pattern in sorted(ctx.nullable, key=lambda p: len(p.segments), reverse=True):
        new_schema, widened = widen_at(new_schema, pattern.segments)
        if widened:
            pointers.append(pattern.text)
    if new_schema is schema:
        return None
    reasons = []
    if converted:
        reasons.append(f"{converted} OpenAPI 'nullable: true' keyword(s)")
    if len(pointers) > (1 if converted else 0):
        reasons.append(f"{ctx.nullable_by}: nullable (the server sends null there; its schema does not allow it)")
    return (
        {**tool, "outputSchema": new_schema},
        Rewrite("nullable", "advertised nullable places in outputSchema", tuple(pointers), "; ".join(reasons)),
    )


def _null_invalid(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    tool = ctx.tool
    if tool is None or not tool.nullable or tool.compiled is None or result.get("isError") is True:
        return None
    if "structuredContent" not in result:
        return None
    structured = result["structuredContent"]
    try:
        violations = tool.compiled.violations(structured)
    except SchemaUnusable:
        return None
    places: dict[Path, str] = {}
    for violation in violations:
        for pattern in tool.nullable:
            place = pattern.nearest_match(violation.path)
            if place is not None:
                places.setdefault(place, violation.describe())
                break
    # Drop places inside another place that is nulled anyway.
    chosen = [p for p in places if not any(len(q) < len(p) and p[: len(q)] == q for q in places)]
    originals: dict[str, JSON] = {}
    for place in chosen:
        found, value = resolve(structured, place)
        if found and value is not None:
            structured = set_at(structured, place, None)
            originals[format_pointer(place)] = value
    if not originals:
        return None
    out = with_original_values({**result, "structuredContent": structured}, originals)
    reason = "; ".join(places[p] for p in chosen if format_pointer(p) in originals)
    return out, Rewrite(
        "nullable",
        "replaced invalid values at nullable places with null",
        tuple("/structuredContent" + p for p in originals),
        reason,
    )


RULE = Rule(
    name="nullable",
    kind="null_for_non_nullable",
    summary="Advertise declared nullable places (config pointers, OpenAPI nullable) and null invalid values there.",
    on_tool=_advertise,
    on_result=_null_invalid,
    conformance=True,
    tool_gate=lambda scan, ctx: bool(ctx.nullable) or scan.has(OPENAPI_NULLABLE),
)
