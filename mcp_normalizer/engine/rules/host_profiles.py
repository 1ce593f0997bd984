"""The hosts: what each one sends as its ``clientInfo``, the model API behind it, what it rejects
that the spec allows, and which of those the proxy repairs for it alone. The facts are packaged
data (``mcp_normalizer/hosts.toml``), validated when first read; no I/O beyond reading it once.

Where :mod:`mcp_normalizer.engine.rules.clients` lists faults every client gets repaired unless it is
known to accept them, this table is the other way round: a *host fault* is something valid that a
host refuses, so its repair changes what every other client accepts as it is; it runs for the
hosts that name the fault and for no one else. The faults are the closed set of
:mod:`~.host_faults`, each with its one repair and an oracle. A host refuses what its model API
refuses (``[model_api.<family>] refuses``), what every model API refuses (``[every_family]
refuses``: every host gets those repairs, a host whose model the user chooses too) and what it
names itself (``faults``), each with its source. The facts come from ``reference/hosts.md`` (the
hosts' own source where it is public, else the issues that show the failure). A host is
recognised by the ``clientInfo.name`` it sends (``initialize`` params; on 2026-07-28 every
request's ``_meta``); that name is self-reported, and naming a host only ever gets a client the
output that host can take, with the original kept in ``_meta``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from ...errors import ConfigError
from .host_faults import (
    ARRAY_ITEMS,
    CONSTRAINTS,
    ENUM_TYPE,
    IMAGE_MIME,
    IMAGE_SVG,
    IMAGE_UNDECODABLE,
    LEGACY_TUPLE,
    NEVER_BRANCH,
    OBJECT_PROPERTIES,
    PROPERTY_KEY,
    RESOURCE_LINK,
    STRUCTURED_NOT_OBJECT,
    TEXT_PARSED_AS_STRUCTURED,
    TOOL_NAME,
    TYPE_BESIDE_ANYOF,
)

__all__ = [
    "ARRAY_ITEMS",
    "ENUM_TYPE",
    "EVERY_FAMILY",
    "HOSTS",
    "IMAGE_MIME",
    "IMAGE_SVG",
    "IMAGE_UNDECODABLE",
    "LEGACY_TUPLE",
    "MODEL_APIS",
    "NEVER_BRANCH",
    "OBJECT_PROPERTIES",
    "PROFILES",
    "PROPERTY_KEY",
    "RESOURCE_LINK",
    "STRUCTURED_NOT_OBJECT",
    "TEXT_PARSED_AS_STRUCTURED",
    "TOOL_NAME",
    "TYPE_BESIDE_ANYOF",
    "Fact",
    "Host",
    "ModelApi",
    "Versions",
    "host_for",
    "load",
    "version_key",
]

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


#: What a host's :attr:`Host.model_api` names when the user picks the model.
USER_CHOSEN = "user-chosen"
#: What a host may show its model of a tool result (:attr:`Host.reads`).
READS = ("content", "structured_first", "both", "unknown")


@dataclass(frozen=True, slots=True)
class Fact:
    """Something a model API refuses, with its source, that no host repair of the closed set covers.

    Attributes:
        what: what it refuses.
        source: where that comes from.
        rule: the rule that repairs it for every client, ``""`` when none does.
    """

    what: str
    source: str
    rule: str = ""


@dataclass(frozen=True, slots=True)
class ModelApi:
    """A model API family and the schema and content rules it enforces.

    Attributes:
        family: its name (``anthropic``, ``openai``, ``openai-strict``, ``gemini``).
        title: as people call it.
        source: where its rules are documented.
        refuses: constraint key (:data:`~.host_faults.CONSTRAINTS`) -> its source; repaired for the
            hosts that use this API.
        refuses_unrepaired: what else it refuses, with sources, that no host repair covers.
        repaired_for_every_client: what it refuses that a rule repairs for every client.
    """

    family: str
    title: str
    source: str
    refuses: Mapping[str, str] = field(default_factory=dict)
    refuses_unrepaired: tuple[Fact, ...] = ()
    repaired_for_every_client: tuple[Fact, ...] = ()


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

    :attr:`faults` holds those of its model API and its own.
    """

    profile: str
    title: str
    client_names: tuple[str, ...]
    faults: Mapping[str, str] = field(default_factory=dict)
    rejects: tuple[str, ...] = ()
    versions: Mapping[str, Versions] = field(default_factory=dict)
    #: The model API family it sends tools to (a key of :data:`MODEL_APIS`), or ``user-chosen``.
    model_api: str = USER_CHOSEN
    #: What it shows its model of a result with both ``content`` and ``structuredContent``:
    #: ``content``, ``structured_first``, ``both`` or ``unknown`` (:data:`READS`).
    reads: str = "unknown"
    #: Where :attr:`reads` comes from.
    reads_source: str = ""
    #: Whether it checks a result's ``structuredContent`` against the tool's ``outputSchema`` (a
    #: success's, and an error's against the success schema as the TS SDK 1.x does): ``True``,
    #: ``False``, or ``None`` when no source says (treated as validating: it gets the conforming shape).
    validates_structured: bool | None = None
    #: Where :attr:`validates_structured` comes from.
    validates_structured_source: str = ""
    #: Whether its model gets a result's non-text blocks and the JSON of its ``structuredContent`` but
    #: none of its text blocks when ``structuredContent`` is there (Claude Code): text the proxy adds
    #: for such a host goes as an embedded text resource, which it shows. ``False`` when no source says.
    drops_text_beside_structured: bool = False
    #: Where :attr:`drops_text_beside_structured` comes from.
    drops_text_beside_structured_source: str = ""
    #: Whether it reads ``structuredContent`` into IEEE doubles before its model gets the JSON (a
    #: JavaScript host: an integer past 2**53 reaches the model rounded). ``False`` when no source says.
    parses_numbers_as_doubles: bool = False
    #: Where :attr:`parses_numbers_as_doubles` comes from.
    parses_numbers_as_doubles_source: str = ""
    #: Where its ``clientInfo.name`` values come from.
    source: str = ""
    #: What else the docs' table says of it.
    note: str = ""

    def faults_at(self, version: object) -> frozenset[str]:
        """The faults this host rejects at ``version`` (its ``clientInfo.version``; any JSON)."""
        ranges = self.versions
        return frozenset(fault for fault in self.faults if fault not in ranges or ranges[fault].covers(version))

    @property
    def content_only(self) -> bool:
        """Its model reads only a result's ``content`` (:attr:`reads` is ``content``): the data of
        ``structuredContent`` must be in the text to reach it."""
        return self.reads == "content"

    @property
    def keeps_structured(self) -> bool:
        """Its model reads ``structuredContent`` first and it validates nothing of it
        (:attr:`validates_structured` is ``False``): a repair that makes ``structuredContent``
        conform, or moves an error's out of it, only hides data from that model."""
        return self.reads == "structured_first" and self.validates_structured is False


