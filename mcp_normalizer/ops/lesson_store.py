"""Where the lessons of :mod:`mcp_normalizer.engine.lessons` outlive the process: a state directory and
the shared store (Redis), both optional, both fail-open.

- The upstream's identity names its lessons (:func:`upstream_digest`, a BLAKE2b digest: never the
  identity itself): the whole upstream URL, query string included (:func:`http_identity`), or a
  stdio server's whole command line, its ``--env`` items and its ``--cwd`` (:func:`command_identity`).
  Two upstreams that differ anywhere never share lessons; the same upstream gets the same digest
  after a restart.
- State directory (``[proxy] state_dir``, ``--state-dir DIR``, ``MCP_NORMALIZER_STATE_DIR``; off
  unless set; made ``0700``): one file per upstream, ``lessons-<32 hex digits>.json``,
  ``{"upstream": label, "lessons": [...], "evidence": [...]}`` (the evidence pending a second
  witness, :class:`~mcp_normalizer.engine.lessons.Evidence`), and ``witness.key``, the random key
  witnesses are hashed with (so the same authorization is the same witness after a restart and in
  every worker). Every file is written ``0600``. The lessons file is read once when the proxy
  starts; written whole (to a ``.partial`` file, then renamed: a crash never leaves half a file)
  after an exchange taught something, merged with what the file holds (another worker's lessons
  and evidence are kept and adopted: two workers' witnesses confirm a lesson). Files are written
  new, never through a link (:func:`write_private`), and read only when they are the proxy's own
  (:func:`read_own`: no link, this user's, writable by no one else). A file that cannot be
  read or parsed, or is not the proxy's own, is logged and ignored (the proxy starts with nothing
  learned); one that cannot be written is logged once per minute.
- Shared store (``state_url``): the hash ``{prefix}k:<upstream digest>``, one field per lesson
  (:meth:`mcp_normalizer.engine.scopes.SharedBackend.read_lessons`), and ``{prefix}k:<upstream
  digest>:e``, one field per pending evidence (witnesses hashed with ``state_secret``, unkeyed when
  it is empty, as the scopes are). Read when the proxy first needs them and then at most every
  :data:`REFRESH` seconds, before a ``tools/list`` is forwarded, so a lesson another replica learned
  (or confirmed with this one's evidence) reaches this replica's next listing; written as a lesson
  is learned or evidence seen.

One owner per piece: the middleware makes the book and this store; the store alone reads and
writes them.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shlex
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
import orjson

from ..engine.lessons import DROP, MAX_PENDING, MAX_WITNESS_PARTS, NULLABLE, Evidence, Lesson, LessonBook
from ..engine.scopes import SharedBackend
from ..types import JSONObject

logger = logging.getLogger(__name__)

#: Seconds between two reads of the shared store's lessons (at most; only when a list is asked for).
REFRESH = 2.0
#: Largest state file read (the book's bound, with room for JSON).
MAX_FILE_BYTES = 4 * 1024 * 1024
#: The state directory's file holding the key witnesses are hashed with.
KEY_FILE = "witness.key"
#: Mode of every file written in the state directory (the directory itself: ``0700``).
FILE_MODE = 0o600
_WARN_EVERY = 60.0


def upstream_digest(upstream: str) -> str:
    """32 hex digits naming the upstream (its identity, :func:`http_identity` or
    :func:`command_identity`) in file names and store keys (the identity never appears)."""
    text = upstream.encode("utf-8", "surrogateescape")
    return hashlib.blake2b(text, digest_size=16, person=b"mcpn-lessons").hexdigest()


def http_identity(url: str) -> str:
    """An HTTP upstream's identity: its whole URL, query string included (two upstreams that
    differ only there are two upstreams)."""
    return url


def command_identity(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """A stdio server's identity: ``stdio:`` and its whole command line, then (when set) its
    environment additions and working directory (absolute), as JSON. Without ``env`` and
    ``cwd`` it is ``stdio:`` and the shell-quoted command line, as the label of earlier versions
    spelled a command of at most 200 characters."""
    if not env and not cwd:
        return "stdio:" + shlex.join(argv)
    where = os.path.abspath(cwd) if cwd else None
    # (a quoted command line never begins with "[": the two spellings never meet)
    return "stdio:" + orjson.dumps([list(argv), sorted((env or {}).items()), where]).decode()


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file at ``path`` readable by the owner only (``0600``), never
    through a link: whatever has that name (a ``.partial`` left by a crash, or a link another user
    of a shared directory made there) is removed first, and the file is made new (``O_EXCL``,
    ``O_NOFOLLOW``), so the proxy never writes a file it did not make.

    Raises:
        OSError: it cannot (a name another user holds in a sticky directory, among others).
    """
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, FILE_MODE)
    with os.fdopen(fd, "wb") as file:
        os.fchmod(file.fileno(), FILE_MODE)  # (whatever the umask)
        file.write(data)


