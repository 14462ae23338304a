"""The test suite finds Postgres's programs and ``runuser`` where distributions install
them, whatever PATH says (a PATH without the sbin directories used to skip every
Postgres test although ``runuser`` was there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.pg import PostgresServer, Unavailable, _run_as_postgres, find_pgbin, find_program


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holds one empty directory: nothing is found on it."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return empty


def test_a_program_off_path_is_found_in_the_system_directories(tmp_path: Path,
                                                                bare_path: Path) -> None:
    sbin = tmp_path / "usr" / "sbin"
    runuser = executable(sbin / "runuser")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "runuser").write_text("not executable")
    dirs = (str(tmp_path / "bin"), str(sbin))
    assert find_program("runuser", dirs) == str(runuser)
    assert find_program("no-such-program", dirs) is None


def test_path_wins_over_the_system_directories(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    on_path = executable(tmp_path / "on-path" / "runuser")
    elsewhere = executable(tmp_path / "sbin" / "runuser")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert find_program("runuser", (str(elsewhere.parent),)) == str(on_path)


def test_the_newest_server_directory_wins_by_version_number(tmp_path: Path,
                                                            bare_path: Path) -> None:
    for version in ("9", "15", "13"):
        for program in ("pg_ctl", "initdb"):
            executable(tmp_path / "usr/lib/postgresql" / version / "bin" / program)
    executable(tmp_path / "usr/lib/postgresql/17/bin/pg_ctl")  # no initdb: not a server
    globs = (str(tmp_path / "usr/lib/postgresql/*/bin"),)
    assert find_pgbin(globs, ()) == tmp_path / "usr/lib/postgresql/15/bin"


def test_rhel_layout_and_the_system_directories_are_searched(tmp_path: Path,
                                                             bare_path: Path) -> None:
    for program in ("pg_ctl", "initdb"):
        executable(tmp_path / "usr/pgsql-16/bin" / program)
        executable(tmp_path / "local/bin" / program)
    assert find_pgbin((str(tmp_path / "usr/pgsql-*/bin"),), ()) == tmp_path / "usr/pgsql-16/bin"
    assert find_pgbin((str(tmp_path / "nowhere/*"),), (str(tmp_path / "local/bin"),)) == \
        tmp_path / "local/bin"
    with pytest.raises(Unavailable, match="no Postgres server binaries"):
        find_pgbin((str(tmp_path / "nowhere/*"),), (str(tmp_path / "usr"),))


def test_the_real_server_programs_run_with_sbin_off_path(pg_server: PostgresServer,
                                                         bare_path: Path) -> None:
    """On this machine: with PATH holding nothing, the programs are still found and
    run (as the postgres user through runuser when we are root)."""
    assert "sbin" not in os.environ["PATH"]
    pgbin = find_pgbin()
    result = _run_as_postgres([str(pgbin / "pg_ctl"), "--version"])
    assert "PostgreSQL" in result.stdout
