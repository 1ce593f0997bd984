"""The rule engine: applies the rules to ``tools/list`` and ``tools/call`` results (pure, no I/O).

The same :class:`Normalizer` serves the middleware, the proxy and ``check``; it never knows which.
For a ``tools/list`` result it repairs each ``Tool`` and builds the catalog entries of what it
advertises. For a ``CallToolResult`` it runs the rules in order (:data:`mcp_normalizer.engine.rules.RESULT_RULES`); the
success-result conformance repairs run as one group whose changes are kept only if, together, they
make ``structuredContent`` conform to the advertised ``outputSchema`` (DESIGN section 3: a result
that cannot be made conforming is left as it is, and the reason is logged).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from ..config import NormalizerConfig
from ..errors import DecodeError
from ..types import JSON, JSONObject
from ..wire.eras import era_of
from ..wire.jsoncodec import Codec, Raw, dumps, fingerprint, loads, spliced
from ..wire.jsonrpc import IdKey
from ..wire.pointer import WILDCARD, PointerPattern, format_pointer, resolve
from . import interventions, suggest
from .bounded import SizedLRU
from .catalog import ToolEntry, build_entry
from .lessons import LessonBook, definition_digest
from .rules import (
    RESPONSE_RULES,
    RESULT_RULES,
    RULES,
    TOOL_RULES,
    Mode,
    ResultContext,
    Rewrite,
    ToolContext,
    learned,
    lone_surrogates,
    withhold,
)
from .rules.base import Response, ResponseContext, ToolGate
from .rules.clients import UNKNOWN, ClientProfile, with_model_api
from .rules.declared import unconstrained
from .rules.degrade import RULE as DEGRADE
from .rules.gemini_schemas import enum_arguments
from .rules.host_faults import ENUM_NON_STRING
from .rules.host_schemas import host_argument_map
from .rules.jsonrpc_envelope import ENVELOPE, unwrap_single
from .rules.learned import NOTHING_LEARNED, Learned, LearnedTools
from .rules.learned import RULE as LEARN
from .rules.model_schemas import listing_faults_checked, unchanged_input
from .rules.nullable import declared_places
from .rules.object_root import WRAP_MARK, objects_required
from .rules.scan import WALK_DEPTH, ToolScan
from .rules.schema_keywords import SHAPE
from .rules.schema_repairs import misshapen_input
from .rules.schemas import subschemas, widen_at
from .rules.withhold import Withheld
from .schema import SchemaCompiler, SchemaUnusable, Violation
from .steps import Steps, run_all

_GROUP = tuple(rule for rule in RESULT_RULES if rule.conformance and rule.on_result is not None)
#: Rules that validate a success result's structuredContent against its outputSchema.
_VALIDATING = (*(rule.name for rule in _GROUP), "last_resort")
#: structuredContent texts up to this size are always decoded (cheap; the null and {} checks read them).
_SMALL = 4096
#: Bounds of the caches of catalog entries and of listed tools, in bytes of the tools they describe.
_MAX_ENTRY_BYTES = 64 * 1024 * 1024
_MAX_LISTED_BYTES = 64 * 1024 * 1024
#: Bytes counted for one cached item besides its text (key, objects, records).
_ITEM_BYTES = 256
#: Verdicts kept on tools listed to hosts (:meth:`Normalizer.withheld`): a key and a shared object each.
_MAX_VERDICTS = 200_000


class Record(msgspec.Struct, frozen=True, gc=False):
    """A rewrite (or a finding) about one message, with the tool and whether it took effect.

    Attributes:
        rewrite: what the rule did or would do.
        tool: the tool concerned, if known.
        applied: ``False`` when the rule runs in report mode (nothing changed).
        event: ``rewrite``; ``unrepaired`` for a success result no rule could make conform;
            ``skipped`` for a result too large to validate; ``fault`` for a tool the proxy could
            not read (it passes untouched); ``withheld`` for a tool left out of a host's listing
            (:mod:`mcp_normalizer.engine.rules.withhold`).
    """

    rewrite: Rewrite
    tool: str | None
    applied: bool
    event: Literal["rewrite", "unrepaired", "skipped", "fault", "withheld"] = "rewrite"


@dataclass(slots=True)
class Outcome:
    """The result to emit and what happened to it.

    Attributes:
        result: the result to forward (the input object itself when nothing was applied).
        changed: whether ``result`` differs from the input.
        records: one per rewrite or finding, in rule order.
        entries: catalog entries of the advertised tools (``tools/list`` only).
        learned: what an unrepaired ``tools/call`` result taught of its tool's schema
            (:mod:`mcp_normalizer.engine.rules.learned`; ``None`` when nothing, or rule ``learn_schema`` is off).
    """

    result: JSONObject
    changed: bool = False
    records: list[Record] = field(default_factory=list)
    entries: list[ToolEntry] = field(default_factory=list)
    learned: Learned | None = None


@dataclass(frozen=True, slots=True)
class Listing:
    """One ``Tool`` of a ``tools/list`` page after the rules.

    Attributes:
        tool: the tool to emit (the input object itself when no rule in mode ``on`` changed it).
        records: one per rewrite or finding, in rule order.
        entry: its catalog entry; ``None`` for a member that is not an object with a string ``name``
            (it passes untouched and is not learned).
        fault: ``True`` when the tool could not be worked on (it passes untouched; ``records`` says why).
    """

    tool: JSON
    records: tuple[Record, ...] = ()
    entry: ToolEntry | None = None
    fault: bool = False


class ListedTool(msgspec.Struct, frozen=True, gc=False):
    """One ``Tool`` of a ``tools/list`` page, as text, after the rules.

    Attributes:
        text: the tool's new JSON text (unchanged parts copied byte for byte), ``None`` when unchanged.
        records, entry: as in :class:`Listing`.

    Cached by the thousand: invisible to the cyclic garbage collector, like its entry.
    """

    text: bytes | None
    records: tuple[Record, ...]
    entry: ToolEntry | None


@dataclass(slots=True)
class _Track:
    """One message through a sequence of rules, in two versions.

    ``would`` has every change of every rule not ``off`` (what the proxy would emit with all of them
    ``on``: report-only mode previews exactly that); ``real`` has only the changes of rules ``on``
    (what is emitted). They are the same object until a rule in ``report`` mode makes a change.
    """

    would: JSONObject
    real: JSONObject
    records: list[Record] = field(default_factory=list)
    learned: Learned | None = None

    def run(self, config: NormalizerConfig, rules: Iterable[tuple[str, Hook]], ctx: Any, tool: str | None) -> None:
        self.run_planned([(name, hook, config.mode(name, tool)) for name, hook in rules], ctx, tool)

    def run_planned(self, steps: Iterable[tuple[str, Hook, Mode]], ctx: Any, tool: str | None) -> None:
        """Run ``steps`` (rule name, hook, the rule's mode for this tool) in order."""
        for _name, hook, mode in steps:
            if mode is not Mode.OFF:
                self.step(hook, mode, ctx, tool)

    def step(self, hook: Hook, mode: Mode, ctx: Any, tool: str | None) -> None:
        """Run one rule's ``hook`` in ``mode`` (not ``off``). Its record says ``applied`` only when
        the emitted version changed: a rule ``on`` whose change only the preview needs (an
        earlier rule in ``report`` mode made the place it reacts to) is recorded as previewed."""
        done = hook(self.would, ctx)
        if done is None:
            return
        in_step = self.real is self.would
        self.would = done[0]
        applied = mode is Mode.ON
        if applied:
            if in_step:
                self.real = self.would
            else:
                again = hook(self.real, ctx)
                if again is None:
                    applied = False
                else:
                    self.real = again[0]
        self.records.append(Record(done[1], tool, applied=applied))


Hook = Callable[[JSONObject, Any], "tuple[JSONObject, Rewrite] | None"]
#: The keys (and values) a list rule or its gate reacts to, as :meth:`Normalizer._unchanged`
#: looks for them in a tool's text (whitespace wherever JSON allows it; every alternative begins
#: with a quote, which keeps the search fast).
_KEYS = re.compile(
    rb'"(?:\$|definitions"|anyOf"|oneOf"|allOf"|prefixItems"|_meta"|nullable"|format"'
    rb'|properties"[ \t\r\n]*:[ \t\r\n]*(?:null|\[)|required"[ \t\r\n]*:[ \t\r\n]*null)'
)


class _Listed(msgspec.Struct):
    """A tool as :meth:`Normalizer._unchanged` reads it: its name, its schemas undecoded."""

    name: str
    inputSchema: Raw | UnsetType = UNSET
    outputSchema: Raw | UnsetType = UNSET


_LISTED = msgspec.json.Decoder(_Listed)
#: Plain tool contexts kept (:meth:`Normalizer._plain_context`): eras times clients seen lately.
_MAX_CONTEXTS = 64
#: One ``tools/list`` rule as a tool's plan runs it: its hook, its gate (:mod:`.rules.scan`), its mode.
_ToolStep = tuple[Hook, "ToolGate | None", Mode]


def _joined(first: tuple[PointerPattern, ...], *more: tuple[PointerPattern, ...]) -> tuple[PointerPattern, ...]:
    """Pointer patterns of every group, each once, in the order first seen."""
    if not any(more):
        return first
    return tuple({p.text: p for group in (first, *more) for p in group}.values())


class Normalizer:
    """Applies the configured rules.

    Args:
        config: rule modes, per-tool declarations and knobs.
        compiler: shared schema compiler (one per process is enough).
    """

    def __init__(
        self, config: NormalizerConfig, compiler: SchemaCompiler | None = None, lessons: LessonBook | None = None
    ) -> None:
        self.config = config
        #: What results taught of their tools, for every session of the upstream (:mod:`mcp_normalizer.engine.lessons`);
        #: the normalizer reads it when it lists tools, the transformer adds to it.
        self.lessons = lessons if lessons is not None else LessonBook(enabled=False)
        self.compiler = compiler or SchemaCompiler()
        self._plans: dict[str | None, tuple[tuple[str, Hook, Mode] | None, ...]] = {}
        self._tool_plans: dict[str | None, tuple[_ToolStep, ...]] = {}
        self._contexts: dict[tuple[str | None, int], tuple[ClientProfile, ToolContext]] = {}
        self._tool_clients: dict[tuple[bytes, str | None, str | None, str], ClientProfile] = {}
        # Entries by content, shared by every scope that lists the same tool: thousands of clients
        # of one upstream cost one entry per distinct tool, not one per client.
        # Keys are bytes, values untracked Structs: a 50,000-tool list adds nothing the cyclic
        # collector walks (a tuple is tracked until a collection looks at it).
        self._entries: SizedLRU[bytes, ToolEntry] = SizedLRU(_MAX_ENTRY_BYTES, lambda entry: entry.size + _ITEM_BYTES)
        # What the rules made of each tool text already listed: a client listing the tools every
        # other client listed costs a hash per tool, not the rules.
        self._listed: SizedLRU[bytes, ListedTool] = SizedLRU(
            _MAX_LISTED_BYTES, lambda listed: _ITEM_BYTES + len(listed.text or b"")
        )
        # Why a tool as advertised to a host is withheld from it (:meth:`withheld`), by the host's
        # oracles and the tool's text: a host listing the tools again costs a hash per tool.
        self._verdicts: SizedLRU[bytes, Withheld | Literal[False]] = SizedLRU(_MAX_VERDICTS, lambda _: 1)
        self._verdict_digest: tuple[ClientProfile, hashlib.blake2b] | None = None
        self._inert: dict[str | None, bool] = {}
        #: Whether rule ``withhold_tools`` is on or in report mode for some tool (else no tool is judged).
        self.withholds = any(config.mode(withhold.NAME, tool) is not Mode.OFF for tool in (None, *config.tools))
        self._last_digest: tuple[tuple[str | None, bytes, bytes, int], hashlib.blake2b] | None = None
        #: Declarations for known servers (:mod:`mcp_normalizer.engine.interventions`), unless turned off.
        self.interventions = interventions.shipped() if config.interventions else interventions.NONE

    def _may_degrade(self, tool: str | None) -> bool:
        """Whether any setting may turn degrade mode on for ``tool`` (for some client)."""
        config = self.config
        return bool(config.degrade or config.degrade_clients or config.tool(tool).degrade)

    def degrades(self, tool: str | None, client: ClientProfile) -> str:
        """Why degrade mode (rule ``degrade``) is on for ``tool`` and ``client``, ``""`` when it is off
        (:meth:`~mcp_normalizer.config.NormalizerConfig.degrade_for`)."""
        config = self.config
        if not (config.degrade or config.degrade_clients or (tool is not None and tool in config.tools)):
            return ""
        return config.degrade_for(tool, client.name, client.host.profile if client.host is not None else None)

    def _entry(
        self, tool: JSONObject, places: tuple[PointerPattern, ...], definition: str, text: bytes | None = None
    ) -> ToolEntry:
        """The shared entry of an advertised tool (one per distinct content, nullable places and
        definition as the server listed it); ``text``: the tool's fingerprint, when at hand."""
        arguments = host_argument_map(tool)
        enums = enum_arguments(tool)
        try:
            text = text if text is not None else fingerprint(tool)
        except DecodeError:
            return build_entry(tool, places, self.compiler, definition=definition, arguments=arguments, enums=enums)
        try:
            # compact JSON holds no raw line break: the key is unambiguous; its first byte, 0xff,
            # tells it from the keys of the tools listed as they came (JSON texts: :meth:`_unchanged`)
            key = b"\xff" + text + b"\n" + dumps([place.text for place in places]) if places else b"\xff" + text
        except DecodeError:
            return build_entry(tool, places, self.compiler, definition=definition, arguments=arguments, enums=enums)
        key += b"\n" + definition.encode()
        found = self._entries.get(key)
        if found is None:
            found = build_entry(
                tool, places, self.compiler, size=len(text), definition=definition, arguments=arguments, enums=enums
            )
            self._entries[key] = found
        return found

    def tools_list(self, result: JSONObject, era: str | None, client: ClientProfile = UNKNOWN) -> Outcome:
        """Repair the tools of a ``ListToolsResult`` and build their catalog entries (all at once;
        :meth:`tools_list_steps` does it in slices)."""
        return run_all(self.tools_list_steps(result, era, client))

    def tools_list_steps(
        self,
        result: JSONObject,
        era: str | None,
        client: ClientProfile = UNKNOWN,
        learned: LearnedTools = NOTHING_LEARNED,
    ) -> Steps[Outcome]:
        """Repair the tools of a ``ListToolsResult`` and build their catalog entries, pausing after
        each tool (:mod:`mcp_normalizer.engine.steps`).

        The entries describe each tool as the proxy advertises it with every rule not ``off``
        applied, so report-only mode previews what the proxy would do. Members of ``tools`` that
        are not objects with a string ``name`` pass through untouched and are not learned.
        ``client`` is who the list goes to (repairs only some clients need: :mod:`mcp_normalizer.engine.rules.clients`);
        ``learned``, what the scope learned of its tools' schemas (:mod:`mcp_normalizer.engine.rules.learned`).
        """
        tools = result.get("tools")
        outcome = Outcome(result=result)
        if not isinstance(tools, list):
            return outcome
        emitted = list(tools)
        for index, tool in enumerate(tools):
            listing = self.list_tool(tool, index, era, client, learned)
            outcome.records += listing.records
            if listing.entry is not None:
                outcome.entries.append(listing.entry)
            if listing.tool is not tool:
                emitted[index] = listing.tool
                outcome.changed = True
            yield
        if outcome.changed:
            outcome.result = {**result, "tools": emitted}
        return outcome

    def list_tool(
        self,
        tool: JSON,
        index: int,
        era: str | None,
        client: ClientProfile = UNKNOWN,
        learned: LearnedTools = NOTHING_LEARNED,
        text: bytes | None = None,
    ) -> Listing:
        """Run the tool rules on one member of a ``tools/list`` page's ``tools`` (at ``index``;
        ``text``: its JSON text as listed, when at hand, for the rules that read how its values
        were written).

        A tool whose schemas are too deep or strange to work on passes untouched, learned as
        unvalidatable, with a ``fault`` record; the rest of the list is normalized as usual.
        """
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return Listing(tool)
        name = tool["name"]
        try:
            nullable_on = self.config.mode("nullable", name) is not Mode.OFF
            declared = self.config.tool(name)
            if declared.model_api:  # the tool's model API family, over the client's
                client = self._tool_client(client, declared.model_api)
            configured, relax, drop = declared.nullable, declared.relax, declared.drop_output_schema
            declared_by = "declared in config"
            applied = self.interventions.for_tool(tool)
            if applied:
                configured = _joined(configured, *(entry.nullable for entry in applied))
                relax = _joined(relax, *(entry.relax for entry in applied))
                drop = drop or any(entry.drop_output_schema for entry in applied)
                labels = ", ".join(entry.label for entry in applied)
                by_config = declared.nullable or declared.relax or declared.drop_output_schema
                declared_by = f"declared in config and by {labels}" if by_config else labels
            configured = configured if nullable_on else ()
            track = _Track(tool, tool)
            nullable_by = declared_by
            scan = first = ToolScan(tool)
            definition = definition_digest(tool, first.text) if self.lessons.enabled else ""  # only a lesson reads it
            taught = learned.get(name)
            lesson = self.lessons.get(name, definition) if self.lessons.knows(name) else None
            if lesson is not None:
                taught = lesson if taught is None else taught.merged(lesson)
            advertised_nullable = configured
            if taught is not None:
                where = "of this upstream" if lesson is not None else "in this scope"
                by_lesson = f"learned from this tool's results {where} (rule learn_schema)"
                if taught.relax or taught.drop_output_schema:
                    relax = _joined(relax, taught.relax)
                    drop = drop or taught.drop_output_schema
                    declared_by = by_lesson
                if taught.nullable and nullable_on:
                    # advertised only: the nullable rule never nulls a value at a learned place
                    advertised_nullable = _joined(configured, taught.nullable)
                    nullable_by = f"{nullable_by}; {by_lesson}" if configured else by_lesson
            degrade = self.degrades(name, client)
            if configured or relax or drop or applied or taught is not None or degrade:
                context = ToolContext(
                    era=era,
                    settings=self.config.settings,
                    nullable=advertised_nullable,
                    relax=relax,
                    drop_output_schema=drop,
                    client=client,
                    declared_by=declared_by,
                    nullable_by=nullable_by,
                    degrade=degrade,
                )
            else:
                context = self._plain_context(era, client)
            if text is not None and client.host_needs(ENUM_NON_STRING):  # its enums' spelling (gemini_schemas)
                context = dataclasses.replace(context, listed=text)
            for hook, gate, mode in self._tool_plan(name):
                if gate is not None and not gate(scan, context):
                    continue  # the rule cannot change this tool
                before = track.would
                track.step(hook, mode, context, name)
                if track.would is not before:
                    scan = ToolScan(track.would)
            places = declared_places(tool, configured, first) if nullable_on else ()
            advertised = track.would.get("outputSchema")
            if places and isinstance(advertised, dict) and advertised.get(WRAP_MARK) is True:
                # the results will be wrapped too: the places move under /result
                places = tuple(PointerPattern("/result" + p.text, ("result", *p.segments)) for p in places)
            entry = self._entry(track.would, places, definition, scan.text)
        except (RecursionError, DecodeError, ValueError, TypeError) as exc:
            reason = f"{type(exc).__name__} while reading the tool"
            rewrite = Rewrite("tools_list", "left unchanged", (f"/tools/{index}",), reason)
            problem = ToolEntry(name, tool.get("outputSchema"), problem=reason)
            return Listing(tool, (Record(rewrite, name, False, "fault"),), problem, fault=True)
        return Listing(track.real, tuple(track.records), entry)

    def list_tool_text(
        self,
        text: bytes | Raw,
        index: int,
        era: str | None,
        client: ClientProfile = UNKNOWN,
        learned: LearnedTools = NOTHING_LEARNED,
    ) -> ListedTool:
        """:meth:`list_tool` on one tool given as JSON text; the answer for a text already listed
        (in the same era) is reused, so only new tools cost the rules.

        Raises:
            DecodeError: ``text`` is not JSON the proxy reads (RFC 8259; too deep; ``1e400``).
        """
        digest = self._listing_digest(era, client, learned).copy()
        digest.update(text)
        key = digest.digest()
        found = self._listed.get(key)
        if found is not None:
            return found
        found = self._unchanged(text, era, client, learned)
        if found is not None:
            self._listed[key] = found
            return found
        tool = loads(text)
        listing = self.list_tool(tool, index, era, client, learned, bytes(text))
        new = spliced(listing.tool, tool, text) if listing.tool is not tool else None
        found = ListedTool(new, listing.records, listing.entry)
        if not listing.fault:
            self._listed[key] = found  # a fault names its index: not reused
        return found

    def _listing_digest(self, era: str | None, client: ClientProfile, learned: LearnedTools) -> hashlib.blake2b:
        """The digest of what a tool's listing depends on besides its text (copied per tool, then
        fed the text: the key of :attr:`_listed`); the last one is kept, so a page costs one."""
        # degrade mode by client name (not in client.key): its own listings
        degrade = self.degrades(None, client).encode() if self.config.degrade_clients else b""
        context = (era, client.key + degrade, learned.key, self.lessons.generation)
        last = self._last_digest
        if last is not None and last[0] == context:
            return last[1]
        era, _, _, generation = context
        digest = hashlib.blake2b(digest_size=16)
        digest.update(dumps(era))  # a JSON string or null, a JSON array, then the text: unambiguous
        digest.update(dumps(degrade.decode()) if degrade else b"")  # a JSON string: unambiguous
        digest.update(client.key)
        digest.update(learned.key)  # a scope that learned lists its tools otherwise (b"" when nothing)
        digest.update(b"%d\n" % generation)  # so does the upstream, once a result taught it
        self._last_digest = (context, digest)
        return digest

    def _unchanged(
        self, text: bytes | Raw, era: str | None, client: ClientProfile, learned: LearnedTools
    ) -> ListedTool | None:
        """The listing of a tool no list rule can change, made without running them (so a tool
        with nothing to repair costs near what passing it on does), or ``None``: the rules must
        run (:meth:`list_tool`).

        ``None`` for a tool whose text holds anything a rule or its gate reacts to (:data:`_KEYS`,
        ``true``/``false`` anywhere, an escape that could spell an ASCII letter), for a tool
        something is declared, intervened or learned for, for a client with host faults other than
        result faults and those of :mod:`.rules.model_schemas` (whose own check it makes), for a
        tool nested deeper than the rules read, for any root the rules repair, and for a schema
        holding a keyword of :mod:`.rules.schema_keywords` (a type that is no JSON type name, an
        array among ``properties``: one a substring search cannot tell from a sibling ``required``).
        The name is decoded and the schemas are read as a skeleton (:data:`.rules.schema_keywords.SHAPE`:
        msgspec's C decoder types only the keywords those rules repair and the ones holding
        subschemas and skips every other member without making a value of it: about 1 µs more
        than reading the roots alone, for the bench's tool); the ``outputSchema`` is kept as its
        text, the definition digest made when first asked for (:meth:`ToolEntry.digest`).
        ``tests/test_tool_gates.py`` holds this and :meth:`list_tool` to the same answers.
        """
        data = text if isinstance(text, bytes) else bytes(text)
        # the cheapest refusals first: a boolean (zod's additionalProperties: false, OpenAPI's
        # nullable: true) is common and a substring search; the key pattern costs the most
        faults = client.host_faults
        if (faults and not listing_faults_checked(faults)) or b"true" in data or b"false" in data or b"\\u00" in data:
            return None
        if _KEYS.search(data) is not None or data.count(b"{") + data.count(b"[") > WALK_DEPTH:
            return None
        try:
            listed = _LISTED.decode(data)
            inputs, outputs = listed.inputSchema, listed.outputSchema
            # each schema read as a skeleton (:data:`SHAPE`): it fails for what type_names,
            # required_boolean, required_in_properties and enum_not_array repair
            if isinstance(inputs, UnsetType):
                return None
            root = SHAPE.decode(inputs)
            if root.type != "object":
                return None  # (schema_shape's and input_object_root's: no object root, or no type at it)
            if faults and not unchanged_input(faults, bytes(inputs), root.type, root.properties):
                return None  # (model_schemas': a host's every-family repairs)
            output = None if isinstance(outputs, UnsetType) else SHAPE.decode(outputs)
        except msgspec.DecodeError:  # (ValidationError included: a name that is not a string, a root not an object)
            return None
        name = listed.name
        if name in self.config.tools or name in self.interventions.by_tool or self.degrades(name, client):
            return None
        if learned.get(name) is not None or self.lessons.knows(name):
            return None
        if output is not None and output.type != "object" and not era_of(era).structured_any:
            return None  # (object_root's)
        if b'"array"' in bytes(inputs):
            schema = loads(inputs)
            if any(map(misshapen_input, subschemas(schema))):
                return None  # (schema_shape's: an input array without items)
        key = data  # (a JSON object: it begins with "{" or a space, never 0xff as the keys of :meth:`_entry` do)
        entry = self._entries.get(key)
        if entry is None:
            schema_text = None if isinstance(outputs, UnsetType) else bytes(outputs)
            entry = ToolEntry(
                name, None, (), None, self.compiler, size=len(data), schema_text=schema_text, keys_read=False
            )
            if self.lessons.enabled:
                entry.listed = data
            self._entries[key] = entry
        return ListedTool(None, (), entry)

    def withheld(self, text: bytes | Raw, client: ClientProfile) -> Withheld | None:
        """Why a tool, as the proxy advertises it to ``client`` (its JSON text, every repair made,
        the name it is advertised under), is withheld from that host, or ``None``
        (:func:`mcp_normalizer.engine.rules.withhold.withheld`); the verdict is kept by the host's
        oracles and the text. ``None`` for a client that is no host with a tool oracle.

        Raises:
            DecodeError: ``text`` is not JSON the proxy reads.
        """
        last = self._verdict_digest
        if last is not None and last[0] is client:
            base = last[1]
        else:
            if not withhold.judged(client):
                return None
            base = hashlib.blake2b(withhold.key_of(client), digest_size=16)
            self._verdict_digest = (client, base)  # (a page's clients are one: one digest a page)
        digest = base.copy()
        digest.update(text)
        key = digest.digest()
        found = self._verdicts.get(key)
        if found is None:
            found = withhold.withheld(loads(text), client) or False
            self._verdicts[key] = found
        return found if found is not False else None

    @property
    def idle(self) -> bool:
        """True when every rule is ``off`` for every tool: the proxy then need not look at any traffic."""
        tools = (None, *self.config.tools)
        return all(self.config.mode(rule.name, tool) is Mode.OFF for rule in RULES for tool in tools)

    def response(self, response: Response, ctx: ResponseContext, tool: str | None) -> tuple[Response, list[Record]]:
        """Run the envelope rules (:data:`mcp_normalizer.engine.rules.RESPONSE_RULES`) on one JSON-RPC response.

        Args:
            response: the message's members (and its result's, when an object), undecoded.
            ctx: the request it answers, as far as known.
            tool: the called tool of a ``tools/call`` (per-tool modes), else ``None``.

        Returns:
            The response to emit (``response`` itself when nothing took effect) and the records,
            report-mode ones included.
        """
        records: list[Record] = []
        out = response
        for rule in RESPONSE_RULES:
            mode = self.config.mode(rule.name, tool)
            if mode is Mode.OFF or rule.on_response is None:
                continue
            done = rule.on_response(out, ctx)
            if done is None:
                continue
            records.append(Record(done[1], tool, applied=mode is Mode.ON))
            if mode is Mode.ON:
                out = done[0]
        return out, records

    def batch_response(self, items: list[Raw], request_id: IdKey | None) -> Record | None:
        """Whether a response body (or SSE event) that is a JSON array of ``items`` is to be sent
        as its one message: the record (``applied`` when rule ``jsonrpc_envelope`` is ``on``), or
        ``None`` to keep the array (a batch POST: ``request_id`` is ``None``)."""
        mode = self.config.mode(ENVELOPE.name, None)
        rewrite = unwrap_single(items, request_id) if mode is not Mode.OFF else None
        return Record(rewrite, None, applied=mode is Mode.ON) if rewrite is not None else None

    def message_text(self, data: bytes) -> tuple[bytes, Record] | None:
        """Rule ``lone_surrogates`` on the text of a response body or SSE event's data, before it is
        decoded: the text to read on (the repaired one when the rule is ``on``) and the record, or
        ``None`` when there is nothing to repair (or the rule is ``off``)."""
        mode = self.config.mode(lone_surrogates.RULE.name, None)
        done = lone_surrogates.repair(data) if mode is not Mode.OFF else None
        if done is None:
            return None
        record = Record(lone_surrogates.rewrite(done[1]), None, applied=mode is Mode.ON)
        return (done[0] if mode is Mode.ON else data), record

    def inert(self, tool: str | None) -> bool:
        """True when every ``tools/call`` rule is ``off`` for ``tool``: nothing can change its results.

        Asked for every call: the answer is kept per tool the config names (any other tool answers
        as ``None`` does), so the cache is bounded by the config, not by what clients send.
        """
        key = tool if tool in self.config.tools else None
        found = self._inert.get(key)
        if found is None:
            found = self._inert[key] = all(self.config.mode(rule.name, key) is Mode.OFF for rule in RESULT_RULES)
        return found

    def reads_structured(
        self,
        result: JSONObject,
        text: Raw,
        tool: str | None,
        entry: ToolEntry | None,
        era: str | None,
        size: int,
        client: ClientProfile = UNKNOWN,
    ) -> bool:
        """Whether a rule may read the value of this result's ``structuredContent``.

        Args:
            result: the result's other members, decoded.
            text: ``structuredContent``, undecoded.
            tool, entry, era, size, client: as for :meth:`tools_call`.

        When no rule can, :meth:`tools_call` may be given ``text`` itself in place of the value: it
        is written back as it came, and a large result costs no more than reading its envelope.
        Small values are always read (the text mirror, the ``null`` and ``{}`` checks look at
        them), and so is any value ``object_result`` looks at (it tells objects from the rest). A
        value to validate is read unless its text already passes the schema's typed check
        (:meth:`~mcp_normalizer.engine.schema.CompiledSchema.accepts_text`): a conforming result is then judged
        without building its Python objects.
        """
        mode = self.config.mode
        if len(text) <= max(self.config.settings.mirror_max_bytes, _SMALL) or result.get("isError") is True:
            return True
        if entry is None:
            return False
        if entry.has_output_schema:
            validated = size <= self.config.max_validate_bytes
            if not (validated and any(mode(name, tool) is not Mode.OFF for name in _VALIDATING)):
                return False
            # A text the schema's typed check accepts conforms: no validating rule has work there.
            compiled = entry.compiled
            return compiled is None or not compiled.accepts_text(text)
        return objects_required(era, client) and mode("object_result", tool) is not Mode.OFF

    def tools_call(
        self,
        result: JSONObject,
        tool: str | None,
        entry: ToolEntry | None,
        era: str | None,
        size: int,
        codec: Codec | None = None,
        client: ClientProfile = UNKNOWN,
    ) -> Outcome:
        """Normalize one ``CallToolResult`` (``resultType`` absent or ``complete``).

        Args:
            result: the result object from the JSON-RPC response (``structuredContent`` may be
                left undecoded, a :data:`~mcp_normalizer.wire.jsoncodec.Raw`, where :meth:`reads_structured` allows).
            tool: the called tool's name, from the request.
            entry: the tool's catalog entry, ``None`` if the proxy does not know the tool.
            era: the exchange's protocol version.
            size: the encoded size of the message in bytes (for ``max_validate_bytes``).
            codec: the message's codec (rules decode and encode through it); a new one if ``None``.
            client: who the result goes to (repairs only some clients need: :mod:`mcp_normalizer.engine.rules.clients`).
        """
        outcome = Outcome(result=result)
        if size > self.config.max_validate_bytes and entry is not None and entry.compiled is not None:
            reason = f"result of {size} bytes exceeds max_validate_bytes={self.config.max_validate_bytes}"
            outcome.records.append(Record(Rewrite("validation", "skipped", (), reason), tool, False, "skipped"))
            entry = entry.without_validation("result too large to validate")
        ctx = ResultContext(
            tool=entry,
            era=era,
            settings=self.config.settings,
            codec=codec or Codec(),
            client=client,
            degrade=self.degrades(tool, client),
        )
        track = _Track(result, result)
        for step in self._result_plan(tool):
            if step is None:
                self._conform(track, ctx, tool)
            else:
                track.run_planned((step,), ctx, tool)
        outcome.records += track.records
        outcome.learned = track.learned
        outcome.result = track.real
        outcome.changed = track.real is not result
        return outcome

    def _tool_client(self, client: ClientProfile, family: str) -> ClientProfile:
        """``client`` sending a tool to model API ``family`` (``[tools."NAME"] model_api``), one
        profile per client and family (bounded as the contexts are)."""
        key = (client.key, client.name, client.version, family)
        found = self._tool_clients.get(key)
        if found is None:
            if len(self._tool_clients) >= _MAX_CONTEXTS:
                self._tool_clients.clear()
            found = self._tool_clients[key] = with_model_api(client, family)
        return found

    def _plain_context(self, era: str | None, client: ClientProfile) -> ToolContext:
        """The context of a tool nothing is declared or learned for (one per era and client)."""
        found = self._contexts.get((era, id(client)))
        if found is not None and found[0] is client:
            return found[1]
        if len(self._contexts) >= _MAX_CONTEXTS:
            self._contexts.clear()
        context = ToolContext(era=era, settings=self.config.settings, client=client)
        self._contexts[(era, id(client))] = (client, context)  # (the client held: its id stays its own)
        return context

    def _tool_plan(self, tool: str) -> tuple[_ToolStep, ...]:
        """The tool rules in order with their gates and modes for ``tool`` (``off`` ones left out):
        one plan per tool the config declares and one for all others, as :meth:`_result_plan`."""
        key = tool if tool in self.config.tools else None
        plan = self._tool_plans.get(key)
        if plan is None:
            steps: list[_ToolStep] = []
            for rule in TOOL_RULES:
                mode = self.config.mode(rule.name, tool)
                if rule.on_tool is not None and mode is not Mode.OFF:
                    steps.append((rule.on_tool, rule.tool_gate, mode))
            plan = tuple(steps)
            self._tool_plans[key] = plan
        return plan

    def _result_plan(self, tool: str | None) -> tuple[tuple[str, Hook, Mode] | None, ...]:
        """The result rules in order with their modes for ``tool`` (``off`` ones left out); ``None``
        marks where the conformance group runs. Modes depend on the tool only when the config
        declares it, so there is one plan per declared tool and one for all others."""
        key = tool if tool is not None and tool in self.config.tools else None
        plan = self._plans.get(key)
        if plan is None:
            steps: list[tuple[str, Hook, Mode] | None] = []
            for rule in RESULT_RULES:
                if rule.on_result is None:
                    continue
                if not rule.conformance:
                    mode = self.config.mode(rule.name, tool)
                    if rule is DEGRADE and not self._may_degrade(tool):
                        continue  # (opted into nowhere for this tool: the rule has nothing to do)
                    if mode is not Mode.OFF:
                        steps.append((rule.name, rule.on_result, mode))
                elif rule is _GROUP[0]:
                    steps.append(None)
            plan = self._plans[key] = tuple(steps)
        return plan

    def _conform(self, track: _Track, ctx: ResultContext, tool: str | None) -> None:
        """Run the conformance group; keep its changes only if they make the result conform."""
        entry, result = ctx.tool, track.would
        if entry is None or entry.compiled is None or result.get("isError") is True:
            return
        if ctx.client.keeps_structured:
            return  # a host that reads structuredContent and validates none of it: repairs only hide data
            # (and a missing one is no fault for it: nothing to learn)
        if "structuredContent" not in result:
            reason = "structuredContent is missing and no rule could supply one"
            fix = suggest.for_missing_structured(tool)
            rewrite = Rewrite("conformance", "left unchanged", ("/structuredContent",), reason, fix)
            track.records.append(Record(rewrite, tool, False, "unrepaired"))
            self._learn(track, tool, learned.from_missing())
            return
        try:
            if entry.compiled.is_valid(result["structuredContent"]):
                return
        except SchemaUnusable:
            return
        group = _Track(track.would, track.real)
        group.run(self.config, [(rule.name, rule.on_result) for rule in _GROUP if rule.on_result], ctx, tool)
        try:
            remaining = entry.compiled.violations(group.would["structuredContent"], limit=3)
        except SchemaUnusable:
            remaining = []
        if remaining:
            reason = "structuredContent still fails outputSchema at " + ", ".join(v.describe() for v in remaining)
            try:
                every = entry.compiled.violations(result["structuredContent"], limit=learned.MAX_PLACES + 1)
            except SchemaUnusable:
                every = remaining
            structured, repaired = result["structuredContent"], group.would.get("structuredContent")
            structured, repaired = (loads(v) if isinstance(v, Raw) else v for v in (structured, repaired))
            unrepaired = [v for v in every if not _null_repaired(structured, repaired, v)]
            # the declaration to write: for what the lossless repairs leave (not an optional null)
            fix = suggest.for_violations(tool, structured, unrepaired or every)
            rewrite = Rewrite("conformance", "left unchanged", ("/structuredContent",), reason, fix)
            track.records.append(Record(rewrite, tool, False, "unrepaired"))
            nulls = self.config.mode("nullable", tool) is not Mode.OFF  # (else a learned place is never advertised)
            taught = learned.from_violations(structured, unrepaired, entry.output_schema if nulls else None)
            self._learn(track, tool, self._relaxing(entry, (structured, repaired), taught))
            return
        applied = any(record.applied for record in group.records)
        if applied and group.real is not group.would and not self._conforms(entry, group.real):
            # Some of the group is report-only and the rest alone does not make the result conform:
            # emit the result as it was, and say that nothing of the group took effect.
            track.would = group.would
            track.records += [msgspec.structs.replace(record, applied=False) for record in group.records]
            reason = "the repairs in mode 'on' alone leave structuredContent non-conforming"
            rewrite = Rewrite("conformance", "left unchanged", ("/structuredContent",), reason)
            track.records.append(Record(rewrite, tool, False, "unrepaired"))
            return
        track.would, track.real = group.would, group.real
        track.records += group.records

    def _learn(self, track: _Track, tool: str | None, found: Learned | None) -> None:
        """Hand on what an unrepaired result teaches of its tool (rule ``learn_schema``): in mode
        ``on`` as :attr:`Outcome.learned` (the transformer keeps it for the scope and logs it); in
        ``report`` as a record of what would be learned."""
        mode = self.config.mode(LEARN.name, tool)
        if found is None or tool is None or mode is Mode.OFF:
            return
        if mode is Mode.ON:
            track.learned = found
            return
        what = found.describe()
        reason = "the tool's results do not meet its outputSchema; a scope would be told with list_changed"
        track.records.append(Record(Rewrite(LEARN.name, f"would learn {what}", (), reason), tool, False))

    def _relaxing(self, entry: ToolEntry, structured: tuple[JSON, JSON], found: Learned | None) -> Learned | None:
        """``found`` if relaxing its places (``relax``: unconstrained; ``nullable``: ``null`` added)
        widens the schema at each and makes the result conform, as it came or as the lossless
        repairs would make it (``structured``: both), else ``None`` (a place only a
        ``patternProperties`` or a branch reaches, or more faults than were learned: the relaxed
        list would announce a change that changes nothing)."""
        schema = entry.output_schema
        if found is None or not isinstance(schema, dict):
            return None
        found = _schema_named(schema, found)
        relaxed: JSON = schema
        # the deepest first, as the tool rules widen them (an outer place cannot hide an inner one)
        for place in sorted(found.nullable, key=lambda p: len(p.segments), reverse=True):
            relaxed, count = widen_at(relaxed, place.segments)
            if not count:
                return None
        for place in found.relax:
            relaxed, count = widen_at(relaxed, place.segments, unconstrained)
            if not count:
                return None
        try:
            compiled = self.compiler.compile(relaxed)
            return found if any(compiled.is_valid(value) for value in structured) else None
        except SchemaUnusable:
            return None

    @staticmethod
    def _conforms(entry: ToolEntry, result: JSONObject) -> bool:
        """Whether ``result``'s ``structuredContent`` conforms (an unusable schema counts as yes)."""
        try:
            return entry.compiled is None or entry.compiled.is_valid(result.get("structuredContent"))
        except SchemaUnusable:
            return True


def _null_repaired(structured: JSON, repaired: JSON, violation: Violation) -> bool:
    """Whether ``violation`` is at a ``null`` that the lossless repairs replace (an optional member
    dropped, a required array's ``null`` made ``[]``): that ``null`` teaches nothing."""
    found, value = resolve(structured, violation.path)
    if not found or value is not None:
        return False
    still, after = resolve(repaired, violation.path)
    return not still or after is not None


def _schema_named(schema: JSON, found: Learned) -> Learned:
    """``found`` with each place spelled as the schema names it: a member the schema does not
    list in ``properties`` where the place is (one ``additionalProperties`` takes: a key of the
    result's data, an e-mail address, a customer's id) is written ``*``, as array indexes are. A
    lesson's places are shown to anyone (``GET {admin_prefix}/lessons``), kept in the state file
    and offered to every tenant; one tenant's data must be in none of them, and results whose
    data keys differ teach the same place."""
    named: list[tuple[PointerPattern, ...]] = []
    for given in (found.relax, found.nullable):
        places: dict[str, PointerPattern] = {}
        for place in given:
            segments: list[str] = []
            for segment in place.segments:
                if segment != WILDCARD and not _names_member(schema, segments, segment):
                    segment = WILDCARD
                segments.append(segment)
            text = format_pointer(tuple(segments))
            places.setdefault(text, PointerPattern.parse(text))
        named.append(tuple(places.values()))
    relax, nullable = named
    if relax == found.relax and nullable == found.nullable:
        return found
    return Learned(found.drop_output_schema, relax, nullable)


def _names_member(schema: JSON, prefix: list[str], name: str) -> bool:
    """Whether a schema place that validates instance pattern ``prefix`` lists ``name`` in its
    ``properties`` (:func:`~mcp_normalizer.engine.rules.schemas.widen_at` finds the places)."""
    seen: list[JSON] = []

    def note(node: JSON) -> JSON:
        seen.append(node)
        return node

    widen_at(schema, prefix, note)
    return any(
        isinstance(node, dict) and isinstance(node.get("properties"), dict) and name in node["properties"]
        for node in seen
    )
