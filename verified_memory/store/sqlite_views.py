"""The dashboard views of the SQLite store (its migration 7): the same names, columns and
numbers as Postgres' (``sql/004_views.sql``, ``sql/007_memory_quality.sql``,
``sql/010_dashboard.sql``; ``store/views.py`` lists them).

Why two small tables kept by triggers: Postgres counts a million events per day and
kind in a few hundred milliseconds (in parallel), SQLite in seconds. Telemetry is
append-only, so an insert trigger can keep the counts a dashboard needs as it goes
(``agent_memory_events_rollup``: events per repository, UTC day and kind, feedback split
by outcome; ``agent_memory_breaks_rollup``: citations a verdict found changed or missing,
per file and day): one small B-tree write per event, and the views read thousands of
rows instead of millions. Three indexes on ``agent_memory`` serve the counts and the
lists of memories the same way. SQLite has one writer at a time, so these counter rows are
never contended (on Postgres they would serialise every writer, which is why Postgres
computes the same views from the events directly). An event leaves the table only into
the archive (``vmem db compact``), which counts the days it archived from again: the views
count the live events, as Postgres' do (migration 15 did so once for the stores an older
compaction left counting archived events).

A trigger must never fail the write that fires it: ``detail`` is always a JSON object
(the store validates it), and anything in it that is not what a verification writes is
skipped, not an error.
"""

from __future__ import annotations

import sqlite3
from datetime import date, timedelta

__all__ = ["DASHBOARD_MIGRATION", "count_breaks", "count_events", "recount_archived_days",
           "recount_through"]

# A day is the first ten characters of a stored time: times are fixed-width UTC text.
_DAY = "substr({}, 1, 10)"
_SUCCESS = ("CASE WHEN {kind} = 'feedback' THEN json_extract({detail}, '$.outcome') IS "
            "'{outcome}' ELSE 0 END")

# Per outcome of a verified_invalid event's detail: its file when a verdict found the
# citation changed or missing (NULL otherwise). CASE, not AND, guards the JSON reads: an
# element that is not an object is never parsed. (Not named "path": json_each has a
# column of that name.)
_BROKEN_PATH = """
    CASE WHEN o.type = 'object' THEN
        CASE WHEN json_type(o.value, '$.path') = 'text'
              AND json_extract(o.value, '$.outcome') IN ('changed', 'missing')
             THEN json_extract(o.value, '$.path') END
    END"""


def count_events(where: str) -> str:
    """The rows of ``agent_memory_events_rollup`` for the events ``where`` keeps (a
    condition on ``t``), counted from the events themselves: migration 7 fills the table
    so, and compaction counts again the days it archived events from."""
    return f"""
    INSERT INTO agent_memory_events_rollup (repo, day, kind, events, successes, failures)
    SELECT t.repo, {_DAY.format("t.at")}, t.kind, count(*),
           sum({_SUCCESS.format(kind="t.kind", detail="t.detail", outcome="success")}),
           sum({_SUCCESS.format(kind="t.kind", detail="t.detail", outcome="failure")})
    FROM agent_memory_telemetry AS t
    WHERE {where}
    GROUP BY t.repo, {_DAY.format("t.at")}, t.kind
    """


def count_breaks(where: str) -> str:
    """``count_events`` of ``agent_memory_breaks_rollup``."""
    return f"""
    INSERT INTO agent_memory_breaks_rollup (repo, day, path, breaks)
    SELECT t.repo, {_DAY.format("t.at")}, {_BROKEN_PATH} AS broken_file, count(*)
    FROM agent_memory_telemetry AS t, json_each(t.detail, '$.outcomes') AS o
    WHERE t.kind = 'verified_invalid' AND json_type(t.detail, '$.outcomes') = 'array'
      AND broken_file IS NOT NULL AND ({where})
    GROUP BY t.repo, {_DAY.format("t.at")}, broken_file
    """


def recount_through(conn: sqlite3.Connection, last_day: str | None) -> None:
    """Count both rollup tables again from the live events, for every day up to
    ``last_day`` (``YYYY-MM-DD``; None: no day). Compaction does so for the days it
    archived from, inside its write transaction."""
    if last_day is None:
        return
    after = (date.fromisoformat(last_day) + timedelta(days=1)).isoformat()
    for table, count in (("agent_memory_events_rollup", count_events),
                         ("agent_memory_breaks_rollup", count_breaks)):
        conn.execute(f"DELETE FROM {table} WHERE day <= ?", (last_day,))
        conn.execute(count("t.at < ?"), (after,))


