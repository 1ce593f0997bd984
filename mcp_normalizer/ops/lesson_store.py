"""Where the lessons of :mod:`mcp_normalizer.engine.lessons` outlive the process: a state directory and
the shared store (Redis), both optional, both fail-open.

- State directory (``[proxy] state_dir``, ``--state-dir DIR``, ``MCP_NORMALIZER_STATE_DIR``; off
  unless set): one file per upstream, ``lessons-<32 hex digits>.json`` (a BLAKE2b digest of the
  upstream's label), ``{"upstream": label, "lessons": [...]}``. Read once when the proxy starts;
  written whole (to a ``.partial`` file, then renamed: a crash never leaves half a file) after an
  exchange taught something. A file that cannot be read or parsed is logged and ignored (the
  proxy starts with nothing learned); one that cannot be written is logged once per minute.
- Shared store (``state_url``): the hash ``{prefix}k:<upstream digest>``, one field per lesson
  (:meth:`mcp_normalizer.engine.scopes.SharedBackend.read_lessons`). Read when the proxy first needs it and
  then at most every :data:`REFRESH` seconds, before a ``tools/list`` is forwarded, so a lesson
  another replica learned reaches this replica's next listing; written as a lesson is learned.

One owner per piece: the middleware makes the book and this store; the store alone reads and
writes them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

import anyio
import orjson

from ..engine.lessons import Lesson, LessonBook
from ..engine.scopes import SharedBackend
from ..types import JSONObject

logger = logging.getLogger(__name__)

#: Seconds between two reads of the shared store's lessons (at most; only when a list is asked for).
REFRESH = 2.0
#: Largest state file read (the book's bound, with room for JSON).
MAX_FILE_BYTES = 4 * 1024 * 1024
_WARN_EVERY = 60.0


def upstream_digest(upstream: str) -> str:
    """32 hex digits naming the upstream in file names and store keys (its label never appears)."""
    text = upstream.encode("utf-8", "surrogateescape")
    return hashlib.blake2b(text, digest_size=16, person=b"mcpn-lessons").hexdigest()


class LessonStore:
    """Loads and saves one upstream's :class:`LessonBook`.

    Args:
        book: the book (its :attr:`~LessonBook.dirty` lessons are what :meth:`save` writes).
        upstream: the upstream's label (the proxy's upstream URL, credentials redacted).
        state_dir: the state directory, ``None`` for none.
        shared: the shared store, ``None`` for none.
    """

    def __init__(self, book: LessonBook, upstream: str, state_dir: str | None, shared: SharedBackend | None) -> None:
        self.book = book
        self.upstream = upstream
        self.digest = upstream_digest(upstream)
        self.path = Path(state_dir) / f"lessons-{self.digest}.json" if state_dir else None
        self.shared = shared
        self._read_at: float | None = None
        self._lock = anyio.Lock()
        self._warned_at = -_WARN_EVERY

    @property
    def active(self) -> bool:
        """True when lessons are kept anywhere beyond this process."""
        return self.book.enabled and (self.path is not None or self.shared is not None)

    def load(self) -> int:
        """Read the state file into the book (at start); how many lessons it held."""
        if self.path is None or not self.book.enabled:
            return 0
        try:
            with self.path.open("rb") as file:
                raw = file.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            logger.warning("cannot read the state file %s: %s; starting with nothing learned", self.path, exc)
            return 0
        try:
            document = orjson.loads(raw) if len(raw) <= MAX_FILE_BYTES else None
        except orjson.JSONDecodeError:
            document = None
        entries = document.get("lessons") if isinstance(document, dict) else None
        if not isinstance(entries, list):
            logger.warning("the state file %s is not a lessons file; starting with nothing learned", self.path)
            return 0
        lessons = [lesson for lesson in map(Lesson.from_json, entries) if lesson is not None]
        added = self.book.adopt(lessons)
        logger.info("%d lessons read from %s", added, self.path)
        return added

    async def refresh(self) -> None:
        """Bring in what other replicas learned (the shared store, at most every :data:`REFRESH` s)."""
        if self.shared is None or not self.book.enabled:
            return
        now = time.monotonic()
        if self._read_at is not None and now - self._read_at < REFRESH:
            return
        self._read_at = now
        values = await self.shared.read_lessons(self.digest)
        if values:
            self.book.adopt([lesson for lesson in map(_decoded, values) if lesson is not None])

    async def save(self) -> None:
        """Write the lessons learned since the last save (to the shared store, then the whole book
        to the state file)."""
        dirty, self.book.dirty = self.book.dirty, {}
        if not dirty:
            return
        if self.shared is not None:
            fields = {orjson.dumps(list(key)): orjson.dumps(lesson.as_json()) for key, lesson in dirty.items()}
            await self.shared.write_lessons(self.digest, fields)
        if self.path is not None:
            async with self._lock:  # one writer of the file per process at a time
                lessons = [lesson.as_json() for lesson in self.book.lessons()]
                await anyio.to_thread.run_sync(self._write, lessons)

    def _write(self, lessons: list[JSONObject]) -> None:
        """Write the book, merged with what the file holds (another worker's lessons are kept)."""
        assert self.path is not None
        partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.partial")
        try:
            merged = {(lesson["tool"], lesson["definition"]): lesson for lesson in self._stored()}
            merged.update({(lesson["tool"], lesson["definition"]): lesson for lesson in lessons})
            document = orjson.dumps({"upstream": self.upstream, "lessons": list(merged.values())})
            partial.write_bytes(document)
            partial.replace(self.path)
        except OSError as exc:
            now = time.monotonic()
            if now - self._warned_at >= _WARN_EVERY:
                self._warned_at = now
                logger.warning("cannot write the state file %s: %s; lessons kept in memory", self.path, exc)

    def _stored(self) -> list[JSONObject]:
        """The lessons the file holds now, as JSON (what is not a lesson is dropped)."""
        assert self.path is not None
        try:
            raw = self.path.read_bytes() if self.path.stat().st_size <= MAX_FILE_BYTES else b"{}"
            document = orjson.loads(raw)
        except (OSError, orjson.JSONDecodeError):
            return []
        entries = document.get("lessons") if isinstance(document, dict) else None
        return [
            lesson.as_json()
            for lesson in map(Lesson.from_json, entries if isinstance(entries, list) else [])
            if lesson is not None
        ]


def _decoded(value: bytes) -> Lesson | None:
    try:
        return Lesson.from_json(orjson.loads(value))
    except orjson.JSONDecodeError:
        return None
