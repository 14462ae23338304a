"""A throwaway Postgres for the test session (a pytest plugin: ``pytest_plugins``).

- ``$DATABASE_URL`` set: that server is used. Its role must be a superuser (as in a CI
  service container): tests create databases, and switch to ``anon``/``authenticated``/
  ``service_role`` the way PostgREST does. Only the databases we created are dropped.
- Otherwise a server is started with ``initdb``/``pg_ctl`` (Debian's
  ``/usr/lib/postgresql/*/bin`` and the like, else ``PATH``, else the system
  directories: ``SYSTEM_DIRS``, searched whatever PATH says) in a temporary directory
  (in ``/dev/shm`` when there is one) on a free port, as the ``postgres`` user when we
  are root (the server refuses to run as root; ``runuser`` is looked for the same way)
  or as ourselves otherwise, and stopped when the session ends (or at exit, if the
  plugin was not registered).
- No server can be started: the tests that need one are skipped and say why; under
  ``CI=true`` they fail instead, so CI never passes by skipping them.
- ``pg_url``: a database of the test's own, cloned from a template migrated once per
  session (``CREATE DATABASE ... TEMPLATE``: tens of milliseconds), dropped afterwards.
  The contract-suite factories (``postgres_store``, ``supabase_store``) recycle emptied
  databases instead (``TRUNCATE``: a few milliseconds), with their connection pools.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from verified_memory.store.postgres import PostgresStore
from verified_memory.store.supabase import SupabaseStore

__all__ = [
    "PostgresServer",
    "RecycledPostgresStore",
    "RecycledSupabaseStore",
    "find_pgbin",
    "find_program",
    "fresh_database",
    "pg_server",
    "pg_url",
    "postgres_store",
    "server",
    "supabase_store",
]

_SERVER: PostgresServer | None = None
_UNAVAILABLE: str | None = None


class Unavailable(Exception):
    """No Postgres server could be found or started; the message says why."""


class PostgresServer:
    """A server we may create databases on; ``stop`` undoes whatever we created."""

    def __init__(self, url: str, *, pgbin: Path | None = None, root: Path | None = None) -> None:
        self.url = url  # the maintenance database
        self.pgbin = pgbin
        self.root = root  # set when we started the server ourselves
        self.created: list[str] = []
        self._names = itertools.count()
        self._template: str | None = None
        self._free: list[str] = []  # emptied databases, ready for reuse
        self._stopped = False
        self._pools: dict[str, Any] = {}
        self._fakes: dict[str, Any] = {}

    def url_for(self, dbname: str) -> str:
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path="/" + dbname))

    def _admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def template(self) -> str:
        """The name of a database migrated once per session, to clone per test."""
        if self._template is None:
            from verified_memory.store.migrate import migrate

            name = f"vmem_tpl_{os.getpid()}"
            with self._admin() as conn:
                conn.execute(f'drop database if exists "{name}" with (force)')
                conn.execute(f'create database "{name}"')
            self.created.append(name)
            migrate(self.url_for(name))
            self._template = name
        return self._template

    def create_database(self, *, migrated: bool = True) -> str:
        """A new, empty database (or a clone of the migrated template); its URL."""
        name = f"vmem_t_{os.getpid()}_{next(self._names)}"
        template = f' template "{self.template()}"' if migrated else ""
        with self._admin() as conn:
            conn.execute(f'create database "{name}"{template}')
        self.created.append(name)
        return self.url_for(name)

    def acquire(self) -> str:
        """A migrated database with empty tables: a recycled one when there is one.

        Cloning costs tens of milliseconds, emptying three tables a few, and the
        contract suite opens hundreds of stores. Tests that change more than rows (roles,
        schema) take a ``create_database`` of their own instead.
        """
        return self._free.pop() if self._free else self.create_database()

    def release(self, url: str) -> None:
        """Empty a database from ``acquire`` and keep it for the next test."""
        with self.pool_for(url).connection() as conn:
            conn.execute(
                "truncate agent_memory_telemetry, agent_memory_telemetry_archive, "
                "agent_memory_tombstone, agent_memory_citation, agent_memory restart identity"
            )
        fake = self._fakes.get(url)
        if fake is not None:
            fake.requests.clear()
        self._free.append(url)

    def pool_for(self, url: str) -> Any:
        """A connection pool kept open for a recycled database across tests: new
        connections (and their first PL/pgSQL compilations) cost more than a test."""
        if url not in self._pools:
            from psycopg_pool import ConnectionPool

            self._pools[url] = ConnectionPool(url, min_size=1, max_size=4, open=True,
                                              kwargs={"autocommit": True})
        return self._pools[url]

    def fake_for(self, url: str) -> Any:
        """A ``FakePostgrest`` kept for a recycled database across tests."""
        if url not in self._fakes:
            from tests.fake_postgrest import FakePostgrest

            self._fakes[url] = FakePostgrest(url)
        return self._fakes[url]

    def drop_database(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        with self._admin() as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')
        if name in self.created:
            self.created.remove(name)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for fake in self._fakes.values():
            fake.close()
        for pool in self._pools.values():
            pool.close()
        if self.root is None:  # someone else's server: drop what we made, nothing more
            # Cleanup must not mask the outcome of the tests.
            with contextlib.suppress(Exception), self._admin() as conn:
                for name in reversed(self.created):
                    conn.execute(f'drop database if exists "{name}" with (force)')
            return
        assert self.pgbin is not None
        _run_as_postgres(
            [str(self.pgbin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "fast",
             "-w", "stop"],
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


# --------------------------------------------------------------------------- starting


#: Where distributions install system programs, searched after PATH: a login shell of a
#: plain user (or a CI image) often leaves the sbin directories off PATH although
#: ``runuser`` is there, and ``pg_ctl`` lives outside PATH on Debian and RHEL.
SYSTEM_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
#: Postgres server binaries by distribution, newest version first within each pattern.
PG_BIN_GLOBS = ("/usr/lib/postgresql/*/bin",  # Debian, Ubuntu
                "/usr/pgsql-*/bin",  # RHEL, Fedora (PGDG)
                "/usr/local/pgsql/bin",  # built from source
                "/opt/homebrew/opt/postgresql*/bin", "/usr/local/opt/postgresql*/bin")


def find_program(name: str, directories: tuple[str, ...] = SYSTEM_DIRS) -> str | None:
    """``name`` on PATH, else in the first of ``directories`` that holds it as an
    executable file."""
    found = shutil.which(name)
    if found:
        return found
    for directory in directories:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _version(directory: str) -> tuple[int, ...]:
    """15 from /usr/lib/postgresql/15/bin or /usr/pgsql-15/bin (0 when there is none)."""
    digits = re.findall(r"\d+", Path(directory).parent.name)
    return tuple(int(d) for d in digits) or (0,)


def find_pgbin(globs: tuple[str, ...] = PG_BIN_GLOBS,
               directories: tuple[str, ...] = SYSTEM_DIRS) -> Path:
    """The directory of ``initdb`` and ``pg_ctl``: a distribution's server directory
    (newest version first), else wherever PATH or the system directories have both."""
    for pattern in globs:
        for directory in sorted(glob.glob(pattern), key=_version, reverse=True):
            if (Path(directory) / "pg_ctl").exists() and (Path(directory) / "initdb").exists():
                return Path(directory)
    pg_ctl = find_program("pg_ctl", directories)
    if pg_ctl and (Path(pg_ctl).parent / "initdb").exists():
        return Path(pg_ctl).parent
    raise Unavailable(
        "no Postgres server binaries (initdb, pg_ctl) were found under "
        f"{', '.join(globs)}, on PATH or in {', '.join(directories)}, and DATABASE_URL is "
        "not set"
    )


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _run_as_postgres(args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    program = Path(args[0]).name
    if _is_root():
        runuser = find_program("runuser")
        if runuser is None:
            raise Unavailable("running as root, and runuser (to drop to 'postgres') is "
                              f"neither on PATH nor in {', '.join(SYSTEM_DIRS)}")
        args = [runuser, "-u", "postgres", "--", *args]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if check and result.returncode != 0:
        raise Unavailable(
            f"{program} failed "
            f"(exit {result.returncode}): {(result.stderr or result.stdout).strip()[-800:]}"
        )
    return result


def _scratch_dir() -> str | None:
    """A RAM-backed directory when there is one: cloning a database per test is I/O."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return str(shm)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_throwaway() -> PostgresServer:
    pgbin = find_pgbin()
    if _is_root():
        import pwd

        try:
            user = pwd.getpwnam("postgres")
        except KeyError as exc:
            raise Unavailable("running as root and there is no 'postgres' user") from exc
    # Not pytest's tmp_path: as root that lives under a 0700 directory the postgres
    # user cannot enter.
    root = Path(tempfile.mkdtemp(prefix="vmem-pg-", dir=_scratch_dir()))
    try:
        if _is_root():
            os.chown(root, user.pw_uid, user.pw_gid)
        _run_as_postgres([str(pgbin / "initdb"), "-D", str(root / "data"), "-U", "postgres",
                          "--auth=trust", "-E", "UTF8", "--locale=C", "-N"])
        port = _free_port()
        options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300")
        _run_as_postgres([str(pgbin / "pg_ctl"), "-D", str(root / "data"), "-l",
                          str(root / "server.log"), "-w", "-t", "60", "-o", options, "start"])
    except Unavailable as exc:
        log = root / "server.log"
        tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise Unavailable(f"{exc}{' | server log: ' + tail if tail else ''}") from exc
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    started = PostgresServer(f"postgresql://postgres@127.0.0.1:{port}/postgres", pgbin=pgbin,
                             root=root)
    # pytest_sessionfinish stops it; this covers runs where the plugin was not registered.
    atexit.register(started.stop)
    return started


