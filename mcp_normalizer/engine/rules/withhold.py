"""Rule ``withhold_tools``: a tool that no repair makes acceptable to the calling host's model API is
withheld from that host alone, so one bad tool never costs the others. Pure: no I/O.

A host sends every tool of a server to its model API in one request; one tool the API refuses
fails the request (the Anthropic API answers 400 for every turn, anthropics/claude-code#586: Claude
Code before its own check of the schemas, the Claude apps, any host on the API) or loses the host
the whole server (Gemini CLI). Every host repair runs first (rules ``host_schemas``,
``tool_names``, ...); then each tool of the listing, as the proxy would advertise it to that host,
is judged by oracles written from the hosts' and APIs' published rules, not from the repair code:

- the oracle of each key of the host's faults (:data:`~.host_faults.CONSTRAINTS`, subject
  ``tool``) that the client's host refuses at its version: a key whose oracle still fires after
  the repairs is a fault no repair made acceptable (its repair is off for the tool, or cannot reach
  it). Keys added to the closed set are judged here without a change to this module.
- the refusals of the host's model-API family that no repair exists for (:data:`REFUSALS`): the
  Anthropic API's "input_schema: JSON schema is invalid. It must match JSON Schema draft 2020-12"
  (anthropics/claude-code#586, #2758).

A tool one of them fires on is left out of that host's ``tools/list`` (:func:`withheld` says why);
every other tool, and every other client (an SDK client, an unknown one), gets the listing as before.
The engine (:mod:`mcp_normalizer.engine.tools_list`) applies it on the one ``tools/list`` path of
every form (the HTTP proxy, the middleware, the stdio wrapper); ``check --host`` reports it.

A ``tools/call`` of a withheld tool (a host that listed before, a model that names a tool it was
never offered) goes upstream as it came and its result is repaired as any other: the upstream
still serves the tool, and the call carries no schema for the API to refuse.

Not judged, by design: tool names against the model APIs' own patterns (the Claude hosts prefix
``mcp__server__`` and replace other characters themselves, as Codex and Gemini CLI do; a name is
judged only by a host key such as ``tool_name_strict``); a ``pattern`` the API's regex engine may
not take (formats are not asserted: an ECMA-262 ``\\p{L}`` is valid JSON Schema).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import jsonschema_rs
import msgspec
from jsonschema import Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator, Draft202012Validator

from ...types import JSON, JSONObject
from .base import Rewrite, Rule
from .clients import ClientProfile
from .host_faults import CONSTRAINTS
from .host_profiles import Host

#: The rule's name, in config, logs and metrics.
NAME = "withhold_tools"
#: The Anthropic API's draft 2020-12 check of an ``input_schema``.
INPUT_SCHEMA_2020 = "input_schema_2020"
#: Schemas nesting deeper than this are not judged (kept: the validator recurses).
_MAX_DEPTH = 128


@dataclass(frozen=True, slots=True)
class Refusal:
    """What a model-API family refuses of a tool that no repair exists for.

    Attributes:
        key: its name, in the log (``host_fault``), the metrics and ``check``.
        what: the fault, for the log, ``check`` and the docs.
        source: where the refusal is shown.
        violates: the oracle: whether a ``tools/list`` member (as advertised) has the fault.
    """

    key: str
    what: str
    source: str
    violates: Callable[[JSON], bool]


@dataclass(frozen=True, slots=True)
class Withheld:
    """Why a tool is withheld from a host.

    Attributes:
        key: the fault: a key of :data:`~.host_faults.CONSTRAINTS` or of :data:`REFUSALS`.
        rule: the rule that repairs it for the host (``""``: none exists).
        what: the fault, in words.
        source: where the host's refusal is shown.
    """

    key: str
    rule: str
    what: str
    source: str


#: The metaschemas a schema may declare with ``$schema`` (``http``/``https``, with or without ``#``).
_DIALECTS: Mapping[str, JSONObject] = {
    uri: cls.META_SCHEMA
    for cls in (Draft202012Validator, Draft201909Validator, Draft7Validator, Draft6Validator, Draft4Validator)
    for uri in (cls.META_SCHEMA["$schema"].rstrip("#").split("://", 1)[1],)
}
_DEFAULT = "json-schema.org/draft/2020-12/schema"


@functools.cache
def _metaschema(dialect: str) -> jsonschema_rs.Validator:
    """The metaschema of ``dialect`` (a key of :data:`_DIALECTS`), compiled once (jsonschema-rs
    bundles the drafts' vocabularies: nothing is fetched)."""
    return jsonschema_rs.validator_for(_DIALECTS[dialect], offline=True)


def _dialect(schema: JSON) -> str:
    declared = schema.get("$schema") if isinstance(schema, dict) else None
    if isinstance(declared, str):
        key = declared.strip().rstrip("#").split("://", 1)[-1]
        if key in _DIALECTS:
            return key
    return _DEFAULT


def _deeper_than(node: JSON, limit: int) -> bool:
    stack: list[tuple[JSON, int]] = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > limit:
            return True
        children = current.values() if isinstance(current, dict) else current if isinstance(current, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _not_2020(tool: JSON) -> bool:
    """The Anthropic API's rule for ``input_schema`` (anthropics/claude-code#586: "JSON schema is
    invalid. It must match JSON Schema draft 2020-12"), as the host can be spared it: the
    ``inputSchema`` fails the metaschema of the dialect it declares (2020-12 when it declares
    none; ``check_schema`` without format assertions). A schema valid for the older draft it
    declares is not judged: the API refuses a draft-07 tuple too, but Claude Code 2.1.332 then sends
    the tool again with ``{"type": "object"}`` (reproduced in ``tests/test_withheld.py``), so its
    model is offered more than if the tool were withheld; translating it is a repair's job. A tool
    without one, a schema nesting deeper than 128 levels or one the validator cannot take (a lone
    surrogate) is not judged."""
    if not isinstance(tool, dict) or "inputSchema" not in tool:
        return False
    schema = tool["inputSchema"]
    try:
        text = msgspec.json.encode(schema)  # (C: a bound on the depth, much cheaper than a walk)
        if text.count(b"{") + text.count(b"[") > _MAX_DEPTH and _deeper_than(schema, _MAX_DEPTH):
            return False
        return not _metaschema(_dialect(schema)).is_valid(schema)
    except (ValueError, TypeError, OverflowError, msgspec.EncodeError):
        return False


#: What each model-API family refuses that no repair exists for, by family.
REFUSALS: Mapping[str, tuple[Refusal, ...]] = {
    "anthropic": (
        Refusal(
            INPUT_SCHEMA_2020,
            "an inputSchema that is not valid JSON Schema draft 2020-12 (nor valid for the older draft it declares)",
            "anthropics/claude-code#586, #2758 (the Anthropic API: input_schema must match JSON Schema draft 2020-12;"
            " one such tool fails every request)",
            _not_2020,
        ),
    ),
}

#: One oracle as :func:`withheld` runs it: the key, the repairing rule, what, source, the oracle.
_Oracle = tuple[str, str, str, str, Callable[[JSON], bool]]


#: Oracles by host and faults (a few hosts, a few versions each): (host, faults) -> the oracles.
_ORACLES: dict[tuple[int, frozenset[str]], tuple[Host, tuple[_Oracle, ...]]] = {}


def oracles(client: ClientProfile) -> tuple[_Oracle, ...]:
    """The oracles a tool listed to ``client`` is judged by (none for a client that is no host)."""
    host = client.host
    if host is None:
        return ()
    key = (id(host), client.host_faults)
    found = _ORACLES.get(key)
    if found is not None and found[0] is host:
        return found[1]
    judges: list[_Oracle] = []
    for fault in sorted(client.host_faults):
        constraint = CONSTRAINTS.get(fault)
        if constraint is not None and constraint.subject == "tool":
            judges.append((fault, constraint.rule, constraint.what, host.faults.get(fault, ""), constraint.violates))
    judges.extend((r.key, "", r.what, r.source, r.violates) for r in REFUSALS.get(host.model_api, ()))
    if len(_ORACLES) >= 256:
        _ORACLES.clear()
    _ORACLES[key] = (host, tuple(judges))  # (the host held: its id stays its own)
    return _ORACLES[key][1]


def judged(client: ClientProfile) -> bool:
    """Whether the tools listed to ``client`` are judged at all (a host with a tool oracle)."""
    return bool(oracles(client))


def key_of(client: ClientProfile) -> bytes:
    """What a verdict for ``client`` depends on besides the tool (a cache key's prefix): its host
    (the sources it names) and the oracles' keys."""
    profile = client.host.profile if client.host is not None else ""
    return "\n".join((profile, *(oracle[0] for oracle in oracles(client)), "", "")).encode()


def withheld(tool: JSON, client: ClientProfile) -> Withheld | None:
    """Why ``tool`` (a ``tools/list`` member as the proxy advertises it to ``client``, every repair
    made) is withheld from ``client``'s host, or ``None``: it goes to the host. The first oracle
    that fires, the host's keys (sorted) before its family's refusals."""
    for key, rule, what, source, violates in oracles(client):
        if violates(tool):
            return Withheld(key, rule, what, source)
    return None


def repairing_rule(key: str) -> str:
    """The rule that repairs host fault ``key`` (``none``: a refusal no repair exists for, or not a key)."""
    constraint = CONSTRAINTS.get(key)
    return constraint.rule if constraint is not None else "none"


def rewrite(index: int, found: Withheld, host: str) -> Rewrite:
    """The log record of withholding tool ``index`` of a page from ``host`` (its title); the tool's
    name is the record's tool, never in the reason."""
    repair = f"its repair (rule {found.rule}) does not make it acceptable" if found.rule else "no repair exists"
    reason = f"{found.what}: {repair}; {host} refuses it ({found.source}); every other tool is listed"
    return Rewrite(NAME, f"withheld the tool from {host}", (f"/tools/{index}",), reason, host_fault=found.key)


RULE = Rule(
    NAME,
    "tool_withheld",
    "for a host whose model API refuses a tool that no repair makes acceptable (a host fault whose oracle"
    " still fires, an inputSchema that is not valid draft 2020-12 for the Claude hosts): the tool is left out"
    " of that host's tools/list, logged with the fault, and every other tool and every other client gets the"
    " listing as before",
)
