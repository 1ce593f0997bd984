"""Scope state shared by the replicas behind one load balancer, in Redis (``[proxy] state_url``).

A :class:`RedisState` is the :class:`~mcp_normalizer.engine.scopes.SharedBackend` of the proxy's
:class:`~mcp_normalizer.engine.scopes.ScopeStore` when ``state_url`` is set. It holds only what a request
arriving at another replica needs, never a value of a result and never a tool catalog (a replica
fetches ``tools/list`` itself):

- ``{prefix}t:{hash(scope, task id)}``: string, the tool that started the task; expires after
  ``task_ttl`` seconds.
- ``{prefix}p:{scope}``: hash, the unanswered requests of a legacy session (resumption on a later
  ``GET``): field the JSON-RPC id key as JSON (``["n", 7]``, ``["s", "abc"]``), value JSON
  ``{"m": method, "t": tool, "k": task id, "c": cursor, "d": deadline}`` (``d``: Unix seconds, ``pending_ttl``
  after the request); the key expires ``pending_ttl`` after its last write, expired fields are
  ignored, at most ``max_pending`` are kept.
- ``{prefix}s:{scope}``: hash, ``client`` (the ``clientInfo`` name of the session),
  ``client_version`` (its ``clientInfo`` version, empty when it gave none: a host profile's
  version ranges read it) and ``learned`` (the 32 hex digits naming a learned-schemas entry); the
  key expires ``learned_ttl`` after its last write.
- ``{prefix}k:{upstream}``: hash, the lessons every replica learned for one upstream
  (:mod:`mcp_normalizer.ops.lesson_store`): field ``[tool, definition digest]`` as JSON, value the
  lesson's JSON; expires :data:`LESSONS_TTL` after its last write; at most :data:`MAX_LESSON_FIELDS`
  fields are read.
- ``{prefix}l:{digest}``: string, learned schemas (JSON ``{tool: [drop_output_schema, [place,
  ...]]}``, 8 KiB at most), stored once by content however many scopes point at it; expires
  ``learned_ttl`` after its last write. Tool name maps (rule ``tool_names``) are never stored: a
  replica derives the same map from the listing it fetches itself.

What one scope and one client may write is bounded: a scope's hash holds three short fields, its
pending hash at most :data:`MAX_SHARED_PENDING` entries of bounded size; one client address (the
TCP peer, or behind ``trusted_proxies`` the address they forwarded) may create at most
``state_scopes_per_client`` new scopes a minute per replica, past which its new scopes stay in the
replica's memory alone (``mcp_normalizer_state_errors_total{op="capped"}``). Only scopes whose
request the upstream accepted (a 2xx) are written at all.

``scope`` is a BLAKE2b hash (32 hex digits) of the upstream, session id, ``Authorization`` and
``Cookie``, keyed with ``state_secret`` (the same on every replica; unkeyed when empty): the raw
values never reach Redis.

Fail-open: every call is bounded by :data:`TIMEOUT` (waiting for one of the
:data:`MAX_CONNECTIONS` pooled connections included); a call that fails or times out is counted
(``mcp_normalizer_state_errors_total{op}``) and logged at most once per :data:`LOG_INTERVAL` (and
its recovery once after that). A store that refuses connections, or times out
:data:`DOWN_AFTER` calls in a row, is left alone for :data:`RETRY_AFTER` seconds (calls meanwhile
are skipped and counted): one slow call, for one scope, never turns the store off for the others.
The proxy then works from its in-memory state alone; a store that answers again is used again.

``redis`` (redis-py, the ``[redis]`` extra) is imported only when a :class:`RedisState` is made.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import orjson
from cachetools import LRUCache

from ..engine.rules.jsonrpc_envelope import LIST_METHODS
from ..engine.rules.learned import Learned
from ..engine.scopes import Changes, Limits, Snapshot
from ..errors import ConfigError
from ..wire.jsonrpc import IdKey, PendingRequest
from ..wire.pointer import PointerPattern

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from .metrics import Metrics

logger = logging.getLogger(__name__)

#: Seconds one call to the store may take (then it counts as failed).
TIMEOUT = 0.25
#: Seconds the store is left alone after a failure.
RETRY_AFTER = 1.0
#: Seconds between two warnings about an unreachable store.
LOG_INTERVAL = 30.0
#: Connections to the store one replica holds at most (a call waits for a free one, within TIMEOUT).
MAX_CONNECTIONS = 32
#: Calls timing out in a row after which the store is left alone (a refused connection: at once).
DOWN_AFTER = 3
#: Unanswered requests of one session shared at most (the latest kept).
MAX_SHARED_PENDING = 256
#: Seconds of the window in which one client address may create ``scopes_per_client`` scopes.
CLIENT_WINDOW = 60.0
#: Prefix of every key.
PREFIX = "mcp-normalizer:"
#: The longest text (bytes of UTF-8: a tool name, a task id, a method, a client name) stored; an
#: entry with a longer one, or with one that is not UTF-8 or not JSON (a lone surrogate, a 39-digit
#: id), is not shared at all (the replica keeps it): a client cannot fill the store through them.
MAX_TEXT = 512
#: The longest lesson (field and value) stored or read (a lesson's tool name and 20 places fit).
MAX_LESSON_BYTES = 8192
#: Fields of an upstream's lessons hash read at most (4 replicas' full books).
MAX_LESSON_FIELDS = 4000
#: Seconds an upstream's lessons outlive their last write (30 days).
LESSONS_TTL = 30 * 86_400

#: A hash field name or value as redis-py takes it.
_Field = bytes | bytearray | memoryview | str | int | float


class RedisState:
    """The shared backend in Redis (see the module docstring for what is stored, and how).

    Raises:
        ConfigError: ``url`` is not one redis-py can use (a port out of range, a bad query argument).

    Args:
        url: ``redis://[user:password@]host[:port][/db]``, ``rediss://...`` (TLS) or ``unix://path``.
        secret: the key scope hashes are made with (the same on every replica; ``""``: unkeyed).
        limits: ``task_ttl``, ``pending_ttl``, ``learned_ttl`` (seconds) and ``max_pending``.
        metrics: where failed and skipped calls are counted, if anywhere.
        timeout: seconds one call may take.
        retry_after: seconds the store is left alone after a failure.
        log_interval: seconds between two warnings about it.
        prefix: the prefix of every key (:data:`PREFIX`).
        scopes_per_client: new scopes one client address may write per :data:`CLIENT_WINDOW`
            (``0``: no bound).
        max_connections: connections to the store at most.
    """

    def __init__(
        self,
        url: str,
        *,
        secret: str = "",
        limits: Limits | None = None,
        metrics: Metrics | None = None,
        timeout: float = TIMEOUT,
        retry_after: float = RETRY_AFTER,
        log_interval: float = LOG_INTERVAL,
        prefix: str = PREFIX,
        scopes_per_client: int = 1000,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        from redis.asyncio import BlockingConnectionPool, Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        try:
            # A bounded pool: 200 sessions at once share MAX_CONNECTIONS connections instead of
            # opening one each (which ran into the pool's own limit and into connect timeouts).
            pool = BlockingConnectionPool.from_url(
                url,
                max_connections=max_connections,
                timeout=timeout,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),  # fail once, fast: the caller goes on without the store
                health_check_interval=0,
            )
        except ValueError as exc:  # a bad port, query argument or host: one line at start, not later
            raise ConfigError(f"state_url is not a usable Redis URL: {exc}") from None
        self.redis: Redis = Redis(connection_pool=pool)
        self.limits = limits if limits is not None else Limits()
        self.metrics = metrics
        self.timeout = timeout
        self.retry_after = retry_after
        self.log_interval = log_interval
        self.prefix = prefix
        self._hash_key = hashlib.blake2b(secret.encode(), digest_size=32).digest() if secret else b""
        self._down_until = 0.0  # monotonic: calls before it are skipped
        self._next_log = 0.0
        self._failed = 0  # calls failed or skipped since the last warning
        self._timeouts = 0  # calls timed out in a row
        self._warned = False  # a warning went out since the store last answered
        self.scopes_per_client = scopes_per_client
        self._written: LRUCache[str, None] = LRUCache(100_000)  # scopes this replica has written
        self._clients: LRUCache[str, list[float]] = LRUCache(100_000)  # client -> [window start, new scopes]
        self._learned_seen: LRUCache[str, dict[str, Learned]] = LRUCache(1024)  # entries by digest

    # -- the SharedBackend interface ----------------------------------------------------------

    def scope_id(self, upstream: str, session: str | None, authorization: str | None, cookie: str | None) -> str:
        """32 hex digits naming the scope in the store (keyed BLAKE2b of the four values)."""
        parts = (upstream, session or "", authorization or "", cookie or "")
        text = "\0".join(parts).encode("utf-8", "surrogateescape") + b"\0%d.%d.%d" % tuple(map(len, parts[:3]))
        return hashlib.blake2b(text, key=self._hash_key, digest_size=16, person=b"mcpn-scope").hexdigest()

    async def read(self, scope: str, tasks: Collection[str], *, pending: bool) -> Snapshot | None:
        """One round trip: the scope's hash, the asked-for task keys, the pending hash if asked;
        ``None`` when the store cannot be reached."""
        task_ids = list(tasks)

        async def run(redis: Redis) -> list[Any]:
            async with redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(self._key("s", scope))
                for task_id in task_ids:
                    pipe.get(self._task_key(scope, task_id))
                if pending:
                    pipe.hgetall(self._key("p", scope))
                return list(await pipe.execute())

        replies = await self._call("read", run)
        if replies is None:
            return None
        snapshot, digest = _scope_snapshot(replies[0])
        for task_id, tool in zip(task_ids, replies[1 : 1 + len(task_ids)], strict=True):
            if isinstance(tool, bytes):
                snapshot.tasks[task_id] = tool.decode("utf-8", "replace")
        if pending:
            snapshot.pending = _pending(replies[-1], time.time(), self._pending_bound)
        if digest is not None:
            snapshot.learned = await self._learned_entry(digest)
        return snapshot

    async def _learned_entry(self, digest: str) -> dict[str, Learned]:
        """The learned schemas stored under ``digest`` (read once per replica: entries never change)."""
        found = self._learned_seen.get(digest)
        if found is not None:
            return found

        async def run(redis: Redis) -> Any:
            return await redis.get(self._key("l", digest))

        raw = await self._call("read", run)
        if not isinstance(raw, bytes):
            return {}
        found = self._learned_seen[digest] = _learned(raw)
        return found

    async def write(
        self, scope: str, changes: Changes, learned: Mapping[str, Learned], writer: str | None = None
    ) -> None:
        """One round trip writing ``changes`` (TTLs renewed on the keys written). ``writer``: the
        client address the scope is the client of; a new scope past its bound is not written."""
        limits = self.limits
        if scope not in self._written:
            if not self._admit(writer):
                self._capped(writer)
                return
            self._written[scope] = None
        # Everything is encoded before the round trip: an entry that cannot be (or is too long)
        # is left out alone; it never counts as the store failing.
        tasks = {
            self._task_key(scope, task_id): text
            for task_id, tool in changes.tasks.items()
            if _text(task_id) is not None and (text := _text(tool)) is not None
        }
        deadline = time.time() + limits.pending_ttl
        awaited: dict[_Field, _Field] = {}
        for key, request in changes.awaited.items():
            name, value = _id_field(key), _pending_value(request, deadline)
            if name is not None and value is not None:
                awaited[name] = value
        answered = [name for name in map(_id_field, changes.answered) if name is not None]
        scope_fields: dict[_Field, _Field] = {}
        client = _text(changes.client) if changes.client is not None else None
        if client is not None:
            scope_fields["client"] = client
            version = _text(changes.client_version) if changes.client_version is not None else None
            scope_fields["client_version"] = version if version is not None else b""
        entry: tuple[str, bytes] | None = None
        if changes.learned:
            content = _learned_json(learned)
            digest = hashlib.blake2b(content, digest_size=16, person=b"mcpn-learned").hexdigest()
            scope_fields["learned"], entry = digest, (digest, content)
        if not (tasks or awaited or answered or scope_fields):
            return

        async def run(redis: Redis) -> list[Any]:
            async with redis.pipeline(transaction=False) as pipe:
                for task_key, tool_text in tasks.items():
                    pipe.set(task_key, tool_text, ex=_seconds(limits.task_ttl))
                pending_key = self._key("p", scope)
                if awaited:
                    pipe.hset(pending_key, mapping=awaited)
                    pipe.expire(pending_key, _seconds(limits.pending_ttl))
                    pipe.hlen(pending_key)
                if answered:
                    pipe.hdel(pending_key, *answered)
                if scope_fields:
                    scope_key = self._key("s", scope)
                    pipe.hset(scope_key, mapping=scope_fields)
                    pipe.expire(scope_key, _seconds(limits.learned_ttl))
                if entry is not None:  # one copy however many scopes learned the same
                    pipe.set(self._key("l", entry[0]), entry[1], ex=_seconds(limits.learned_ttl))
                return list(await pipe.execute())

        replies = await self._call("write", run)
        if replies is not None and awaited:
            count = replies[len(tasks) + 2]
            if isinstance(count, int) and count > self._pending_bound:
                await self._trim_pending(scope)

    async def forget(self, scope: str) -> None:
        """Delete the scope's hash and its pending requests (task keys expire on their own)."""

        async def run(redis: Redis) -> int:
            return int(await redis.delete(self._key("s", scope), self._key("p", scope)))

        await self._call("forget", run)

    async def read_lessons(self, upstream: str) -> list[bytes] | None:
        """The upstream's lessons (one round trip; a hash past :data:`MAX_LESSON_FIELDS` fields is
        not read: no replica writes that many)."""

        async def run(redis: Redis) -> list[Any]:
            async with redis.pipeline(transaction=False) as pipe:
                pipe.hlen(self._key("k", upstream))
                pipe.hgetall(self._key("k", upstream))
                return list(await pipe.execute())

        replies = await self._call("read", run)
        if replies is None or not isinstance(replies[0], int) or replies[0] > MAX_LESSON_FIELDS:
            return None
        fields = replies[1] if isinstance(replies[1], dict) else {}
        return [value for value in fields.values() if isinstance(value, bytes) and len(value) <= MAX_LESSON_BYTES]

    async def write_lessons(self, upstream: str, lessons: Mapping[bytes, bytes]) -> None:
        """Add the lessons to the upstream's hash; it expires :data:`LESSONS_TTL` after its last write."""
        fields: dict[_Field, _Field] = {k: v for k, v in lessons.items() if len(k) + len(v) <= MAX_LESSON_BYTES}
        if not fields:
            return

        async def run(redis: Redis) -> list[Any]:
            async with redis.pipeline(transaction=False) as pipe:
                pipe.hset(self._key("k", upstream), mapping=fields)
                pipe.expire(self._key("k", upstream), LESSONS_TTL)
                return list(await pipe.execute())

        await self._call("write", run)

    async def close(self) -> None:
        """Close the connection pool."""
        try:
            with anyio.fail_after(self.timeout):
                await self.redis.aclose(close_connection_pool=True)
        except Exception:  # closing a pool whose server is gone: nothing to keep
            logger.debug("closing the shared state store failed", exc_info=True)

    # -- internals ----------------------------------------------------------------------------

    def _key(self, kind: str, scope: str) -> str:
        return f"{self.prefix}{kind}:{scope}"

    def _task_key(self, scope: str, task_id: str) -> str:
        digest = hashlib.blake2b(task_id.encode("utf-8", "surrogateescape"), key=scope.encode(), digest_size=16)
        return self._key("t", digest.hexdigest())

    async def _trim_pending(self, scope: str) -> None:
        """Keep the ``max_pending`` latest unanswered requests of ``scope`` (expired ones go first)."""
        key = self._key("p", scope)

        async def run(redis: Redis) -> int:
            entries = await redis.hgetall(key)
            by_deadline = sorted(entries.items(), key=lambda item: _deadline(item[1]))
            drop = [name for name, _ in by_deadline[: max(len(entries) - self._pending_bound, 0)]]
            return int(await redis.hdel(key, *drop)) if drop else 0

        await self._call("write", run)

    @property
    def _pending_bound(self) -> int:
        return min(self.limits.max_pending, MAX_SHARED_PENDING)

    def _admit(self, writer: str | None) -> bool:
        """Whether client ``writer`` may create one more scope in the store in this window."""
        if self.scopes_per_client <= 0 or writer is None:
            return True
        now = time.monotonic()
        window = self._clients.get(writer)
        if window is None or now - window[0] >= CLIENT_WINDOW:
            window = self._clients[writer] = [now, 0.0]
        if window[1] >= self.scopes_per_client:
            return False
        window[1] += 1
        return True

    def _capped(self, writer: str | None) -> None:
        if self.metrics is not None:
            self.metrics.state_errors.labels(op="capped").inc()
        logger.warning(
            "a client created more than %d scopes in %g s: its new scopes are not shared (state_scopes_per_client)",
            self.scopes_per_client,
            CLIENT_WINDOW,
        )

    async def _call(self, op: str, run: Any) -> Any:
        """``run(redis)`` bounded by the timeout; ``None`` when it failed, timed out or was skipped
        (the store refused a connection, or timed out :data:`DOWN_AFTER` calls in a row, less
        than ``retry_after`` seconds ago)."""
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeout

        now = time.monotonic()
        if now < self._down_until:
            self._count(op, now, None)
            return None
        try:
            with anyio.fail_after(self.timeout):
                result = await run(self.redis)
        except Exception as exc:  # redis errors, OSError, TimeoutError: the proxy goes on without the store
            slow = isinstance(exc, TimeoutError | RedisTimeout)
            self._timeouts = self._timeouts + 1 if slow else 0
            if not slow and isinstance(exc, RedisConnectionError | OSError) or self._timeouts >= DOWN_AFTER:
                self._down_until = time.monotonic() + self.retry_after
            self._count(op, time.monotonic(), exc)
            return None
        self._timeouts = 0
        if self._warned:
            self._warned = False
            logger.info("shared state store reachable again")
        return result

    def _count(self, op: str, now: float, error: BaseException | None) -> None:
        """Count a failed or skipped call; warn at most once per ``log_interval`` (and say that it
        answers again once after each warning)."""
        self._failed += 1
        if self.metrics is not None:
            self.metrics.state_errors.labels(op=op).inc()
        if error is not None and now >= self._next_log:
            self._next_log = now + self.log_interval
            failed, self._failed = self._failed, 0
            self._warned = True
            logger.warning(  # the error's type only: redis-py's text can quote a command's arguments
                "shared state store unreachable (%s); working from this process's state alone"
                " (%d calls failed or skipped since the last warning)",
                type(error).__name__,
                failed,
            )


