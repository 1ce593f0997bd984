"""The rule engine: applies the rules to ``tools/list`` and ``tools/call`` results (pure, no I/O).

The same :class:`Normalizer` serves the middleware, the proxy and ``check``; it never knows which.
For a ``tools/list`` result it repairs each ``Tool`` and builds the catalog entries of what it
advertises. For a ``CallToolResult`` it runs the rules in order (:data:`proxy.rules.RULES`); the
success-result conformance repairs run as one group whose changes are kept only if, together, they
make ``structuredContent`` conform to the advertised ``outputSchema`` (DESIGN section 3: a result
that cannot be made conforming is left as it is, and the reason is logged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .catalog import ToolEntry, build_entry
from .config import NormalizerConfig
from .rules import RULES, Mode, ResultContext, Rewrite, ToolContext
from .rules.nullable import declared_places
from .schema import SchemaCompiler, SchemaUnusable
from .types import JSONObject

_GROUP = tuple(rule for rule in RULES if rule.conformance and rule.on_result is not None)


@dataclass(frozen=True, slots=True)
class Record:
    """A rewrite (or a finding) about one message, with the tool and whether it took effect.

    Attributes:
        rewrite: what the rule did or would do.
        tool: the tool concerned, if known.
        applied: ``False`` when the rule runs in report mode (nothing changed).
        event: ``rewrite``; ``unrepaired`` for a success result no rule could make conform;
            ``skipped`` for a result too large to validate.
    """

    rewrite: Rewrite
    tool: str | None
    applied: bool
    event: Literal["rewrite", "unrepaired", "skipped"] = "rewrite"


@dataclass(slots=True)
class Outcome:
    """The result to emit and what happened to it.

    Attributes:
        result: the result to forward (the input object itself when nothing was applied).
        changed: whether ``result`` differs from the input.
        records: one per rewrite or finding, in rule order.
        entries: catalog entries of the advertised tools (``tools/list`` only).
    """

    result: JSONObject
    changed: bool = False
    records: list[Record] = field(default_factory=list)
    entries: list[ToolEntry] = field(default_factory=list)


class Normalizer:
    """Applies the configured rules.

    Args:
        config: rule modes, per-tool declarations and knobs.
        compiler: shared schema compiler (one per process is enough).
    """

    def __init__(self, config: NormalizerConfig, compiler: SchemaCompiler | None = None) -> None:
        self.config = config
        self.compiler = compiler or SchemaCompiler()

    def tools_list(self, result: JSONObject, era: str | None) -> Outcome:
        """Repair the tools of a ``ListToolsResult`` and build their catalog entries.

        Members of ``tools`` that are not objects with a string ``name`` pass through untouched
        and are not learned.
        """
        tools = result.get("tools")
        outcome = Outcome(result=result)
        if not isinstance(tools, list):
            return outcome
        emitted = list(tools)
        for index, tool in enumerate(tools):
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            name = tool["name"]
            nullable_mode = self.config.mode("nullable", name)
            configured = self.config.nullable_for(name) if nullable_mode is not Mode.OFF else ()
            ctx = ToolContext(era=era, settings=self.config.settings, nullable=configured)
            current = tool
            for rule in RULES:
                mode = self.config.mode(rule.name, name)
                if rule.on_tool is None or mode is Mode.OFF:
                    continue
                done = rule.on_tool(current, ctx)
                if done is None:
                    continue
                outcome.records.append(Record(done[1], name, applied=mode is Mode.ON))
                if mode is Mode.ON:
                    current = done[0]
            if current is not tool:
                emitted[index] = current
                outcome.changed = True
            places = declared_places(tool, configured) if nullable_mode is not Mode.OFF else ()
            outcome.entries.append(build_entry(current, places, self.compiler))
        if outcome.changed:
            outcome.result = {**result, "tools": emitted}
        return outcome

    def tools_call(
        self, result: JSONObject, tool: str | None, entry: ToolEntry | None, era: str | None, size: int
    ) -> Outcome:
        """Normalize one ``CallToolResult`` (``resultType`` absent or ``complete``).

        Args:
            result: the result object from the JSON-RPC response.
            tool: the called tool's name, from the request.
            entry: the tool's catalog entry, ``None`` if the proxy does not know the tool.
            era: the exchange's protocol version.
            size: the encoded size of the message in bytes (for ``max_validate_bytes``).
        """
        outcome = Outcome(result=result)
        validate = size <= self.config.max_validate_bytes
        if not validate and entry is not None and entry.compiled is not None:
            reason = f"result of {size} bytes exceeds max_validate_bytes={self.config.max_validate_bytes}"
            outcome.records.append(Record(Rewrite("validation", "skipped", (), reason), tool, False, "skipped"))
        ctx = ResultContext(tool=entry if validate else _without_schema(entry), era=era, settings=self.config.settings)
        current = result
        for rule in RULES:
            if rule.on_result is None or rule.conformance:
                if rule is _GROUP[0]:
                    current = self._conform(current, ctx, tool, outcome)
                continue
            mode = self.config.mode(rule.name, tool)
            if mode is Mode.OFF:
                continue
            done = rule.on_result(current, ctx)
            if done is None:
                continue
            outcome.records.append(Record(done[1], tool, applied=mode is Mode.ON))
            if mode is Mode.ON:
                current = done[0]
        outcome.result = current
        outcome.changed = current is not result
        return outcome

    def _conform(self, result: JSONObject, ctx: ResultContext, tool: str | None, outcome: Outcome) -> JSONObject:
        """Run the conformance group; keep its changes only if they make the result conform."""
        entry = ctx.tool
        if (
            entry is None
            or entry.compiled is None
            or result.get("isError") is True
            or "structuredContent" not in result
        ):
            return result
        try:
            if entry.compiled.is_valid(result["structuredContent"]):
                return result
        except SchemaUnusable:
            return result
        shadow, real = result, result
        records: list[Record] = []
        for rule in _GROUP:
            mode = self.config.mode(rule.name, tool)
            if mode is Mode.OFF or rule.on_result is None:
                continue
            done = rule.on_result(shadow, ctx)
            if done is None:
                continue
            shadow = done[0]
            records.append(Record(done[1], tool, applied=mode is Mode.ON))
            if mode is Mode.ON:
                again = rule.on_result(real, ctx) if real is not shadow else done
                real = again[0] if again is not None else real
        try:
            remaining = entry.compiled.violations(shadow["structuredContent"], limit=3)
        except SchemaUnusable:
            remaining = []
        if remaining:
            reason = "structuredContent still fails outputSchema at " + ", ".join(v.describe() for v in remaining)
            outcome.records.append(
                Record(
                    Rewrite("conformance", "left unchanged", ("/structuredContent",), reason), tool, False, "unrepaired"
                )
            )
            return result
        outcome.records.extend(records)
        return real


def _without_schema(entry: ToolEntry | None) -> ToolEntry | None:
    """The entry with its validator hidden: rules that need validation skip a result too large to validate."""
    if entry is None:
        return None
    return ToolEntry(
        name=entry.name,
        output_schema=entry.output_schema,
        nullable=entry.nullable,
        ui_resource_uri=entry.ui_resource_uri,
        compiled=None,
        schema_problem="result too large to validate",
    )
