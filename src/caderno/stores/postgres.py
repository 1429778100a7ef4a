"""PostgreSQL store: the same memory on a server database (extra ``postgres``).

psycopg 3 (async) with a connection pool. Connections are checked when taken
from the pool, so a server restart or a terminated backend costs one
reconnect, not an error storm. Every call is one transaction; a transaction
cut by a lost connection is rolled back by the server, so a turn is stored
whole or not at all.

Concurrency: appends lock their thread row (``SELECT … FOR UPDATE``), so two
writers of one thread queue and each turn's messages are contiguous;
working-memory updates lock the resource row for the read-merge-write.
Passwords never appear in errors or logs: URLs are shown redacted.

With the pgvector extension installed in the database (``CREATE EXTENSION
vector``, by whoever administers it), vectors are also stored in a pgvector
column with an HNSW index per dimension, and recall searches in the database
(``ops.SearchVectors``); without it, the bytes and the in-process search stay.
``?pgvector=off`` keeps the in-process search even where the extension is.

Behind a pooler in transaction mode (PgBouncer: ``?pooler=transaction``)
each transaction may get another server connection, so the store keeps no
session state: no server-side prepared statements, and the settings a
connection would otherwise keep (``search_path``, ``hnsw.iterative_scan``)
are set with ``SET LOCAL`` at the start of every transaction; a
one-statement operation that needs them runs in a transaction too. The only
advisory lock (migrations, new vector indexes) is transaction-scoped.

With ``?read_replica=URL`` (a hot standby of the same server), a batch in
which no operation writes and every operation names its resource reads from
the standby, unless this store wrote to one of those resources and the
standby has not replayed that write yet (read your writes: the primary's WAL
position after each write against the standby's ``pg_last_wal_replay_lsn()``;
a write that failed counts too, at the primary's position when it failed: a
duplicate id or a version conflict is state the next read must see). The
standby is also skipped while it lags more than ``STANDBY_MAX_LAG_SECONDS``
behind the primary, and left alone once it is no longer a standby (promoted):
see ``_replica``. Everything else — writes, global reads such as API key
lookups — goes to the primary, and so does every read while the standby is
down or failing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from ..core.clock import utcnow
from ..core.errors import MissingExtra, OutcomeUnknown, StorageBusy, StorageError, UsageError
from ..core.redact import redact_url, scrub, secrets_of, split_url
from . import _migrate, _postgres_plans, ops
from ._cache import KeyCache
from ._op import DialectPlans
from ._postgres_plans import PGVECTOR, POSTGRES
from ._postgres_schema import HNSW_MAX_DIM, LEDGER, MIGRATION_LOCK, MIGRATIONS, VECTOR_COLUMN, hnsw_index
from ._replica import PRIMARY_FLUSHED, StandbyGone, StandbyWatch
from ._sql import Dialect, ForeignKeyViolation, Handler, Q, UniqueViolation, run_plan, to_pyformat
from .capabilities.recall import vector_text

T = TypeVar("T")

_OUR_PARAMS = {"schema", "pool_size", "pgvector", "pooler", "read_replica"} | {
    "lock_timeout",
    "idle_in_transaction_timeout",
}

#: What ``?pooler=`` may say: ``none`` (direct connections, or a pooler in
#: session mode) or ``transaction`` (PgBouncer's transaction mode: no session state).
POOLERS = ("none", "transaction")

#: Seconds a statement waits for a lock (a thread's row, a resource's working memory, a notebook
#: page) before it fails with ``StorageBusy`` (``lock_timeout``; ``?lock_timeout=`` or
#: ``[database] lock_timeout``, 0: wait for ever). caderno's own transactions hold such a row for
#: milliseconds, so a wait this long means a stalled holder. It is longer than
#: ``IDLE_IN_TRANSACTION_TIMEOUT``: a writer queued behind a stopped process gets the lock once the
#: server ended that process's session, and fails only behind a holder that is busy, not stalled.
LOCK_TIMEOUT = 10.0
#: Seconds a session may sit in an open transaction without sending anything before the server
#: ends it, rolling its transaction back and freeing its locks
#: (``idle_in_transaction_session_timeout``; ``?idle_in_transaction_timeout=`` or
#: ``[database] idle_in_transaction_timeout``, 0: never). Between two statements of a transaction
#: caderno waits only on its own event loop (a merge, a JSON encoding: milliseconds), so 5 s of
#: silence is a stopped process (SIGSTOP, a long GC pause, a VM migration), not a slow one.
IDLE_IN_TRANSACTION_TIMEOUT = 5.0
#: Seconds the one retry of a write whose session the server ended waits for a lock. The
#: retry is for a session that died idle (a restart): its locks are free at once. A write
#: cut while it waited for a lock (``pg_terminate_backend`` of a blocked backend) finds
#: that lock still held: it fails within this bound instead of queueing again.
RETRY_LOCK_TIMEOUT = 1.0
#: A standby that failed is left alone this long before a read tries it again (seconds).
STANDBY_RETRY_SECONDS = 5.0
#: How long a read waits for a standby connection before the primary answers it (seconds).
STANDBY_CONNECT_TIMEOUT = 2.0
#: Resources remembered as written and maybe not replayed yet; past this many,
#: one watermark holds back every read until the standby passes it.
WRITTEN_MAX = 10_000

log = logging.getLogger(__name__)
#: The channel key changes are announced on (``NOTIFY``; the payload names the
#: keys table's schema, then the store that wrote: ``_keys_home``).
_KEYS_CHANNEL = "caderno_keys"
#: Seconds between attempts to reconnect the key listener (the cache is off meanwhile).
_LISTEN_RETRY = 5.0
#: How long the key listener may take to connect and ``LISTEN`` (seconds), as the first connection at open.
_LISTEN_CONNECT_TIMEOUT = 10.0
#: The channel queued embedding work is announced on (payload as ``_KEYS_CHANNEL``'s): the
#: key listener's session listens to it too, and wakes this process's embedding worker
#: (``watch_embedding_queue``). A notice only hurries a worker: each one also polls the queue.
_WORK_CHANNEL = "caderno_work"
#: The listener session's name in ``pg_stat_activity`` (the pool's connections are ``caderno``).
_LISTENER_NAME = "caderno-keys"
#: Seconds between two heartbeats of the key listener. A heartbeat is a
#: ``NOTIFY`` this store sends through its pool and must read back on its
#: LISTEN session; notices arrive in commit order, so one that comes back
#: proves every key notice committed before it arrived too. Its traffic also
#: keeps a NAT or load balancer from finding the session idle. Each costs one
#: statement per server; 2 s keeps the bound below short.
KEY_HEARTBEAT_SECONDS = 2.0
#: How long a heartbeat may take to come back (seconds) before the key cache
#: is switched off and the listener reconnected. A healthy one takes a few
#: milliseconds; 2 s leaves a loaded server room without trusting a cut
#: session long. A revoked key stops working within
#: ``KEY_HEARTBEAT_SECONDS + KEY_HEARTBEAT_TIMEOUT`` (4 s) even when its notice is lost,
#: and within ``KEY_MAX_AGE`` (10 s) if even this fails.
KEY_HEARTBEAT_TIMEOUT = 2.0
#: Where the keys table really is, the same on every server of a database
#: however its URL spells the schema (``?schema=public``, or none and the
#: server's search path). The schema's name, not the table's OID: an OID would
#: differ once the schema is dropped and made again under a running server,
#: which would then ignore every notice. Not ``current_schema()``: that is the
#: first schema of the path that exists (an empty ``"$user"`` schema), not
#: necessarily the one the table resolves in.
_KEYS_HOME = (
    "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'api_keys'::regclass"
)

DIALECT = Dialect(
    name="postgresql",
    ts=lambda value: value,
    for_update=" FOR UPDATE",
    # Identity values become visible at commit, not in draw order (see ``capabilities.recall.read_vectors``).
    feed_overlap=10_000,
    # A vector is stored only for a message that still exists: its row is
    # locked against a concurrent delete for the rest of the transaction.
    key_share=" FOR KEY SHARE",
    no_key_update=" FOR NO KEY UPDATE",
    # Item embedding workers lock their rows without ever waiting on another transaction.
    skip_locked=" FOR UPDATE SKIP LOCKED",
    # items.doc is the document parsed when written (migration 0022), a field read at a text[] path.
    # The item plans (_postgres_plans) write their own conditions on it; these serve the shared ones.
    json_doc="doc",
    json_field=lambda kind: {
        "kind": "jsonb_typeof(doc #> ?)",
        "string": "CASE WHEN jsonb_typeof(doc #> ?) = 'string' THEN doc #>> ? END",
        "number": "CASE jsonb_typeof(doc #> ?) WHEN 'number' THEN (doc #> ?)::numeric "
        "WHEN 'boolean' THEN ((doc #> ?)::boolean)::int END",
    }[kind],
    json_path=list,
)


async def _still_open(conn: Any) -> None:
    """The pool's check on checkout, without a round trip: has the server closed this connection?

    A server that ends an idle session (a restart, ``pg_terminate_backend``)
    sends its goodbye at once, so the socket is readable while the
    connection sits idle. Reading it raises, and the pool takes another
    connection; a live idle connection has nothing to read, and the check
    costs one ``select`` call. Anything that slips past (a goodbye arriving
    after this look) is handled by the retry in ``_tx``.
    """
    import select

    import psycopg

    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        conn.pgconn.consume_input()  # raises OperationalError when the server hung up
        if conn.pgconn.status != psycopg.pq.ConnStatus.OK:
            raise psycopg.OperationalError("the server closed this connection")


#: SQLSTATEs of a session the server ended (admin shutdown, crash shutdown,
#: cannot connect now): the statement that received one never ran.
_SESSION_ENDED = frozenset({"57P01", "57P02", "57P03"})
#: The server ended a session that sat idle in its transaction (``idle_in_transaction_session_timeout``):
#: whatever came next (a COMMIT included) was never run.
_IDLE_ENDED = "25P03"
#: A lock wait ran past ``lock_timeout``.
_LOCK_NOT_AVAILABLE = "55P03"
#: What a transaction that may wait long on the migration lock says first.
_NO_LOCK_TIMEOUT = "SET LOCAL lock_timeout TO 0"


class _Progress:
    """How far one attempt of a call got on its connection: whether its commit was on its way.

    An error before that point means the server rolled the work back; after
    it, the work may be committed (the server may have committed and died
    before its answer arrived).
    """

    __slots__ = ("autocommit", "committing")

    def __init__(self) -> None:
        self.committing = False
        self.autocommit = False  # the call was one statement, committing by itself

    def outcome_unknown(self, exc: Any) -> bool:
        """Whether ``exc`` (a driver error) leaves the commit's outcome unknown.

        A lost connection (no SQLSTATE: no word from the server) once the
        commit was sent. Also a session the server ended in the middle of a
        COMMIT: the commit record may have been written first. A one-statement
        call the server ended (57P0x) was cut while it ran, not committed:
        ``_tx`` retries it once.
        """
        if not self.committing or exc.sqlstate == _IDLE_ENDED:
            return False
        return exc.sqlstate is None or (exc.sqlstate in _SESSION_ENDED and not self.autocommit)


def one_statement(op: ops.Op[Any]) -> bool:
    """Whether ``op``'s plan sends at most one statement, so that alone in a batch it needs no transaction.

    The operation type says (``Op.one_statement``), but for an append longer
    than one chunk. ``tests/stores/test_one_statement.py`` runs every
    operation's plan and checks this against the statements it really sends.
    """
    if isinstance(op, ops.Append):
        return len(op.messages) <= _postgres_plans.APPEND_CHUNK  # one statement per chunk
    return op.one_statement


async def _run_on(
    conn: Any,
    fn: Callable[[Any], Awaitable[T]],
    *,
    alone: bool,
    local: str,
    snapshot: bool = False,
    progress: _Progress | None = None,
) -> T:
    """``fn(conn)`` in one transaction that first sets ``local`` — unless it is one statement that needs no setting.

    ``snapshot``: a read-only transaction on one snapshot (REPEATABLE READ), said on
    its BEGIN, not in a statement of its own (one round trip fewer).
    ``progress`` is told when the commit goes out.
    """
    progress = progress or _Progress()
    if alone and not local:
        progress.committing = progress.autocommit = True
        return await fn(conn)
    if snapshot:
        from psycopg import IsolationLevel

        await conn.set_isolation_level(IsolationLevel.REPEATABLE_READ)
        await conn.set_read_only(True)
    try:
        async with conn.transaction():
            if local:
                await conn.execute(local)
            result = await fn(conn)
            progress.committing = True  # what fails from here failed in the COMMIT
        return result
    finally:
        if snapshot:  # the pool lends this connection to writers next
            await _reset_characteristics(conn)


async def _reset_characteristics(conn: Any) -> None:
    """Back to the server's defaults for the next BEGIN; a connection that broke is dropped by the pool instead."""
    import psycopg

    try:
        await conn.set_isolation_level(None)
        await conn.set_read_only(None)
    except psycopg.Error:
        await conn.close()