def _require_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise Unavailable("psycopg is not installed: pip install -e '.[test]'") from exc


def _connect_external(url: str) -> PostgresServer:
    import psycopg

    deadline = time.monotonic() + 10
    while True:
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=3):
                return PostgresServer(url)
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise Unavailable(f"DATABASE_URL is set but the server refused: {exc}") from exc
            time.sleep(0.2)


def server() -> PostgresServer:
    """The session's server, started on first use; skips (fails under CI) if none."""
    global _SERVER, _UNAVAILABLE
    if _SERVER is None and _UNAVAILABLE is None:
        try:
            _require_psycopg()
            url = os.environ.get("DATABASE_URL")
            _SERVER = _connect_external(url) if url else _start_throwaway()
        except Unavailable as exc:
            _UNAVAILABLE = str(exc)
    if _SERVER is None:
        message = f"Postgres tests need a server: {_UNAVAILABLE}"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"{message} (CI=true: Postgres tests must run)", pytrace=False)
        pytest.skip(message)
    return _SERVER


def fresh_database(*, migrated: bool = True) -> str:
    """The URL of a new database of its own, migrated unless ``migrated=False``."""
    return server().create_database(migrated=migrated)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _SERVER
    if _SERVER is not None:
        _SERVER.stop()
        _SERVER = None


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def pg_server() -> PostgresServer:
    return server()


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> Iterator[str]:
    """A freshly migrated database of this test's own."""
    url = pg_server.create_database()
    yield url
    pg_server.drop_database(url)