def _seconds(ttl: float) -> int:
    """A TTL for Redis: whole seconds, at least 1."""
    return max(int(ttl + 0.999), 1)


def _text(value: str) -> bytes | None:
    """``value`` as UTF-8, ``None`` when it has a lone surrogate or is longer than :data:`MAX_TEXT`."""
    try:
        encoded = value.encode()
    except UnicodeEncodeError:
        return None
    return encoded if len(encoded) <= MAX_TEXT else None


def _id_field(key: IdKey) -> bytes | None:
    """The hash field of an id key, ``None`` when it cannot be stored (see :data:`MAX_TEXT`)."""
    try:
        encoded = orjson.dumps(list(key))
    except orjson.JSONEncodeError:
        return None
    return encoded if len(encoded) <= MAX_TEXT else None


def _pending_value(request: PendingRequest, deadline: float) -> bytes | None:
    """The stored value of an unanswered request, ``None`` when it cannot be stored."""
    value: dict[str, Any] = {"m": request.method, "d": round(deadline, 3)}
    if request.tool is not None:
        value["t"] = request.tool
    if request.task_id is not None:
        value["k"] = request.task_id
    if request.cursor is not None and request.method in LIST_METHODS and len(request.cursor) <= 1024:
        value["c"] = request.cursor  # (a longer one is not kept: the request is, which matters more)
    try:
        encoded = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return None
    return encoded if len(encoded) <= 3 * MAX_TEXT else None


