"""The ``tools/list`` path: one page of a tool list, its tools repaired by the list rules and
learned, a name clients refuse advertised under another (rule ``tool_names``), a tool a host's model
API refuses after every repair left out for that host (rule ``withhold_tools``); sans-IO.

:func:`tools_list_page` is driven by the transformer (:mod:`mcp_normalizer.engine.transform`) a
tool at a time, as a :data:`~mcp_normalizer.engine.steps.Steps` generator, so that a page of
50,000 tools never holds the event loop. It reads and writes only the tools it changes: the
others are copied as they came.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING

from ..errors import DecodeError
from ..types import JSONObject
from ..wire.jsoncodec import Codec, Raw, is_utf8, join_object, split_array, split_object
from ..wire.jsonrpc import PendingRequest
from .catalog import ToolEntry, ToolSet
from .exchange import Exchange
from .name_maps import names_kept
from .normalize import Normalizer, Record
from .rules import Mode as RuleMode
from .rules import Rewrite, withhold
from .rules.base import meta_of
from .rules.clients import UNKNOWN, ClientProfile
from .rules.tool_names import ORIGINAL_NAME_KEY, Renamer
from .rules.tool_names import RULE as TOOL_NAMES
from .rules.tool_names import SPEC as SPEC_NAME
from .rules.tool_names import rewrite as name_rewrite
from .rules.withhold import NAME as WITHHOLD
from .steps import LARGE_TEXT, Steps

if TYPE_CHECKING:
    pass

_NAME = attrgetter("name")
#: Entries learned, and names checked, in one step (about 1.5 ms).
_CHUNK = 4096
#: Tools judged for a host in one step (rule ``withhold_tools``: about 2 ms cold, 0.1 ms warm).
_JUDGED = 64


def tools_list_page(
    normalizer: Normalizer, exchange: Exchange, request: PendingRequest, members: dict[str, Raw], codec: Codec
) -> Steps[tuple[dict[str, Raw | list[Raw]] | None, list[Record]]]:
    """Repair and learn one ``tools/list`` page, a tool at a time (a pause after each); a tool
    that cannot be read passes untouched, and a tool text listed before costs a hash.

    Args:
        normalizer: runs the list rules on each tool (:meth:`Normalizer.list_tool_text`).
        exchange: the exchange the page came on; the page's tools are learned into it.
        request: the ``tools/list`` request the page answers (its ``cursor``: a later page).
        members: the result's members, undecoded.
        codec: decodes what must be read, keeping every number's spelling.

    Returns (as the generator's value): the result's new members (``None``: unchanged), written
    with the message in one pass, and the log records.
    """
    result: JSONObject = {}
    records: list[Record] = []
    entries = ToolSet()
    new_tools: list[Raw] | None = None
    for key, text in members.items():
        if key != "tools":
            try:
                result[key] = codec.loads(text)
            except DecodeError:
                result[key] = text  # not the tools: passed on as it came, the tools still learned
            continue
        try:
            parts = split_array(text)
        except DecodeError:
            continue  # not an array: nothing to repair or learn
        if len(text) > LARGE_TEXT:
            yield  # the first pass over a huge page in a slice of its own
        texts: list[Raw] = []
        found: list[ToolEntry | None] = []  # each tool's entry, by index (None: not learned)
        changed = False
        before = exchange.state.catalog.tools if request.cursor is not None else None
        for index, part in enumerate(parts):
            try:
                listed = normalizer.list_tool_text(part, index, exchange.era, exchange.client, exchange.state.learned)
            except DecodeError as exc:
                reason = f"the tool cannot be read: {str(exc)[:120]}"
                rewrite = Rewrite("tools_list", "left unchanged", (f"/tools/{index}",), reason)
                records.append(Record(rewrite, None, False, "fault"))
                texts.append(part)
                found.append(None)
                continue
            records += listed.records
            found.append(listed.entry)
            if listed.text is not None:
                changed = True
            texts.append(part if listed.text is None else Raw(listed.text))
            yield
        # the page's entries learned and its names checked in C passes, not a Python call a tool;
        # a pause after each chunk (50,000 tools in one step held the loop 20 ms)
        page_entries = list(filter(None, found))
        fullmatch = names_kept(exchange.client).fullmatch
        odd = False  # a name tool_names renames is on this page
        for start in range(0, len(page_entries), _CHUNK):
            chunk = page_entries[start : start + _CHUNK]
            entries.extend(chunk)
            odd = odd or None in map(fullmatch, map(_NAME, chunk))
            yield
        if odd or (before is not None and before.names):  # (only when a name may change)
            named = [(index, entry.name) for index, entry in enumerate(found) if entry is not None]
            entries.names = yield from _rename(normalizer, exchange.client, texts, named, records, codec, before)
            changed = changed or bool(entries.names)
        if normalizer.withholds and withhold.judged(exchange.client):  # (a host: the tools as advertised to it)
            kept = yield from _withhold(normalizer, exchange.client, texts, found, records)
            if kept is not None:
                texts, changed = kept, True
        if changed:
            new_tools = texts
    entries.named_for = names_kept(exchange.client).pattern
    exchange.learn_tools(result, entries.sealed(), first_page=request.cursor is None)
    yield
    # Made for this client or scope (fewer repairs, learned declarations), changed or not: no
    # shared cache may hand it to another (2026-07-28 server/utilities/caching.mdx, cacheScope).
    # Only what an unknown client gets (every repair) is everyone's.
    tailored = result.get("cacheScope") == "public" and (exchange.client is not UNKNOWN or exchange.state.learned)
    if new_tools is None and not tailored:
        return None, records
    # The bytes copied are the server's: a rewritten tool was decoded, a tool listed as it came was
    # searched and its roots decoded (a member the decoder skips is not checked for UTF-8), a tool
    # that cannot be read goes as it came, as through a plain proxy. The other members were
    # decoded, but for those kept undecoded: they are checked here.
    unread = [text for key, text in members.items() if key != "tools" and result[key] is text]
    if not all(is_utf8(bytes(text)) for text in unread):
        return None, []  # the message cannot be rewritten: nor is anything logged
    out: dict[str, Raw | list[Raw]] = dict(members) if new_tools is None else {**members, "tools": new_tools}
    if tailored:
        out["cacheScope"] = Raw(b'"private"')
    return out, records  # written with the message, in one pass


def _withhold(
    normalizer: Normalizer,
    client: ClientProfile,
    texts: list[Raw],
    found: list[ToolEntry | None],
    records: list[Record],
) -> Steps[list[Raw] | None]:
    """Rule ``withhold_tools`` on one page, after every other rule (``texts``: each tool as it is
    advertised to ``client``, a host): the tools its model API refuses after every repair are left
    out, one record each (:mod:`mcp_normalizer.engine.rules.withhold`), a pause every 64 tools;
    the page's tools without them, or ``None`` when none is left out. A tool the proxy did not
    learn (no string name, unreadable) is not judged: it passes as it came. Its catalog entry
    stays: a call of it goes upstream and its result is repaired, as any other."""
    host = client.host.title if client.host is not None else ""
    config = normalizer.config
    dropped: set[int] = set()
    judge = normalizer.withheld
    for index, (text, entry) in enumerate(zip(texts, found, strict=True)):
        if index % _JUDGED == 0:
            yield  # (a verdict known costs a hash; one not yet, a decode and the oracles: tens of µs)
        if entry is None:
            continue
        try:
            verdict = judge(text, client)
        except DecodeError:
            continue
        if verdict is not None:
            mode = config.mode(WITHHOLD, entry.name)
            if mode is not RuleMode.OFF:
                rewrite = withhold.rewrite(index, verdict, host)
                records.append(Record(rewrite, entry.name, applied=mode is RuleMode.ON, event="withheld"))
            if mode is RuleMode.ON:
                dropped.add(index)
    if not dropped:
        return None
    return [text for index, text in enumerate(texts) if index not in dropped]


def _rename(
    normalizer: Normalizer,
    client: ClientProfile,
    texts: list[Raw],
    named: list[tuple[int, str]],
    records: list[Record],
    codec: Codec,
    before: ToolSet | None,
) -> Steps[dict[str, str]]:
    """Rule ``tool_names`` on one page (``before``: the listing's earlier pages, if any): tools
    whose names clients refuse, or whose names an earlier page's invented name took, are
    advertised under new ones (``texts`` changed in place, a pause after each); the page's
    part of the name map (advertised -> upstream)."""
    config = normalizer.config
    earlier = before if before is not None else ToolSet()
    kept = names_kept(client)
    host = client.host.title if kept is not SPEC_NAME and client.host is not None else ""
    renamer = Renamer((name for _, name in named), earlier.keys(), earlier.names, kept)
    names: dict[str, str] = {}
    for index, original in named:
        odd = kept.fullmatch(original) is None
        mode = config.mode(TOOL_NAMES.name, original) if odd else RuleMode.OFF
        new = renamer.name_for(original, odd and mode is RuleMode.ON)
        if new is None:
            if mode is RuleMode.REPORT:
                records.append(Record(name_rewrite(original, index, host=host), original, applied=False))
            continue
        records.append(Record(name_rewrite(original, index, taken=not odd, host=host), original, applied=True))
        # Only the name and _meta members are read and written: the rest of the tool is copied
        # as it came (decoding 50,000 whole tools kept their trees alive for the collector).
        members = split_object(texts[index])
        text = members.get("_meta")
        meta = meta_of({"_meta": codec.loads(text)} if text is not None else {})
        meta[ORIGINAL_NAME_KEY] = original
        members["name"], members["_meta"] = Raw(codec.dumps(new)), Raw(codec.dumps(meta))
        texts[index] = Raw(join_object(members))
        names[new] = original
        yield
    return names
