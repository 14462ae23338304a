"""The ``store`` fixture: the contract suite runs once per entry of ``STORE_FACTORIES``.

To run the suite against another store, append ``pytest.param(factory, id=..., marks=...)``
to ``STORE_FACTORIES``; ``factory(tmp_path)`` must return a fresh, empty store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.pg import postgres_store, supabase_store
from verified_memory.gitstore.store import GitStore
from verified_memory.store.base import MemoryStore
from verified_memory.store.memory import InMemoryStore
from verified_memory.store.sqlite import SQLiteStore

StoreFactory = Callable[[Path], MemoryStore]


def sqlite_store(tmp_path: Path) -> MemoryStore:
    return SQLiteStore(tmp_path / "contract" / "memory.db")


def memory_store(tmp_path: Path) -> MemoryStore:
    return InMemoryStore()


def git_store(tmp_path: Path) -> MemoryStore:
    """The repository as the store: files in a folder, and their SQLite index."""
    return GitStore(tmp_path / "contract" / ".memory", session="contract")


STORE_FACTORIES = [
    pytest.param(sqlite_store, id="sqlite"),
    pytest.param(memory_store, id="memory"),
    pytest.param(git_store, id="git"),
    # A real Postgres (skipped with the reason when none can be started; fails under
    # CI=true), and Supabase: supabase-py's real HTTP calls answered by a fake PostgREST
    # over that Postgres. See tests/pg.py.
    pytest.param(postgres_store, id="postgres", marks=pytest.mark.postgres),
    pytest.param(supabase_store, id="supabase", marks=pytest.mark.postgres),
]


@pytest.fixture(params=STORE_FACTORIES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    factory: StoreFactory = request.param
    opened = factory(tmp_path)
    try:
        yield opened
    finally:
        opened.close()
