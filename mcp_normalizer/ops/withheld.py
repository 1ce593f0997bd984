"""The tools withheld from each host (rule ``withhold_tools``), for ``GET {admin_prefix}/withheld``.

:class:`WithheldTools` hears every rewrite log record (an :class:`~mcp_normalizer.engine.audit.AuditLog`
sink) and keeps those of tools left out of a host's ``tools/list``: per host profile, tool and
fault, the rule that repairs the fault (``none``), why, and how many listings left it out. Bounded:
the least recently withheld go first. It keeps what the log says and no more: tool names as the
upstream lists them and the proxy's own words, never a value, an id, a scope or a time.
"""

from __future__ import annotations

from collections import OrderedDict

from ..engine.normalize import Record
from ..engine.rules.host_profiles import host_for
from ..engine.rules.withhold import NAME, repairing_rule
from ..errors import DecodeError
from ..types import JSON, JSONObject
from ..wire.jsoncodec import dumps

#: Entries kept (host, tool, fault), the least recently withheld out first.
MAX_ENTRIES = 1000


class WithheldTools:
    """The tools withheld from hosts lately.

    Args:
        max_entries: how many (host, tool, fault) entries to keep.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str, str], JSONObject] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def note(self, record: Record, jsonrpc_id: JSON, client: str) -> None:
        """Keep ``record`` if it withheld a tool (an audit sink: ``client`` is the ``clientInfo``
        name the listing went to); any other record is ignored."""
        rewrite = record.rewrite
        if record.event != "withheld" or rewrite.rule != NAME or not record.applied or record.tool is None:
            return
        try:
            dumps(record.tool)
        except DecodeError:
            return  # a name JSON cannot carry (a lone surrogate, with lone_surrogates off): the log has it
        host = host_for(client)
        profile = host.profile if host is not None else "unknown"
        key = (profile, record.tool, rewrite.host_fault)
        entry = self._entries.get(key)
        if entry is None:
            entry = {
                "host": profile,
                "tool": record.tool,
                "fault": rewrite.host_fault,
                "rule": repairing_rule(rewrite.host_fault),
                "reason": rewrite.reason,
                "listings": 0,
            }
            self._entries[key] = entry
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        entry["reason"] = rewrite.reason
        entry["listings"] = int(entry["listings"]) + 1

    def entries(self) -> list[JSONObject]:
        """The entries, by host, then tool, then fault."""
        return [self._entries[key] for key in sorted(self._entries)]

    def as_json(self) -> bytes:
        """``{"withheld": [{"host", "tool", "fault", "rule", "reason", "listings"}]}``."""
        return dumps({"withheld": self.entries()})