@pytest.fixture
def pg_empty_url(pg_server: PostgresServer) -> Iterator[str]:
    """A new database with no migrations applied."""
    url = pg_server.create_database(migrated=False)
    yield url
    pg_server.drop_database(url)


class RecycledPostgresStore(PostgresStore):
    """A ``PostgresStore`` on a recycled database and its kept pool; closing it empties
    the database for the next test."""

    def __init__(self, pg: PostgresServer) -> None:
        self._server = pg
        self._released = False
        url = pg.acquire()
        super().__init__(url, migrate=False, pool=pg.pool_for(url))

    def close(self) -> None:
        super().close()
        if not self._released:
            self._released = True
            self._server.release(self.url)


class RecycledSupabaseStore(SupabaseStore):
    """A ``SupabaseStore`` over a recycled database's ``FakePostgrest``; closing it
    empties the database for the next test."""

    release: Callable[[], object]
    fake: Any

    def close(self) -> None:
        first = not self._closed
        super().close()
        if first:
            self.release()


def postgres_store(tmp_path: Path) -> PostgresStore:
    """Contract-suite factory: a ``PostgresStore`` on an empty, migrated database."""
    return RecycledPostgresStore(server())


def supabase_store(tmp_path: Path) -> SupabaseStore:
    """Contract-suite factory: a ``SupabaseStore`` whose REST calls reach a real, empty
    database through ``FakePostgrest`` (tests/fake_postgrest.py), with the service key."""
    from tests.fake_postgrest import SERVICE_KEY, SUPABASE_URL

    pg = server()
    url = pg.acquire()
    fake = pg.fake_for(url)
    store = RecycledSupabaseStore.connect(
        SUPABASE_URL, SERVICE_KEY, http_client=httpx.Client(transport=fake.transport()),
        retry=False,
    )
    assert isinstance(store, RecycledSupabaseStore)
    store.fake = fake
    store.release = lambda: pg.release(url)
    return store