@dataclass(frozen=True, slots=True)
class HostData:
    """The packaged table: the model APIs and the hosts, in the file's order."""

    model_apis: Mapping[str, ModelApi]
    hosts: tuple[Host, ...]
    #: What every model API family refuses (``[every_family]``): in every host's faults, the hosts
    #: whose model the user chooses too. ``None`` when the table has no such entry.
    every_family: ModelApi | None = None


def _text(table: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = table.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise ConfigError(f"{where}: {key} must be a non-empty string")
    return value


def _table(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a table")
    return value


def _only(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")


def _sources(table: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    """A ``{constraint key = source}`` table: every key of the closed set, every source given."""
    found = _table(table.get(key, {}), f"{where} {key}")
    for name, source in found.items():
        if name not in CONSTRAINTS:
            raise ConfigError(
                f"{where} {key}: unknown constraint key {name!r} (known: {', '.join(sorted(CONSTRAINTS))})"
            )
        if not isinstance(source, str) or not source.strip():
            raise ConfigError(f"{where} {key}.{name}: the source must be a non-empty string")
    return dict(found)


def _facts(table: Mapping[str, Any], key: str, where: str, *, rule: bool) -> tuple[Fact, ...]:
    raw = table.get(key, [])
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: {key} must be an array of tables")
    facts = []
    for index, item in enumerate(raw):
        here = f"{where} {key} {index}"
        item = _table(item, here)
        _only(item, {"what", "source", "rule"} if rule else {"what", "source"}, here)
        facts.append(
            Fact(_text(item, "what", here), _text(item, "source", here), _text(item, "rule", here) if rule else "")
        )
    return tuple(facts)


def _model_api(family: str, table: object) -> ModelApi:
    where = f"model_api.{family}"
    table = _table(table, where)
    _only(table, {"title", "source", "refuses", "refuses_unrepaired", "repaired_for_every_client"}, where)
    return ModelApi(
        family,
        _text(table, "title", where),
        _text(table, "source", where),
        _sources(table, "refuses", where),
        _facts(table, "refuses_unrepaired", where, rule=False),
        _facts(table, "repaired_for_every_client", where, rule=True),
    )


def _versions(table: Mapping[str, Any], where: str, faults: Mapping[str, str]) -> dict[str, Versions]:
    found: dict[str, Versions] = {}
    for key, raw in _table(table.get("versions", {}), f"{where} versions").items():
        here = f"{where} versions.{key}"
        if key not in CONSTRAINTS:
            raise ConfigError(f"{here}: unknown constraint key {key!r} (known: {', '.join(sorted(CONSTRAINTS))})")
        if key not in faults:
            raise ConfigError(f"{here}: the host does not refuse {key!r} (neither its faults nor its model API's)")
        item = _table(raw, here)
        _only(item, {"since", "fixed_in", "source"}, here)
        ends: dict[str, str | None] = {}
        for end in ("since", "fixed_in"):
            value = item.get(end)
            if value is not None and (not isinstance(value, str) or version_key(value) is None):
                raise ConfigError(f"{here}: {end} {value!r} is no version (a number first, as 0.1.13)")
            ends[end] = value
        found[key] = Versions(ends["since"], ends["fixed_in"], _text(item, "source", here))
    return found


_HOST_KEYS = {
    "title",
    "client_names",
    "source",
    "model_api",
    "reads",
    "reads_source",
    "validates_structured",
    "validates_structured_source",
    "drops_text_beside_structured",
    "drops_text_beside_structured_source",
    "parses_numbers_as_doubles",
    "parses_numbers_as_doubles_source",
    "faults",
    "versions",
    "rejects",
    "note",
}


#: The name :func:`load` gives the ``[every_family]`` entry (its :attr:`ModelApi.family`).
EVERY = "every_family"


def _every_family(table: object) -> ModelApi:
    """``[every_family]``: title, source and ``refuses`` (constraint key -> source), nothing else:
    what every model API refuses is repaired for every host, so none of it goes unrepaired."""
    table = _table(table, EVERY)
    _only(table, {"title", "source", "refuses"}, EVERY)
    refuses = _sources(table, "refuses", EVERY)
    if not refuses:
        raise ConfigError(f"{EVERY}: refuses must name at least one constraint key")
    return ModelApi(EVERY, _text(table, "title", EVERY), _text(table, "source", EVERY), refuses)


def _host(profile: str, table: object, apis: Mapping[str, ModelApi], every: ModelApi | None = None) -> Host:
    where = f"host.{profile}"
    table = _table(table, where)
    _only(table, _HOST_KEYS, where)
    names = table.get("client_names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"{where}: client_names must be a non-empty array of non-empty strings")
    family = _text(table, "model_api", where)
    if family != USER_CHOSEN and family not in apis:
        raise ConfigError(f"{where}: unknown model_api {family!r} (known: {', '.join([*apis, USER_CHOSEN])})")
    reads = _text(table, "reads", where)
    if reads not in READS:
        raise ConfigError(f"{where}: reads must be one of {', '.join(READS)}, not {reads!r}")
    validates = table.get("validates_structured")
    if validates is not None and not isinstance(validates, bool):
        raise ConfigError(f"{where}: validates_structured must be true or false")
    validates_source = _text(table, "validates_structured_source", where, required=validates is not None)
    if validates is None and validates_source:
        raise ConfigError(f"{where}: validates_structured_source without validates_structured")
    drops = table.get("drops_text_beside_structured", False)
    if not isinstance(drops, bool):
        raise ConfigError(f"{where}: drops_text_beside_structured must be true or false")
    drops_source = _text(table, "drops_text_beside_structured_source", where, required=drops)
    doubles = table.get("parses_numbers_as_doubles", False)
    if not isinstance(doubles, bool):
        raise ConfigError(f"{where}: parses_numbers_as_doubles must be true or false")
    doubles_source = _text(table, "parses_numbers_as_doubles_source", where, required=doubles)
    rejects = table.get("rejects", [])
    if not isinstance(rejects, list) or not all(isinstance(r, str) and r.strip() for r in rejects):
        raise ConfigError(f"{where}: rejects must be an array of non-empty strings")
    inherited = dict(apis[family].refuses) if family in apis else {}
    faults = {**inherited, **_sources(table, "faults", where)}
    for key, source in (every.refuses if every is not None else {}).items():
        faults.setdefault(key, source)  # every host, its model the user's choice or not
    return Host(
        profile,
        _text(table, "title", where),
        tuple(names),
        faults,
        tuple(rejects),
        _versions(table, where, faults),
        model_api=family,
        reads=reads,
        reads_source=_text(table, "reads_source", where),
        validates_structured=validates,
        validates_structured_source=validates_source,
        drops_text_beside_structured=drops,
        drops_text_beside_structured_source=drops_source,
        parses_numbers_as_doubles=doubles,
        parses_numbers_as_doubles_source=doubles_source,
        source=_text(table, "source", where),
        note=_text(table, "note", where, required=False),
    )


def load(data: Mapping[str, Any], where: str = "hosts.toml") -> HostData:
    """Read a decoded table.

    Raises:
        ConfigError: naming the entry and the key: an unknown key or constraint key, a missing
            source, an ``[every_family]`` naming no key (or a model API named so), an unknown
            ``model_api`` or ``reads``, a version that does not parse, a ``clientInfo.name`` two
            hosts claim.
    """
    _only(data, {"model_api", "host", EVERY}, where)
    apis = {
        family: _model_api(family, table)
        for family, table in _table(data.get("model_api", {}), f"{where} model_api").items()
    }
    if EVERY in apis:
        raise ConfigError(f"{where} model_api.{EVERY}: that name is the [{EVERY}] table's, not a family's")
    every = _every_family(data[EVERY]) if EVERY in data else None
    hosts = tuple(
        _host(profile, table, apis, every) for profile, table in _table(data.get("host", {}), f"{where} host").items()
    )
    owners: dict[str, str] = {}
    for host in hosts:
        for name in host.client_names:
            if name in owners:
                raise ConfigError(f"{where}: host.{host.profile} client_names: {name!r} is host.{owners[name]}'s too")
            owners[name] = host.profile
    return HostData(apis, hosts, every)


@cache
def shipped() -> HostData:
    """The table shipped in the package (``mcp_normalizer/hosts.toml``), read once."""
    text = resources.files("mcp_normalizer").joinpath("hosts.toml").read_text(encoding="utf-8")
    return load(tomllib.loads(text), "mcp_normalizer/hosts.toml")


#: The hosts, in the table's order.
HOSTS: tuple[Host, ...] = shipped().hosts
#: The model API families by name.
MODEL_APIS: Mapping[str, ModelApi] = shipped().model_apis

_BY_NAME: dict[str, Host] = {name: host for host in HOSTS for name in host.client_names}
#: What every model API family refuses (``[every_family]``), repaired for every host.
EVERY_FAMILY: ModelApi | None = shipped().every_family
#: Profiles by name (``check --host``).
PROFILES: Mapping[str, Host] = {host.profile: host for host in HOSTS}


def host_for(client_name: str | None) -> Host | None:
    """The host that sends ``client_name`` as its ``clientInfo.name``, if the table knows it."""
    return _BY_NAME.get(client_name) if client_name is not None else None
