"""What a server's author changes in their code to fix each kind of fault at the source (pure data).

``check`` prints it next to what the proxy does (``author fix:``; ``"author"`` in JSON), and the
rule file ``check --write-config`` writes names it in its comments: the proxy is a bridge, the
server's own fix is the end of the fault. Keyed by fault kind (:data:`mcp_normalizer.check.faults.KINDS`);
the examples are the frameworks the reports show (FastMCP and the Python SDK with Pydantic, the
TypeScript SDK with zod, Go's ``mcp-go`` and the official Go SDK).
"""

from __future__ import annotations

_CONFORM = (
    "make the value match the outputSchema, or the schema describe the value (they are generated from the same"
    " type in FastMCP, the TS SDK with zod and the Go SDKs: fix the type)"
)

AUTHOR_FIXES: dict[str, str] = {
    "error_result_validated": "on isError, send structuredContent only if it matches the outputSchema; put a problem"
    " object in _meta or the text (TS SDK: return { isError: true, content: [...] } without structuredContent)",
    "null_for_non_nullable": "declare the field nullable where it can be None: FastMCP/Pydantic `email: str | None ="
    ' None` (not `email: str = None`), zod `.nullable()`, Go `*string` with `jsonschema:"nullable"` or omitempty',
    "enum_mismatch": "add the new value to the enum/const (or drop the const) where the upstream API grew; generate"
    " the schema from the same enum the code returns",
    "type_mismatch": "return the declared type (a number, not its string), or declare what you return; for dates,"
    " declare `type: string, format: date-time` rather than an object",
    "additional_properties": "remove additionalProperties: false from the outputSchema or stop sending the extra"
    " members (zod: `.passthrough()`; Pydantic: `model_config = ConfigDict(extra='allow')`)",
    "wrapped_result": "return the object the outputSchema describes, not an {ok, status, data} envelope around it",
    "missing_structured_content": "return structuredContent on every success of a tool that declares an outputSchema,"
    " or declare no outputSchema (FastMCP: `output_schema=None`; TS SDK: omit outputSchema)",
    "spurious_output_schema": "declare an outputSchema only for a tool that returns structuredContent; never"
    " `outputSchema: true` or an empty schema",
    "error_not_flagged": "set isError: true on a failed call (FastMCP: raise ToolError; TS SDK: return { isError:"
    " true })",
    "non_object_structured_content": 'wrap a list or scalar result in an object ({"result": ...}) and declare an'
    " object outputSchema (FastMCP does this for you with `x-fastmcp-wrap-result`)",
    "non_object_output_schema": "give the outputSchema `type: object` at its root; wrap other results as"
    ' {"result": ...}',
    "schema_ref_unresolvable": "inline the $defs a $ref points to (Pydantic: `model_json_schema(ref_template=...)`"
    " with the $defs kept beside it; zod-to-json-schema: `$refStrategy: 'none'`); never a remote $ref",
    "schema_dialect": "emit 2020-12 schemas without $schema (zod 4 `z.toJSONSchema`; zod-to-json-schema `target:"
    " 'jsonSchema2019-09'` or later, then drop $schema)",
    "invalid_schema_shape": "emit `properties: {}` (never null or []), omit an empty required, give every array"
    " `items`, always send an inputSchema with `type: object`",
    "format_date_time": "send date-times with a time-zone offset: Python `datetime.now(UTC)` (never a naive"
    " datetime), JS `toISOString()`, Go `time.RFC3339`",
    "missing_text_content": "also return the serialized JSON of structuredContent in a text block (FastMCP and the"
    " TS SDK `McpServer` do it when you return an object)",
    "invalid_content_block": "send only text, image, audio, resource_link and resource blocks; a text block's"
    " `text` is a string; report errors with isError: true, not a block of type 'error'",
    "null_optional_fields": "omit optional members instead of writing null (Pydantic: `model_dump(exclude_none=True)`"
    "; Go: `omitempty`; Jackson: `@JsonInclude(NON_NULL)`)",
    "meta_key_invalid": "name _meta keys `reverse.dns.prefix/name` (letters, digits, hyphens; name starts and ends"
    " alphanumeric); keep _meta an object",
    "empty_structured_content": "omit structuredContent on tools without an outputSchema instead of sending {}",
    "double_encoded_json": "return the object itself from the tool (its return type), not `json.dumps(...)` of it",
    "summary_only_content": "put the serialized JSON of structuredContent in a text block (a summary may go in a"
    " second block)",
    "invalid_tools_list": "list each tool once, as an object with a string name, in a `tools` array",
    "jsonrpc_batch_response": "answer a single request with a single response object, with either result or"
    " error (never both, never error: null)",
    "jsonrpc_id_mismatch": 'echo the request\'s id exactly, in its type ("1" stays a string)',
    "sse_framing": "end every SSE event with a blank line (`data: ...\\n\\n`); flush after each event",
    "invalid_media_data": "send image and audio data as bare base64 (strip the `data:<mime>;base64,` prefix; give"
    " mimeType separately)",
    "invalid_unicode": "never cut a string inside a surrogate pair (truncate by code point: Python slices do;"
    " JS `slice` on a string with emoji does not: use `Array.from(s).slice(...)`)",
    "input_schema_root_combinator": "give inputSchema one object root (`type: object` with properties); express"
    " alternatives inside it, not as a root anyOf/oneOf/allOf (zod: `z.object` rather than `z.union` at the top)",
    "invalid_type_keyword": "write type as a JSON type name (`integer`, not `int`; `string` with `format:"
    " date-time`, not `date-time`); leave type out for a value of any type",
    "required_in_properties": "put `required` beside `properties`, not inside it",
    "required_boolean": "list required properties in the object's `required` array instead of `required: true`"
    " on each property (draft-03)",
    "enum_not_array": 'write enum as an array (`["x"]`, or `const: "x"`); leave it out rather than null',
    "input_schema_not_object": "give inputSchema `type: object` at its root; put a single value in a property",
    "tool_name_invalid": "name tools with A-Z, a-z, 0-9, underscore, hyphen and dot only, 1 to 64 characters (the"
    " limit Claude hosts enforce)",
    "boolean_subschema": 'write `{}` for an unconstrained property instead of `true`, and `{"not": {}}` instead of'
    " `false` (Pydantic `Any` fields: give them a type; zod `z.any()` emits {})",
    "output_schema_tuple": "for a fixed-length array, prefer `type: array` with `items` of one schema plus"
    " minItems/maxItems; if you keep prefixItems, leave out the closing `items: false` (draft-07 clients misread"
    " it)",
    "resource_link_incomplete": "give every resource_link a string name (and a uri): the TS SDK `ResourceLink`"
    " type requires both",
    "annotations_invalid": "use only 'user' and 'assistant' in annotations.audience (MCP Role), a priority from 0"
    " to 1, and an ISO 8601 string for lastModified",
    "host_observed": "for the host named: an object inputSchema for every tool, object property schemas rather"
    " than true or false, 2020-12 prefixItems rather than a draft-07 items array, and an error's code and detail"
    " in a text block beside its problem structuredContent",
    "host_content": "for the hosts that refuse them, send a PNG (or JPEG, GIF, WebP) rather than an SVG image,"
    " repeat a resource_link's URI in a text block, and put a type in each anyOf arm rather than beside anyOf;"
    " all of it is valid, the hosts are at fault",
    "model_api_schema": "give every object schema a properties member (even {}), write tuples as 2020-12"
    " prefixItems, leave out anyOf arms nothing matches (zod: z.never() / .optional() on a required field), and"
    " put an enum where its values belong (on items for an array of them)",
    "pagination_cursor_loop": "omit nextCursor on the last page; never return an empty cursor or the cursor the"
    " request sent",
    "missing_era_fields": "on 2026-07-28 answer every result with resultType: 'complete' (or the kind it is), and"
    " each complete list, server/discover and resources/read result with ttlMs and cacheScope ('private' unless"
    " the result is the same for every user)",
    "result_output_field": "return the text in content: [{type: 'text', text: ...}], not in an output or result"
    " member of your own",
    "tool_not_listed": "list every tool a client may call in tools/list (names are case-sensitive); or give"
    " check --call a name the listing shows",
    "oversized_message": "page tools/list (a nextCursor every few hundred tools) and keep results small: return a"
    " resource_link or a page of a large result, not all of it",
    "audit_cut": "end the listing: omit nextCursor on the last page and answer each page promptly (or run check"
    " with a longer --deadline or a larger --max-listing-bytes if the listing is that large on purpose)",
    "unrepaired": _CONFORM,
    "unreadable_tool": "publish schemas a JSON Schema 2020-12 validator compiles (test them with `jsonschema"
    " check-schema` or Ajv's strict mode)",
    "tool_withheld": "publish an inputSchema valid for JSON Schema draft 2020-12 (`jsonschema check-schema`: a"
    " minLength is an integer, required an array of names, a draft-07 tuple is prefixItems) and what the host"
    " takes (reference/hosts.md); until then the proxy withholds the tool from that host alone",
}


def author_fix(kind: str) -> str:
    """What the server's author changes for ``kind`` (a key of ``KINDS``), ``""`` when unknown."""
    return AUTHOR_FIXES.get(kind, "")
