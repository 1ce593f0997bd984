"""What the proxy remembers per scope (one upstream seen through one session and one authorization),
bounded in size and time so that no client can make it grow without limit.

A :class:`ScopeState` holds:

- ``catalog``: the tools learned from ``tools/list`` (see :mod:`mcp_normalizer.catalog`);
- ``pending``: ``tools/call`` requests of a legacy session whose response has not been seen yet. A
  2025-11-25 server may close a POST stream early and deliver the response on a later ``GET`` with
  ``Last-Event-ID`` (resumption, ``basic/transports.mdx`` "Resumability"); the map lets the proxy
  still normalize it. At the bound the oldest entry is dropped; a response whose entry was dropped
  or expired passes through unnormalized.
- ``tasks``: task id -> the tool that started the task (2025-11-25 task-augmented calls and the
  2026-07-28 tasks extension), so the final ``CallToolResult`` is normalized with that tool's schema.

:class:`ScopeStore` keeps at most ``max_scopes`` states, least recently used dropped first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .catalog import CatalogPool, ToolCatalog, ToolEntry, ToolSet
from .jsonrpc import IdKey, PendingRequest
from .rules.clients import UNKNOWN, ClientProfile
from .rules.learned import Learned, LearnedTools

#: Tools whose schema one scope may learn (a bound on what one client's results can make it hold).
MAX_LEARNED_TOOLS = 200
#: Bytes of tool names and places one scope may learn (its state stays small: 10,000 scopes, 80 MB at most).
MAX_LEARNED_BYTES = 8192

K = TypeVar("K")
V = TypeVar("V")


class BoundedMap(Mapping[K, V], Generic[K, V]):
    """A map with at most ``max_entries`` entries, each kept ``ttl`` seconds.

    Putting a new key beyond the bound drops the oldest entry; an expired entry reads as absent.
    """

    def __init__(self, max_entries: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._max = max_entries
        self._ttl = ttl
        self._clock = clock

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key`` (renewing its time to live)."""
        self._items.pop(key, None)
        self._items[key] = (self._clock() + self._ttl, value)
        while len(self._items) > self._max:
            self._items.popitem(last=False)

    def __getitem__(self, key: K) -> V:
        found = self._items.get(key)
        if found is None:
            raise KeyError(key)
        if found[0] <= self._clock():
            del self._items[key]
            raise KeyError(key)
        return found[1]

    def pop(self, key: K) -> V | None:
        """Remove ``key``; return its live value, if any."""
        found = self._items.pop(key, None)
        return found[1] if found is not None and found[0] > self._clock() else None

    def __len__(self) -> int:
        now = self._clock()
        while self._items and next(iter(self._items.values()))[0] <= now:
            self._items.popitem(last=False)  # entries share one ttl: the oldest expire first
        return len(self._items)

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._items))


@dataclass(slots=True)
class Limits:
    """Bounds of what is remembered per scope.

    Attributes:
        max_scopes: scopes remembered (least recently used dropped first).
        max_pending: unanswered ``tools/call`` requests remembered per legacy session.
        pending_ttl: seconds an unanswered request is remembered (a response after that is not normalized).
        max_tasks: task ids remembered per scope.
        task_ttl: seconds a task id is remembered.
        max_catalog_bytes: bytes the distinct tool catalogs may hold together (identical catalogs
            are one copy); past it the least recently used scopes are forgotten.
    """

    max_scopes: int = 10_000
    max_pending: int = 1_000
    pending_ttl: float = 600.0
    max_tasks: int = 1_000
    task_ttl: float = 86_400.0
    max_catalog_bytes: int = 256 * 1024 * 1024


