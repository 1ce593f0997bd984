"""What the proxy remembers per scope (one upstream seen through one session and one authorization),
bounded in size and time so that no client can make it grow without limit.

A :class:`ScopeState` holds:

- ``catalog``: the tools learned from ``tools/list`` (see :mod:`mcp_normalizer.engine.catalog`);
- ``pending``: ``tools/call`` requests of a legacy session whose response has not been seen yet. A
  2025-11-25 server may close a POST stream early and deliver the response on a later ``GET`` with
  ``Last-Event-ID`` (resumption, ``basic/transports.mdx`` "Resumability"); the map lets the proxy
  still normalize it. At the bound the oldest entry is dropped; a response whose entry was dropped
  or expired passes through unnormalized.
- ``tasks``: task id -> the tool that started the task (2025-11-25 task-augmented calls and the
  2026-07-28 tasks extension), so the final ``CallToolResult`` is normalized with that tool's schema.

:class:`ScopeStore` keeps at most ``max_scopes`` states, least recently used dropped first.

Replicas behind one load balancer can share what a later request may need on another replica (a
task's tool, a session's unanswered requests, its client and learned schemas; never a result
value, never a catalog or a name map: a replica fetches ``tools/list`` itself, and derives the same
names from it) through a
:class:`SharedBackend` (:mod:`mcp_normalizer.ops.shared_state`). The in-memory state stays in front as
a cache: the middleware :meth:`ScopeStore.load` reads what an exchange needs before it starts, the
state's methods queue what it learned (:class:`Changes`), and :meth:`ScopeStore.flush` writes it
before the next bytes of the response go out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from cachetools import LRUCache

from ..wire.jsonrpc import IdKey, PendingRequest
from .bounded import ExpiringMap
from .catalog import CatalogPool, ToolCatalog, ToolEntry, ToolSet
from .rules.clients import UNKNOWN, ClientProfile, profile_for
from .rules.learned import Learned, LearnedTools, learned_size

#: Tools whose schema one scope may learn (a bound on what one client's results can make it hold).
MAX_LEARNED_TOOLS = 200
#: Bytes of tool names and places one scope may learn (its state stays small: 10,000 scopes, 80 MB at most).
MAX_LEARNED_BYTES = 8192

K = TypeVar("K")
V = TypeVar("V")


def bounded(max_entries: int, ttl: float) -> ExpiringMap[K, V]:
    """A map of at most ``max_entries`` entries, each kept ``ttl`` seconds (monotonic clock): past
    the bound the entry written longest ago goes, and an expired entry reads as absent
    (:class:`~mcp_normalizer.engine.bounded.ExpiringMap`)."""
    return ExpiringMap(max_entries, ttl)


@dataclass(slots=True)
class Changes:
    """What a scope's state learned since its last flush to the shared backend.

    Attributes:
        tasks: task id -> the tool that started it.
        awaited: unanswered requests of a legacy session, by id key.
        answered: id keys whose responses were seen (their shared entries go).
        client: the ``clientInfo`` name the session's ``initialize`` gave, if it named one since.
        client_version: the ``clientInfo`` version given with it, if a string.
        learned: the learned schemas changed (the whole map is written: it is at most 8 KiB).
    """

    tasks: dict[str, str] = field(default_factory=dict)
    awaited: dict[IdKey, PendingRequest] = field(default_factory=dict)
    answered: set[IdKey] = field(default_factory=set)
    client: str | None = None
    client_version: str | None = None
    learned: bool = False

    def __bool__(self) -> bool:
        return bool(self.tasks or self.awaited or self.answered or self.client is not None or self.learned)


@dataclass(slots=True)
class Snapshot:
    """What the shared backend holds for one scope (every member may be empty).

    Attributes:
        tasks: the asked-for task ids that the backend knows, -> their tools.
        pending: the session's unanswered requests, by id key (only when asked for).
        client: the session's ``clientInfo`` name, ``None`` if none was given.
        client_version: the ``clientInfo`` version given with it, ``None`` if none was.
        learned: the learned schemas, by tool name.
    """

    tasks: dict[str, str] = field(default_factory=dict)
    pending: dict[IdKey, PendingRequest] = field(default_factory=dict)
    client: str | None = None
    client_version: str | None = None
    learned: dict[str, Learned] = field(default_factory=dict)


class SharedBackend(Protocol):
    """A store the replicas share scope state in (:class:`mcp_normalizer.ops.shared_state.RedisState`).

    Fail-open: no method raises on a store that is down or slow; reads then return ``None``, writes
    are dropped, each call bounded by a short timeout.
    """

    def scope_id(self, upstream: str, session: str | None, authorization: str | None, cookie: str | None) -> str:
        """The scope's name in the store: a hash, the same on every replica (never the raw values)."""
        ...

    async def read(self, scope: str, tasks: Collection[str], *, pending: bool) -> Snapshot | None:
        """What the store has for ``scope`` (and the asked-for ``tasks``; the unanswered requests
        when ``pending``); ``None`` when it cannot be reached."""
        ...

    async def write(
        self, scope: str, changes: Changes, learned: Mapping[str, Learned], writer: str | None = None
    ) -> None:
        """Write ``changes`` (and, when they say so, the whole ``learned`` map) for ``scope``;
        ``writer`` is the address of the scope's client (what one client may write is bounded)."""
        ...

    async def forget(self, scope: str) -> None:
        """Drop what the store holds for ``scope`` (its task entries expire on their own)."""
        ...

    async def read_lessons(self, upstream: str) -> list[bytes] | None:
        """The lessons every replica learned for the upstream named ``upstream`` (a digest), each
        as JSON bytes (:mod:`mcp_normalizer.ops.lesson_store`); ``None`` when it cannot be reached."""
        ...

    async def write_lessons(self, upstream: str, lessons: Mapping[bytes, bytes]) -> None:
        """Add ``lessons`` (field -> lesson JSON) to the upstream's lessons."""
        ...

    async def close(self) -> None:
        """Close the connections."""
        ...


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
        learned_ttl: seconds a shared backend keeps a scope's client and learned schemas after
            their last change.
    """

    max_scopes: int = 10_000
    max_pending: int = 1_000
    pending_ttl: float = 600.0
    max_tasks: int = 1_000
    task_ttl: float = 86_400.0
    max_catalog_bytes: int = 256 * 1024 * 1024
    learned_ttl: float = 86_400.0


@dataclass(slots=True)
class ScopeState:
    """What the proxy knows for one scope (see the module docstring).

    The state has one owner: the transformer, the middleware and the ``tools/list`` fetch read its
    fields but write only through its methods (:meth:`remember_task`, :meth:`await_response`,
    :meth:`answered`, :meth:`name_client`, :meth:`learn`, :meth:`learn_tools`,
    :meth:`forget_tools`, :meth:`mark_absent`), so a backend shared by replicas can stand behind them.
    """

    catalog: ToolCatalog
    pending: ExpiringMap[IdKey, PendingRequest]
    tasks: ExpiringMap[str, str]
    #: The client of a legacy session, named by its ``initialize`` (2026-07-28 names it per request).
    client: ClientProfile = UNKNOWN
    #: What the tools' results taught of their schemas (:mod:`mcp_normalizer.engine.rules.learned`), by tool name.
    learned: LearnedTools = field(default_factory=LearnedTools)
    #: The scope's name in the shared backend, ``None`` when there is none (or nothing to share).
    shared: str | None = None
    #: What was learned since the last flush to the shared backend (``None``: nothing is shared).
    changes: Changes | None = None
    #: The address of the scope's client (what it may write to the shared backend is bounded).
    writer: str | None = None

    # Every write of the scope's state goes through the methods below (the middleware, the
    # transformer and the tools/list fetch read the fields, never assign them).

    def remember_task(self, task_id: str, tool: str) -> None:
        """Task ``task_id`` was started by a call of ``tool`` (its final result is that tool's)."""
        self.tasks[task_id] = tool
        if self.changes is not None:
            self.changes.tasks[task_id] = tool

    def task_tool(self, task_id: str) -> str | None:
        """The tool that started task ``task_id``, if remembered."""
        return self.tasks.get(task_id)

    def await_response(self, key: IdKey, request: PendingRequest) -> None:
        """``request`` (id key ``key``) of a legacy session is sent: its response may come on a later ``GET``."""
        self.pending[key] = request
        if self.changes is not None:
            self.changes.awaited[key] = request

    def answered(self, key: IdKey) -> None:
        """The request ``key`` has had its response: no later ``GET`` carries it."""
        self.pending.pop(key, None)
        if self.changes is not None and self.changes.awaited.pop(key, None) is None:
            self.changes.answered.add(key)  # (one awaited and answered before a flush: never written)

    def name_client(self, client: ClientProfile) -> None:
        """The session's ``initialize`` named its client."""
        self.client = client
        if self.changes is not None and client.name is not None:
            self.changes.client, self.changes.client_version = client.name, client.version

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
        if not self._merge(tool, found):
            return False
        if self.changes is not None:
            self.changes.learned = True
        return True

    def adopt(self, snapshot: Snapshot) -> None:
        """Take what another replica shared (nothing of it is queued to be written back): its task
        ids and unanswered requests, a client name when this state has none, and learned schemas
        merged with this state's (within the same bounds)."""
        for task_id, tool in snapshot.tasks.items():
            self.tasks[task_id] = tool
        for key, request in snapshot.pending.items():
            if key not in self.pending:
                self.pending[key] = request
        if snapshot.client is not None and self.client is UNKNOWN:
            self.client = profile_for({"name": snapshot.client, "version": snapshot.client_version})
        for tool, found in snapshot.learned.items():
            self._merge(tool, found)

    def share(self, scope: str, writer: str | None = None) -> None:
        """From now on queue what this state learns for the shared backend, as scope ``scope``
        (``writer``: the address of its client)."""
        if self.shared is None:
            self.shared, self.changes, self.writer = scope, Changes(), writer

    def _merge(self, tool: str, found: Learned) -> bool:
        before = self.learned.get(tool)
        merged = before.merged(found) if before is not None else found
        if merged == before or (before is None and len(self.learned) >= MAX_LEARNED_TOOLS):
            return False
        size = len(tool) + learned_size(merged)
        if self.learned.size - self.learned.size_of(tool) + size > MAX_LEARNED_BYTES:
            return False
        self.learned[tool] = merged
        return True


@dataclass
class ScopeStore:
    """Scope states by scope key, plus the catalog of ``tools/list`` results the upstream marked
    ``cacheScope: "public"`` (2026-07-28 ``server/utilities/caching.mdx``), which any scope may use.

    Bounded twice: at most ``max_scopes`` states, and at most ``max_catalog_bytes`` in the distinct
    catalogs they hold (:class:`~mcp_normalizer.engine.catalog.CatalogPool`: scopes listing the same tools share
    one); least recently used scopes are forgotten first, never the one just used.

    With a :attr:`shared` backend, the states are a cache in front of it: :meth:`load` reads what
    an exchange needs, :meth:`flush` writes what a state learned (both fail-open).
    """

    limits: Limits = field(default_factory=Limits)
    public: ToolCatalog = field(default_factory=ToolCatalog)
    shared: SharedBackend | None = None
    _states: LRUCache[str, ScopeState] = field(init=False)
    pool: CatalogPool = field(init=False)

    def __post_init__(self) -> None:
        self._states = LRUCache(self.limits.max_scopes)  # least recently used first out
        self.pool = CatalogPool(self.limits.max_catalog_bytes, over=self._trim)
        self.public.pool = self.pool

    def __len__(self) -> int:
        return len(self._states)

    def state(self, key: str) -> ScopeState:
        """The state of scope ``key``, created empty if new."""
        found = self._states.get(key)  # (a hit is now the most recently used)
        if found is None:
            limits = self.limits
            found = self._states[key] = ScopeState(
                ToolCatalog(pool=self.pool),
                bounded(limits.max_pending, limits.pending_ttl),
                bounded(limits.max_tasks, limits.task_ttl),
            )
        return found

    def detached(self) -> ScopeState:
        """An empty state that is not stored (for an exchange with nothing to remember: a request
        the result rules do not read, in a scope the proxy has not seen)."""
        return ScopeState(ToolCatalog(pool=self.pool), bounded(1, 0.0), bounded(1, 0.0))

    def peek(self, key: str) -> ScopeState | None:
        """The state of scope ``key`` if the proxy has one."""
        return self._states.get(key)

    def forget(self, key: str) -> None:
        """Drop everything learned for scope ``key`` (session ended or expired)."""
        self._states.pop(key, None)

    def shared_id(
        self, upstream: str, session: str | None, authorization: str | None, cookie: str | None
    ) -> str | None:
        """The scope's name in the shared backend, ``None`` without one."""
        if self.shared is None:
            return None
        return self.shared.scope_id(upstream, session, authorization, cookie)

    async def load(self, state: ScopeState, tasks: Collection[str] = (), *, pending: bool = False) -> None:
        """Bring into ``state`` what the shared backend has for it (its client, learned schemas;
        the tools of ``tasks``; its unanswered requests when ``pending``). Without a backend, or
        with one that cannot be reached, ``state`` stays as it is."""
        if self.shared is None or state.shared is None:
            return
        snapshot = await self.shared.read(state.shared, tasks, pending=pending)
        if snapshot is not None:
            state.adopt(snapshot)

    async def flush(self, state: ScopeState) -> None:
        """Write what ``state`` learned since its last flush to the shared backend (dropped when it
        cannot be reached: the state itself keeps it)."""
        changes = state.changes
        if self.shared is None or state.shared is None or not changes:
            return
        state.changes = Changes()
        await self.shared.write(
            state.shared, changes, dict(state.learned) if changes.learned else {}, writer=state.writer
        )

    async def forget_shared(self, key: str, shared: str | None) -> None:
        """:meth:`forget` scope ``key``, here and in the shared backend (as ``shared``)."""
        self.forget(key)
        if self.shared is not None and shared is not None:
            await self.shared.forget(shared)

    def _trim(self) -> None:
        """Forget least recently used scopes until the catalogs fit their bound (or one scope is left)."""
        while self.pool.bytes > self.pool.max_bytes and len(self._states) > 1:
            self._states.popitem()  # its catalog's set goes when no other scope holds it
