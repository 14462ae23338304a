"""Reading a file's memories on the SQLite store: the plan for a category or a tag that
few memories have, and the migrations by_path's answers need (11 and 12).

``by_path`` walks the citation index under the file's path, newest created first
(migration 9), and stops at the limit. With a category or a tag, every memory the walk
meets is read to ask whether it has it: for a filter most memories pass, the walk stops
early; for one few pass, it read every memory citing the file (78,000 of them for the
hot file of the store benchmark: 52 to 142 ms). So the filter is counted first among
the repository's memories, up to ``GATHER_AT_MOST``: when few have it, those memories
are gathered (migration 12's category index and tag table) and each is asked whether it
cites the file (migration 8's index by seq), then sorted. Neither the index nor the
table holds anything a verification pass moves: categories and tags change only when a
memory is edited.

Migration 11 keeps each citation's copy of its memory's creation time (which orders the
citation index) equal to the memory's, whoever edits either, and brings creation times
later than now back to now (the store's rule: ``memory_values``; ``sql/013`` on
Postgres). Migration 13 does the same for refresh times (which order ``recent``), and
brings either time back to now whenever a row is written with it later than now: a hand
edit, or another program's insert, as Postgres's trigger does (``sql/014``).

Lines of a file work the same way. The walk asks each citation whether it reaches the
lines; for lines few citations reach, it read every citation of the file (past the end
of a file 23,000 citations crowd: 7 to 9 ms for nothing found). So the citations that
end at or after the lines' start are counted first, up to ``GATHER_AT_MOST`` (migration
14's index by last line): when few, the walk goes through those instead, and the few
that reach the lines are sorted.
"""

from __future__ import annotations

import sqlite3

__all__ = ["CREATED_AT_MIGRATION", "GATHER_AT_MOST", "GATHER_MIGRATION", "LINES_MIGRATION",
           "TIMES_MIGRATION", "few_reach", "gathered"]

#: A category or tag at most this many of the repository's memories have is answered
#: from those memories (about 1 µs each); one more have is answered by the walk, which
#: meets its memories early on any file most of them cite.
GATHER_AT_MOST = 1000


#: Now as the store writes times (``time_to_text``: fixed-width UTC, microseconds).
_NOW = "strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000+00:00'"


CREATED_AT_MIGRATION: tuple[str, ...] = (
    # A memory's creation time edited (by hand: the store never does) reaches the copies
    # its citations keep, and a copy edited alone is set back to its memory's.
    """
    CREATE TRIGGER agent_memory_created_at_copies
    AFTER UPDATE OF created_at ON agent_memory
    WHEN NEW.created_at IS NOT OLD.created_at
    BEGIN
        UPDATE agent_memory_citation SET memory_created_at = NEW.created_at
        WHERE memory_id = NEW.id;
    END
    """,
    """
    CREATE TRIGGER agent_memory_citation_created_at
    AFTER UPDATE OF memory_created_at ON agent_memory_citation
    WHEN NEW.memory_created_at IS NOT (SELECT created_at FROM agent_memory
                                       WHERE id = NEW.memory_id)
    BEGIN
        UPDATE agent_memory_citation SET memory_created_at = (
            SELECT created_at FROM agent_memory WHERE id = NEW.memory_id)
        WHERE memory_id = NEW.memory_id AND position = NEW.position;
    END
    """,
    """
    UPDATE agent_memory_citation SET memory_created_at = (
        SELECT m.created_at FROM agent_memory m WHERE m.id = agent_memory_citation.memory_id)
    WHERE memory_created_at IS NOT (
        SELECT m.created_at FROM agent_memory m WHERE m.id = agent_memory_citation.memory_id)
    """,
    # Creation times in the future, as the store's rule has them now (``memory_values``);
    # the first trigger updates their citations' copies.
    f"UPDATE agent_memory SET created_at = {_NOW} WHERE created_at > {_NOW}",
)

#: Whether a time (text) is more than a second later than now. Julian days, not text:
#: a trigger asks it of every row a verification pass refreshes, and parsing two times
#: costs a third of formatting now as text (33,000 rows: about 40 ms, not 150). The
#: second's margin keeps a time the store wrote a moment ago (to the microsecond; SQLite
#: knows now to the millisecond, and a julian day to about 40 microseconds) as it is.
def _later(time: str) -> str:
    return f"julianday({time}) > julianday('now') + 1.0 / 86400"


_NOT_LATER = ("UPDATE agent_memory SET " + ", ".join(
    f"{column} = CASE WHEN {_later(column)} THEN {_NOW} ELSE {column} END"
    for column in ("created_at", "refreshed_at")) + " WHERE seq = NEW.seq;")
_AHEAD = _later("max(NEW.created_at, NEW.refreshed_at)")