@dataclass(slots=True)
class ScopeState:
    """What the proxy knows for one scope (see the module docstring).

    The state has one owner: the transformer, the middleware and the ``tools/list`` fetch read its
    fields but write only through its methods (:meth:`remember_task`, :meth:`await_response`,
    :meth:`answered`, :meth:`name_client`, :meth:`rename`, :meth:`learn`, :meth:`learn_tools`,
    :meth:`forget_tools`, :meth:`mark_absent`), so a backend shared by replicas can stand behind them.
    """

    catalog: ToolCatalog
    pending: BoundedMap[IdKey, PendingRequest]
    tasks: BoundedMap[str, str]
    #: Tool names advertised in place of names clients refuse: advertised name -> the upstream's.
    names: dict[str, str] = field(default_factory=dict)
    #: The client of a legacy session, named by its ``initialize`` (2026-07-28 names it per request).
    client: ClientProfile = UNKNOWN
    #: What the tools' results taught of their schemas (:mod:`mcp_normalizer.rules.learned`), by tool name.
    learned: LearnedTools = field(default_factory=LearnedTools)

    # Every write of the scope's state goes through the methods below (the middleware, the
    # transformer and the tools/list fetch read the fields, never assign them).

    def remember_task(self, task_id: str, tool: str) -> None:
        """Task ``task_id`` was started by a call of ``tool`` (its final result is that tool's)."""
        self.tasks.put(task_id, tool)

    def task_tool(self, task_id: str) -> str | None:
        """The tool that started task ``task_id``, if remembered."""
        return self.tasks.get(task_id)

    def await_response(self, key: IdKey, request: PendingRequest) -> None:
        """``request`` (id key ``key``) of a legacy session is sent: its response may come on a later ``GET``."""
        self.pending.put(key, request)

    def answered(self, key: IdKey) -> None:
        """The request ``key`` has had its response: no later ``GET`` carries it."""
        self.pending.pop(key)

    def name_client(self, client: ClientProfile) -> None:
        """The session's ``initialize`` named its client."""
        self.client = client

    def rename(self, advertised: str, original: str) -> None:
        """Tool ``original`` is advertised as ``advertised`` (rule ``tool_names``)."""
        self.names[advertised] = original

    def learn_tools(self, entries: ToolSet | Iterable[ToolEntry], *, first_page: bool, ttl: float | None) -> None:
        """A ``tools/list`` page (see :meth:`ToolCatalog.learn`)."""
        self.catalog.learn(entries, first_page=first_page, ttl=ttl)

    def forget_tools(self) -> None:
        """The upstream's tool list changed: forget the scope's catalog."""
        self.catalog.clear()

    def mark_absent(self, tools: Iterable[str]) -> None:
        """A whole fetched list lacks ``tools``: no fetch again for them while the list is fresh."""
        self.catalog.absent |= set(tools)

    def learn(self, tool: str, found: Learned) -> bool:
        """Add what a result of ``tool`` taught; ``True`` when the scope's tool list changes with it
        (at most :data:`MAX_LEARNED_TOOLS` tools are learned per scope)."""
        before = self.learned.get(tool)
        merged = before.merged(found) if before is not None else found
        if merged == before or (before is None and len(self.learned) >= MAX_LEARNED_TOOLS):
            return False
        size = len(tool) + sum(len(place.text) for place in merged.relax)
        if self.learned.size - self.learned.size_of(tool) + size > MAX_LEARNED_BYTES:
            return False
        self.learned[tool] = merged
        return True


@dataclass
class ScopeStore:
    """Scope states by scope key, plus the catalog of ``tools/list`` results the upstream marked
    ``cacheScope: "public"`` (2026-07-28 ``server/utilities/caching.mdx``), which any scope may use.

    Bounded twice: at most ``max_scopes`` states, and at most ``max_catalog_bytes`` in the distinct
    catalogs they hold (:class:`~mcp_normalizer.catalog.CatalogPool`: scopes listing the same tools share
    one); least recently used scopes are forgotten first, never the one just used.
    """

    limits: Limits = field(default_factory=Limits)
    public: ToolCatalog = field(default_factory=ToolCatalog)
    _states: OrderedDict[str, ScopeState] = field(default_factory=OrderedDict)
    pool: CatalogPool = field(init=False)

    def __post_init__(self) -> None:
        self.pool = CatalogPool(self.limits.max_catalog_bytes, over=self._trim)
        self.public.pool = self.pool

    def __len__(self) -> int:
        return len(self._states)

    def state(self, key: str) -> ScopeState:
        """The state of scope ``key``, created empty if new."""
        found = self._states.get(key)
        if found is None:
            limits = self.limits
            found = self._states[key] = ScopeState(
                ToolCatalog(pool=self.pool),
                BoundedMap(limits.max_pending, limits.pending_ttl),
                BoundedMap(limits.max_tasks, limits.task_ttl),
            )
            while len(self._states) > limits.max_scopes:
                self._states.popitem(last=False)
        else:
            self._states.move_to_end(key)
        return found

    def detached(self) -> ScopeState:
        """An empty state that is not stored (for an exchange with nothing to remember: a request
        the result rules do not read, in a scope the proxy has not seen)."""
        return ScopeState(ToolCatalog(pool=self.pool), BoundedMap(1, 0.0), BoundedMap(1, 0.0))

    def peek(self, key: str) -> ScopeState | None:
        """The state of scope ``key`` if the proxy has one."""
        return self._states.get(key)

    def forget(self, key: str) -> None:
        """Drop everything learned for scope ``key`` (session ended or expired)."""
        self._states.pop(key, None)

    def _trim(self) -> None:
        """Forget least recently used scopes until the catalogs fit their bound (or one scope is left)."""
        while self.pool.bytes > self.pool.max_bytes and len(self._states) > 1:
            self._states.popitem(last=False)  # its catalog's set goes when no other scope holds it