async def _execute(conn: Any, q: Q) -> Any:
    """Run one query of a plan; constraint errors become the plan's own exceptions."""
    import psycopg

    try:
        if q.fetch == "many":
            if q.params:
                async with conn.cursor() as cur:
                    await cur.executemany(to_pyformat(q.sql), q.params)
            return None
        # Without parameters the text goes as written: a migration's script
        # (several statements, a '%' of its own) is not a template.
        cur = await (conn.execute(to_pyformat(q.sql), q.params, binary=q.binary) if q.params else conn.execute(q.sql))
        return await _fetched(cur, q.fetch)
    except psycopg.errors.UniqueViolation as exc:
        raise UniqueViolation(str(exc)) from exc
    except psycopg.errors.ForeignKeyViolation as exc:
        raise ForeignKeyViolation(str(exc)) from exc


async def _fetched(cur: Any, fetch: str) -> Any:
    """What a plan's query asked back from its cursor: every row, one, the row count, or nothing."""
    if fetch == "all":
        return await cur.fetchall()
    if fetch == "one":
        return await cur.fetchone()
    if fetch == "rowcount":
        return cur.rowcount
    return None


async def _run_pipelined(conn: Any, plans: list[Any]) -> list[Any]:
    """Read-only plans side by side: each round sends every unfinished plan's next statement in one
    pipeline (psycopg's pipeline mode) and hands each its result, so a batch of reads costs as many
    round trips as its longest plan has statements, not as all of them together.
    """
    results: list[Any] = [None] * len(plans)
    pending: dict[int, Q] = {}
    for i, plan in enumerate(plans):
        try:
            pending[i] = next(plan)
        except StopIteration as stop:
            results[i] = stop.value
    while pending:
        async with conn.pipeline():
            cursors = {i: await conn.execute(to_pyformat(q.sql), q.params, binary=q.binary) for i, q in pending.items()}
        for i, q in list(pending.items()):
            value = await _fetched(cursors[i], q.fetch)
            try:
                pending[i] = plans[i].send(value)
            except StopIteration as stop:
                results[i] = stop.value
                del pending[i]
    return results


