"""Secrets and files: credentials never printed, libpq strings recognised, the store private.

- ``--db "host=... password=..."`` (a libpq keyword/value string) is a Postgres
  connection, not the name of a SQLite file to create in the current directory;
- no error line shows a password, whether it sits in ``user:password@``, in a URL's
  query string or in a libpq string;
- a new SQLite store is its owner's alone: the file 0600 (and its -wal and -shm), a
  directory it creates 0700, as the blob cache already was.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.test_cli import vmem
from verified_memory.config import (
    Settings,
    conninfo_pairs,
    is_postgres_url,
    redact,
    scrub,
    secrets_of,
)

PASSWORD = "hunter2-Secret"  # a test value
CLOSED_PORT = "1"  # nothing listens there: connecting fails at once


@pytest.mark.parametrize(("url", "shown"), [
    (f"host=db dbname=app password={PASSWORD}", "host=db dbname=app password=***"),
    (f"host=db password='{PASSWORD} x' user=me", "host=db password=*** user=me"),
    (f"postgresql://me:{PASSWORD}@db/app", "postgresql://me:***@db/app"),
    (f"postgresql://me@db/app?sslmode=require&password={PASSWORD}",
     "postgresql://me@db/app?sslmode=require&password=***"),
    (f"postgres://db/app?sslpassword={PASSWORD}#x", "postgres://db/app?sslpassword=***#x"),
    ("postgresql://vmem@db.internal/memories", "postgresql://vmem@db.internal/memories"),
    ("sqlite:///tmp/m.db", "sqlite:///tmp/m.db"),
])
def test_every_credential_is_redacted(url: str, shown: str) -> None:
    assert redact(url) == shown
    assert PASSWORD not in redact(url)
    assert PASSWORD not in scrub(f"failed: {url} ({' '.join(secrets_of(url))})", url)
    assert PASSWORD not in repr(Settings(database_url=url))


@pytest.mark.parametrize(("text", "postgres"), [
    ("host=db dbname=app", True),
    (" host = db  port=5432 password='a b' ", True),
    ("service=prod", True),
    ("postgresql://db/app", True),
    ("memory.db", False),
    ("./a=b.db", False),
    ("colour=red.db", False),  # not a libpq keyword: a file name
    ("host=db and more", False),
    # a keyword newer than our list, or misspelt: still a connection, for libpq to judge
    (f"host=db dbname=vm password={PASSWORD} sslkeylogfile=/tmp/kl", True),
    (f"host=db dbname=vm pasword={PASSWORD}", True),
])
def test_libpq_strings_are_recognised(text: str, postgres: bool) -> None:
    assert is_postgres_url(text) is postgres
    assert (conninfo_pairs(text) is not None) is (postgres and "://" not in text)


def test_secrets_include_decoded_forms() -> None:
    assert secrets_of("postgresql://me:p%40ssword@db/app") == ["p%40ssword", "p@ssword"]
    # an '@' left unencoded: libpq echoes what follows the first one
    assert "ssw0rdXX" in secrets_of("postgresql://me:p@ssw0rdXX@db/app")
    # a URL urlsplit refuses (an unclosed IPv6 host) is scrubbed all the same
    assert secrets_of(f"postgresql://me:{PASSWORD}@[::1/app") == [PASSWORD]
    assert secrets_of("host=db password='it\\'s mine'") == ["'it\\'s mine'", "it's mine"]


@pytest.mark.parametrize("url", [
    f"host=127.0.0.1 port={CLOSED_PORT} dbname=x user=me password={PASSWORD} "
    "connect_timeout=2",
    f"postgresql://me@127.0.0.1:{CLOSED_PORT}/x?connect_timeout=2&password={PASSWORD}",
    f"postgresql://me:{PASSWORD}@127.0.0.1:{CLOSED_PORT}/x?connect_timeout=2",
    f"host=127.0.0.1 port={CLOSED_PORT} dbname=x password={PASSWORD} sslkeylogfile=/tmp/k",
    f"postgresql://me:{PASSWORD}@[::1/x",
])
@pytest.mark.parametrize("command", [["stats", "--repo", "acme/app"], ["db", "migrate"],
                                     ["db", "export"]])
def test_a_postgres_error_line_never_shows_the_password(
        url: str, command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = vmem(capsys, "--db", url, *command)
    assert code == 1
    assert err.startswith("vmem: error: ")
    assert err.count("\n") == 1
    assert PASSWORD not in out + err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # no SQLite file named after the password


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_default_store_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    os.umask(0o022)
    store = tmp_path / "data" / "verified-memory" / "memory.db"
    assert vmem(capsys, "stats", "--repo", "acme/app")[0] == 1  # reading creates nothing
    assert not store.parent.exists()
    code, _, err = vmem(capsys, "db", "migrate")
    assert code == 0, err
    assert _mode(store) == 0o600
    assert _mode(store.parent) == 0o700
    for side in ("memory.db-wal", "memory.db-shm"):
        if (store.parent / side).exists():
            assert _mode(store.parent / side) == 0o600


def test_a_store_named_on_the_command_line_is_private_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = vmem(capsys, "--db", str(tmp_path / "new" / "team.db"), "db", "migrate")
    assert code == 0, err
    assert _mode(tmp_path / "new" / "team.db") == 0o600
    assert _mode(tmp_path / "new") == 0o700
    # An existing file keeps the mode its owner gave it.
    shared = tmp_path / "shared.db"
    shared.touch(mode=0o640)
    os.chmod(shared, 0o640)
    code, _, err = vmem(capsys, "--db", str(shared), "stats", "--repo", "acme/app")
    assert code == 0, err
    assert _mode(shared) == 0o640
