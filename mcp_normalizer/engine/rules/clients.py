"""Which clients break on which faults: the repairs only some clients need, and who is asking.

Most repairs make a message spec-valid, and every client accepts the result. A few change what is
already valid because *some* clients in the field reject it (``cases/faults.md``, "Strict vs
lenient clients"); for the clients known to accept the original, those repairs only lose the
server's bytes (the conformance suite requires a 2020-12 ``$schema`` and ``$defs`` kept; the Python
SDK client shows an error's ``structuredContent`` to the model). :data:`CLIENT_FAULTS` is the
table: for each such fault, the clients it breaks (from the reports) and the clients known to
accept it, by the name they give in ``clientInfo`` (``initialize`` params; on 2026-07-28 every
request's ``_meta["io.modelcontextprotocol/clientInfo"]``). A repair in the table is applied unless
the client asking is known to accept the fault; an unknown client, or one that sent no
``clientInfo``, gets the output every client accepts. ``clientInfo`` is self-reported: naming a
known client only ever keeps more of the server's own (valid) bytes. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ...types import JSON
from ...wire.jsoncodec import dumps
from .host_profiles import EVERY_FAMILY, MODEL_APIS, USER_CHOSEN, Host, host_for

PYTHON_SDK = "mcp"  # the Python SDK client's default clientInfo name
CONFORMANCE = "conformance-test-client"  # the official conformance suite's client


@dataclass(frozen=True, slots=True)
class ClientFault:
    """A fault only some clients reject.

    Attributes:
        breaks: the clients the reports show failing on it (for the log, ``check`` and docs/rules.md).
        accepted_by: ``clientInfo`` names of clients known to accept it (the repair is skipped for them).
        supported: a supported client (TS SDK 1.x, ``@modelcontextprotocol/client`` 2.x, the Python
            SDK, as installed here) rejects it: ``check`` then counts it as a fault, else as advisory.
        spec: what the spec says of the message, when that is more precise than its fault kind's rule
            (the message is valid and the clients are at fault), else ``""``.
    """

    breaks: str
    accepted_by: frozenset[str]
    supported: bool = False
    spec: str = ""


#: The table. Keys are the names rules ask with :meth:`ClientProfile.needs`.
CLIENT_FAULTS: dict[str, ClientFault] = {
    "schema_dialect_2020": ClientFault(
        "VS Code GitHub Copilot (rejects a 2020-12 $schema: one bad tool breaks the session)",
        frozenset({PYTHON_SDK, CONFORMANCE}),
        spec="An explicit 2020-12 $schema is valid (2020-12 is the default dialect): a client that rejects it"
        " refuses a valid schema",
    ),
    "schema_dialect_draft": ClientFault(
        "@modelcontextprotocol/client 2.x before PR #2534 (Claude desktop, claude.ai, Claude Code, pi-mcp-adapter:"
        " 'The default validator supports JSON Schema 2020-12 only')",
        frozenset({PYTHON_SDK}),
        spec="A schema that declares its dialect with $schema (draft-07) is valid; implementations MUST support"
        " 2020-12 and SHOULD document the other dialects they support: a 2020-12-only client refuses a valid schema",
    ),
    "schema_ref_local": ClientFault(
        "code-mode/UTCP (MissingRefError on $defs; tool discovery fails)", frozenset({PYTHON_SDK, CONFORMANCE})
    ),
    "format_date_time": ClientFault(
        "TS SDK Client 1.x and 2.x ('must match format \"date-time\"'), Cursor and other Ajv clients with"
        " formats (-32602 on date-times without an offset)",
        frozenset({PYTHON_SDK}),
        supported=True,
        spec="format: date-time is an RFC 3339 date-time, which has a time-zone offset (Z or +hh:mm); a value"
        " without one does not conform",
    ),
    "output_schema_tuple": ClientFault(
        "TS SDK Client 1.x and Cursor (Ajv draft-07: 'boolean schema is false' on every tuple item)",
        frozenset({PYTHON_SDK}),
        supported=True,
    ),
    "error_result_validated": ClientFault(
        "TS SDK Client 1.x and hosts embedding it (Claude Code, Cursor, Gemini CLI, OpenCode):"
        " -32602 on an error's non-conforming structuredContent",
        frozenset({PYTHON_SDK}),
        supported=True,
    ),
}


@dataclass(frozen=True, slots=True)
class ClientProfile:
    """The client a message goes to, as far as the table knows it.

    Attributes:
        name: its ``clientInfo`` name, ``None`` when it sent none.
        accepts: the faults of :data:`CLIENT_FAULTS` it is known to accept.
        key: ``accepts`` (and the host faults, for a host) as JSON bytes, sorted (part of a listed
            tool's cache key: made once per client, not once per listed tool).
        host: the host it is (:mod:`mcp_normalizer.engine.rules.host_profiles`), ``None`` for any other client.
        host_faults: the host faults that host rejects at the version the client sent (their
            repairs run for it alone).
        version: its ``clientInfo`` version, if it sent a string (cut to 64 characters).
        model_api: the model API family its tools go to (a key of
            :data:`~mcp_normalizer.engine.rules.host_profiles.MODEL_APIS`): its host's, or the one a
            setting names (:func:`with_model_api`); ``None`` when unknown.
    """

    name: str | None = None
    accepts: frozenset[str] = frozenset()
    key: bytes = b"[]"
    host: Host | None = None
    host_faults: frozenset[str] = frozenset()
    version: str | None = None
    model_api: str | None = None

    def needs(self, fault: str) -> bool:
        """True when the repair of ``fault`` (a key of :data:`CLIENT_FAULTS`) is applied for this client."""
        return fault not in self.accepts

    def host_needs(self, fault: str) -> bool:
        """True when this client is a host that rejects ``fault`` (a key of
        :data:`~mcp_normalizer.engine.rules.host_faults.CONSTRAINTS`): its repair runs for it alone."""
        return fault in self.host_faults

    def fault_source(self, fault: str) -> str:
        """Where the refusal of ``fault`` comes from: the host's source, else its model API's (a
        family a setting names; then ``[every_family]``'s), ``""`` when none names it."""
        if self.host is not None and fault in self.host.faults:
            return self.host.faults[fault]
        api = MODEL_APIS.get(self.model_api) if self.model_api is not None else None
        found = api.refuses.get(fault, "") if api is not None else ""
        if not found and api is not None and EVERY_FAMILY is not None:
            found = EVERY_FAMILY.refuses.get(fault, "")
        return found

    @property
    def title(self) -> str:
        """The client as a rewrite's reason names it: its host's title, else its name, with the
        model API a setting named (``mcp (gemini, by setting)``)."""
        host = self.host
        if host is not None and self.model_api == (host.model_api if host.model_api != USER_CHOSEN else None):
            return host.title
        base = host.title if host is not None else self.label
        return f"{base} ({self.model_api}, by setting)" if self.model_api is not None else base

    @property
    def keeps_structured(self) -> bool:
        """This client is a host whose model reads ``structuredContent`` first and that validates none
        of it (:attr:`~.host_profiles.Host.keeps_structured`, from ``hosts.toml``): it gets
        ``structuredContent`` as the server sent it. ``False`` for every other client."""
        return self.host is not None and self.host.keeps_structured

    @property
    def content_only(self) -> bool:
        """This client is a host whose model reads only ``content`` (:attr:`~.host_profiles.Host.content_only`).
        ``False`` for every other client."""
        return self.host is not None and self.host.content_only

    @property
    def drops_text_beside_structured(self) -> bool:
        """This client is a host whose model gets a result's non-text blocks and the JSON of its
        ``structuredContent``, not its text blocks (:attr:`~.host_profiles.Host.drops_text_beside_structured`).
        ``False`` for every other client."""
        return self.host is not None and self.host.drops_text_beside_structured

    @property
    def parses_numbers_as_doubles(self) -> bool:
        """This client is a host that reads ``structuredContent`` into IEEE doubles
        (:attr:`~.host_profiles.Host.parses_numbers_as_doubles`). ``False`` for every other client."""
        return self.host is not None and self.host.parses_numbers_as_doubles

    @property
    def reads_known(self) -> bool:
        """This client is a host whose ``reads`` a source gives (not ``unknown``)."""
        return self.host is not None and self.host.reads != "unknown"

    @property
    def label(self) -> str:
        """The client as the rewrite log names it: its ``clientInfo`` name, or ``unknown``."""
        return self.name if self.name is not None else "unknown"


#: A client that sent no ``clientInfo``: every repair applies.
UNKNOWN = ClientProfile()


def profile_for(client_info: JSON) -> ClientProfile:
    """The profile of a client from its ``clientInfo`` object (``{"name", "version", ...}``; any JSON:
    what is not an object with a string ``name`` is :data:`UNKNOWN`). A host's faults are those its
    ``version`` rejects (:meth:`~mcp_normalizer.engine.rules.host_profiles.Host.faults_at`)."""
    if not isinstance(client_info, dict) or not isinstance(client_info.get("name"), str):
        return UNKNOWN
    name = client_info["name"][:128]
    raw_version = client_info.get("version")
    version = raw_version[:64] if isinstance(raw_version, str) else None
    accepts = frozenset(fault for fault, row in CLIENT_FAULTS.items() if name in row.accepted_by)
    host = host_for(name)
    host_faults = host.faults_at(version) if host is not None else frozenset()
    key = dumps([sorted(accepts), sorted(host_faults)]) if host_faults else dumps(sorted(accepts))
    family = host.model_api if host is not None and host.model_api != USER_CHOSEN else None
    return ClientProfile(name, accepts, key, host, host_faults, version, family)


def with_model_api(profile: ClientProfile, family: str | None) -> ClientProfile:
    """``profile`` sending its tools to model API ``family`` (a key of
    :data:`~mcp_normalizer.engine.rules.host_profiles.MODEL_APIS`): its host faults are then its
    host's own (those not inherited from the host's model API, at its version), every key
    ``family`` refuses and every key every family refuses (``[every_family]``, which a host has
    already), and its :attr:`~ClientProfile.key` names the family (a listing made for it is never
    reused for the same client without it). ``profile`` itself when ``family`` is ``None``,
    unknown, or already its family."""
    api = MODEL_APIS.get(family) if family is not None else None
    if api is None or family == profile.model_api:
        return profile
    host = profile.host
    own: frozenset[str] = frozenset()
    if host is not None:
        inherited = MODEL_APIS[host.model_api].refuses if host.model_api in MODEL_APIS else {}
        own = frozenset(fault for fault in host.faults_at(profile.version) if fault not in inherited)
    every = EVERY_FAMILY.refuses if EVERY_FAMILY is not None else {}
    faults = own | frozenset(api.refuses) | frozenset(every)
    key = dumps([sorted(profile.accepts), sorted(faults), family])
    return replace(profile, key=key, host_faults=faults, model_api=family)


def resolve_model_api(profile: ClientProfile, default: str, by_client: Mapping[str, str]) -> ClientProfile:
    """``profile`` with the model API family the settings give it: ``by_client[name]`` (the
    ``[clients."NAME"] model_api`` setting) first, over its host's own; else its host's, when the
    host names one; else ``default`` (``[normalizer] model_api``; ``""`` names none). A client
    whose family stays unknown is ``profile`` itself: it gets no model-API repair."""
    named = by_client.get(profile.name) if profile.name is not None else None
    if named:
        return with_model_api(profile, named)
    if profile.host is not None and profile.host.model_api != USER_CHOSEN:
        return profile
    return with_model_api(profile, default or None)
