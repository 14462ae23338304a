"""Apply the ``sql/`` migrations to a Postgres (or Supabase) database.

The migrations are plain SQL files, ``NNN_name.sql``, applied in order. Each runs in its
own transaction together with the row that records it in ``agent_memory_migrations``,
so a failed migration leaves nothing half-applied and a re-run picks up where it
stopped. A transaction-scoped advisory lock serialises concurrent runs (eight agents
starting at once migrate once). The files themselves are idempotent as well, so that
pasting them into the Supabase SQL editor by hand is harmless too.

The table is not called ``schema_migrations``: Rails, Supabase's CLI and other tools
already own tables by that name, with other columns.

The files live at the top of the repository (``sql/``) and are shipped inside the wheel
as ``verified_memory/sql``; ``migrations_dir`` finds either.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verified_memory.config import redact, scrub
from verified_memory.errors import MissingDependency, StoreError

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "MIGRATIONS_TABLE",
    "Migration",
    "applied_versions",
    "load_migrations",
    "migrate",
    "migrate_connection",
    "migrations_dir",
    "pending_versions",
    "render_sql",
]

MIGRATIONS_TABLE = "agent_memory_migrations"
_FILE = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")
# Any constant works; it only has to be the same for every process that migrates.
_LOCK_KEY = 0x766D656D  # "vmem"


@dataclass(frozen=True, slots=True)
class Migration:
    """One ``sql/NNN_name.sql`` file."""

    version: str  # "001"
    name: str  # "schema"
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def migrations_dir() -> Path:
    """``verified_memory/sql`` in an installed wheel, else ``sql/`` of the checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "sql", package.parent / "sql"):
        if candidate.is_dir() and any(candidate.glob("*.sql")):
            return candidate
    raise StoreError(
        f"the SQL migrations were not found (looked in {package / 'sql'} and "
        f"{package.parent / 'sql'}): the package is incomplete"
    )


def load_migrations(directory: Path | None = None) -> list[Migration]:
    """Every migration file, ordered by version; a duplicate version is an error."""
    directory = directory or migrations_dir()
    found: dict[str, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        match = _FILE.match(path.name)
        if not match:
            raise StoreError(f"migration file name must be NNN_name.sql: {path}")
        version, name = match.groups()
        if version in found:
            raise StoreError(f"two migrations share version {version} in {directory}")
        found[version] = Migration(version, name, path.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found, key=int)]


def render_sql(directory: Path | None = None) -> str:
    """All migrations as one script, for the Supabase SQL editor or ``psql -f``.

    The script does not record itself in the migrations table; ``migrate`` will find
    the objects already there and re-running its (idempotent) files changes nothing.
    """
    parts = [
        f"-- verified-memory migration {m.version}_{m.name}\n{m.sql.rstrip()}\n"
        for m in load_migrations(directory)
    ]
    return "\n".join([_REBUILD_VIEWS, *parts])


#: The head of a pasted script. A view may only grow (``create or replace view`` keeps
#: its columns), and each file defines ``agent_memory_full`` as it was at its step, so
#: a second paste would meet 006's wider view in 002. Dropping it first lets every file
#: rebuild it in turn; the functions returning its rows go with it and 002 re-creates
#: them, 003 re-grants them. ``migrate`` runs each file once and needs none of this.
_REBUILD_VIEWS = """\
-- verified-memory: views are rebuilt by the files below, in order.
drop view if exists agent_memory_full cascade;
"""


def migrate(url: str, directory: Path | None = None) -> list[str]:
    """Apply every pending migration to the database at ``url``; the versions applied.

    ``url`` is a ``postgresql://`` URL; for Supabase use the project's direct database
    connection string (the REST API cannot run DDL).
    """
    psycopg = _psycopg()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            return migrate_connection(conn, directory)
    except psycopg.Error as exc:
        raise StoreError(f"could not migrate the database {redact(url)}: "
                         f"{scrub(_describe(exc), url)}") from exc
    except StoreError as exc:
        raise StoreError(scrub(str(exc), url)) from exc


def migrate_connection(conn: psycopg.Connection[Any], directory: Path | None = None) -> list[str]:
    """``migrate`` on an open connection (in autocommit mode: each file commits alone)."""
    psycopg = _psycopg()
    pending = load_migrations(directory)
    applied: list[str] = []
    for migration in pending:
        try:
            with conn.transaction():
                conn.execute("select pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                conn.execute(
                    f"create table if not exists {MIGRATIONS_TABLE} ("
                    " version text primary key,"
                    " name text not null,"
                    " checksum text not null,"
                    " applied_at timestamptz not null default now())"
                )
                done = conn.execute(
                    f"select 1 from {MIGRATIONS_TABLE} where version = %s",
                    (migration.version,),
                ).fetchone()
                if done:
                    continue
                conn.execute(migration.sql.encode())  # no parameters: several statements
                conn.execute(
                    f"insert into {MIGRATIONS_TABLE} (version, name, checksum)"
                    " values (%s, %s, %s)",
                    (migration.version, migration.name, migration.checksum),
                )
        except psycopg.Error as exc:
            raise StoreError(
                f"migration {migration.version}_{migration.name} failed and was rolled "
                f"back: {_describe(exc)}"
            ) from exc
        applied.append(migration.version)
    if applied:
        # PostgREST (Supabase's REST API) caches the schema: tell it to look again, so
        # new functions and views are callable at once. Nobody listens on plain Postgres.
        conn.execute("notify pgrst, 'reload schema'")
    return applied


def applied_versions(url: str) -> list[str]:
    """Versions already applied at ``url`` (empty if the database was never migrated)."""
    psycopg = _psycopg()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            return _applied(conn)
    except psycopg.Error as exc:
        raise StoreError(f"could not read the migrations table: "
                         f"{scrub(_describe(exc), url)}") from exc


def _applied(conn: psycopg.Connection[Any]) -> list[str]:
    exists = conn.execute("select to_regclass(%s)", (MIGRATIONS_TABLE,)).fetchone()
    if not exists or exists[0] is None:
        return []
    rows = conn.execute(f"select version from {MIGRATIONS_TABLE}").fetchall()
    return sorted((str(r[0]) for r in rows), key=int)


def pending_versions(conn: psycopg.Connection[Any], known: Sequence[Migration]) -> list[str]:
    """Versions in ``known`` that ``conn``'s database has not applied yet."""
    done = set(_applied(conn))
    return [m.version for m in known if m.version not in done]


def _describe(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag else None
    hint = getattr(diag, "message_hint", None) if diag else None
    sqlstate = getattr(exc, "sqlstate", None)
    text = primary or str(exc).strip() or type(exc).__name__
    if hint:  # what to do about it (003_rls says how to get the roles it needs)
        text = f"{text}: {hint}"
    return f"{text} [{sqlstate}]" if sqlstate else text


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise MissingDependency("psycopg", "postgres") from exc
    return psycopg
