"""The audit: the proxy's rules in report-only mode over tool lists and tool results (pure, no I/O).

:class:`Auditor` is fed what a server sent (``tools/list`` pages and ``tools/call`` results, live or
from a capture) and collects one :class:`Finding` per fault: the rule that would repair it, where,
why, what it breaks and what the proxy does about it. It uses the same
:class:`~mcp_normalizer.engine.normalize.Normalizer` as the proxy, with every rule's changes previewed and none
applied, so a finding is exactly a rewrite the proxy would make (or a result it could not repair).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..config import NormalizerConfig
from ..engine.catalog import ToolEntry
from ..engine.interventions import named_in
from ..engine.name_maps import names_kept
from ..engine.normalize import Normalizer, Record
from ..engine.rules import Mode, withhold
from ..engine.rules.clients import CLIENT_FAULTS, UNKNOWN, ClientProfile
from ..engine.rules.tool_names import RULE as TOOL_NAMES
from ..engine.rules.tool_names import Renamer
from ..errors import DecodeError
from ..types import JSON, JSONObject
from ..wire.jsoncodec import dumps
from .advisories import advisories
from .author_fixes import author_fix
from .date_times import failing_formats
from .faults import HOST_REFUSALS, KINDS, FaultKind, kind_of
from .host_observed import Observed, observed

#: What the proxy does about a finding that no rule repairs.
NOT_REPAIRED = "none: the proxy passes it through unchanged and logs it (clients still reject it)"
#: Rules whose ``tools/list`` rewrite is a precaution for some clients, not a fault of the server:
#: ``check`` reports them only when a result shows the fault (rule -> how it is found).
PRECAUTIONS = frozenset({"date_time_format"})
DATE_TIME_REPAIR = (
    "the proxy moves date and time format assertions into the description for clients that check formats"
    " (rule date_time_format), so they accept the value; send an offset (2026-12-03T09:30:00Z) to fix it at the source"
)


@dataclass(slots=True)
class Finding:
    """One fault of one tool, possibly seen many times.

    Attributes:
        tool: the tool's name (``None`` when a result could not be tied to a tool).
        where: ``tools/list`` (the tool's definition) or ``tools/call`` (a result).
        rule: the rule that repairs it (``conformance`` when none can; ``tool`` for an unreadable tool).
        pointers: JSON pointers of what is wrong, into the tool or the result.
        reason: what is wrong (validator path and keyword, never a payload value).
        kind: the fault kind, with the spec rule it breaks and the clients it breaks.
        repair: what the proxy does about it.
        count: how many times it was seen.
        fix: for a fault no default repair handles, the TOML that would repair it (else ``""``).
        for_clients: the :data:`~mcp_normalizer.engine.rules.clients.CLIENT_FAULTS` key when only some clients
            reject it (the server's message is valid), else ``""``.
        host_refusal: what the host audited as (``check --host``) does with it, when that host refuses
            what no supported client does (:data:`~mcp_normalizer.check.faults.HOST_REFUSALS`), else ``""``.
    """

    tool: str | None
    where: str
    rule: str
    pointers: tuple[str, ...]
    reason: str
    kind: FaultKind
    repair: str
    count: int = 1
    fix: str = ""
    for_clients: str = ""
    host_refusal: str = ""

    @property
    def advisory(self) -> bool:
        """True when no supported client rejects it: a SHOULD-level kind, or a fault only some other
        clients reject (``check`` exits 0 for those unless ``--strict``); never when the host audited
        as refuses it."""
        if self.host_refusal:
            return False
        return self.kind.advisory or (bool(self.for_clients) and not CLIENT_FAULTS[self.for_clients].supported)

    @property
    def spec(self) -> str:
        """The spec rule it breaks: the client table's more precise word, else its fault kind's."""
        return (CLIENT_FAULTS[self.for_clients].spec if self.for_clients else "") or self.kind.spec

    @property
    def author(self) -> str:
        """What the server's author changes to fix it at the source: the interventions entry's own
        word when an entry caused the repair, else the kind's (:mod:`mcp_normalizer.check.author_fixes`)."""
        entry = named_in(self.reason)
        return entry.author_fix if entry is not None else author_fix(self.kind.name)

    @property
    def clients(self) -> tuple[str, ...]:
        """The clients it breaks: the fault kind's, or for a client-specific fault the table's row
        (after the host audited as, when it refuses it)."""
        clients = (CLIENT_FAULTS[self.for_clients].breaks,) if self.for_clients else self.kind.clients
        return (self.host_refusal, *clients) if self.host_refusal else clients

    def as_json(self) -> JSONObject:
        """The finding as JSON (the ``--format json`` shape)."""
        kind = self.kind
        return {
            "tool": self.tool,
            "where": self.where,
            "rule": self.rule,
            "kind": kind.name,
            "pointers": list(self.pointers),
            "reason": self.reason,
            "spec": {"rule": self.spec, "section": kind.section},
            "clients": list(self.clients),
            "advisory": self.advisory,
            "repair": self.repair,
            "author": self.author,
            "fix": self.fix,
            "count": self.count,
        }


@dataclass(slots=True)
class Audit:
    """Everything an audit saw.

    Attributes:
        findings: the faults, in the order first seen.
        tools: names of the tools listed, in the order first seen.
        calls: results audited.
        eras: the protocol versions of what was audited, in the order first seen.
        notes: what was not audited and why (a call that failed, a result too large, lines skipped).
    """

    findings: list[Finding] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    calls: int = 0
    eras: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Auditor:
    """Runs the rules in report-only mode and collects findings.

    Args:
        config: the rule configuration (the proxy's; its ``report_only`` is forced on).
        client: the client the audit is for (a host's profile: ``check --host``); the rules then
            judge as they do for that client.

    The live check feeds it with :meth:`tools_list` and :meth:`tools_call`; the replay of a capture
    runs the proxy's own transformer over the captured responses and feeds it the transformer's
    records (:meth:`add`) plus :meth:`list_shape` and :meth:`advise`.
    """

    def __init__(self, config: NormalizerConfig, client: ClientProfile = UNKNOWN) -> None:
        self.normalizer = Normalizer(dataclasses.replace(config, report_only=True))
        self.client = client
        #: The rules as the proxy runs them (not report-only): what a host is advertised, which
        #: rule ``withhold_tools`` judges (only for a host it judges, ``check --host``).
        self._emitting = Normalizer(config) if withhold.judged(client) else None
        self.audit = Audit()
        self._catalogs: dict[str, dict[str, ToolEntry]] = {}
        self._index: dict[tuple[str | None, str, str, tuple[str, ...], str], Finding] = {}
        self._tools: set[str] = set()
        self._listing: dict[str, set[str]] = {}  # names in the current listing (all pages) per scope
        self._output_schemas: dict[tuple[str, str], JSONObject] = {}  # as the server listed them

    def era(self, era: str | None) -> None:
        """Note the protocol version of what is audited."""
        if era is not None and era not in self.audit.eras:
            self.audit.eras.append(era)

    def tools_list(self, result: JSONObject, era: str | None, scope: str = "", *, first_page: bool = True) -> None:
        """Audit one ``tools/list`` result page and learn its tools (for later calls in ``scope``)."""
        self.era(era)
        self.list_shape(result, scope, first_page=first_page)
        outcome = self.normalizer.tools_list(result, era, self.client)
        catalog = self._catalogs.setdefault(scope, {})
        for entry in outcome.entries:
            catalog[entry.name] = entry
        for record in outcome.records:
            self.add(record, "tools/list")
        host = self.client.host
        tools = result.get("tools")
        if self._emitting is not None and isinstance(tools, list):
            self._withheld_tools(tools, era)
        if host is not None and isinstance(tools, list):
            for tool in tools:
                name = tool.get("name") if isinstance(tool, dict) else None
                if isinstance(name, str):
                    for found in observed(host.profile, "tool", tool):
                        self._observed(name, "tools/list", found)

    def _withheld_tools(self, tools: list[JSON], era: str | None) -> None:
        """Report the tools of one page that the proxy withholds from the host audited as (rule
        ``withhold_tools``): each tool as the proxy advertises it to that host (every rule run as
        configured, the name rule ``tool_names`` gives it), judged by the host's oracles."""
        emitting, client = self._emitting, self.client
        if emitting is None or client.host is None:
            return
        config = emitting.config
        kept = names_kept(client)
        named = [(i, t["name"]) for i, t in enumerate(tools) if isinstance(t, dict) and isinstance(t.get("name"), str)]
        renamer = Renamer([name for _, name in named], pattern=kept)
        for index, name in named:
            try:
                listing = emitting.list_tool(tools[index], index, era, client)
            except (RecursionError, DecodeError, ValueError, TypeError):
                continue
            advertised = listing.tool
            odd = kept.fullmatch(name) is None
            new = renamer.name_for(name, odd and config.mode(TOOL_NAMES.name, name) is Mode.ON)
            if new is not None and isinstance(advertised, dict):
                advertised = {**advertised, "name": new}
            found = withhold.withheld(advertised, client)
            if found is None or config.mode(withhold.NAME, name) is Mode.OFF:
                continue
            rewrite = withhold.rewrite(index, found, client.host.title)
            self.add(Record(rewrite, name, applied=False, event="withheld"), "tools/list")

    def list_shape(self, result: JSONObject, scope: str = "", *, first_page: bool = True) -> None:
        """Check what the rules take for granted in a ``tools/list`` page: ``tools`` is a list of
        tools with string names, unique in the listing (a strict client drops the whole list)."""
        tools = result.get("tools")
        if not isinstance(tools, list):
            self._list_fault(None, ("/tools",), f"tools is {type(tools).__name__}, not an array")
            return
        listed = self._listing.setdefault(scope, set())
        if first_page:
            listed.clear()
        for index, tool in enumerate(tools):
            name = tool.get("name") if isinstance(tool, dict) else None
            if not isinstance(name, str):
                self._list_fault(None, (f"/tools/{index}",), "a tool without a string name")
                continue
            if name in listed:
                self._list_fault(name, (f"/tools/{index}/name",), "the name is listed twice")
            listed.add(name)
            schema = tool.get("outputSchema")
            if isinstance(schema, dict):
                self._output_schemas[(scope, name)] = schema
            else:
                self._output_schemas.pop((scope, name), None)
            if name not in self._tools:
                self._tools.add(name)
                self.audit.tools.append(name)

    def paging(self, problem: str) -> None:
        """Report a ``tools/list`` paging fault (a repeating cursor)."""
        self._list_fault(None, ("/nextCursor",), problem)

    def listed(self, tool: str, scope: str = "") -> bool:
        """Whether the listing read in ``scope`` names ``tool``."""
        return tool in self._listing.get(scope, ())

    def unlisted(self, tool: str, why: str) -> None:
        """Report a call asked for (``check --call``) of a tool the listing does not name (not made)."""
        kind = KINDS["tool_not_listed"]
        self._note(
            tool,
            "tools/call",
            "tools_list",
            (),
            why,
            kind,
            "none: not called (no client calls a tool it was not offered)",
        )

    def bound(self, where: str, bound: str, what: str) -> None:
        """Report a bound of the audit that was met (``bound``: the option, ``max_message_bytes``,
        ``max_listing_bytes``, ``max_pages`` or ``deadline``) and ``what`` was cut: what was not
        read was not audited, so the audit is not clean."""
        name = "oversized_message" if bound == "max_message_bytes" else "audit_cut"
        repair = "none: check stopped reading there, and what it did not read is not audited"
        self._note(None, where, bound, (), what, KINDS[name], repair)

    def tools_call(self, tool: str | None, result: JSONObject, era: str | None, scope: str = "") -> None:
        """Audit one ``CallToolResult`` of ``tool`` (its schema as listed in ``scope``, if it was)."""
        self.era(era)
        try:
            size = len(dumps(result))
        except DecodeError:
            self.audit.notes.append(f"a result of {tool!r} cannot be written as JSON: not audited")
            return
        entry = self._catalogs.get(scope, {}).get(tool) if tool is not None else None
        outcome = self.normalizer.tools_call(result, tool, entry, era, size, client=self.client)
        for record in outcome.records:
            self.add(record, "tools/call")
        host = self.client.host
        if host is not None:
            for found in observed(host.profile, "result", result):
                self._observed(tool, "tools/call", found)
        self.advise(tool, result, entry, scope)

    def _observed(self, tool: str | None, where: str, found: Observed) -> None:
        """Report what the real host audited as does with a tool or a result (``check --host`` of a
        host that runs here, :mod:`~mcp_normalizer.check.host_observed`): on the fault a rule already
        found there (not an advisory, or a model API's fault: the run shows it), else as a finding of
        its own (no rule repairs it for the host)."""
        here = [f for f in self.audit.findings if f.tool == tool and f.where == where]
        if any(f.host_refusal == found.text for f in here):
            return
        for finding in here:
            if not finding.host_refusal and not finding.advisory:
                finding.host_refusal = found.text
                return
        for finding in here:  # a model API's fault the real host shows too (Codex and a draft-07 tuple)
            if not finding.host_refusal and finding.kind.name == "model_api_schema":
                finding.host_refusal = found.text
                return
        finding = Finding(tool, where, "conformance", (), found.does, KINDS["host_observed"], NOT_REPAIRED)
        finding.host_refusal = found.text
        self.audit.findings.append(finding)

    def advise(self, tool: str | None, result: JSONObject, entry: ToolEntry | None, scope: str = "") -> None:
        """Count one audited result and report the faults no rule repairs by default, and those a
        precaution covers (:data:`PRECAUTIONS`): date and time values that fail the ``format`` the
        server listed."""
        self.audit.calls += 1
        for found in advisories(result, entry):
            self._note(tool, "tools/call", found.name, found.pointers, found.reason, KINDS[found.name], found.repair)
        schema = self._output_schemas.get((scope, tool)) if tool is not None else None
        if schema is None or result.get("isError") is True or "structuredContent" not in result:
            return
        for pointer, name in failing_formats(result["structuredContent"], schema):
            reason = f"not an RFC 3339 {name}" + (" (no time-zone offset?)" if name != "date" else "")
            where, kind = ("/structuredContent" + pointer,), KINDS["format_date_time"]
            # A fault: the TS SDK 1.x and 2.x clients check formats (ajv-formats) and refuse the result.
            self._note(tool, "tools/call", "date_time_format", where, reason, kind, DATE_TIME_REPAIR)

    def add(self, record: Record, where: str) -> None:
        """Report one record of the rule engine (``where``: ``tools/list`` or ``tools/call``)."""
        rewrite = record.rewrite
        if where == "tools/list" and rewrite.rule in PRECAUTIONS:
            return  # not the server's fault: reported when a result shows it (advise)
        if record.event == "skipped":
            self.audit.notes.append(f"{record.tool!r}: {rewrite.reason}; not validated")
            return
        repair = rewrite.action if record.event == "rewrite" else NOT_REPAIRED
        if record.event == "withheld":
            repair = (
                f"{rewrite.action} alone ({rewrite.host_fault}); every other tool, and every other client, is listed"
            )
        kind = kind_of(rewrite.rule, record.event)
        self._note(
            record.tool,
            where,
            rewrite.rule,
            rewrite.pointers,
            rewrite.reason,
            kind,
            repair,
            rewrite.fix,
            rewrite.for_clients,
        )

    def _list_fault(self, tool: str | None, pointers: tuple[str, ...], reason: str) -> None:
        self._note(tool, "tools/list", "tools_list", pointers, reason, KINDS["invalid_tools_list"], NOT_REPAIRED)

    def _note(
        self,
        tool: str | None,
        where: str,
        rule: str,
        pointers: tuple[str, ...],
        reason: str,
        kind: FaultKind,
        repair: str,
        fix: str = "",
        for_clients: str = "",
    ) -> None:
        """Record a finding, or count it again when the same fault was seen before."""
        key = (tool, where, rule, pointers, kind.name)
        found = self._index.get(key)
        if found is not None:
            found.count += 1
            return
        host = self.client.host
        refusal = HOST_REFUSALS.get(host.profile, {}).get(for_clients, "") if host and for_clients else ""
        finding = Finding(
            tool, where, rule, pointers, reason, kind, repair, fix=fix, for_clients=for_clients, host_refusal=refusal
        )
        self._index[key] = finding
        self.audit.findings.append(finding)
