"""The README's SQL for Grafana, Metabase and Supabase runs as written on a real Postgres:
the read-only role reads every dashboard view and writes nothing, and the example queries
answer what the dashboard says."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.dashboard_data import REPO, seed
from verified_memory.models import utcnow
from verified_memory.store.postgres import PostgresStore
from verified_memory.store.views import VIEWS

pytestmark = pytest.mark.postgres

README = (Path(__file__).parent.parent / "README.md").read_text()
SECTION = README.split("\n### Supabase's dashboard, Grafana, Metabase\n", 1)[1].split("\n## ", 1)[0]
ROLE_SQL, WEEKLY_SQL, FILES_SQL = re.findall(r"```sql\n(.*?)```", SECTION, flags=re.S)


@pytest.fixture
def url(pg_server: Any) -> Iterator[str]:
    database = pg_server.create_database()
    with PostgresStore(database) as store:
        seed(store, utcnow())
    yield database
    pg_server.drop_database(database)
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute("drop role if exists vmem_dashboard")


def test_the_read_only_role_reads_every_view_and_writes_nothing(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute(ROLE_SQL.encode())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("set role vmem_dashboard")
        for view in VIEWS:
            conn.execute(f"select * from {view}").fetchall()
        repos = conn.execute("select distinct repo from agent_memory_quality").fetchall()
        assert {r[0] for r in repos} == {"acme/api", "acme/web"}
        # a memory's whole trail, as vmem dashboard reads it: the archive too
        conn.execute("select * from agent_memory_telemetry_archive").fetchall()
        for write in ("insert into agent_memory_telemetry (kind, repo) values "
                      "('retrieved', 'acme/api')",
                      "update agent_memory set status = 'invalid'",
                      "select agent_memory_log('[]'::jsonb)",
                      "delete from agent_memory_telemetry_archive"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(write)


def test_the_example_queries_answer_what_the_dashboard_says(url: str) -> None:
    # Grafana expands $__timeFilter(day) into a range over the panel's time.
    weekly = WEEKLY_SQL.replace("$__timeFilter(day)", "day between %s and %s")
    today = utcnow().date()
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(weekly.encode(), (today.replace(year=today.year - 1),
                                              today)).fetchall()
        assert sum(r[2] for r in rows) == 8  # every verdict of the seed (vmem dashboard's)
        invalid = sum((r[1] or 0) * float(r[2]) for r in rows)
        assert invalid == pytest.approx(3)
        files = conn.execute(FILES_SQL.encode()).fetchall()
    assert files[0] == ("src/a.py", 2)
    assert {path for path, _ in files} == {"src/a.py", "src/c/d.py", "src/old.py"}
    assert REPO in WEEKLY_SQL