TIMES_MIGRATION: tuple[str, ...] = (
    # The store writes no such time (``time_not_later``); anyone else's write is brought
    # back after it. (The trigger's own update does not run it again: SQLite runs no
    # trigger inside itself unless recursive_triggers is on.) A creation time moved so
    # reaches its citations' copies through migration 11's trigger.
    f"CREATE TRIGGER agent_memory_times_not_later_insert AFTER INSERT ON agent_memory "
    f"WHEN {_AHEAD} BEGIN {_NOT_LATER} END",
    f"CREATE TRIGGER agent_memory_times_not_later_update "
    f"AFTER UPDATE OF created_at, refreshed_at ON agent_memory "
    f"WHEN {_AHEAD} BEGIN {_NOT_LATER} END",
    f"UPDATE agent_memory SET refreshed_at = {_NOW} WHERE {_later('refreshed_at')}",
)

LINES_MIGRATION: tuple[str, ...] = (
    # A file's citations by their last line (and first: whether one reaches the lines is
    # read from the index), for ``few_reach``. A verification pass moves nothing in it:
    # only a new memory or new citations do.
    """
    CREATE INDEX agent_memory_citation_end
        ON agent_memory_citation (repo, path, line_end, line_start)
    """,
)

GATHER_MIGRATION: tuple[str, ...] = (
    # A repository's memories of one category.
    """
    CREATE INDEX agent_memory_category ON agent_memory (repo, category)
    WHERE category IS NOT NULL
    """,
    # A repository's memories carrying one tag (tags are a JSON array in the memory's
    # row, which no index can key by each element), kept by triggers.
    """
    CREATE TABLE agent_memory_tag (
        repo TEXT NOT NULL,
        tag TEXT NOT NULL,
        memory_seq INTEGER NOT NULL,
        PRIMARY KEY (repo, tag, memory_seq)
    ) WITHOUT ROWID
    """,
    """
    CREATE TRIGGER agent_memory_tag_insert AFTER INSERT ON agent_memory BEGIN
        INSERT OR IGNORE INTO agent_memory_tag (repo, tag, memory_seq)
        SELECT NEW.repo, value, NEW.seq FROM json_each(NEW.tags);
    END
    """,
    """
    CREATE TRIGGER agent_memory_tag_update AFTER UPDATE OF repo, tags ON agent_memory BEGIN
        DELETE FROM agent_memory_tag WHERE repo = OLD.repo AND memory_seq = OLD.seq
            AND tag IN (SELECT value FROM json_each(OLD.tags));
        INSERT OR IGNORE INTO agent_memory_tag (repo, tag, memory_seq)
        SELECT NEW.repo, value, NEW.seq FROM json_each(NEW.tags);
    END
    """,
    """
    CREATE TRIGGER agent_memory_tag_delete AFTER DELETE ON agent_memory BEGIN
        DELETE FROM agent_memory_tag WHERE repo = OLD.repo AND memory_seq = OLD.seq
            AND tag IN (SELECT value FROM json_each(OLD.tags));
    END
    """,
    """
    INSERT OR IGNORE INTO agent_memory_tag (repo, tag, memory_seq)
    SELECT m.repo, t.value, m.seq FROM agent_memory m, json_each(m.tags) t
    """,
)

_HAVING = {
    "category": ("SELECT seq FROM agent_memory INDEXED BY agent_memory_category "
                 "WHERE repo = ? AND category = ?"),
    "tag": "SELECT memory_seq AS seq FROM agent_memory_tag WHERE repo = ? AND tag = ?",
}


def gathered(conn: sqlite3.Connection, repo: str, category: str | None,
             tag: str | None) -> tuple[str, list[str]] | None:
    """The row numbers (a column ``seq``) of the repository's memories with the rarer
    of ``category`` and ``tag``, as a subquery and its parameters, when at most
    ``GATHER_AT_MOST`` have it; else None (walk the file's citations)."""
    rarest: tuple[int, str, list[str]] | None = None
    for name, value in (("category", category), ("tag", tag)):
        if value is None:
            continue
        having = _HAVING[name]
        (count,) = conn.execute(f"SELECT count(*) FROM ({having} LIMIT ?)",
                                (repo, value, GATHER_AT_MOST + 1)).fetchone()
        if count <= GATHER_AT_MOST and (rarest is None or count < rarest[0]):
            rarest = (count, having, [repo, value])
    return None if rarest is None else (rarest[1], rarest[2])


def few_reach(conn: sqlite3.Connection, repo: str, path: str, start: int) -> bool:
    """Whether at most ``GATHER_AT_MOST`` of the file's citations end at or after line
    ``start`` (only those can reach lines from ``start`` on): then walking them is
    cheaper than walking the file's citations newest first."""
    (count,) = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM agent_memory_citation INDEXED BY "
        "agent_memory_citation_end WHERE repo = ? AND path = ? AND line_end >= ? LIMIT ?)",
        (repo, path, start, GATHER_AT_MOST + 1)).fetchone()
    return bool(count <= GATHER_AT_MOST)
