"""What a PostgreSQL store knows of its read replica: whether it still is a standby, and how far behind it is.

``PostgresStore`` sends a read to the standby only when the standby answers
as the primary would, up to a bounded delay:

- **Still a standby.** A promoted standby answers ``pg_is_in_recovery()``
  false but keeps its last ``pg_last_wal_replay_lsn()``: it is a server of
  its own, frozen at the promotion as far as this cluster is concerned.
  Every ``STANDBY_CHECK_SECONDS`` (and before any read whose resource this
  store wrote) the store asks; a server that is no longer in recovery is
  left alone like a standby that is down (``StandbyGone``), and tried again
  after ``STANDBY_RETRY_SECONDS`` — it may be a standby again by then.
- **Not too far behind.** Each check also samples the primary's flushed WAL
  position with the time it was read. A sample the standby has not replayed
  yet is the oldest write the standby may be missing; once that sample is
  older than ``STANDBY_MAX_LAG_SECONDS`` the standby is skipped for the
  read. An idle primary writes nothing new, so a standby that replayed
  everything has no pending sample and no lag, however old its last replayed
  transaction is (which is what ``now() - pg_last_xact_replay_timestamp()``
  would wrongly count). A read on the standby therefore misses no write
  older than ``STANDBY_MAX_LAG_SECONDS + STANDBY_CHECK_SECONDS``.
- **Read your writes and what your writes ran into**: the store's own
  bookkeeping (``_Written`` in ``postgres.py``), checked here against the
  position the standby was last seen at.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.errors import InternalSignal

__all__ = [
    "STANDBY_CHECK_SECONDS",
    "STANDBY_MAX_LAG_SECONDS",
    "StandbyGone",
    "StandbyWatch",
]

log = logging.getLogger("caderno.stores.postgres")

#: How often a store re-reads its standby's state and the primary's position
#: while reads go there (seconds): one tiny statement on each server per
#: interval, whatever the read rate, and a promotion is seen within it.
STANDBY_CHECK_SECONDS = 1.0
#: How far behind the primary a standby may be and still answer reads (seconds).
#: A healthy streaming standby replays within milliseconds; seconds of lag mean
#: replay is paused, conflicting with queries (PostgreSQL lets that last up to
#: ``max_standby_streaming_delay``, 30 s by default) or cut from the primary.
#: 3 s keeps a read that another server's write preceded by more than
#: ``STANDBY_MAX_LAG_SECONDS + STANDBY_CHECK_SECONDS`` (4 s) from missing it.
STANDBY_MAX_LAG_SECONDS = 3.0
#: Primary samples kept while the standby is behind; past this, the two oldest
#: merge (the older time, the newer position), which can only overstate the lag.
_SAMPLES_MAX = 64

#: SQL of a standby's state: still in recovery, and how far it has replayed (NULL on a server never a standby).
_STANDBY_STATE = "SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0')::bigint"
#: SQL of the primary's flushed WAL position: what a standby can have received at most.
PRIMARY_FLUSHED = "SELECT (pg_current_wal_flush_lsn() - '0/0')::bigint"


class StandbyGone(InternalSignal):
    """The replica answers but is not a standby of the primary (any longer): the primary answers every read."""


class StandbyWatch:
    """One store's view of its standby: the position it was last seen at, and the primary's pending samples."""

    def __init__(self, url: str) -> None:
        self.url = url
        #: The standby's replay position when last read (a whole number; 0: not known).
        self.replayed = 0
        self._checked_at = -math.inf
        #: (``time.monotonic()``, primary position) samples the standby was not yet seen past, oldest first.
        self._pending: deque[tuple[float, int]] = deque()
        self._lagging = False

    def forget(self) -> None:
        """The standby went away: what answers next may be another one, further behind; check it at once."""
        self.replayed = 0
        self._checked_at = -math.inf

    async def ready(self, conn: Any, needed: int, primary: Callable[[], Awaitable[int | None]]) -> bool:
        """Whether the standby behind ``conn`` may answer a read that must see the primary's position ``needed``.

        Raises:
            StandbyGone: the server is not in recovery (promoted), or never was a standby.
        """
        now = time.monotonic()
        due = now - self._checked_at >= STANDBY_CHECK_SECONDS
        if due:
            self._checked_at = now  # one check at a time: concurrent reads use what it finds
            position = await primary()
            if position is not None:
                self._pending.append((now, position))
                if len(self._pending) > _SAMPLES_MAX:
                    oldest, _ = self._pending.popleft()
                    _, newer = self._pending.popleft()
                    self._pending.appendleft((oldest, newer))
        if due or needed > self.replayed:
            in_recovery, replayed = await (await conn.execute(_STANDBY_STATE)).fetchone()
            if not in_recovery:
                raise StandbyGone("it is not a standby: pg_is_in_recovery() is false (promoted?)")
            if replayed is None:
                raise StandbyGone("it is not a hot standby (pg_last_wal_replay_lsn() is null)")
            self.replayed = max(self.replayed, replayed)
            while self._pending and self._pending[0][1] <= self.replayed:
                self._pending.popleft()
        if needed > self.replayed:
            return False
        lag = now - self._pending[0][0] if self._pending else 0.0
        if lag > STANDBY_MAX_LAG_SECONDS:
            if not self._lagging:
                self._lagging = True
                log.warning(
                    "read replica %s is %.1f s behind the primary (the bound is %s s): reads go to the primary "
                    "until it catches up",
                    self.url,
                    lag,
                    STANDBY_MAX_LAG_SECONDS,
                )
            return False
        if self._lagging:
            self._lagging = False
            log.info("read replica %s caught up: reads go to it", self.url)
        return True
