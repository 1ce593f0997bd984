"""The hosts: what each one sends as its ``clientInfo``, what it rejects that the spec allows, and
which of those the proxy repairs for it alone. Pure data, no I/O.

Where :mod:`mcp_normalizer.engine.rules.clients` lists faults every client gets repaired unless it is
known to accept them, this table is the other way round: a *host fault* is something valid that a
host refuses, so its repair changes what every other client accepts as it is; it runs for the
hosts that name the fault and for no one else. The facts come from ``reference/hosts.md`` (the
hosts' own source where it is public, else the issues that show the failure), each with its
source. A host is recognised by the ``clientInfo.name`` it sends (``initialize`` params; on
2026-07-28 every request's ``_meta``); that name is self-reported, and naming a host only ever
gets a client the output that host can take, with the original kept in ``_meta``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

#: An SVG image block (``image/svg+xml``): the Anthropic API takes JPEG, PNG, GIF and WebP only.
IMAGE_SVG = "image_svg"
#: A ``resource_link`` content block: rmcp ``=3.1.3`` (Codex, ChatGPT) fails the whole call.
RESOURCE_LINK = "resource_link_block"

#: A schema node with ``type`` beside ``anyOf``: older Gemini CLIs send the schema to the Gemini
#: API, which answers "type and anyOf cannot be both populated".
TYPE_BESIDE_ANYOF = "type_beside_anyof"

#: A tool name the spec allows but outside ``^[a-zA-Z0-9_-]{1,64}$`` (a dot, 65 to 128 characters):
#: Claude Desktop and claude.ai refuse every tool of the server.
TOOL_NAME = "tool_name_strict"

#: An ``inputSchema`` property name outside ``^[a-zA-Z0-9_.-]{1,64}$``: the Anthropic API answers
#: 400 for every request while one tool has one.
PROPERTY_KEY = "property_key_strict"

#: An array schema (``type: "array"``) without ``items``: VS Code's Copilot Chat throws "tool
#: parameters array type must have items" and the chat request fails.
ARRAY_ITEMS = "array_without_items"

#: What each host fault is, for the log, ``check`` and the docs (docs/rules.md).
HOST_FAULTS: Mapping[str, str] = {
    IMAGE_SVG: "an image block of type image/svg+xml",
    RESOURCE_LINK: "a resource_link content block",
    TYPE_BESIDE_ANYOF: "type beside anyOf in an inputSchema node",
    TOOL_NAME: "a tool name outside ^[a-zA-Z0-9_-]{1,64}$ (a dot, more than 64 characters)",
    PROPERTY_KEY: "an inputSchema property name outside ^[a-zA-Z0-9_.-]{1,64}$",
    ARRAY_ITEMS: 'an inputSchema node of type "array" without items',
}

_VERSION = re.compile(r"v?(\d+(?:\.\d+){0,3})(-)?")


def version_key(version: object) -> tuple[int, ...] | None:
    """``version`` (a host's ``clientInfo.version``, e.g. ``"0.150.0-alpha.8"``) as a key that
    orders releases as semver does: four numbers, then 0 for a pre-release and 1 for a release;
    ``None`` when it does not start with a number."""
    match = _VERSION.match(version) if isinstance(version, str) else None
    if match is None:
        return None
    numbers = [int(part) for part in match.group(1).split(".")]
    return (*numbers, *[0] * (4 - len(numbers)), 0 if match.group(2) else 1)


@dataclass(frozen=True, slots=True)
class Versions:
    """The versions of a host (its ``clientInfo.version``) that reject a fault: from ``since``
    (included) to ``fixed_in`` (excluded); ``None`` leaves that end open.

    A client whose version is missing or not a number gets the repair: it loses nothing, and the
    host might need it."""

    since: str | None = None
    fixed_in: str | None = None
    #: Where the range comes from.
    source: str = ""

    def covers(self, version: object) -> bool:
        """Whether a host that sends ``version`` rejects the fault."""
        key = version_key(version)
        if key is None:
            return True
        since = version_key(self.since) if self.since is not None else None
        fixed = version_key(self.fixed_in) if self.fixed_in is not None else None
        return (since is None or key >= since) and (fixed is None or key < fixed)


@dataclass(frozen=True, slots=True)
class Host:
    """A host and the faults the proxy repairs for it.

    Attributes:
        profile: the profile's name (``check --host``, the docs, the log).
        title: the host as people call it.
        client_names: the ``clientInfo.name`` values it sends.
        faults: host fault -> the source that shows the host rejecting it (a repair runs for them).
        rejects: what else it rejects, with sources, that the proxy does not repair for it.
        versions: host fault -> the versions that reject it, where a source says; a fault not
            named here is rejected by every version.
    """

    profile: str
    title: str
    client_names: tuple[str, ...]
    faults: Mapping[str, str] = field(default_factory=dict)
    rejects: tuple[str, ...] = ()
    versions: Mapping[str, Versions] = field(default_factory=dict)

    def faults_at(self, version: object) -> frozenset[str]:
        """The faults this host rejects at ``version`` (its ``clientInfo.version``; any JSON)."""
        ranges = self.versions
        return frozenset(fault for fault in self.faults if fault not in ranges or ranges[fault].covers(version))


_CLAUDE_IMAGES = (
    "anthropics/claude-code#15807 (an image/svg+xml block gets a 400 from the API); the Anthropic vision docs "
    "(JPEG, PNG, GIF and WebP only)"
)
_CLAUDE_NAMES = (
    "NetApp/netapp-dataops-toolkit#38, API-200/api200#14 (every tool refused: "
    "'tools.N.FrontendRemoteMcpToolDefinition.name' must match ^[a-zA-Z0-9_-]{1,64}$)"
)
_CLAUDE_KEYS = (
    "anthropics/claude-code#4668, #79418 (the Anthropic API: property keys must match ^[a-zA-Z0-9_.-]{1,64}$; "
    "one such tool fails every request)"
)
_RMCP_LINKS = "openai/codex#41280 and #33404 (rmcp =3.1.3: 'Unexpected response type' on any resource_link block)"

#: The table, from ``reference/hosts.md``.
HOSTS: tuple[Host, ...] = (
    Host(
        "claude-code",
        "Claude Code",
        ("claude-code",),
        {IMAGE_SVG: _CLAUDE_IMAGES, PROPERTY_KEY: _CLAUDE_KEYS},
        (
            "a root oneOf/anyOf/allOf in an inputSchema (anthropics/claude-code#5319): repaired for every client"
            " by input_combinator when every arm is an object schema; other roots stay",
        ),
    ),
    Host(
        "claude-desktop",
        "Claude Desktop",
        ("claude-ai",),
        {IMAGE_SVG: _CLAUDE_IMAGES, TOOL_NAME: _CLAUDE_NAMES, PROPERTY_KEY: _CLAUDE_KEYS},
    ),
    Host(
        "claude-connectors",
        "claude.ai connectors",
        ("Anthropic/ClaudeAI", "Anthropic"),
        {IMAGE_SVG: _CLAUDE_IMAGES, TOOL_NAME: _CLAUDE_NAMES, PROPERTY_KEY: _CLAUDE_KEYS},
    ),
    Host(
        "codex",
        "OpenAI Codex",
        ("codex-mcp-client",),
        {RESOURCE_LINK: _RMCP_LINKS},
        ("arrays without items, a root oneOf/anyOf/allOf/enum/not (the OpenAI API)",),
    ),
    Host(
        "chatgpt",
        "ChatGPT connectors",
        ("openai-mcp",),
        {RESOURCE_LINK: "openai/codex#41280 (also seen on ChatGPT desktop)"},
    ),
    Host(
        "vscode",
        "VS Code (Copilot)",
        ("Visual Studio Code", "Visual-Studio-Code", "Code - OSS"),
        {
            ARRAY_ITEMS: "microsoft/vscode-copilot-chat src/extension/tools/common/toolSchemaNormalizer.ts"
            " (normalizeToolSchema throws 'tool parameters array type must have items'; the request fails)"
        },
        (
            "an inputSchema failing the draft-07 metaschema: the tool is dropped (microsoft/vscode"
            " mcpServer.ts _normalizeTool); a spec-valid schema passes it",
        ),
    ),
    Host(
        "cursor",
        "Cursor",
        ("cursor-vscode",),
        rejects=("server name + tool name over 60 characters: hidden (executeautomation/mcp-playwright#145)",),
    ),
    Host(
        "gemini-cli",
        "Gemini CLI",
        ("gemini-cli-mcp-client",),
        {TYPE_BESIDE_ANYOF: "google-gemini/gemini-cli#4121 ('type and anyOf cannot be both populated')"},
        (
            "enum on non-strings (JetBrains/mcp-jetbrains#71)",
            "a tools/call result without structuredContent whose first content block is text holding JSON that is"
            " not an object ('[]', '42', '\"x\"', 'null'): its McpComplianceTransport (@google/gemini-cli-core"
            " 0.61.0 dist/src/tools/mcp-compliance-transport.js) sets structuredContent to the parsed text, then the"
            " TS SDK 1.23 it embeds refuses it ('expected record'); the model gets that error, not the text."
            " A spec-valid result; the proxy does not add a structuredContent for it",
        ),
        {
            TYPE_BESIDE_ANYOF: Versions(
                fixed_in="0.1.13",
                source="google-gemini/gemini-cli#4176 (merged 2025-07-15: MCP schemas go as parametersJsonSchema,"
                " which the API takes as JSON Schema), first in 0.1.13 (tanaikech/ToolsForMCPServer#2: the change"
                " came between 0.1.12 and 0.1.13)",
            )
        },
    ),
)

_BY_NAME: dict[str, Host] = {name: host for host in HOSTS for name in host.client_names}
#: Profiles by name (``check --host``).
PROFILES: Mapping[str, Host] = {host.profile: host for host in HOSTS}


def host_for(client_name: str | None) -> Host | None:
    """The host that sends ``client_name`` as its ``clientInfo.name``, if the table knows it."""
    return _BY_NAME.get(client_name) if client_name is not None else None