#: The pools' names, as psycopg's pool logger shows them.
_PRIMARY_POOL, _STANDBY_POOL = "caderno", "caderno-standby"

#: The loggers psycopg writes connection errors to.
_DRIVER_LOGGERS = ("psycopg", "psycopg.pool")


def _pooler(value: str) -> bool:
    """Whether ``?pooler=value`` declares a transaction-mode pooler."""
    if value not in POOLERS:
        raise UsageError(f"pooler must be one of {', '.join(POOLERS)}, not {value!r}")
    return value == "transaction"


def _seconds(name: str, given: float | None, query: dict[str, str], default: float) -> float:
    """A timeout in seconds from a keyword, else the URL's ``?name=``, else ``default``; 0 turns it off."""
    value: object = given if given is not None else query.get(name, default)
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be a number of seconds, not {value!r}") from None
    if isinstance(value, bool) or not 0 <= seconds <= _MAX_TIMEOUT:
        raise UsageError(f"{name} must be between 0 (off) and {_MAX_TIMEOUT:g} seconds, not {value!r}")
    return seconds


#: The largest timeout accepted (seconds): PostgreSQL's own limit for both settings (2^31 - 1 ms).
_MAX_TIMEOUT = 2_147_483.0


def _ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _set(settings: list[tuple[str, str]], *, local: bool) -> str:
    """The ``SET`` statements of ``settings``: for the session, or (``local``) for the current transaction only."""
    scope = "SET LOCAL" if local else "SET"
    return "; ".join(f"{scope} {name} TO {value}" for name, value in settings)


