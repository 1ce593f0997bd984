"""What each kind of fault breaks: the spec rule (with its section) and the real clients that fail.

Sources: the MCP specification (``docs/specification/<version>/...`` of
``modelcontextprotocol/modelcontextprotocol``; sections named as in the spec) and the corpus of
public bug reports the project keeps (``cases/faults.md``, "Strict (rejecting) vs lenient"). One
entry per fault kind; every rule names its kind (:attr:`mcp_normalizer.engine.rules.Rule.kind`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.rules import RULES_BY_NAME


@dataclass(frozen=True, slots=True)
class FaultKind:
    """A kind of fault and what it breaks.

    Attributes:
        name: the kind's name (``error_result_validated``, ...).
        spec: the rule of the spec the fault breaks, paraphrased.
        section: where that rule is (spec version and page, section).
        clients: real clients that reject or mishandle it, and how.
        advisory: the rule broken is a SHOULD and no supported client (TS SDK 1.x and 2.x, the
            Python SDK) rejects the message: ``check`` reports it and exits 0 (1 with ``--strict``).
    """

    name: str
    spec: str
    section: str
    clients: tuple[str, ...]
    advisory: bool = False


_CONFORM = "If an output schema is provided, servers MUST provide structured results that conform to it"
_CONFORM_AT = "MCP 2025-06-18+ server/tools.mdx, Output Schema"
_VALIDATORS = (
    "TS SDK Client 1.x and 2.x (-32602: structured content does not match the tool's output schema)",
    "Python SDK client (raises on the validation error)",
    "Claude Code, Cursor, Gemini CLI, OpenCode, MCP Inspector (all embed the TS SDK Client)",
)

KINDS: dict[str, FaultKind] = {
    kind.name: kind
    for kind in (
        FaultKind(
            "error_result_validated",
            "Errors raised by a tool are results with isError: true; the output-schema rule has no isError carve-out"
            " in any released version, so 1.x clients validate error results too (SEP-2200 proposes to stop that)",
            "MCP 2025-06-18+ server/tools.mdx, Error Handling and Output Schema",
            (
                "TS SDK Client 1.x (throws -32602 'Structured content does not match the tool's output schema';"
                " the real error is lost)",
                "Vercel AI SDK (threw on isError results of tools with an outputSchema, before vercel/ai#13964)",
                "OpenAI Agents SDK (structuredContent replaced the error text, before #4224)",
            ),
        ),
        FaultKind("null_for_non_nullable", _CONFORM, _CONFORM_AT, _VALIDATORS),
        FaultKind("enum_mismatch", _CONFORM, _CONFORM_AT, _VALIDATORS),
        FaultKind("type_mismatch", _CONFORM, _CONFORM_AT, _VALIDATORS),
        FaultKind("additional_properties", _CONFORM, _CONFORM_AT, _VALIDATORS),
        FaultKind(
            "wrapped_result",
            _CONFORM,
            _CONFORM_AT,
            (*_VALIDATORS[:1], "Codex (shows the escaped {result} wrapper to the model)"),
        ),
        FaultKind(
            "missing_structured_content",
            _CONFORM + "; a success result of such a tool must carry structuredContent",
            _CONFORM_AT,
            (
                "TS SDK Client 1.x and 2.x (-32600: tool has an output schema but did not return structured content)",
                "Python SDK client (raises)",
                "Claude Desktop and claude.ai ('Tool execution failed'), Claude Code, Cursor",
            ),
        ),
        FaultKind(
            "spurious_output_schema",
            _CONFORM + "; a schema the tool can never satisfy makes every success result fail",
            _CONFORM_AT,
            ("TS SDK Client 1.x and 2.x (-32600 or -32602)", "Claude Desktop and claude.ai"),
        ),
        FaultKind(
            "error_not_flagged",
            "Errors that originate in the tool SHOULD be reported in the result with isError: true",
            "MCP 2025-06-18+ schema.ts CallToolResult.isError; server/tools.mdx, Error Handling",
            ("TS SDK Client (-32600: a 'success' without the structuredContent its schema requires)",),
        ),
        FaultKind(
            "non_object_structured_content",
            "structuredContent is a JSON object (any JSON value only from 2026-07-28)",
            "MCP 2025-06-18 and 2025-11-25 schema.ts CallToolResult.structuredContent",
            (
                "TS SDK Client (Zod: structuredContent must be a record)",
                "ChatGPT connector, LiteLLM (require a dict)",
                "Claude Desktop and claude.ai",
                "Claude Code, in every era ('expects record'; anthropics/claude-code#95504, #88049, #91099)",
            ),
        ),
        FaultKind(
            "non_object_output_schema",
            "outputSchema has type: object at its root (any 2020-12 schema only from 2026-07-28)",
            "MCP 2025-06-18 and 2025-11-25 schema.ts Tool.outputSchema",
            ("TS SDK Client (rejects the whole tools/list)", "Claude Code (drops every tool of the server)"),
        ),
        FaultKind(
            "schema_ref_unresolvable",
            "Schemas MUST be valid for their dialect; a $ref that resolves to a network URI MUST NOT be fetched",
            "MCP 2025-11-25 basic/index.mdx, JSON Schema Usage; 2026-07-28 basic/index.mdx, $ref Resolution",
            ("TS SDK Client (Ajv: can't resolve reference; the tool or the whole list fails)",),
        ),
        FaultKind(
            "schema_dialect",
            "Schemas without $schema are JSON Schema 2020-12; implementations MUST support 2020-12",
            "MCP 2025-11-25 basic/index.mdx, JSON Schema Usage (SEP-1613)",
            (
                "@modelcontextprotocol/client 2.x before PR #2534 ('supports JSON Schema 2020-12 only') in Claude"
                " Desktop (Cowork), claude.ai connectors, pi-mcp-adapter",
                "VS Code GitHub Copilot (rejects an explicit 2020-12 $schema)",
            ),
        ),
        FaultKind(
            "invalid_schema_shape",
            "inputSchema and outputSchema MUST be valid JSON Schema objects (properties an object, required an"
            " array, not null)",
            "MCP 2025-11-25 server/tools.mdx, Tool; JSON Schema 2020-12 core and validation vocabularies",
            (
                "VS Code GitHub Copilot (array schemas need items; one bad tool breaks the session)",
                "OpenAI function calling (400 on properties: [])",
            ),
        ),
        FaultKind(
            "format_date_time",
            _CONFORM + " (format: date-time is RFC 3339 date-time, with a time-zone offset)",
            _CONFORM_AT + "; RFC 3339 section 5.6",
            (
                "TS SDK Client 1.x and 2.x (Ajv with ajv-formats: -32602 'Structured content does not match the"
                " tool's output schema: data/taken must match format \"date-time\"')",
                "Claude Code, Cursor, Gemini CLI, OpenCode, MCP Inspector (all embed the TS SDK Client)",
            ),
        ),
        FaultKind(
            "missing_text_content",
            "A tool that returns structured content SHOULD also return the serialized JSON in a TextContent block",
            "MCP 2025-06-18+ server/tools.mdx, Structured Content",
            (
                "claude.ai and Claude Desktop (read only content: show nothing)",
                "VS Code GitHub Copilot (crashes on results with only structuredContent)",
                "Kiro",
            ),
            advisory=True,
        ),
        FaultKind(
            "invalid_content_block",
            "content is a list of content blocks (text, image, audio, resource_link, resource); text is a string",
            "MCP 2025-06-18+ schema.ts CallToolResult.content, ContentBlock",
            ("TS SDK Client (Zod rejects the result)", "Cline and Roo Code (the legacy toolResult shape)"),
        ),
        FaultKind(
            "null_optional_fields",
            "Optional members are omitted, not null (_meta and annotations are objects when present)",
            "MCP schema.ts Result._meta, Annotations, CallToolResult",
            ("TS SDK Client (Zod rejects the result)",),
        ),
        FaultKind(
            "meta_key_invalid",
            "_meta keys are an optional reverse-DNS prefix and a name that begins and ends with an alphanumeric",
            "MCP 2025-06-18+ basic/index.mdx, General fields: _meta",
            ("tower-mcp (rejects the whole response)",),
        ),
        FaultKind(
            "empty_structured_content",
            "structuredContent is the tool's output per its outputSchema; an empty one on a tool with no schema"
            " says nothing",
            "MCP 2025-06-18+ server/tools.mdx, Structured Content",
            ("Claude Code and Codex (show {} to the model instead of the text)",),
            advisory=True,
        ),
        FaultKind(
            "double_encoded_json",
            "structuredContent carries the tool's output as JSON values; a JSON document inside a string is not"
            " structured",
            "MCP 2025-06-18+ server/tools.mdx, Structured Content",
            (
                "Claude Code, Claude Desktop, Codex (the model reads escaped JSON: 30-50% more tokens,"
                " skwallace36/Pepper#527)",
            ),
            advisory=True,
        ),
        FaultKind(
            "summary_only_content",
            "A tool that returns structured content SHOULD also return the serialized JSON in a TextContent block",
            "MCP 2025-06-18+ server/tools.mdx, Structured Content",
            ("claude.ai and Claude Desktop (read only content: the model never sees the data)",),
            advisory=True,
        ),
        FaultKind(
            "invalid_tools_list",
            "tools/list answers {tools: Tool[]}; every Tool has a string name, unique within the server; cursors"
            " are opaque and the last page has no nextCursor",
            "MCP schema.ts ListToolsResult and Tool; server/tools.mdx, Tool Names; server/utilities/pagination.mdx",
            (
                "TS SDK Client (Zod rejects the whole list: every tool is lost)",
                "clients that page (a repeating cursor never ends)",
            ),
        ),
        FaultKind(
            "jsonrpc_batch_response",
            "A single request gets a single response object, and a response has result or error, never both",
            "JSON-RPC 2.0 sections 5 and 6; MCP basic/index.mdx, Responses",
            (
                "TS SDK Client 1.x and 2.x (ZodError unrecognized_keys ['error']; over SSE the request never settles)",
                "n8n-nodes-mcp (Zod rejects the array)",
            ),
        ),
        FaultKind(
            "jsonrpc_id_mismatch",
            "A response MUST include the same ID as the request it corresponds to",
            "MCP basic/index.mdx, Responses; JSON-RPC 2.0 section 5",
            (
                "Copilot Studio, OpenCode (the response is never matched: the call hangs until its timeout)",
                "TS SDK Client and Python SDK client (an unknown id is dropped; the request times out)",
            ),
        ),
        FaultKind(
            "sse_framing",
            "An SSE event is dispatched at the blank line that ends it; a server sends each JSON-RPC message as"
            " one complete event",
            "WHATWG HTML section 9.2.6 (dispatch at a blank line); MCP basic/transports.mdx, Streamable HTTP",
            ("Vercel AI SDK createMCPClient (hangs on initialize)", "any SSE client (the last message never arrives)"),
        ),
        FaultKind(
            "invalid_media_data",
            "ImageContent.data and AudioContent.data are base64-encoded (a data: URI is not base64)",
            "MCP 2025-06-18+ schema.ts ImageContent, AudioContent",
            ("TS SDK Client 1.x and 2.x (-32602 Invalid Base64 string: the whole result is rejected)",),
        ),
        FaultKind(
            "invalid_unicode",
            "JSON text is Unicode: a string with an unpaired UTF-16 surrogate escape has unpredictable behaviour",
            "RFC 8259 section 8.2; MCP basic/index.mdx (JSON-RPC messages are UTF-8 JSON)",
            (
                "Python SDK client (invalid JSON: the message is rejected)",
                "Anthropic and OpenAI model APIs (every later turn of the conversation rejected)",
            ),
        ),
        FaultKind(
            "input_schema_root_combinator",
            "inputSchema is a JSON Schema object with type: object at its root",
            "MCP 2025-06-18+ schema.ts Tool.inputSchema",
            (
                "TS SDK Client (rejects the whole tools/list when the root has no type: object)",
                "Anthropic and OpenAI tool APIs (400 for a root anyOf/oneOf/allOf, on every turn)",
            ),
        ),
        FaultKind(
            "invalid_type_keyword",
            "type is a JSON type name (null, boolean, object, array, number, string, integer) or an array of them",
            "JSON Schema 2020-12 validation section 6.1.1; MCP 2025-11-25 basic/index.mdx, JSON Schema Usage",
            (
                "TS SDK Client 1.x (Ajv: the whole tools/list refused for one outputSchema type name)",
                "TS client 2.x and Python SDK client (the call of such a tool refused)",
                "Anthropic API, google-genai (the tool refused)",
            ),
        ),
        FaultKind(
            "required_in_properties",
            "properties maps names to schemas; required is an array of names beside it",
            "JSON Schema 2020-12 validation sections 6.5.3 and core 10.3.2.1",
            ("Python SDK client (an array among properties: the whole tools/list refused)",),
        ),
        FaultKind(
            "required_boolean",
            "required is an array of property names (a boolean required is draft-03)",
            "JSON Schema 2020-12 validation section 6.5.3",
            (
                "TS SDK Client 1.x (the whole tools/list refused for one in an outputSchema)",
                "TS client 2.x and Python SDK client (the call refused)",
                "Anthropic API, google-genai, OpenAI strict mode",
            ),
        ),
        FaultKind(
            "enum_not_array",
            "The value of enum is an array",
            "JSON Schema 2020-12 validation section 6.1.2",
            (
                "TS SDK Client 1.x (the whole tools/list refused for one in an outputSchema)",
                "TS client 2.x and Python SDK client (the call refused)",
                "Anthropic API",
            ),
        ),
        FaultKind(
            "input_schema_not_object",
            "inputSchema is a JSON Schema object with type: object at its root",
            "MCP 2025-06-18+ schema.ts Tool.inputSchema",
            ("TS SDK Client 1.x and 2.x, Python SDK client (the whole tools/list refused)",),
        ),
        FaultKind(
            "tool_name_invalid",
            "Tool names SHOULD be 1 to 128 characters of A-Z, a-z, 0-9, underscore, hyphen and dot",
            "MCP 2025-11-25 server/tools.mdx, Tool names",
            (
                "Claude Desktop and claude.ai (refuse every tool of the server for one name outside"
                " ^[a-zA-Z0-9_-]{1,64}$)",
                "Anthropic API (400 on such a tool name)",
            ),
        ),
        FaultKind(
            "boolean_subschema",
            "inputSchema and outputSchema are JSON Schema objects; the MCP schema types every root properties value"
            " as an object schema",
            "MCP 2025-06-18+ schema.ts Tool.inputSchema, Tool.outputSchema; JSON Schema 2020-12 core section 4.3.2",
            (
                "TS SDK Client 1.x (refuses the whole tools/list for a property schema that is true or false)",
                "Python SDK clients before 1.10 (crash walking a boolean subschema)",
            ),
        ),
        FaultKind(
            "output_schema_tuple",
            "Schemas default to JSON Schema 2020-12, where prefixItems with items: false is a closed tuple",
            "MCP 2025-11-25 basic/index.mdx, JSON Schema Usage",
            (
                "TS SDK Client 1.x and Cursor (Ajv draft-07 ignores prefixItems and reads items: false as"
                " 'boolean schema is false': every non-empty array result rejected)",
            ),
        ),
        FaultKind(
            "resource_link_incomplete",
            "A ResourceLink is a Resource: uri and name are required strings",
            "MCP 2025-06-18+ schema.ts ResourceLink, Resource",
            ("TS SDK Client 1.x and 2.x, Python SDK client (the whole result is rejected)",),
        ),
        FaultKind(
            "annotations_invalid",
            "Annotations.audience is a list of Role ('user' or 'assistant'); priority is a number from 0 to 1",
            "MCP 2025-06-18+ schema.ts Annotations, Role",
            (
                "TS SDK Client 1.x and 2.x, Python SDK client (the whole result is rejected)",
                "Codex (the call fails)",
            ),
        ),
        FaultKind(
            "host_observed",
            "The spec allows it; a host that runs here refuses it (a real run of the host shows it)",
            "MCP 2025-06-18+ schema.ts Tool, CallToolResult; the host's own code (tests/test_check_hosts.py)",
            ("Codex 0.171.0 (a draft-07 tuple items: the tool is not offered)",),
        ),
        FaultKind(
            "host_content",
            "The spec allows it (an image of any media type, a resource_link, type beside anyOf); the host refuses it",
            "MCP 2025-06-18+ schema.ts ContentBlock; the host's own rule (reference/hosts.md)",
            (
                "Claude Code, Claude Desktop, claude.ai: an image/svg+xml image (anthropics/claude-code#15807)",
                "Codex: an image/svg+xml image ('image content omitted because it could not be processed',"
                " reproduced with Codex 0.171.0 in tests/test_check_hosts.py)",
                "ChatGPT, Codex before 0.171.0 (Codex Desktop 0.150): any resource_link block (openai/codex#41280,"
                " #33404: rmcp =3.1.3; Codex 0.171.0 takes it)",
                "Kiro: a resource_link block (kirodotdev/Kiro#8960: the whole result discarded)",
                "Gemini CLI: type beside anyOf in an inputSchema (google-gemini/gemini-cli#4121)",
            ),
        ),
        FaultKind(
            "model_api_schema",
            "The spec allows it (any JSON Schema in an inputSchema); the model API behind a host refuses it (its"
            " published schema rules), so the host's request fails or the tool is not offered; the host itself takes"
            " it (the runs here, against a mock of the model API, cannot show the refusal: an advisory)",
            "MCP 2025-06-18+ schema.ts Tool.inputSchema; the model APIs' function-calling schema rules"
            " (reference/hosts.md §5)",
            (
                "OpenAI (Copilot CLI, Codex with GPT models): an object schema without properties, an enum that"
                " contradicts its type (400: github/copilot-cli#2223, can1357/oh-my-pi#2652)",
                "Anthropic API: a draft-07 tuple items in a schema it reads as 2020-12 (anthropics/claude-code#586,"
                " #2758); Codex 0.171.0 does not offer the tool",
                "Kimi, OpenAI strict, Gemini: an anyOf arm `not: {}` (zod's never branch)",
            ),
            advisory=True,
        ),
        FaultKind(
            "pagination_cursor_loop",
            "nextCursor is an opaque token for the next page; a page without one is the last",
            "MCP 2025-03-26+ server/utilities/pagination.mdx, Response Format",
            (
                "C# and Java SDK clients and hosts that list everything (page the same cursor forever)",
                "@modelcontextprotocol/client 2.x (stops paging when a page repeats)",
            ),
        ),
        FaultKind(
            "missing_era_fields",
            "Every 2026-07-28 result carries resultType; complete results of server/discover, the lists and"
            " resources/read carry ttlMs and cacheScope",
            "MCP 2026-07-28 basic/index.mdx, ResultType; server/utilities/caching.mdx",
            (
                "@modelcontextprotocol/client 2.4.0 (missing required resultType; the list schemas require ttlMs"
                " and cacheScope: no tool listed, every call fails)",
                "Python SDK Client at 2026-07-28 (pydantic: resultType, ttlMs, cacheScope field required)",
                "Claude Code before 2.1.332 (zero tools: tobert/kaibo PR #142); 2.1.332 fills them itself",
            ),
        ),
        FaultKind(
            "result_output_field",
            "A CallToolResult carries its unstructured result in content, which is required",
            "MCP 2025-06-18+ schema.ts CallToolResult.content; server/tools.mdx, Tool Result",
            (
                "Claude Desktop, claude.ai and other content-only hosts (show nothing)",
                "TS SDK Client and Python SDK client (reject a result without content)",
            ),
        ),
        FaultKind(
            "tool_not_listed",
            "A client calls the tools tools/list lists (hosts offer their model only those); a name it does not"
            " list is an unknown tool",
            "MCP 2025-06-18+ server/tools.mdx, Listing Tools and Calling Tools (Error Handling: unknown tools)",
            (
                "every host (its model is never offered the tool, so it is never called)",
                "check --call (a misspelt name would audit the server's 'not found' answer instead of the tool)",
            ),
        ),
        FaultKind(
            "oversized_message",
            "No spec rule bounds a message; check reads at most --max-message-bytes of one tools/list page or"
            " tools/call result (the proxy's own max_message_bytes default, 32 MiB)",
            "mcp-normalizer check --max-message-bytes; the proxy's [proxy] max_message_bytes",
            (
                "clients that read each message whole: TS SDK Client 1.x and 2.x and the Python SDK client hold"
                " all of it (a 200 MiB page took 1 GB of memory to read)",
            ),
        ),
        FaultKind(
            "audit_cut",
            "No spec rule bounds a listing or a run; check reads at most --max-listing-bytes of all tools/list"
            " pages, 1,000 pages, and stops the whole run at --deadline",
            "mcp-normalizer check --max-listing-bytes, --deadline; MCP server/utilities/pagination.mdx",
            (
                "clients that list every page before use (TS SDK Client's callers, hosts): a pager without end,"
                " or one that answers each page just under the timeout, holds them as long",
            ),
        ),
        FaultKind(
            "unrepaired",
            _CONFORM,
            _CONFORM_AT,
            _VALIDATORS,
        ),
        FaultKind(
            "tool_withheld",
            "Schemas MUST be valid for their dialect (2020-12 unless they say otherwise); a host sends every tool's"
            " inputSchema to its model API, which refuses this one (invalid, or valid but outside what it takes)"
            " after every repair the proxy makes for that host",
            "MCP 2025-11-25 basic/index.mdx, JSON Schema Usage; the host's and its model API's own rules"
            " (reference/hosts.md)",
            (
                "Claude Code, Claude Desktop, claude.ai: an inputSchema that is not valid draft 2020-12 fails every"
                " request of the session (anthropics/claude-code#586, #2758)",
                "any host whose model API refuses one tool of the server: the whole request fails, or the host"
                " loses the whole server",
            ),
        ),
        FaultKind(
            "unreadable_tool",
            "A tool's schemas MUST be valid JSON Schema the client can compile",
            "MCP 2025-11-25 basic/index.mdx, JSON Schema Usage",
            ("Any validating client (the tool, or the whole list, is rejected)",),
        ),
    )
}
_CLAUDE_DRAFT_07 = (
    " refuses every call to a tool whose outputSchema declares draft-07 ('supports JSON Schema 2020-12 only';"
    " anthropics/claude-ai-mcp#1016, anthropics/claude-code#86142, #88882)"
)
#: Faults of the client table (:data:`~mcp_normalizer.engine.rules.clients.CLIENT_FAULTS`) that no
#: supported client rejects but a host refuses: for ``check --host`` of that host they are faults,
#: not advisories (``reference/hosts.md``, "Where hosts refuse what the spec allows"). Profile ->
#: client fault -> what that host does with it. Claude Code 2.1.2xx refused draft-07 output schemas
#: too; 2.1.332 takes them (reproduced in ``tests/test_check_hosts.py``), so it is not here.
HOST_REFUSALS: dict[str, dict[str, str]] = {
    "claude-desktop": {"schema_dialect_draft": "Claude Desktop and Cowork" + _CLAUDE_DRAFT_07},
    "claude-connectors": {"schema_dialect_draft": "claude.ai connectors" + _CLAUDE_DRAFT_07},
}
#: Kinds of the proxy's own findings that are not rules.
_EVENT_KINDS = {"unrepaired": "unrepaired", "fault": "unreadable_tool"}


def kind_of(rule: str, event: str = "rewrite") -> FaultKind:
    """The fault kind behind a rewrite record (its rule's kind; ``unrepaired``/``fault`` events have
    their own). Rules whose kind has no entry (the opt-in last resort) get the conformance rule.

    Raises:
        KeyError: ``rule`` is not a rule name and ``event`` is a plain ``rewrite``.
    """
    if event in _EVENT_KINDS:
        return KINDS[_EVENT_KINDS[event]]
    return KINDS.get(RULES_BY_NAME[rule].kind, KINDS["unrepaired"])