def _deadline(raw: bytes | str) -> float:
    try:
        found = orjson.loads(raw)
        return float(found["d"]) if isinstance(found, dict) else 0.0
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return 0.0


def _pending(entries: object, now: float, bound: int) -> dict[IdKey, PendingRequest]:
    """The live pending requests of a pending hash (malformed fields ignored), latest ``bound``."""
    found: list[tuple[float, IdKey, PendingRequest]] = []
    if not isinstance(entries, dict):
        return {}
    for name, raw in entries.items():
        try:
            kind, value = orjson.loads(name)
            entry = orjson.loads(raw)
            deadline = float(entry["d"])
            method = entry["m"]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
        if deadline <= now or kind not in ("n", "s") or not isinstance(value, int | str) or not isinstance(method, str):
            continue
        tool, task_id, cursor = entry.get("t"), entry.get("k"), entry.get("c")
        request = PendingRequest(
            method,
            tool=tool if isinstance(tool, str) else None,
            cursor=cursor if isinstance(cursor, str) else None,
            task_id=task_id if isinstance(task_id, str) else None,
        )
        found.append((deadline, (kind, value), request))
    found.sort(key=lambda item: item[0])
    return {key: request for _, key, request in found[-bound:]} if bound > 0 else {}


def _learned_json(learned: Mapping[str, Learned]) -> bytes:
    """``{tool: [drop_output_schema, [relax place, ...], [nullable place, ...]]}`` (:func:`_learned` reads it)."""
    return orjson.dumps(
        {
            tool: [d.drop_output_schema, [p.text for p in d.relax], [p.text for p in d.nullable]]
            for tool, d in learned.items()
        }
    )


