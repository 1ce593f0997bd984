"""Rule ``era_fields``: the members the 2026-07-28 era requires of a result, filled where a server
left them out.

Fault kind ``missing_era_fields`` (issue 41; tobert/kaibo PR #142, ``../shared/reference/hosts.md``
section 5): a 2026-07-28 server whose results lack ``resultType``, or whose list and
``server/discover`` results lack ``ttlMs``/``cacheScope``. The strict 2026-07-28 clients refuse
every such result (``@modelcontextprotocol/client`` 2.4.0: "missing required resultType"; its
``tools/list`` schema requires both cache fields): they list no tool and every call fails. Claude
Code 2.1.332 fills them itself (its ``--debug`` log); older versions showed zero tools.

What the spec says an absent member means, and what is filled (only on responses of the
2026-07-28 era, to a request the proxy saw):

- ``resultType`` (``basic/index.mdx`` section ResultType, required in every result): an absent one
  **MUST** be treated as ``"complete"``; it is filled on the result of any method.
- ``ttlMs`` and ``cacheScope`` (``server/utilities/caching.mdx``, SEP-2549), required on the
  *complete* results of :data:`CACHEABLE_METHODS`: an absent ``ttlMs`` is treated as 0
  ("immediately stale"), and ``"private"`` is the scope that shares nothing across authorizations.
  They are filled as ``ttlMs: 0`` and ``cacheScope: "private"`` (as Claude Code fills them), so no
  client or shared cache reuses what the server never said it may. An ``input_required`` (or any
  other non-complete) result carries no cache hints: nothing is added to it.

The proxy's own tool catalog reads the result after this rule
(:meth:`mcp_normalizer.engine.exchange.Exchange.learn_tools`): a filled list is reused for 0 ms
and by its own scope only, exactly what the client is told.

A present value is never changed. ``null`` counts as absent (serializers that write an absent
member as ``null``, fault kind ``null_optional_fields``: it says nothing a value could lose). Any
other invalid value (``ttlMs: -1``, ``"60"``, ``cacheScope: "shared"``, ``resultType: "done"``)
is the server's own statement and passes as sent: the proxy does not guess what it meant, and its
catalog reads it as the spec says (a negative or non-numeric ``ttlMs`` as 0, any scope other than
``"public"`` as private). Lossless: what is added is what the spec says the absence means.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...errors import DecodeError
from ...wire.eras import CACHEABLE_METHODS, era_of
from ...wire.jsoncodec import Raw, loads
from .base import Response, ResponseContext, Rewrite, Rule
from .jsonrpc_envelope import is_null

#: Each member filled, with the value an absent one means, in the order they are added.
FILLED: tuple[tuple[str, bytes], ...] = (("resultType", b'"complete"'), ("ttlMs", b"0"), ("cacheScope", b'"private"'))
_COMPLETE = b'"complete"'


def _absent(result: Mapping[str, Raw], name: str) -> bool:
    text = result.get(name)
    return text is None or is_null(text)


def _complete(text: Raw) -> bool:
    """True when the ``resultType`` member text is ``"complete"`` (however it is spelled)."""
    if bytes(text) == _COMPLETE:
        return True
    try:
        return bool(loads(text) == "complete")
    except DecodeError:
        return False


def missing(result: Mapping[str, Raw], method: str | None, era: str | None = "2026-07-28") -> tuple[str, ...]:
    """The members of ``result`` (member texts) of a ``method`` request in protocol version ``era``
    that are absent (or ``null``) and the era requires (:func:`~mcp_normalizer.wire.eras.era_of`:
    in 2026-07-28, ``resultType`` on any result, ``ttlMs`` and ``cacheScope`` on a complete result
    of :data:`~mcp_normalizer.wire.eras.CACHEABLE_METHODS`; nothing before it). A cheap look: only
    ``resultType`` may be decoded."""
    known = era_of(era)
    if not known.result_fields:
        return ()
    found = [name for name in sorted(known.result_fields) if _absent(result, name)]
    complete = "resultType" in found or ("resultType" in result and _complete(result["resultType"]))
    if method in CACHEABLE_METHODS and complete:
        listed = (name for name, _ in FILLED if name in known.list_fields and name not in found)
        found += [name for name in listed if _absent(result, name)]
    return tuple(found)


def _fill(response: Response, ctx: ResponseContext) -> tuple[Response, Rewrite] | None:
    result = response.result
    if result is None or ctx.method is None:
        return None
    names = missing(result, ctx.method, ctx.era)
    if not names:
        return None
    added = {name: Raw(value) for name, value in FILLED if name in names}
    said = ", ".join(f"{name}: {bytes(value).decode()}" for name, value in added.items())
    why = []
    if "resultType" in added:
        why.append("2026-07-28 requires resultType in every result; an absent one means complete")
    if len(added) > ("resultType" in added):
        why.append(
            f"a complete {ctx.method} result requires ttlMs and cacheScope; an absent ttlMs means 0 and private "
            "shares nothing across authorizations"
        )
    if any(name in result for name in added):
        why.append("a null one says no more than an absent one")
    rewrite = Rewrite(RULE.name, f"filled {said}", tuple(f"/result/{name}" for name in added), "; ".join(why))
    return Response(response.members, {**result, **added}), rewrite


RULE = Rule(
    name="era_fields",
    kind="missing_era_fields",
    summary='A 2026-07-28 result without resultType gets "complete"; a complete list, server/discover or '
    'resources/read result without ttlMs or cacheScope gets ttlMs: 0 and cacheScope: "private" (what an '
    "absent one means).",
    on_response=_fill,
)
