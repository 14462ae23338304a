"""write_atomically: whole or nothing, and the mode a new file would get."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

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


def test_a_missing_folder_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "no" / "a.md", "x")