def _scope_snapshot(fields: object) -> tuple[Snapshot, str | None]:
    """The client of a scope hash, and the digest of its learned schemas (malformed parts ignored)."""
    snapshot = Snapshot()
    digest: str | None = None
    if not isinstance(fields, dict):
        return snapshot, digest
    for raw_name, raw in fields.items():
        name = raw_name.decode("utf-8", "replace") if isinstance(raw_name, bytes) else str(raw_name)
        if not isinstance(raw, bytes):
            continue
        if name == "client":
            snapshot.client = raw.decode("utf-8", "replace")[:128]
        elif name == "client_version" and raw:
            snapshot.client_version = raw.decode("utf-8", "replace")[:64]
        elif name == "learned" and len(raw) == 32 and raw.isalnum():
            digest = raw.decode("ascii")
    return snapshot, digest


def _learned(raw: bytes) -> dict[str, Learned]:
    try:
        decoded = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    out: dict[str, Learned] = {}
    if not isinstance(decoded, dict):
        return out
    for tool, value in decoded.items():
        try:
            drop, places, *rest = value  # (an entry written before nullable was learned has two)
            relax = tuple(PointerPattern.parse(place) for place in places if isinstance(place, str))
            nulls = rest[0] if rest and isinstance(rest[0], list) else []
            nullable = tuple(PointerPattern.parse(place) for place in nulls if isinstance(place, str))
        except (TypeError, ValueError):
            continue
        out[str(tool)] = Learned(drop_output_schema=drop is True, relax=relax, nullable=nullable)
    return out
