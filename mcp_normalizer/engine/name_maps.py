"""The name maps of rule ``tool_names`` per client profile, pure: which tool names a client keeps,
and a listing's map (advertised name -> the upstream's) as it is for a given client. Read by the
exchange (a call's map) and by :mod:`mcp_normalizer.engine.tools_list` (a listing's)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from .catalog import ToolSet
from .rules import Mode as RuleMode
from .rules.clients import ClientProfile
from .rules.host_profiles import TOOL_NAME as STRICT_NAMES
from .rules.tool_names import RULE as TOOL_NAMES
from .rules.tool_names import SPEC as SPEC_NAME
from .rules.tool_names import VALID as VALID_NAME
from .rules.tool_names import Renamer, invented

if TYPE_CHECKING:
    from ..config import NormalizerConfig


def names_for(
    tools: ToolSet, client: ClientProfile, config: NormalizerConfig, calls: Collection[str] | None = None
) -> Mapping[str, str]:
    """The name map of listing ``tools`` as it is for ``client``'s profile (advertised ->
    upstream): the map the listing was made with when it was made for a client that keeps the
    same names, else the map rule ``tool_names`` gives the listing's upstream names for this
    client, derived once per listing and pattern (the listing is immutable). Never the map of
    whichever client listed last: a call goes upstream by the names its own client was shown.

    The derived map treats the whole listing as one page: it differs from a page-by-page one only
    where an invented name equals a real tool name of a later page (a 64-bit digest match).
    ``calls``: the names the map is wanted for; when none has an invented name's shape (every
    name the derived map holds has it), the map is not derived (a 50,000-tool listing costs the
    event loop tens of milliseconds): ``{}`` answers for them alike."""
    pattern = names_kept(client).pattern
    if not tools.named_for or tools.named_for == pattern:
        return tools.names
    found = tools.derived.get(pattern)
    if found is None and calls is not None and not any(map(invented, calls)):
        return {}
    if found is None:
        kept = names_kept(client)
        renamer = Renamer(tools.keys(), pattern=kept)
        derived: dict[str, str] = {}
        for original in tools:
            odd = kept.fullmatch(original) is None
            wanted = odd and config.mode(TOOL_NAMES.name, original) is RuleMode.ON
            new = renamer.name_for(original, wanted)
            if new is not None:
                derived[new] = original
        found = tools.derived[pattern] = derived  # (two patterns at most: the set stays bounded)
    return found


def names_kept(client: ClientProfile) -> re.Pattern[str]:
    """The tool names rule ``tool_names`` keeps for ``client``: the spec's, or the stricter ones a
    host takes (Claude Desktop, claude.ai)."""
    return VALID_NAME if client.host_needs(STRICT_NAMES) else SPEC_NAME
