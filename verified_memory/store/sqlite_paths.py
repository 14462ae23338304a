"""The SQLite store's migrations for reading a file's memories by path.

Migration 11 keeps each citation's copy of its memory's creation time (which orders the
citation index, migration 9) equal to the memory's, whoever edits either, and brings
creation times later than now back to now (the store's rule: ``memory_values``;
``sql/013`` on Postgres).
"""

from __future__ import annotations

__all__ = ["CREATED_AT_MIGRATION"]

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