class _ScrubLogs(logging.Filter):
    """Masks a store's secrets in the records of psycopg's own loggers (the pool logs connection errors)."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and f"{_STANDBY_POOL!r}" in record.getMessage():
            return False  # a standby's failures are the store's to report, once (``_standby_failed``)
        if self.secrets:
            record.msg, record.args = scrub(record.getMessage(), self.secrets), ()
            record.exc_info = record.exc_text = None  # a traceback would repeat the driver's text
        return True


#: The WAL position of a write whose position could not be read (its connection
#: died after the commit): later than any, until a later write's position replaces it.
_UNKNOWN_LSN = 1 << 64

#: SQL of the primary's WAL position (a whole number) once a write committed.
_WRITTEN_LSN = "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint"


class _Written:
    """The primary's WAL position after this store's writes that the standby may not have replayed yet.

    Per resource, plus one watermark for writes that name no single resource
    (and for everything once ``WRITTEN_MAX`` resources are remembered). A
    position is forgotten once the standby is seen past it.
    """

    def __init__(self) -> None:
        self.by_resource: dict[str, int] = {}
        self.everything = 0

    def note(self, resources: set[str] | None, lsn: int) -> None:
        if lsn != _UNKNOWN_LSN:  # a later position covers a write whose own was lost
            for rid, seen in self.by_resource.items():
                if seen == _UNKNOWN_LSN:
                    self.by_resource[rid] = lsn
            if self.everything == _UNKNOWN_LSN:
                self.everything = lsn
        if resources is None:
            self.everything = max(self.everything, lsn)
            return
        for rid in resources:
            self.by_resource[rid] = max(self.by_resource.get(rid, 0), lsn)
        if len(self.by_resource) > WRITTEN_MAX:
            self.everything = max(self.everything, *self.by_resource.values())
            self.by_resource.clear()

    def needed(self, resources: set[str]) -> int:
        """The position the standby must have replayed to answer a read of ``resources`` as the primary would."""
        return max([self.everything, *(self.by_resource.get(rid, 0) for rid in resources)])

    def replayed(self, lsn: int) -> None:
        """The standby was seen at ``lsn``: forget what it has."""
        self.by_resource = {rid: seen for rid, seen in self.by_resource.items() if seen > lsn}
        if self.everything <= lsn:
            self.everything = 0


def _resources(batch: Sequence[ops.Op[Any]]) -> set[str] | None:
    """The resources a batch names, or None when one of its operations names no single resource."""
    found = set()
    for op in batch:
        rid = getattr(op, "resource_id", None)
        if not isinstance(rid, str):
            return None
        found.add(rid)
    return found


class PostgresStore:
    """A store in a PostgreSQL database (optionally in one schema of it).

    Args:
        url: ``postgresql://user[:password]@host:port/db``; ``?schema=NAME``,
            ``?pool_size=N``, ``?pgvector=off``, ``?pooler=transaction`` and
            ``?read_replica=URL`` (URL-encoded; it may carry its own
            ``pooler``) are read here, other parameters go to libpq.
        schema: use (and create) this schema instead of ``public``.
        pool_size: most connections this process opens (default 10; as many again to a read replica).
        lock_timeout: seconds a statement waits for a lock before ``StorageBusy`` (``LOCK_TIMEOUT``;
            also ``?lock_timeout=``; 0: no bound).
        idle_in_transaction_timeout: seconds of silence inside a transaction before the server ends
            the session and frees its locks (``IDLE_IN_TRANSACTION_TIMEOUT``; also
            ``?idle_in_transaction_timeout=``; 0: no bound).
    """

    supports = ops.ALL

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_size: int | None = None,
        lock_timeout: float | None = None,
        idle_in_transaction_timeout: float | None = None,
    ) -> None:
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise MissingExtra("postgres", "psycopg and psycopg-pool") from None
        # Other parameters keep their exact text: libpq reads them as written
        # (re-encoding turned "options=-c statement_timeout=1234" into something it refuses).
        conninfo, query = split_url(url, _OUR_PARAMS)
        self._conninfo = "postgresql://" + conninfo.split("://", 1)[1] if "://" in conninfo else conninfo
        shown, _ = split_url(url, {"read_replica"})
        self.url = redact_url(shown)
        self._secrets = secrets_of(url)
        self._pooled = _pooler(query.get("pooler", "none"))
        self.keys = KeyCache()
        self._key_listener: asyncio.Task[None] | None = None
        #: The key cache answers until then (``time.monotonic()``): a heartbeat came back (``_beat_listener``).
        self._keys_trusted_until = 0.0
        self._store_id = uuid.uuid4().hex  # in this store's key notices, and its heartbeat channel
        self._keys_home = ""  # the keys table's schema (``_KEYS_HOME``), found at open
        self._beat_channel = f"caderno_beat_{self._store_id}"
        self._beats_sent = 0
        self._beats_seen = 0
        self._beat_arrived = asyncio.Event()
        self._on_work: Callable[[], None] | None = None  # ``watch_embedding_queue``
        self._work_queued = asyncio.Event()  # ``_announce_work`` sends a notice
        self._announcer: asyncio.Task[None] | None = None
        self._closing = False  # the listener's loops stop, even should a cancellation get lost
        #: The standby's conninfo (``?read_replica=``), and whether a transaction-mode pooler is in front of it.
        self._replica: str | None = None
        self._replica_url = ""
        self._replica_pooled = self._pooled
        replica = query.get("read_replica")
        if replica is not None:
            if not replica.startswith(("postgresql://", "postgres://")):
                raise UsageError("read_replica must be a postgresql:// URL, URL-encoded in the primary's query string")
            rest, extra = split_url(replica, _OUR_PARAMS)
            misplaced = sorted(set(extra) - {"pooler"})
            if misplaced:
                raise UsageError(
                    f"read_replica's URL cannot set {', '.join(misplaced)}: the standby follows the primary's URL"
                )
            self._replica = "postgresql://" + rest.split("://", 1)[1]
            self._replica_url = redact_url(replica)
            self._replica_pooled = _pooler(extra.get("pooler", query.get("pooler", "none")))
            self._secrets = sorted({*self._secrets, *secrets_of(replica)}, key=lambda s: (-len(s), s))
            self.url += ("&" if "?" in shown else "?") + "read_replica=" + quote(self._replica_url, safe=":/@*")
        self.schema = schema or query.get("schema")
        if self.schema is not None and not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", self.schema):
            raise UsageError(f"schema name {self.schema!r} must be lowercase letters, digits and '_'")
        try:
            self.pool_size = int(pool_size or query.get("pool_size") or 10)
        except ValueError:
            raise UsageError(f"pool_size must be a whole number, not {query.get('pool_size')!r}") from None
        if not 1 <= self.pool_size <= 1000:
            raise UsageError(f"pool_size must be between 1 and 1000, not {self.pool_size}")
        if query.get("pgvector", "auto") not in ("auto", "off"):
            raise UsageError(f"pgvector must be 'auto' or 'off', not {query['pgvector']!r}")
        self._use_pgvector = query.get("pgvector", "auto") == "auto"
        #: Seconds (0: off): ``LOCK_TIMEOUT`` and ``IDLE_IN_TRANSACTION_TIMEOUT`` unless the URL or a keyword says.
        self.lock_timeout = _seconds("lock_timeout", lock_timeout, query, LOCK_TIMEOUT)
        self.idle_in_transaction_timeout = _seconds(
            "idle_in_transaction_timeout", idle_in_transaction_timeout, query, IDLE_IN_TRANSACTION_TIMEOUT
        )
        #: The schema of the vector extension once found at open (None: in-process search).
        self.pgvector_schema: str | None = None
        self._hnsw_dims: set[int] = set()
        self._iterative_scan = False
        #: What every transaction needs set (``search_path``, ``hnsw.iterative_scan``): found at open.
        self._settings: list[tuple[str, str]] = []
        self._log_filter = _ScrubLogs(self._secrets)
        self._pool: Any = None
        self._open_lock = asyncio.Lock()
        self._written = _Written()
        self._standby_pool: Any = None
        self._standby_lock = asyncio.Lock()
        self._standby_down_until = 0.0
        self._standby_watch = StandbyWatch(self._replica_url)
        self._standby_failing = False

    # -- connections ---------------------------------------------------------------

    async def open(self) -> None:
        async with self._open_lock:
            if self._pool is not None:
                return
            for name in _DRIVER_LOGGERS:
                logging.getLogger(name).addFilter(self._log_filter)

            import psycopg
            import psycopg_pool

            failure = None
            try:
                await self._first_connect()
            except psycopg.Error as exc:
                failure = f"cannot open PostgreSQL at {self.url}: {scrub(str(exc), self._secrets)}"
            if failure is not None:
                raise StorageError(failure)
            pool = self._new_pool(self._conninfo, pooled=self._pooled, name=_PRIMARY_POOL)
            try:
                await pool.open(wait=True, timeout=30)
                await self._migrate(pool)
            except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                failure = f"cannot open PostgreSQL at {self.url}: {scrub(str(exc), self._secrets)}"
            except BaseException:
                await pool.close()
                raise
            if failure is not None:  # raised outside the except: no chained driver error
                await pool.close()
                raise StorageError(failure)
            self._pool = pool
            self._closing = False
            # NOTIFY passes a transaction pooler (only LISTEN needs a session): sent either way.
            self._announcer = asyncio.create_task(self._announce_work(), name="caderno-work-notices")
            if not self._pooled:  # LISTEN needs a session; behind a transaction pooler keys are read each time
                self._key_listener = asyncio.create_task(self._listen_for_keys(), name="caderno-keys-listener")

    def watch_embedding_queue(self, wake: Callable[[], None] | None) -> None:
        """Call ``wake`` (on the event loop) when another process announces embedding work it queued; None: stop.

        ``Memory.run_background`` sets it to wake its embedding worker. The
        notices come on the key listener's session (``_WORK_CHANNEL``): none
        behind a transaction pooler, or while that session reconnects — the
        worker's poll (``caderno.memory.engines.indexer.POLL_SECONDS``) finds the work then.
        """
        self._on_work = wake

    async def _announce_work(self) -> None:
        """Tell every listening process that embedding work was queued, once per burst of appends.

        After the commit, not in the appending transaction: an append alone is
        one statement without BEGIN/COMMIT, and a ``NOTIFY`` in it would cost
        it a transaction's round trips. Appends that commit while a notice is
        on its way share the next one. A notice lost (this process killed
        between the commit and it, the database away) only leaves the work to
        the workers' poll.
        """
        import psycopg
        import psycopg_pool

        while not self._closing:
            await self._work_queued.wait()
            self._work_queued.clear()
            try:
                async with self._pool.connection() as conn:
                    await conn.execute("SELECT pg_notify(%s, %s)", (_WORK_CHANNEL, self._keys_notice))
            except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                log.debug("embedding work notice not sent (the workers' poll finds the work): %s", type(exc).__name__)

    #: ``KEY_HEARTBEAT_SECONDS``, ``KEY_HEARTBEAT_TIMEOUT`` and ``_LISTEN_RETRY``, per store (a test makes them short).
    key_heartbeat_seconds = KEY_HEARTBEAT_SECONDS
    key_heartbeat_timeout = KEY_HEARTBEAT_TIMEOUT
    key_listen_retry = _LISTEN_RETRY

    @property
    def _keys_live(self) -> bool:
        """The key cache may answer: the listener's last heartbeat came back recently enough."""
        return time.monotonic() < self._keys_trusted_until

    @property
    def _keys_notice(self) -> str:
        """This store's key notice: the keys table's schema, then this store (a schema's name may hold spaces)."""
        return f"{self._keys_home} {self._store_id}"

    async def _listen_for_keys(self) -> None:
        """Keep the key cache honest: ``LISTEN`` on one session of its own; any key change clears the cache.

        A key written by any process on the same keys table (``_KEYS_CHANNEL``,
        sent in the writing transaction, so delivered at its commit; matched
        on ``_KEYS_HOME``, not on how a URL spells the schema) clears the
        cache. The cache answers only while this session proves alive: a
        session can die without a word (a NAT or load balancer that forgets
        it leaves the socket open and silent for hours), so
        ``_beat_listener`` probes it, and when a heartbeat does not come back
        the cache is off at once and the session is made again. Meanwhile,
        and until a new session's first heartbeat is back, keys are read
        from the database each time (reconnection retried every
        ``_LISTEN_RETRY`` seconds).
        """
        import psycopg

        while not self._closing:
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation (close's)
                # that lands as the awaited call finishes.
                async with asyncio.timeout(_LISTEN_CONNECT_TIMEOUT):
                    conn = await self._listener_session()
                async with conn:
                    self.keys.clear()  # changes made while nobody listened
                    if self._on_work is not None:
                        self._on_work()  # and work queued meanwhile
                    reader = asyncio.create_task(self._read_notices(conn), name="caderno-keys-notices")
                    try:
                        await self._beat_listener(reader)
                    finally:
                        reader.cancel()
                        await asyncio.gather(reader, return_exceptions=True)
            except (psycopg.Error, TimeoutError) as exc:
                why = scrub(str(exc), self._secrets) or "no answer in time"
                log.info("key cache off until the listener reconnects: %s", why)
            finally:
                self._keys_trusted_until = 0.0
                self.keys.clear()
            await asyncio.sleep(self.key_listen_retry)

    async def _listener_session(self) -> Any:
        """A connection of its own that listens to key notices and to this store's heartbeats."""
        import psycopg

        conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True, application_name=_LISTENER_NAME)
        try:
            await conn.execute(f"LISTEN {_KEYS_CHANNEL}")
            await conn.execute(f"LISTEN {_WORK_CHANNEL}")
            await conn.execute(f"LISTEN {self._beat_channel}")
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _read_notices(self, conn: Any) -> None:
        try:
            async for note in conn.notifies():
                if note.channel == self._beat_channel:
                    self._beats_seen = max(self._beats_seen, int(note.payload))
                    self._beat_arrived.set()
                    continue
                home, _, sender = note.payload.rpartition(" ")
                if note.channel == _WORK_CHANNEL:
                    if home == self._keys_home and sender != self._store_id and self._on_work is not None:
                        self._on_work()  # this store's own appends wake its worker directly
                    continue
                if home == self._keys_home and sender != self._store_id:
                    self.keys.clear()  # another store changed a key (this one cleared at its commit)
        finally:
            self._beat_arrived.set()  # a heartbeat waiting for this reader stops waiting

    async def _beat_listener(self, reader: asyncio.Task[None]) -> None:
        """Send heartbeats through the pool and trust the cache while they come back; return when one does not.

        Each heartbeat that comes back trusts the cache until the next one is
        due back (sent + interval + timeout): should this loop itself stall,
        the trust runs out on its own.
        """
        while not self._closing:
            self._beats_sent += 1
            beat, sent = self._beats_sent, time.monotonic()
            try:
                async with asyncio.timeout(self.key_heartbeat_timeout):
                    await self._heartbeat(beat, reader)
            except TimeoutError:
                self._keys_trusted_until = 0.0
                self.keys.clear()
                log.warning(
                    "the key listener did not answer a heartbeat within %.1f s: key cache off, reconnecting",
                    self.key_heartbeat_timeout,
                )
                return
            if reader.done():
                return reader.result()  # the session ended (its error, if any, goes up)
            self._keys_trusted_until = sent + self.key_heartbeat_seconds + self.key_heartbeat_timeout
            await asyncio.wait({reader}, timeout=max(0.0, sent + self.key_heartbeat_seconds - time.monotonic()))
            if reader.done():
                return reader.result()

    async def _heartbeat(self, beat: int, reader: asyncio.Task[None]) -> None:
        """Notify this store's heartbeat channel through the pool; wait until the listener reads it back."""
        async with self._pool.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (self._beat_channel, str(beat)))
        while self._beats_seen < beat and not reader.done():
            self._beat_arrived.clear()
            await self._beat_arrived.wait()

    async def _find_key(self, op: ops.FindKey, read: Callable[[], Awaitable[list[Any]]]) -> Any:
        """A live key, from the cache while the listener is alive (``_listen_for_keys``): every request asks."""
        if self._keys_live:
            hit = self.keys.get(op.token_hash)
            if hit is not None:
                return hit
        epoch, read_at = self.keys.epoch(), time.monotonic()
        (found,) = await read()
        if found is not None and self._keys_live:
            self.keys.fill(op.token_hash, found, epoch, read_at=read_at)
        return found

    def _new_pool(self, conninfo: str, *, pooled: bool, name: str) -> Any:
        """A pool (not opened) whose connections have the settings found at open, as long as they keep them.

        Behind a transaction-mode pooler a server connection serves any
        client between two transactions, so nothing is set on it here and
        nothing is prepared on it: ``_local`` sets the settings in each transaction.
        """
        from psycopg_pool import AsyncConnectionPool

        session = "" if pooled else _set(self._settings + self._timeouts(), local=False)

        async def configure(conn: Any) -> None:
            if session:
                await conn.execute(session)

        kwargs: dict[str, Any] = {"autocommit": True, "application_name": "caderno"}
        if pooled:
            kwargs["prepare_threshold"] = None  # a prepared statement would live on one server connection
        return AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=self.pool_size,
            open=False,
            kwargs=kwargs,
            configure=configure,
            check=_still_open,
            name=name,
        )

    def _local(self, pooled: bool) -> str:
        """What a transaction sets first on a pooled connection (empty: the connection keeps it, or nothing to set).

        Behind a transaction pooler that includes the timeouts, so every call
        runs in a transaction (as with a ``?schema=``): a ``SET`` on the
        session would reach whichever client the pooler hands it to next.
        """
        return _set(self._settings + self._timeouts(), local=True) if pooled else ""

    def _timeouts(self, *, lock: float | None = None) -> list[tuple[str, str]]:
        """The lock wait and the idle-in-transaction bound as settings (``lock``: another lock wait)."""
        lock = self.lock_timeout if lock is None else lock
        return [
            ("lock_timeout", f"'{round(lock * 1000)}ms'"),
            ("idle_in_transaction_session_timeout", f"'{round(self.idle_in_transaction_timeout * 1000)}ms'"),
        ]

    async def _first_connect(self) -> None:
        import psycopg

        # Connect once directly for a clear, immediate error (the pool would
        # retry in the background instead). Behind a transaction-mode pooler
        # this is a client connection like any other: what it runs (CREATE
        # SCHEMA, lookups) keeps nothing on the server connection it got.
        failure = None
        try:
            extra: dict[str, Any] = {"prepare_threshold": None} if self._pooled else {}
            conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True, connect_timeout=10, **extra)
        except psycopg.Error as exc:
            failure = f"cannot connect to PostgreSQL at {self.url}: {scrub(str(exc), self._secrets)}"
        if failure is not None:  # raised outside the except: the driver's error (and its text) is not chained
            raise StorageError(failure)
        try:
            if self.schema:
                await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            if self._use_pgvector:
                row = await (
                    await conn.execute(
                        "SELECT n.nspname, e.extversion FROM pg_extension e "
                        "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
                    )
                ).fetchone()
                if row is not None:
                    self.pgvector_schema = row[0]
                    version = tuple(int(p) for p in re.findall(r"\d+", row[1])[:2])
                    self._iterative_scan = version >= (0, 8)  # hnsw.iterative_scan came in 0.8
            self._settings = await self._find_settings(conn)
        finally:
            await conn.close()

    async def _find_settings(self, conn: Any) -> list[tuple[str, str]]:
        """What each connection (or, behind a pooler, each transaction) sets: the search path, the HNSW scan."""
        settings = []
        vector_schema = self.pgvector_schema
        if self.schema:
            # The extension's schema follows ours: its type and operators resolve, our tables come first.
            path = _ident(self.schema)
            if vector_schema and vector_schema != self.schema:
                path += f", {_ident(vector_schema)}"
            settings.append(("search_path", path))
        elif vector_schema:  # the server's search path, plus the extension's schema if it lacks it
            row = await (
                await conn.execute(
                    "SELECT current_setting('search_path'), %s = ANY(current_schemas(false))", (vector_schema,)
                )
            ).fetchone()
            if not row[1]:
                server = row[0].strip()
                has_path = server not in ("", '""')
                settings.append(
                    ("search_path", f"{server}, {_ident(vector_schema)}" if has_path else _ident(vector_schema))
                )
        if self._iterative_scan:
            # Filtered HNSW scans (one resource, one thread) go on until k rows pass, in exact order.
            settings.append(("hnsw.iterative_scan", "strict_order"))
        return settings

    async def _migrate(self, pool: Any) -> None:
        local = self._local(self._pooled)
        async with pool.connection() as conn, conn.transaction():
            if local:
                await conn.execute(local)
            # Transaction-scoped, as every lock here: a pooler may hand the next transaction another session.
            # Waited for without a bound: another process's migration may take long, and is not stalled.
            await conn.execute(_NO_LOCK_TIMEOUT)
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            execute = functools.partial(_execute, conn)
            done = await run_plan(_migrate.applied(MIGRATIONS, LEDGER), execute)
            await run_plan(_migrate.apply(MIGRATIONS, done, utcnow()), execute)
            self._keys_home = (await (await conn.execute(_KEYS_HOME)).fetchone())[0]
            if self.pgvector_schema is not None:
                await self._vector_setup(conn)
        if self.pgvector_schema is not None:
            self.supports = ops.ALL | ops.VECTOR_SEARCH

    async def _vector_setup(self, conn: Any) -> None:
        """Make the pgvector column complete: add it if the extension came after
        migration 0009, fill rows stored without it, index their dimensions."""
        await conn.execute(VECTOR_COLUMN)
        while rows := await (
            await conn.execute("SELECT resource_id, id, dim, vector FROM embeddings WHERE vec IS NULL LIMIT 1000")
        ).fetchall():
            async with conn.cursor() as cur:
                await cur.executemany(
                    "UPDATE embeddings SET vec = %s::vector WHERE resource_id = %s AND id = %s",
                    [(vector_text(bytes(r[3])), r[0], r[1]) for r in rows],
                )
            for dim in {r[2] for r in rows}:
                await self._index_dim(conn, dim)
        indexed = await (
            await conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
                "AND indexname LIKE 'embeddings\\_hnsw\\_%'"
            )
        ).fetchall()
        self._hnsw_dims |= {int(r[0].rsplit("_", 1)[1]) for r in indexed}

    @staticmethod
    async def _index_dim(conn: Any, dim: int) -> None:
        """The HNSW index of a dimension, made before its first vector is stored (idempotent)."""
        if dim <= HNSW_MAX_DIM:
            await conn.execute(hnsw_index(dim))

    async def _ensure_indexes(self, batch: Sequence[ops.Op[Any]]) -> None:
        new = {op.dim for op in batch if isinstance(op, ops.FinishEmbeddings) and op.dim not in self._hnsw_dims}
        if not new:
            return

        async def run(conn: Any) -> None:
            await conn.execute(_NO_LOCK_TIMEOUT)  # behind a migration or another index, as in ``_migrate``
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            for dim in sorted(new):
                await self._index_dim(conn, dim)

        await self._tx(run)
        self._hnsw_dims |= new

    async def close(self) -> None:
        self._closing = True
        for task in (self._key_listener, self._announcer):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._key_listener = self._announcer = None
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
        if self._standby_pool is not None:
            standby, self._standby_pool = self._standby_pool, None
            await standby.close()
        for name in _DRIVER_LOGGERS:
            logging.getLogger(name).removeFilter(self._log_filter)

    async def _tx(
        self,
        fn: Callable[[Any], Awaitable[T]],
        *,
        write: bool = True,
        alone: bool = False,
        after: Callable[[Any], Awaitable[None]] | None = None,
        snapshot: bool = False,
    ) -> T:
        """Run ``fn(conn)`` on the primary, in one transaction unless it is a single statement (``alone``).

        ``after(conn)`` runs on the same connection once ``fn``'s work is
        committed, outside the retry: it must not raise.

        Connections are checked when taken from the pool without a round trip
        (``_still_open`` looks at the socket only). A connection that died while idle —
        a server restart, ``pg_terminate_backend`` — is found by the call that
        uses it: the pool drops it, and the call is retried once on a fresh
        connection, after the pool checked its idle connections (only then, so
        the steady state stays one round trip). Reads always; writes only when the server said it had
        ended the session (SQLSTATE class 57P0x) before their commit was sent:
        such a write was rolled back. Its retry waits at most
        ``RETRY_LOCK_TIMEOUT`` for a lock, so a write cut while it queued on a
        lock another session still holds fails at once rather than queueing
        again. A write cut any other way is not retried; its caller gets a
        ``StorageError`` (nothing stored) or, when the connection died with
        the commit on its way, ``OutcomeUnknown`` (maybe stored). A lock wait
        past the lock timeout is ``StorageBusy``.

        Writes run in their own task: a cancelled caller does not abandon a
        transaction halfway (it commits or rolls back on its own).
        """
        import psycopg

        if self._pool is None:
            await self.open()

        local = self._local(self._pooled)
        retry_wait = min(self.lock_timeout or RETRY_LOCK_TIMEOUT, RETRY_LOCK_TIMEOUT)
        # Behind a pooler ``local`` already set the timeouts; this later SET LOCAL wins.
        retry_local = "; ".join(filter(None, [local, _set(self._timeouts(lock=retry_wait)[:1], local=True)]))
        progress = _Progress()

        async def attempt(local: str) -> T:
            async with self._pool.connection() as conn:
                result = await _run_on(conn, fn, alone=alone, local=local, snapshot=snapshot, progress=progress)
                if after is not None:
                    await after(conn)
                return result

        async def run() -> T:
            nonlocal progress
            failure: tuple[type[StorageError], str] | None = None
            retried = False
            try:
                try:
                    return await attempt(local)
                except psycopg.OperationalError as exc:
                    if write and (exc.sqlstate not in _SESSION_ENDED or progress.outcome_unknown(exc)):
                        raise
                    # Its siblings likely died with it (a restart): check the idle
                    # ones now, once, so the retry gets a live connection.
                    await self._pool.check()
                    progress, retried = _Progress(), True
                    return await attempt(retry_local if write else local)
            except (psycopg.Error, UniqueViolation, ForeignKeyViolation) as exc:
                failure = self._failure(exc, unknown=write and progress.outcome_unknown(exc), retried=retried)
            # Raised outside the except: the driver's exception may quote the
            # connection string, so it is neither the cause nor the context.
            raise failure[0](failure[1])

        if not write:
            return await run()
        return await asyncio.shield(asyncio.ensure_future(run()))

    def _failure(self, exc: Exception, *, unknown: bool, retried: bool) -> tuple[type[StorageError], str]:
        """The caderno error a driver error becomes, and its sentence (the driver's text scrubbed).

        ``retried``: it is the error of the retry of a call whose session the server ended.
        """
        said = scrub(str(exc), self._secrets)
        if unknown:
            return OutcomeUnknown, (
                f"PostgreSQL on {self.url}: the connection was lost after this write was sent to be committed, "
                f"so it may or may not be stored ({said}). Retry it with the same Idempotency-Key, "
                f"or read before writing it again"
            )
        if getattr(exc, "sqlstate", None) == _LOCK_NOT_AVAILABLE and retried:
            return StorageBusy, (
                f"PostgreSQL on {self.url}: this call's session was ended while it waited for a lock, and "
                f"another transaction still holds that lock; nothing was stored. Retry later"
            )
        if getattr(exc, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
            return StorageBusy, (
                f"PostgreSQL on {self.url}: another transaction held a lock this call needs for more than "
                f"{self.lock_timeout:g} s (a stalled process, usually); nothing was stored. Retry later"
            )
        return StorageError, f"PostgreSQL error on {self.url}: {said}"

    # -- the port ------------------------------------------------------------------------

    async def batch(self, batch: Sequence[ops.Op[Any]]) -> list[Any]:
        batch = list(batch)
        if batch and self._pool is None:
            await self.open()  # first: what open finds (the vector extension) decides the handlers
        plans = [self._handler(op) for op in batch]
        if not batch:
            return []
        if self.pgvector_schema is not None:
            await self._ensure_indexes(batch)
        writes = any(op.writes for op in batch)

        snapshot = not writes and len(batch) > 1  # several reads: one snapshot

        keys_changed = any(isinstance(op, ops.CreateKey | ops.RevokeKey) for op in batch)

        async def run(conn: Any) -> list[Any]:
            if snapshot:  # independent reads: their statements go out together, round by round
                return await _run_pipelined(conn, [plan(DIALECT, op) for plan, op in zip(plans, batch, strict=True)])
            execute = functools.partial(_execute, conn)
            results = [await run_plan(plan(DIALECT, op), execute) for plan, op in zip(plans, batch, strict=True)]
            if keys_changed:  # every other store's cache, at this transaction's commit
                await execute(Q("SELECT pg_notify(?, ?)", (_KEYS_CHANNEL, self._keys_notice)))
            return results

        if len(batch) == 1 and isinstance(batch[0], ops.FindKey):  # on the primary, as every key read
            return [await self._find_key(batch[0], lambda: self._tx(run, write=False, alone=True))]
        if keys_changed:
            try:
                return await self._dispatch(batch, run, writes=True, alone=False, snapshot=False)
            finally:  # this store's own cache at once (a lookup that read before the commit cannot refill it)
                self.keys.clear()
        # A single one-statement operation is atomic on its own: no BEGIN/COMMIT round trips.
        alone = len(batch) == 1 and one_statement(batch[0])
        results = await self._dispatch(batch, run, writes=writes, alone=alone, snapshot=snapshot)
        if any(op.queues_work for op in batch):
            self._work_queued.set()  # committed: ``_announce_work`` tells the other processes
        return results

    async def _dispatch(
        self,
        batch: list[ops.Op[Any]],
        run: Callable[[Any], Awaitable[list[Any]]],
        *,
        writes: bool,
        alone: bool,
        snapshot: bool,
    ) -> list[Any]:
        """Run a batch on the primary, or its reads on the standby when they may go there (``_read_standby``)."""
        if self._replica is None:
            return await self._tx(run, write=writes, alone=alone, snapshot=snapshot)
        resources = _resources(batch)
        if not writes:
            if resources is not None:  # a global read (API keys, every resource) stays on the primary
                results = await self._read_standby(run, alone=alone, resources=resources, snapshot=snapshot)
                if results is not None:
                    return results
            return await self._tx(run, write=False, alone=alone, snapshot=snapshot)

        async def note(conn: Any) -> None:
            import psycopg

            try:
                lsn = (await (await conn.execute(_WRITTEN_LSN)).fetchone())[0]
            except psycopg.Error:  # committed, but where is unknown: the next write's position will tell
                lsn = _UNKNOWN_LSN
            self._written.note(resources, lsn)

        try:
            return await self._tx(run, write=True, alone=alone, after=note)
        except StorageError:  # it may have committed (the connection died): read it back from the primary
            self._written.note(resources, _UNKNOWN_LSN)
            raise
        except Exception:
            # Refused on the primary (a message id already stored, a version conflict): what it ran
            # into may not be on the standby yet, and the caller's next read (the stored turn of an
            # idempotency key, the current version) must see it.
            failed = await self._primary_position(_WRITTEN_LSN)
            self._written.note(resources, _UNKNOWN_LSN if failed is None else failed)
            raise

    # -- the standby ---------------------------------------------------------------------

    async def _read_standby(
        self, fn: Callable[[Any], Awaitable[list[Any]]], *, alone: bool, resources: set[str], snapshot: bool = False
    ) -> list[Any] | None:
        """``fn``'s results read on the standby, or None when the primary must answer.

        The primary answers when this store wrote to one of ``resources`` and
        the standby has not replayed that write yet, and while the standby
        is down or failing (logged once, until a read succeeds there again).
        A read is never half-done: a failure on the standby reruns it whole on the primary.
        """
        import psycopg

        if time.monotonic() < self._standby_down_until:
            return None
        failure: str | None = None
        lost = False
        results: list[Any] | None = None
        try:
            pool = await self._standby()
            if pool is None:
                return None
            async with pool.connection(timeout=STANDBY_CONNECT_TIMEOUT) as conn:
                watch, seen = self._standby_watch, self._standby_watch.replayed
                # Bounded: while the primary is down the standby still answers (without a new sample).
                sample = functools.partial(self._primary_position, PRIMARY_FLUSHED, timeout=STANDBY_CONNECT_TIMEOUT)
                ready = await watch.ready(conn, self._written.needed(resources), sample)
                if watch.replayed != seen:
                    self._written.replayed(watch.replayed)
                if not ready:
                    return None
                local = self._local(self._replica_pooled)
                results = await _run_on(conn, fn, alone=alone, local=local, snapshot=snapshot)
        except StandbyGone as exc:  # promoted: left alone like a standby that is down, and checked again later
            failure, lost = str(exc), True
        except psycopg.OperationalError as exc:  # cannot connect, connection lost, pool timed out
            failure, lost = scrub(str(exc), self._secrets), True
        except psycopg.Error as exc:  # the statement failed there (a recovery conflict…): the primary answers it
            failure = scrub(str(exc), self._secrets)
        if failure is not None:
            await self._standby_failed(failure, lost=lost)
            return None
        if self._standby_failing:
            self._standby_failing = False
            log.info("read replica %s answers again: reads go to it", self._replica_url)
        return results

    async def _standby(self) -> Any:
        """The standby's pool, opened on first use; None while it is left alone after a failure.

        While one read opens it, the others go to the primary rather than wait.
        """
        if self._standby_pool is not None or self._standby_lock.locked():
            return self._standby_pool
        async with self._standby_lock:
            if self._standby_pool is None and time.monotonic() >= self._standby_down_until:
                assert self._replica is not None
                import psycopg

                # One plain connection first: a standby that is down refuses it at once,
                # where the pool would retry until its timeout.
                extra: dict[str, Any] = {"prepare_threshold": None} if self._replica_pooled else {}
                probe = await psycopg.AsyncConnection.connect(
                    self._replica, autocommit=True, connect_timeout=round(STANDBY_CONNECT_TIMEOUT), **extra
                )
                await probe.close()
                pool = self._new_pool(self._replica, pooled=self._replica_pooled, name=_STANDBY_POOL)
                try:
                    await pool.open(wait=True, timeout=STANDBY_CONNECT_TIMEOUT)
                except BaseException:
                    await pool.close()
                    raise
                self._standby_pool = pool
            return self._standby_pool

    async def _primary_position(self, sql: str, *, timeout: float | None = None) -> int | None:
        """The primary's WAL position ``sql`` reads, or None when it cannot be read within ``timeout`` seconds."""

        async def read(conn: Any) -> int:
            position: int = (await (await conn.execute(sql)).fetchone())[0]
            return position

        try:
            return await asyncio.wait_for(self._tx(read, write=False, alone=True), timeout)
        except (StorageError, TimeoutError):
            return None

    async def _standby_failed(self, failure: str, *, lost: bool) -> None:
        if not self._standby_failing:
            self._standby_failing = True
            log.warning("read replica %s failed, reads go to the primary: %s", self._replica_url, failure)
        if lost:  # closed, so that its pool stops reconnecting in the background; tried again later
            self._standby_down_until = time.monotonic() + STANDBY_RETRY_SECONDS
            self._standby_watch.forget()
            pool, self._standby_pool = self._standby_pool, None
            if pool is not None:
                await pool.close()

    @property
    def plans(self) -> DialectPlans:
        """Where the store finds each operation's plan: with the vector extension's plans once open found it."""
        return POSTGRES if self.pgvector_schema is None else PGVECTOR

    def _handler(self, op: ops.Op[Any]) -> Handler:
        handler = self.plans.handler(type(op))
        if handler is None:
            raise UsageError(f"{type(self).__name__} does not support {type(op).__name__}")
        return handler
