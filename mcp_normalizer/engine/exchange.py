"""``Exchange``: what the proxy watches on one HTTP exchange (one POST's stream, or a legacy GET
stream), and the tool lists it may use: the ones it learned, its scope's, the public ones.

Owned by the caller that builds a :class:`~mcp_normalizer.engine.transform.ResponseTransformer`
for the exchange (the middleware, the stdio session, ``check``'s replay, the proxy's own
``tools/list`` fetch); the transformer reads it and records the lists it sees into it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..types import JSONObject
from ..wire.eras import era_of
from ..wire.jsonrpc import IdKey, PendingRequest
from .catalog import ToolCatalog, ToolEntry, ToolSet
from .name_maps import names_for, names_kept
from .rules.clients import UNKNOWN, ClientProfile
from .scopes import ScopeState

if TYPE_CHECKING:
    from ..config import NormalizerConfig


@dataclass(slots=True)
class Exchange:
    """What the proxy watches on one HTTP exchange.

    Attributes:
        pending: watched requests by JSON-RPC id key: the POST's own, or for a legacy ``GET``
            stream the session's unanswered ones (resumption).
        era: the protocol version of the exchange, ``None`` when unknown.
        scope: the hashed session/authorization scope (safe to log).
        state: what is remembered for that scope (catalog, unanswered requests, tasks).
        public: tools the upstream listed with ``cacheScope: "public"`` (any scope may use them).
        fetching: tools whose ``tools/list`` fetch is in flight; a response for one of them waits.
        learned: the tool lists learned during this exchange (by name, each as it came); usable by
            it even when the list's ``ttlMs`` is 0 (the list may not be reused by later exchanges).
        lists_expire: honour a 2026-07-28 list's ``ttlMs``; off when replaying a capture, which has
            no clock (a list then lasts until the next one or ``list_changed``).
        sole: the id key of the POST's one request when it carried one (not a batch, not a ``GET``
            stream): a response on its stream with another id answers it all the same.
        client: who the responses go to (:mod:`mcp_normalizer.engine.rules.clients`), :data:`UNKNOWN` if unnamed.
        private: the scope is one client's (a session or a credential names it): only such a scope
            learns from results (:mod:`mcp_normalizer.engine.rules.learned`).
        listed: the members other than ``tools`` of the last ``tools/list`` page learned (the
            proxy's own fetch reads its ``nextCursor`` there), ``None`` before one.
        own_stream: the response is a POST's: every response on it answers one of ``pending``,
            once (Streamable HTTP, ``basic/transports.mdx``); another reply is refused. ``False``
            for a ``GET`` stream, which may carry the answers to any earlier request.
        witness: who the results go to, as lessons count witnesses (keyed digests of the
            credentials, else of the session: :meth:`mcp_normalizer.ops.lesson_store.LessonStore.witness`);
            ``None``: no witness (what its results teach stays with its scope). Read it with
            :meth:`witnessed_by`.
        witness_of: makes :attr:`witness` the first time a result needs it (hashing credentials
            costs every request that teaches nothing); ``None`` once made, or when given.
    """

    pending: Mapping[IdKey, PendingRequest]
    era: str | None
    scope: str
    state: ScopeState
    public: ToolCatalog = field(default_factory=ToolCatalog)
    fetching: set[str] = field(default_factory=set)
    learned: list[ToolSet] = field(default_factory=list)
    lists_expire: bool = True
    sole: IdKey | None = None
    client: ClientProfile = UNKNOWN
    private: bool = True
    listed: JSONObject | None = None
    own_stream: bool = False
    witness: str | None = None
    witness_of: Callable[[], str | None] | None = None
    upstream_eras: list[str] | None = None

    @property
    def upstream_era(self) -> str | None:
        """The era the upstream side speaks when it is not :attr:`era` (a bridged session), else ``None``."""
        return self.upstream_eras[-1] if self.upstream_eras else None

    def witnessed_by(self) -> str | None:
        """Who the results go to, as lessons count witnesses (:attr:`witness`, made on first use)."""
        if self.witness_of is not None:
            self.witness, self.witness_of = self.witness_of(), None
        return self.witness

    def tool(self, name: str | None) -> ToolEntry | None:
        """The entry of tool ``name`` as this exchange may use it, if known."""
        if name is None:
            return None
        for tools in reversed(self.learned):  # the latest first
            found = tools.get(name)
            if found is not None:
                return found
        return self.state.catalog.get(name) or self.public.get(name)

    def names(
        self, config: NormalizerConfig | None = None, calls: Collection[str] | None = None
    ) -> Mapping[str, str] | None:
        """The current listing's name map (advertised -> upstream, rule ``tool_names``): of the
        lists learned in this exchange (made for its client), else of the scope's fresh list, else
        of the public one; ``None`` when there is no current listing (the caller may fetch one).

        With ``config``, the map is the one for this exchange's :attr:`client` (its profile's
        names, derived from the upstream names of the listing:
        :func:`~mcp_normalizer.engine.name_maps.names_for`), whichever client listed; without,
        the map as the listing was made. ``calls``: the names it is wanted for (a map no call
        can need is not derived)."""
        if self.learned:
            if config is not None:
                pattern = names_kept(self.client).pattern
                if any(tools.named_for not in ("", pattern) for tools in self.learned):
                    # pages made for another client (a fetch this exchange joined): the whole
                    # listing's map derived for this one
                    listing = self.learned[0]
                    for tools in self.learned[1:]:
                        listing = listing.merged(tools)
                    return self._names_for(listing, config, calls)
            merged: dict[str, str] = {}
            for tools in self.learned:  # (pages in order: a later page's names join the earlier ones)
                merged.update(tools.names)
            return merged
        found = self.listing()
        if found is None:
            return None
        return found.names if config is None else self._names_for(found, config, calls)

    def _names_for(
        self, listing: ToolSet, config: NormalizerConfig, calls: Collection[str] | None
    ) -> Mapping[str, str]:
        return names_for(listing, self.client, config, calls)

    def listing(self) -> ToolSet | None:
        """The scope's fresh listing, else the public one, ``None`` when neither is fresh."""
        found = self.state.catalog.listing()
        return found if found is not None else self.public.listing()

    def tool_of(self, request: PendingRequest) -> str | None:
        """The tool a watched request concerns: the called tool, or the tool that started its task."""
        if request.tool is not None:
            return request.tool
        return self.state.task_tool(request.task_id) if request.task_id is not None else None

    def learn_tools(self, result: JSONObject, entries: ToolSet, *, first_page: bool) -> None:
        """Record a ``tools/list`` page: for the scope, for this exchange and, when the upstream
        marked it ``cacheScope: "public"``, for every scope. A 2026-07-28 list is reused for its
        ``ttlMs`` only (absent or negative: 0); a legacy list lasts until invalidated."""
        ttl: float | None = None
        if self.lists_expire and era_of(self.era).lists_expire:
            ttl_ms = result.get("ttlMs")
            ttl = (
                max(float(ttl_ms), 0.0) / 1000
                if isinstance(ttl_ms, int | float) and not isinstance(ttl_ms, bool)
                else 0.0
            )
        self.state.learn_tools(entries, first_page=first_page, ttl=ttl)
        if result.get("cacheScope") == "public" and not self.state.learned:
            # (a scope's learned declarations are its own: its entries never serve another scope)
            self.public.learn(entries, first_page=first_page, ttl=ttl)
        self.learned.append(entries)
        self.listed = result

    def forget_tools(self) -> None:
        """The upstream said its tool list changed: forget what was learned."""
        self.state.forget_tools()
        self.public.clear()
        self.learned.clear()