def read_own(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the file at ``path`` if it is the proxy's own: a regular file
    (no link, no FIFO), owned by this user, that no one else may write; what another user of a
    shared state directory left there is never trusted.

    Raises:
        FileNotFoundError: there is none.
        OSError: it cannot be read, or it is not the proxy's own (``PermissionError``).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid() or found.st_mode & 0o022:
            raise PermissionError(f"{path} is not a file of the proxy's own (another user's, or one others may write)")
        return file.read(limit + 1)


class LessonStore:
    """Loads and saves one upstream's :class:`LessonBook`.

    Args:
        book: the book (its :attr:`~LessonBook.dirty` lessons are what :meth:`save` writes).
        upstream: the upstream's label (the proxy's upstream URL, credentials redacted): what the
            state file says it is for.
        state_dir: the state directory, ``None`` for none.
        shared: the shared store, ``None`` for none.
        identity: the upstream's identity (:func:`http_identity`, :func:`command_identity`), what
            its digest is made of; ``None``: the label.
        secret: with ``shared``, the key witnesses are hashed with (``state_secret``; ``""``: unkeyed).
    """

    def __init__(
        self,
        book: LessonBook,
        upstream: str,
        state_dir: str | None,
        shared: SharedBackend | None,
        *,
        identity: str | None = None,
        secret: str = "",
    ) -> None:
        self.book = book
        self.upstream = upstream
        self.digest = upstream_digest(identity if identity is not None else upstream)
        self.directory = Path(state_dir) if state_dir else None
        self.path = self.directory / f"lessons-{self.digest}.json" if self.directory is not None else None
        self.shared = shared
        self._secret = secret
        self._key: bytes | None = None
        self._read_at: float | None = None
        self._lock = anyio.Lock()
        self._warned_at = -_WARN_EVERY

    def witness(self, authorization: str | None, cookie: str | None, session: str | None) -> str | None:
        """Who a request comes from, as lessons count witnesses: a keyed digest (16 hex digits)
        of each of its credentials (its ``Authorization``'s scheme, in any case, and first word;
        each cookie of its ``Cookie``), sorted and joined by ``.``, when it has any, else of its
        session; ``None`` for neither (every such client looks the same: it is no witness), and
        for more than :data:`~mcp_normalizer.engine.lessons.MAX_WITNESS_PARTS` credentials. Two
        witnesses sharing a part are one (:func:`~mcp_normalizer.engine.lessons.same_witness`):
        the proxy cannot tell which credential the upstream reads."""
        texts = _credentials(authorization, cookie)
        if not texts:
            if session is None:
                return None
            texts = {"s\0" + session}
        if len(texts) > MAX_WITNESS_PARTS:
            return None
        if self._key is None:
            self._key = self._witness_key()
        key = self._key
        return ".".join(
            sorted(
                hashlib.blake2b(
                    text.encode("utf-8", "surrogateescape"), key=key, digest_size=8, person=b"mcpn-witness"
                ).hexdigest()
                for text in texts
            )
        )

    def _witness_key(self) -> bytes:
        """The key witnesses are hashed with: the shared store's secret (every replica's), else
        the state directory's :data:`KEY_FILE` (made once, ``0600``; every worker's and restart's),
        else a random one (this process's, as its lessons are)."""
        if self.shared is not None:
            return hashlib.blake2b(self._secret.encode(), digest_size=32).digest() if self._secret else b""
        if self.directory is None:
            return os.urandom(32)
        path = self.directory / KEY_FILE
        partial = self.directory / f"{KEY_FILE}.{os.getpid()}.partial"
        try:
            try:
                key = read_own(path, 32)
            except FileNotFoundError:
                write_private(partial, os.urandom(32))
                try:
                    os.link(partial, path)  # (fails if another worker made it first: then that one is read)
                except FileExistsError:
                    pass
                finally:
                    partial.unlink(missing_ok=True)
                key = read_own(path, 32)
        except OSError as exc:
            logger.warning("cannot read or make %s: %s; witnesses are counted by this process alone", path, exc)
            return os.urandom(32)
        if len(key) != 32:
            logger.warning("%s is not a witness key; witnesses are counted by this process alone", path)
            return os.urandom(32)
        return key

    @property
    def active(self) -> bool:
        """True when lessons are kept anywhere beyond this process."""
        return self.book.enabled and (self.path is not None or self.shared is not None)

    def load(self) -> int:
        """Read the state file into the book (at start); how many lessons it held."""
        if self.path is None or not self.book.enabled:
            return 0
        try:
            raw = read_own(self.path, MAX_FILE_BYTES)
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
        found = document.get("evidence") if isinstance(document, dict) else None
        evidence = [entry for entry in map(Evidence.from_json, found if isinstance(found, list) else []) if entry]
        added += self.book.adopt_evidence(evidence[-MAX_PENDING:])
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
        pending = await self.shared.read_lessons(self.digest + ":e")
        if pending:
            self.book.adopt_evidence([entry for entry in map(_evidence, pending) if entry is not None])

    async def save(self) -> None:
        """Write the lessons learned and the evidence seen since the last save (to the shared
        store, then the whole book to the state file, whose other lessons and evidence (another
        worker's) are then adopted)."""
        for _ in range(2):  # (once more when another worker's evidence confirmed a lesson here)
            dirty, self.book.dirty = self.book.dirty, {}
            seen, self.book.dirty_evidence = self.book.dirty_evidence, {}
            if not dirty and not seen:
                return
            if self.shared is not None:
                if dirty:
                    fields = {orjson.dumps(list(key)): orjson.dumps(lesson.as_json()) for key, lesson in dirty.items()}
                    await self.shared.write_lessons(self.digest, fields)
                if seen:
                    found = {orjson.dumps(list(key)): orjson.dumps(entry.as_json()) for key, entry in seen.items()}
                    await self.shared.write_lessons(self.digest + ":e", found)
            if self.path is None:
                return
            async with self._lock:  # one writer of the file per process at a time
                lessons = [lesson.as_json() for lesson in self.book.lessons()]
                evidence = [entry.as_json() for entry in self.book.evidence()]
                stored = await anyio.to_thread.run_sync(self._write, lessons, evidence)
            self.book.adopt(stored[0])
            self.book.adopt_evidence(stored[1])

    def _write(self, lessons: list[JSONObject], evidence: list[JSONObject]) -> tuple[list[Lesson], list[Evidence]]:
        """Write the book, merged with what the file holds (another worker's lessons and evidence
        are kept); what the file held."""
        assert self.path is not None
        partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.partial")
        held: tuple[list[Lesson], list[Evidence]] = ([], [])
        try:
            held = self._stored()
            merged = {(lesson.tool, lesson.definition): lesson.as_json() for lesson in held[0]}
            merged.update({(lesson["tool"], lesson["definition"]): lesson for lesson in lessons})
            learned = {(str(x["tool"]), str(x["definition"])): _items_of(x) for x in merged.values()}
            pending = {_evidence_key(entry.as_json()): entry.as_json() for entry in held[1]}
            pending.update({_evidence_key(entry): entry for entry in evidence})
            kept = [
                entry
                for entry in pending.values()
                if entry["item"] not in learned.get((str(entry["tool"]), str(entry["definition"])), ())
            ][-MAX_PENDING:]
            document = orjson.dumps({"upstream": self.upstream, "lessons": list(merged.values()), "evidence": kept})
            write_private(partial, document)
            partial.replace(self.path)
        except OSError as exc:
            now = time.monotonic()
            if now - self._warned_at >= _WARN_EVERY:
                self._warned_at = now
                logger.warning("cannot write the state file %s: %s; lessons kept in memory", self.path, exc)
        return held

    def _stored(self) -> tuple[list[Lesson], list[Evidence]]:
        """The lessons and evidence the file holds now (what is neither is dropped)."""
        assert self.path is not None
        try:
            raw = read_own(self.path, MAX_FILE_BYTES)
            document = orjson.loads(raw) if len(raw) <= MAX_FILE_BYTES else {}
        except (OSError, orjson.JSONDecodeError):
            return [], []
        entries = document.get("lessons") if isinstance(document, dict) else None
        found = document.get("evidence") if isinstance(document, dict) else None
        lessons = [x for x in map(Lesson.from_json, entries if isinstance(entries, list) else []) if x is not None]
        evidence = [x for x in map(Evidence.from_json, found if isinstance(found, list) else []) if x is not None]
        return lessons, evidence[-MAX_PENDING:]


def _credentials(authorization: str | None, cookie: str | None) -> set[str]:
    """The credentials a witness is made of: the ``Authorization`` header's scheme (any case) and
    first word (a bearer token, Basic's user and password; what a lax server reads of
    ``Bearer TOKEN anything``) and each cookie (``name=value``) of the ``Cookie`` header; an empty
    header is a credential too."""
    found: set[str] = set()
    if authorization is not None:
        scheme, *rest = authorization.split() or [""]
        found.add("a\0" + scheme.lower() + " " + (rest[0] if rest else ""))
    if cookie is not None:
        pairs = {pair.strip() for pair in cookie.split(";")} - {""}
        found |= {"c\0" + pair for pair in pairs} if pairs else {"c\0"}
    return found


def _decoded(value: bytes) -> Lesson | None:
    try:
        return Lesson.from_json(orjson.loads(value))
    except orjson.JSONDecodeError:
        return None


def _evidence(value: bytes) -> Evidence | None:
    try:
        return Evidence.from_json(orjson.loads(value))
    except orjson.JSONDecodeError:
        return None


def _evidence_key(entry: JSONObject) -> tuple[str, ...]:
    return tuple(str(entry[name]) for name in ("tool", "definition", "item", "witness"))


def _items_of(lesson: JSONObject) -> tuple[str, ...]:
    """The items a stored lesson declares (:attr:`Evidence.item`)."""
    relax, nullable = lesson.get("relax"), lesson.get("nullable")
    places = tuple(str(p) for p in relax) if isinstance(relax, list) else ()
    places += tuple(NULLABLE + str(p) for p in nullable) if isinstance(nullable, list) else ()
    return ((DROP,) if lesson.get("drop_output_schema") is True else ()) + places
