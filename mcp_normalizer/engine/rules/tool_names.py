"""Rule ``tool_names``: tool names clients refuse, advertised under valid names.

Fault kind ``tool_name_invalid`` (``cases/faults.md``, "Kinds from the 2026 reports";
NetApp/netapp-dataops-toolkit#38, hostinger/api-mcp-server#49, github/copilot-cli#1879): names
with spaces, slashes or other characters, or longer than hosts accept. MCP 2025-11-25
(``server/tools.mdx``, Tool names) says names SHOULD be 1 to 128 characters of ``A-Z a-z 0-9 _ - .``;
Claude Desktop and claude.ai refuse every tool of a server with one name outside
``^[a-zA-Z0-9_-]{1,64}$``, and the Anthropic API answers 400.

It is the one repair that rewrites a request: ``tools/list`` advertises the new name (the original
kept in the tool's ``_meta["dev.mcp-normalizer/original-name"]``), the listing's name map
remembers the pair (:attr:`mcp_normalizer.engine.catalog.ToolSet.names`), and a ``tools/call`` for the
new name goes upstream under the original one (:mod:`mcp_normalizer.engine.request_rewrite`).

The map is sound, whatever the upstream lists (a property test holds it to this):

- **one map per listing**, derived from the whole current listing (every page, in order) and
  rebuilt with it: a new first page starts a new map, ``list_changed`` drops it. A call for a name
  the current map does not hold goes upstream as sent.
- **injective**: every advertised name stands for one upstream tool. An invented name is never
  one the listing holds so far (a later page that lists it anyway gets that tool renamed in turn,
  so no two advertised tools share a name).
- **recognisable**: an invented name is the original's characters outside
  ``[A-Za-z0-9_-]`` made ``_``, cut to 47, then ``_`` and 16 hex digits of a BLAKE2b digest of
  the original (:data:`INVENTED`). The 64 bits are not trusted to be unique: a name already taken
  is hashed again with a counter, until it is free. The same listing gets the same names in every
  scope and process (the digest is unkeyed), so a replica that never saw the list finds the same
  map by listing the tools itself: the middleware fetches ``tools/list`` before it forwards a
  call for an invented-looking name in a scope with no current map.

A name outside the spec's :data:`SPEC` pattern is renamed for every client; the new name matches
:data:`VALID` (the Anthropic API's pattern, so it works everywhere). Names the spec allows but
Claude Desktop and claude.ai refuse (a dot, 65 to 128 characters) are renamed for those hosts alone
(:data:`VALID` is then the pattern kept; :mod:`mcp_normalizer.engine.rules.host_profiles`): renaming them for
every client would change what most clients accept.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping

from .base import META_PREFIX, Rewrite, Rule

#: Names every known client accepts (the Anthropic API's pattern, inside the spec's charset).
VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The names MCP 2025-11-25 recommends (``server/tools.mdx``, Tool names); others are renamed.
SPEC = re.compile(r"[A-Za-z0-9_.-]{1,128}")
#: The shape of a name this rule invents: 47 characters at most, ``_``, 16 hex digits.
INVENTED = re.compile(r"[A-Za-z0-9_-]{0,47}_[0-9a-f]{16}")
ORIGINAL_NAME_KEY = META_PREFIX + "original-name"
_OTHER = re.compile(r"[^A-Za-z0-9_-]")
_BASE = 47


def invented(name: str) -> bool:
    """True when ``name`` has the shape of a name this rule invents (it may also be a real tool's)."""
    return INVENTED.fullmatch(name) is not None


class Renamer:
    """Gives the tools of one listing their advertised names, a tool at a time.

    Args:
        page: the upstream names of this page, in order.
        listed: the upstream names of the listing's earlier pages (none for a first page).
        names: the earlier pages' map, advertised name -> upstream name.
        pattern: the names kept (:data:`SPEC`; :data:`VALID` for a host that refuses the others).

    :meth:`name_for` answers for each tool of ``page``; :attr:`renamed` is this page's part of the
    map (upstream name -> advertised name).
    """

    __slots__ = ("_before", "_kept", "_listed", "_taken", "pattern", "renamed")

    def __init__(
        self,
        page: Iterable[str],
        listed: Collection[str] = (),
        names: Mapping[str, str] | None = None,
        pattern: re.Pattern[str] = SPEC,
    ) -> None:
        self.pattern = pattern
        names = names or {}
        self._before = {upstream: advertised for advertised, upstream in names.items()}  # a page listed again
        self._kept = {name for name in listed if name not in self._before}  # advertised as themselves
        self._taken = self._kept | set(names)  # every advertised name so far
        self._listed = set(listed)
        self._listed.update(page)  # (an invented name avoids the whole page, not only what came before)
        self.renamed: dict[str, str] = {}

    def name_for(self, name: str, wanted: bool) -> str | None:
        """The name tool ``name`` is advertised under, ``None`` for its own. ``wanted``: the rule
        may rename it (on for that tool); a valid name, or one the rule may not touch, keeps its
        own unless an invented name already took it (then it is renamed all the same, or two
        advertised tools would share one name)."""
        if name in self.renamed:
            return self.renamed[name]
        if name in self._kept:
            return None  # listed twice: the same answer
        if name in self._before:
            self.renamed[name] = self._before[name]
            return self.renamed[name]
        if name not in self._taken and (not wanted or self.pattern.fullmatch(name) is not None):
            self._kept.add(name)
            self._taken.add(name)
            return None
        base = _OTHER.sub("_", name)[:_BASE]
        raw = name.encode("utf-8", "surrogatepass")
        salt = 0
        while True:  # 64 bits rarely collide; when they do, the next salt is tried
            digest = hashlib.blake2b(raw + (b"\0%d" % salt if salt else b""), digest_size=8).hexdigest()
            new = f"{base}_{digest}"
            if new not in self._taken and new not in self._listed:
                break
            salt += 1
        self._taken.add(new)
        self.renamed[name] = new
        return new


def renames(names: Iterable[str]) -> dict[str, str]:
    """The new name of each of ``names`` (a whole one-page listing) that needs one (the rule on
    for every tool); valid names are kept."""
    names = list(names)
    renamer = Renamer(names)
    for name in names:
        renamer.name_for(name, True)
    return renamer.renamed


def rewrite(original: str, index: int, *, taken: bool = False, host: str = "") -> Rewrite:
    """The log record of renaming tool ``index`` (the name itself is not logged: it is the
    server's text); ``taken``: a valid name renamed because an earlier page's invented name is it;
    ``host``: the host whose stricter names it was renamed for."""
    if taken:
        reason = "its name is one the proxy advertises for another tool of the listing (an earlier page's)"
    elif host and SPEC.fullmatch(original) is not None:
        reason = f"a name of {len(original)} characters outside [A-Za-z0-9_-]{{1,64}}, which {host} refuses"
    else:
        reason = f"a name of {len(original)} characters outside the spec's [A-Za-z0-9_.-]{{1,128}}"
    return Rewrite("tool_names", "advertised the tool under a valid name", (f"/tools/{index}/name",), reason)


RULE = Rule(
    name="tool_names",
    kind="tool_name_invalid",
    summary="Tool names outside the spec's [A-Za-z0-9_.-]{1,128} advertised under valid ones; tools/call "
    "for them sent upstream under the original name.",
)
