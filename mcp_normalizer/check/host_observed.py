"""What the hosts that run here do, as their real runs show it: faults ``check --host`` reports for
Claude Code, Codex and Gemini CLI beyond the host table (pure data and pure functions, no I/O).

Each entry was reproduced by running the real host (the version named) offline against a fixture
server in ``tests/test_check_hosts.py``, which also runs ``check --host`` against the same server and
fails when the two disagree. These are faults the proxy has no host repair key for (the closed set
of ``engine/rules/host_faults.py``): an ``inputSchema: null`` (repaired for every client by
``schema_shape``), a boolean property schema (``boolean_subschema``), a problem error with empty
content (``error_problem``), a draft-07 tuple ``items`` (``model_schemas``, for every host: it
is a model API's fault too, which ``check`` reports as an advisory where no run shows it). A host that cannot run here
(Claude Desktop, claude.ai, ChatGPT, Cursor, VS Code) has no entry: it is judged from its sources
(``hosts.toml``, :data:`~mcp_normalizer.check.faults.HOST_REFUSALS`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from ..engine.rules.host_faults import schema_nodes
from ..types import JSON

#: The versions run in ``tests/test_check_hosts.py`` (pinned in ``tests/hosts/package.json``).
VERSIONS = {"claude-code": "Claude Code 2.1.332", "codex": "Codex 0.171.0", "gemini-cli": "Gemini CLI 0.61.0"}
SOURCE = "tests/test_check_hosts.py"


@dataclass(frozen=True, slots=True)
class Observed:
    """One fault a real host showed.

    Attributes:
        profile: the host's profile.
        subject: what :attr:`violates` judges: a ``tools/list`` member or a ``CallToolResult``.
        does: what the host does with it (after its name and version).
        violates: the oracle.
    """

    profile: str
    subject: Literal["tool", "result"]
    does: str
    violates: Callable[[JSON], bool]

    @property
    def text(self) -> str:
        """The finding's first ``clients`` entry: the host, its version, what it does, the source."""
        version = VERSIONS[self.profile]
        return f"{version} {self.does} (reproduced with {version} in {SOURCE})"


def _null_input_schema(tool: JSON) -> bool:
    return isinstance(tool, dict) and "inputSchema" in tool and tool["inputSchema"] is None


def _boolean_property(tool: JSON) -> bool:
    schema = tool.get("inputSchema") if isinstance(tool, dict) else None
    for node in schema_nodes(schema):
        members = node.get("properties")
        if isinstance(members, dict) and any(isinstance(sub, bool) for sub in members.values()):
            return True
    return False


def _tuple_items(tool: JSON) -> bool:
    schema = tool.get("inputSchema") if isinstance(tool, dict) else None
    return any(isinstance(node.get("items"), list) for node in schema_nodes(schema))


def _problem_without_text(result: JSON) -> bool:
    if not isinstance(result, dict) or result.get("isError") is not True:
        return False
    content = result.get("content")
    texts = [b for b in content if isinstance(b, dict) and b.get("type") == "text"] if isinstance(content, list) else []
    return isinstance(result.get("structuredContent"), dict) and not texts


_NULL_SCHEMA = "loses every tool of the server for one tool whose inputSchema is null"

OBSERVED: tuple[Observed, ...] = (
    *(
        Observed(
            profile, "tool", "loses every tool of the server for one tool whose inputSchema is null", _null_input_schema
        )
        for profile in ("claude-code", "codex", "gemini-cli")
    ),
    Observed(
        "gemini-cli",
        "tool",
        "loses every tool of the server for one boolean property schema (true or false)",
        _boolean_property,
    ),
    Observed(
        "codex",
        "tool",
        "does not offer a tool whose inputSchema has a draft-07 tuple `items` (an array of schemas): 'failed to"
        " build tool spec: invalid type: map, expected a string'",
        _tuple_items,
    ),
    Observed(
        "claude-code",
        "result",
        "shows its model nothing of an error result whose content has no text (its structuredContent is not read)",
        _problem_without_text,
    ),
)


def observed(profile: str, subject: Literal["tool", "result"], value: JSON) -> Iterator[Observed]:
    """The observations of host ``profile`` that ``value`` (a tool or a result) meets."""
    for entry in OBSERVED:
        if entry.profile == profile and entry.subject == subject and entry.violates(value):
            yield entry
