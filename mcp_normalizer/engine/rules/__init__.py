"""The normalization rules, in the order the engine applies them.

Each rule module holds one family of faults (``cases/faults.md``) and exposes a :class:`Rule`.
Rules are pure functions of a message and a context; see :mod:`mcp_normalizer.engine.rules.base`. The order is the
repair ladder's: the result's envelope first, then errors, then a missing ``structuredContent``,
then the value repairs of the conformance group (kept only if together they make the result
conform), then the last resort, then presentation.
"""

from __future__ import annotations

from . import (
    apps_result_meta,
    block_members,
    content_blocks,
    degrade,
    empty_structured,
    envelope,
    era_fields,
    error_problem,
    gemini_schemas,
    host_content,
    host_schemas,
    input_combinator,
    last_resort,
    learned,
    lone_surrogates,
    media_data,
    meta_keys,
    model_schemas,
    nullable,
    output_member,
    sse_framing,
    text_mirror,
    tool_names,
    withhold,
)
from .base import Mode, ResultContext, Rewrite, Rule, RuleSettings, ToolContext
from .boolean_schemas import BOOLEAN_SUBSCHEMA, SCHEMA_TUPLE
from .declared import DROP_OUTPUT_SCHEMA, RELAX
from .jsonrpc_envelope import CURSOR_LOOP, ENVELOPE, NULL_CURSOR, STAMP_ID
from .missing_structured import ERROR_FLAG, PROMOTE_TEXT_JSON, VACUOUS_STRUCTURED_CONTENT
from .null_values import NULL_ARRAY_TO_EMPTY, NULL_OPTIONAL_MEMBER
from .object_root import OBJECT_RESULT, OBJECT_ROOT, REWRAP_RESULT, WRAP_RESULT
from .schema_keywords import ENUM_NOT_ARRAY, INPUT_OBJECT_ROOT, REQUIRED_BOOLEAN, REQUIRED_IN_PROPERTIES, TYPE_NAMES
from .schema_repairs import DATE_TIME_FORMAT, SCHEMA_DIALECT, SCHEMA_REFS, SCHEMA_SHAPE, TIMESTAMP_OBJECTS
from .value_repairs import COERCE_TYPES, PRUNE_ADDITIONAL

#: ``tools/list`` repairs, in the order they run on each tool.
TOOL_RULES: tuple[Rule, ...] = (
    meta_keys.RULE,
    DROP_OUTPUT_SCHEMA,
    degrade.RULE,  # opted in only: after drop_output_schema, the same drop made lossy
    SCHEMA_SHAPE,
    INPUT_OBJECT_ROOT,  # after schema_shape, which types a root without type
    TYPE_NAMES,
    REQUIRED_BOOLEAN,
    REQUIRED_IN_PROPERTIES,
    ENUM_NOT_ARRAY,
    BOOLEAN_SUBSCHEMA,  # after schema_shape: a boolean root outputSchema is dropped there
    SCHEMA_DIALECT,
    SCHEMA_TUPLE,  # after schema_dialect: a draft-07 tuple's additionalItems: false becomes items: false there
    TIMESTAMP_OBJECTS,  # reads $defs names, so before schema_refs inlines them
    SCHEMA_REFS,
    input_combinator.RULE,  # after schema_refs: arms given as $refs are inlined by then
    model_schemas.RULE,  # after the schema_keywords and schema_dialect repairs, and input_combinator's hoist
    host_schemas.RULE,  # after input_combinator, which may hoist a root anyOf's arms
    gemini_schemas.RULE,  # after host_schemas: its anyOf arms carry their type by then
    nullable.RULE,
    RELAX,
    DATE_TIME_FORMAT,
    OBJECT_ROOT,
)
#: ``tools/call`` repairs, in the order they run on each result (the repair ladder).
RESULT_RULES: tuple[Rule, ...] = (
    # the envelope
    envelope.RULE,
    output_member.RULE,  # before content_blocks, which gives a result without content an empty one
    content_blocks.RULE,
    media_data.RULE,
    block_members.RESOURCE_LINK_NAME,
    block_members.ANNOTATIONS,
    host_content.RULE,  # after the block repairs: it reads well-formed blocks
    meta_keys.RULE,
    # errors, the shape the era requires, a missing structuredContent
    error_problem.RULE,
    OBJECT_RESULT,
    PROMOTE_TEXT_JSON,
    VACUOUS_STRUCTURED_CONTENT,
    ERROR_FLAG,
    # the conformance group: kept only if together they make the result conform
    WRAP_RESULT,
    nullable.RULE,
    NULL_OPTIONAL_MEMBER,
    NULL_ARRAY_TO_EMPTY,
    PRUNE_ADDITIONAL,
    COERCE_TYPES,
    REWRAP_RESULT,
    # what is left
    empty_structured.RULE,
    last_resort.RULE,
    degrade.RULE,  # opted in only: before text_mirror, which it leaves nothing to do
    text_mirror.RULE,
    apps_result_meta.RULE,  # presentation: reads the catalog entry only, after the value rules
)
#: Repairs of a JSON-RPC response's envelope (any method), in order, before the result rules.
RESPONSE_RULES: tuple[Rule, ...] = (ENVELOPE, STAMP_ID, NULL_CURSOR, CURSOR_LOOP, era_fields.RULE)
#: Rules with no hook: the transformer applies them (the SSE framing, the message text before it is
#: decoded, tool names across a page and the requests that use them, what a scope learned, the tools
#: withheld from a host after every repair).
STREAM_RULES: tuple[Rule, ...] = (sse_framing.RULE, lone_surrogates.RULE, tool_names.RULE, learned.RULE, withhold.RULE)
#: Every rule once (for names, config validation and the rule reference of docs/rules.md).
RULES: tuple[Rule, ...] = tuple(dict.fromkeys((*STREAM_RULES, *RESPONSE_RULES, *TOOL_RULES, *RESULT_RULES)))
RULES_BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}

__all__ = [
    "RESPONSE_RULES",
    "RESULT_RULES",
    "RULES",
    "RULES_BY_NAME",
    "STREAM_RULES",
    "TOOL_RULES",
    "Mode",
    "ResultContext",
    "Rewrite",
    "Rule",
    "RuleSettings",
    "ToolContext",
]