def recount_archived_days(conn: sqlite3.Connection) -> None:
    """Migration 15. A compaction before it counted nothing again, so a store it compacted
    kept, for the days it archived from, counts of events its table no longer held: its
    dashboard showed more than its events (and than Postgres'). Only the days up to the
    newest archived event's can hold archived events: those are counted again. A store
    never compacted has none; a compacted one keeps few live events on them (the later
    ones of the day of the cut), so this reads the events' times and little more (at
    300,000 live events and 100,000 archived: 83 ms, where counting every day took 2.2 s)."""
    (last_day,) = conn.execute(
        "SELECT substr(max(at), 1, 10) FROM agent_memory_telemetry_archive").fetchone()
    recount_through(conn, last_day)


DASHBOARD_MIGRATION: tuple[str, ...] = (
    """
    CREATE TABLE agent_memory_events_rollup (
        repo TEXT NOT NULL,
        day TEXT NOT NULL,
        kind TEXT NOT NULL,
        events INTEGER NOT NULL,
        successes INTEGER NOT NULL,
        failures INTEGER NOT NULL,
        PRIMARY KEY (repo, day, kind)
    ) WITHOUT ROWID
    """,
    count_events("1"),
    f"""
    CREATE TRIGGER agent_memory_events_rollup AFTER INSERT ON agent_memory_telemetry BEGIN
        INSERT INTO agent_memory_events_rollup (repo, day, kind, events, successes, failures)
        VALUES (new.repo, {_DAY.format("new.at")}, new.kind, 1,
                {_SUCCESS.format(kind="new.kind", detail="new.detail", outcome="success")},
                {_SUCCESS.format(kind="new.kind", detail="new.detail", outcome="failure")})
        ON CONFLICT (repo, day, kind) DO UPDATE SET
            events = events + 1,
            successes = successes + excluded.successes,
            failures = failures + excluded.failures;
    END
    """,
    """
    CREATE TABLE agent_memory_breaks_rollup (
        repo TEXT NOT NULL,
        day TEXT NOT NULL,
        path TEXT NOT NULL,
        breaks INTEGER NOT NULL,
        PRIMARY KEY (repo, day, path)
    ) WITHOUT ROWID
    """,
    count_breaks("1"),
    f"""
    CREATE TRIGGER agent_memory_breaks_rollup AFTER INSERT ON agent_memory_telemetry
    WHEN new.kind = 'verified_invalid' AND json_type(new.detail, '$.outcomes') = 'array'
    BEGIN
        INSERT INTO agent_memory_breaks_rollup (repo, day, path, breaks)
        SELECT new.repo, {_DAY.format("new.at")}, {_BROKEN_PATH} AS broken_file, count(*)
        FROM json_each(new.detail, '$.outcomes') AS o
        WHERE broken_file IS NOT NULL
        GROUP BY broken_file
        ON CONFLICT (repo, day, path) DO UPDATE SET breaks = breaks + excluded.breaks;
    END
    """,
    # ------------------------------------------------------------ 004's views
    """
    CREATE VIEW agent_memory_invalidation_daily AS
    SELECT repo, day,
        sum(CASE kind WHEN 'verified_valid' THEN events ELSE 0 END) AS verified_valid,
        sum(CASE kind WHEN 'verified_invalid' THEN events ELSE 0 END) AS verified_invalid,
        sum(CASE kind WHEN 'invalidated' THEN events ELSE 0 END) AS invalidated,
        CAST(sum(CASE kind WHEN 'verified_invalid' THEN events ELSE 0 END) AS REAL)
            / nullif(sum(CASE WHEN kind IN ('verified_valid', 'verified_invalid')
                              THEN events ELSE 0 END), 0) AS invalidation_rate
    FROM agent_memory_events_rollup
    WHERE kind IN ('verified_valid', 'verified_invalid', 'invalidated')
    GROUP BY repo, day
    """,
    # Distinct memories cannot be summed from counts: this one reads the events (the
    # dashboard's funnel reads agent_memory_events_daily instead).
    f"""
    CREATE VIEW agent_memory_outcome_funnel AS
    SELECT repo, {_DAY.format("at")} AS day,
        sum(kind = 'retrieved') AS retrieved,
        sum(kind = 'verified_valid') AS verified_valid,
        sum(kind = 'verified_invalid') AS verified_invalid,
        sum(kind = 'applied') AS applied,
        count(DISTINCT CASE WHEN kind = 'retrieved' THEN memory_id END) AS memories_retrieved,
        count(DISTINCT CASE WHEN kind = 'applied' THEN memory_id END) AS memories_applied
    FROM agent_memory_telemetry
    WHERE kind IN ('retrieved', 'verified_valid', 'verified_invalid', 'applied')
    GROUP BY repo, {_DAY.format("at")}
    """,
    """
    CREATE VIEW agent_memory_status_counts AS
    SELECT repo, status, count(*) AS memories FROM agent_memory GROUP BY repo, status
    UNION ALL
    SELECT repo, 'forgotten', count(*) FROM agent_memory_tombstone GROUP BY repo
    """,
    # ------------------------------------------------------------ 007's view
    """
    CREATE VIEW agent_memory_quality AS
    SELECT repo,
        count(*) FILTER (WHERE status = 'active') AS active,
        count(*) FILTER (WHERE status = 'pending') AS pending,
        count(*) FILTER (WHERE status = 'active' AND applied_count >= 3
                         AND success_count + failure_count > 0
                         AND success_count >= 0.9 * (success_count + failure_count))
            AS validated,
        count(*) FILTER (WHERE status = 'active' AND success_count + failure_count >= 4
                         AND success_count < 0.5 * (success_count + failure_count)) AS poor,
        count(*) FILTER (WHERE promoted_to IS NOT NULL) AS promoted,
        count(*) FILTER (WHERE status = 'expired') AS expired,
        count(*) FILTER (WHERE status = 'invalid') AS invalid,
        count(*) FILTER (WHERE status = 'superseded') AS superseded
    FROM agent_memory
    GROUP BY repo
    """,
    # ------------------------------------------------------------ 010's views
    """
    CREATE VIEW agent_memory_events_daily AS
    SELECT repo, day, kind, events, successes, failures FROM agent_memory_events_rollup
    """,
    """
    CREATE VIEW agent_memory_breaks_daily AS
    SELECT repo, day, path, breaks FROM agent_memory_breaks_rollup
    """,
    """
    CREATE VIEW agent_memory_summary AS
    SELECT id, repo, subject, status, category, created_at, refreshed_at,
        coalesce(used_at, created_at) AS last_used_at, verification_count, applied_count,
        success_count, failure_count, invalid_reason
    FROM agent_memory
    """,
    """
    CREATE VIEW agent_memory_attention AS
    SELECT repo,
        count(*) FILTER (WHERE status = 'active' AND applied_count = 0) AS never_applied,
        count(*) FILTER (WHERE status = 'active' AND failure_count > 0) AS failing
    FROM agent_memory
    GROUP BY repo
    """,
    # The memory table is wide (facts, tags): scanning it for counts reads every page. These
    # indexes hold what the counts and the lists need, so counting scans an index and a
    # list reads its first rows in order (at 100,000 memories: 1.8 s to 0.2 s). A refresh
    # moves none of their columns; an application or a feedback moves one entry. The two
    # for lists start with the status, so that reads by repository alone (recent, export)
    # keep the indexes they had.
    """
    CREATE INDEX agent_memory_health ON agent_memory (repo, status, applied_count,
        created_at, failure_count, success_count, used_at, promoted_to)
    """,
    "CREATE INDEX agent_memory_failing ON agent_memory (status, repo, failure_count)",
    """
    CREATE INDEX agent_memory_last_use ON agent_memory (status, repo,
        coalesce(used_at, created_at))
    """,
    # "+status": not a look-up by status (which would read every active memory's row),
    # a scan of agent_memory_health, which holds every column this needs.
    f"""
    CREATE VIEW agent_memory_last_use_daily AS
    SELECT repo, {_DAY.format("coalesce(used_at, created_at)")} AS day,
        count(*) AS memories
    FROM agent_memory
    WHERE +status = 'active'
    GROUP BY repo, {_DAY.format("coalesce(used_at, created_at)")}
    """,
)
