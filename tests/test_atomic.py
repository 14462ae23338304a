"""write_atomically: whole or nothing, the mode a new file would get, and errors that
name the file asked for."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from verified_memory import setup
from verified_memory.atomic import write_atomically


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_what_the_umask_leaves_and_no_temporary_stays(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomically(tmp_path / "a.md", "one\r\ntwo\n")
        write_atomically(tmp_path / "private.html", "x", mode=0o600)
    finally:
        os.umask(old)
    assert (tmp_path / "a.md").read_bytes() == b"one\r\ntwo\n"  # newlines as given
    assert _mode(tmp_path / "a.md") == 0o644
    assert _mode(tmp_path / "private.html") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "private.html"]


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "a.md"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(target, "half \udcff")  # a lone surrogate cannot be UTF-8
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.md"]


def test_a_missing_folder_is_an_os_error_naming_the_file_asked_for(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        write_atomically(tmp_path / "no" / "a.md", "x")
    assert info.value.filename == str(tmp_path / "no" / "a.md")  # not our temporary file
    (tmp_path / "dir.md").mkdir()  # the rename fails: a folder is in the way
    with pytest.raises(OSError, match="directory") as info:
        write_atomically(tmp_path / "dir.md", "x")
    assert info.value.filename == str(tmp_path / "dir.md")
    assert [p.name for p in tmp_path.iterdir()] == ["dir.md"]  # no temporary left


def test_vmem_init_names_the_file_it_could_not_write(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").mkdir()
    with pytest.raises(OSError, match="directory") as info:
        setup.write(tmp_path, [setup.Change(".mcp.json", None, "{}\n", ())])
    assert info.value.filename == str(tmp_path / ".mcp.json")
    assert [p.name for p in tmp_path.iterdir()] == [".mcp.json"]


def test_keep_mode_leaves_an_existing_files_mode_as_its_owner_set_it(tmp_path: Path) -> None:
    target = tmp_path / ".mcp.json"
    target.write_text("{}\n")
    target.chmod(0o640)
    setup.write(tmp_path, [setup.Change(".mcp.json", "{}\n", '{"a": 1}\n', ())])
    assert (target.read_text(), _mode(target)) == ('{"a": 1}\n', 0o640)
    write_atomically(target, "x", mode=0o600)  # without keep_mode: what mode says
    assert _mode(target) == 0o600
