"""Telemetry written behind the reads that cause it.

Every read of memories leaves a ``retrieved`` event per memory: fifty rows for one
``get_recent(50)``. Writing them inside the read made the read cost twice what the
query did (a transaction, two index updates a row; a round trip on Postgres). So the
service hands them to a ``TelemetryBuffer``, which writes them in one batch:

- before the service's next write (so telemetry stays in the order things happened),
  and before it reads telemetry back (``stats``), unless the store will not take them
  then: a read answers while another process writes;
- when 1,000 events are waiting, or a second after the first one arrived (a timer
  thread);
- when the service closes, and at interpreter exit for a service nobody closed.

A process killed outright loses at most that second of ``retrieved`` events; events
that record a change to a memory are never buffered: they are written in the same
transaction as the change.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Sequence

from verified_memory.errors import VerifiedMemoryError
from verified_memory.models import TelemetryEvent
from verified_memory.store.base import MemoryStore

__all__ = ["TelemetryBuffer"]

log = logging.getLogger(__name__)

#: Events kept for a retry when the store cannot take them; beyond it the oldest go.
MAX_KEPT = 10_000


#: Buffers still alive, flushed by one exit hook (weak: a buffer must not outlive its
#: service because of the hook).
_LIVE: weakref.WeakSet[TelemetryBuffer] = weakref.WeakSet()


@atexit.register
def _flush_all_at_exit() -> None:
    for buffer in list(_LIVE):
        try:
            buffer.flush()
        except VerifiedMemoryError as exc:
            log.warning("telemetry: %d events lost at exit: %s", len(buffer), exc)


class TelemetryBuffer:
    def __init__(self, store: MemoryStore, *, max_events: int = 1000,
                 max_age: float = 1.0) -> None:
        self._store = store
        self.max_events = max_events
        self.max_age = max_age
        self._pending: list[TelemetryEvent] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        #: the store refused the last batch and it was given up (``give_up``): ``close``
        #: does not wait on the store again, until a flush gets through
        self._refused = False
        #: how many ``also`` events the last flush failed to write (not kept; ``give_up``
        #: counts them among the lost)
        self._not_kept = 0
        _LIVE.add(self)

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, events: Sequence[TelemetryEvent]) -> None:
        """Queue events; they are written within ``max_age`` seconds."""
        if not events:
            return
        with self._lock:
            self._pending.extend(events)
            full = len(self._pending) >= self.max_events
            if not full and self._timer is None:
                self._timer = threading.Timer(self.max_age, self._flush_on_timer)
                self._timer.name = "vmem-telemetry"
                self._timer.daemon = True  # never holds a process up: the exit hook writes
                self._timer.start()
        if full:
            self.flush()

    def flush(self, also: Sequence[TelemetryEvent] = ()) -> None:
        """Write every queued event now, and ``also`` after them, in one batch. On a
        store error the queued events are kept (for the next flush) and the error is
        raised. ``also`` is not kept: its caller is told (a pass that failed, whose run
        again records its own; kept, they would count that pass twice)."""
        with self._lock:
            queued, self._pending = self._pending, []
            batch = [*queued, *also]
            self._not_kept = 0
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if not batch:
            return
        try:
            self._store.log(batch)
            self._refused = False
        except BaseException:
            with self._lock:
                self._pending[:0] = queued
                self._not_kept = len(also)
                dropped = len(self._pending) - MAX_KEPT
                if dropped > 0:
                    del self._pending[:dropped]
                    log.warning("telemetry: dropped %d events the store could not take",
                                dropped)
            raise

    def flush_for_reading(self) -> None:
        """Write what is queued before a read that counts it (stats, a trail, a
        dashboard view), unless the store will not take it now: a SQLite store answers
        reads while another process holds its write lock, so the read must not fail on
        the events a read or a failed pass left queued. They stay queued (for the next
        write), and the read counts what is stored."""
        try:
            self.flush()
        except VerifiedMemoryError as exc:
            log.warning("telemetry: %d event%s not counted yet: %s", len(self),
                        "" if len(self) == 1 else "s", exc)

    def close(self) -> int:
        """Write what is queued, as when a service closes; returns how many events were
        lost. The queue holds only ``retrieved`` events of reads that already answered
        (every write flushes it first), so a store that will not take them (another
        process holds the SQLite write lock past its timeout) costs a warning, never
        the read: they are dropped."""
        if self._refused:  # refused a moment ago (locked): not a second wait for it
            lost = self.discard()
            if lost:
                log.warning("telemetry: %d more event%s not recorded (the store refused "
                            "them before)", lost, "" if lost == 1 else "s")
            return lost
        try:
            self.flush()
        except VerifiedMemoryError as exc:
            lost = self.discard()
            log.warning("telemetry: %d retrieved event%s not recorded: %s", lost,
                        "" if lost == 1 else "s", exc)
            return lost
        return 0

    def give_up(self, exc: VerifiedMemoryError) -> int:
        """After a flush the store refused (another process holds the SQLite write lock
        past its timeout) where the events only record what was seen (a view's
        ``checked`` and ``retrieved``): drop them with a warning rather than fail the
        answer, and let ``close`` not wait on the store again. Returns how many."""
        lost = self.discard() + self._not_kept
        self._refused = True
        log.warning("telemetry: %d event%s not recorded: %s", lost,
                    "" if lost == 1 else "s", exc)
        return lost

    def discard(self) -> int:
        """Forget queued events (the store is gone); returns how many."""
        with self._lock:
            count = len(self._pending)
            self._pending.clear()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        return count

    def _flush_on_timer(self) -> None:
        with self._lock:
            self._timer = None
        try:
            self.flush()
        except VerifiedMemoryError as exc:
            # Nobody to tell but the log: a read already returned. Kept for next time.
            log.warning("telemetry: could not write %d events yet: %s", len(self), exc)
