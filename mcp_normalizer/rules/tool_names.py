"""Rule ``tool_names``: tool names clients refuse, advertised under valid names.

Fault kind ``tool_name_invalid`` (``cases/faults.md``, "Kinds from the 2026 reports";
NetApp/netapp-dataops-toolkit#38, hostinger/api-mcp-server#49, github/copilot-cli#1879): names
with spaces, slashes or other characters, or longer than hosts accept. MCP 2025-11-25
(``server/tools.mdx``, Tool names) says names SHOULD be 1 to 128 characters of ``A-Z a-z 0-9 _ - .``;
Claude Desktop and claude.ai refuse every tool of a server with one name outside
``^[a-zA-Z0-9_-]{1,64}$``, and the Anthropic API answers 400.

It is the one repair that rewrites a request: ``tools/list`` advertises the new name (the original
kept in the tool's ``_meta["dev.mcp-normalizer/original-name"]``), the scope remembers the pair,
and a ``tools/call`` for the new name goes upstream under the original one. A name outside the
spec's :data:`SPEC` pattern is renamed for every client; the new name matches :data:`VALID` (the
Anthropic API's pattern, so it works everywhere): each other character becomes ``_``, and a name
that is then too long, or equal to another tool's, is cut and given a short hash of the original.
Renaming is deterministic: the same list gets the same names in every scope and process.

Names the spec allows but Claude hosts refuse (a dot, 65 to 128 characters) are kept: renaming them
for every client would change what most clients accept; that waits for repairs made per client.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from .base import META_PREFIX, Rewrite, Rule

#: Names every known client accepts (the Anthropic API's pattern, inside the spec's charset).
VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The names MCP 2025-11-25 recommends (``server/tools.mdx``, Tool names); others are renamed.
SPEC = re.compile(r"[A-Za-z0-9_.-]{1,128}")
ORIGINAL_NAME_KEY = META_PREFIX + "original-name"
_OTHER = re.compile(r"[^A-Za-z0-9_-]")
_MAX = 64


def renames(names: Iterable[str]) -> dict[str, str]:
    """The new name of each of ``names`` (one page of a ``tools/list``) that needs one; valid names
    are kept, and no new name equals another tool's name."""
    names = list(names)
    taken = {name for name in names if SPEC.fullmatch(name)}
    out: dict[str, str] = {}
    for name in names:
        if name in taken or name in out:
            continue
        new = _OTHER.sub("_", name)[:_MAX] or "_"
        if new in taken or len(name) > _MAX or not name:
            new = (
                new[: _MAX - 9]
                + "_"
                + hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
            )
        taken.add(new)
        out[name] = new
    return out


def rewrite(original: str, index: int) -> Rewrite:
    """The log record of renaming tool ``index`` (the name itself is not logged: it is the
    server's text)."""
    reason = f"a name of {len(original)} characters outside the spec's [A-Za-z0-9_.-]{{1,128}}"
    return Rewrite("tool_names", "advertised the tool under a valid name", (f"/tools/{index}/name",), reason)


RULE = Rule(
    name="tool_names",
    kind="tool_name_invalid",
    summary="Tool names outside the spec's [A-Za-z0-9_.-]{1,128} advertised under valid ones; tools/call "
    "for them sent upstream under the original name.",
)
