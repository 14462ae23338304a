"""``vmem init``: wire verified memory into a coding agent's client in one command.

For each client (``clients.py``): the MCP server entry, the session hooks the client
has, and the memory rules in the client's rules file, merged into the files that are
there without clobbering them (``files.py``), their line ends and byte order mark
kept. ``plan`` computes every new file before anything is written, so a file that cannot
be edited safely stops the whole run with nothing changed; ``write`` then replaces each
file atomically. ``check`` says, part by part, what is wired.
"""

from __future__ import annotations

import difflib
import errno
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from verified_memory.atomic import nearest_existing, write_atomically
from verified_memory.errors import ValidationError
from verified_memory.prompt import prompt_file
from verified_memory.setup.clients import CLIENTS, SERVER_NAME, Part, parts_for

__all__ = ["CLIENTS", "SERVER_NAME", "Change", "Wiring", "check", "plan", "write"]

#: The most a client's configuration file may be for us to read it (they are small).
MAX_FILE = 4 * 1024 * 1024


def _edited(root: Path, relative: str) -> str:
    """The file ``vmem init`` edits for ``relative`` (relative to ``root`` too): itself,
    or where the symbolic links on its way lead (the file may not exist yet), so a link
    stays a link (CLAUDE.md -> AGENTS.md: one rules file for two clients). A link out of
    the working copy, into ``.git`` or round in a loop is refused: a project someone
    else wrote must not make vmem init write anywhere else."""
    parts = Path(relative).parts
    link = next((Path(*parts[:n]) for n in range(1, len(parts) + 1)
                 if (root / Path(*parts[:n])).is_symlink()), None)
    if link is None:
        return relative
    try:
        target = (root / relative).resolve().relative_to(root.resolve())
    except (OSError, RuntimeError):  # RuntimeError: a loop, before Python 3.13
        why = "loops"
    except ValueError:
        why = "leads out of the working copy"
    else:
        if ".git" not in target.parts:
            return target.as_posix()
        why = "leads into .git"
    where = relative if link.as_posix() == relative else f"{relative}: {link.as_posix()}"
    raise ValidationError(f"{where} is a symbolic link that {why}: vmem init edits the "
                          "files of this working copy only")


def _read(root: Path, relative: str) -> str | None:
    path = root / relative
    # Found now, not after the files before it were written: a file where a folder on
    # the way must go (links are followed already: ``_edited``).
    for folder in reversed(Path(relative).parents[:-1]):
        if (root / folder).exists() and not (root / folder).is_dir():
            raise ValidationError(f"{relative} cannot be written: {folder.as_posix()} is not "
                                  "a folder")
    if not path.exists():
        return None
    if path.is_symlink() or not path.is_file():
        raise ValidationError(f"{relative} is not a regular file: vmem init edits regular "
                              "files only")
    if path.stat().st_size > MAX_FILE:
        raise ValidationError(f"{relative} is larger than {MAX_FILE:,} bytes")
    try:
        with path.open(encoding="utf-8", newline="") as fh:  # line ends as they are
            return fh.read()
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{relative} is not UTF-8 text ({exc.reason} at byte "
                              f"{exc.start})") from None


_BOM = "\ufeff"


def _unwrap(text: str | None) -> tuple[str | None, Callable[[str], str]]:
    """``text`` as the editors of ``files.py`` take it (no byte order mark, LF line
    ends), and how to give their result the file's own back: files written on Windows
    keep their mark and their CRLF line ends, so what is not ours stays byte for byte.
    A file whose line ends are mixed is edited as it is."""
    if text is None:
        return None, lambda new: new
    mark = _BOM if text.startswith(_BOM) else ""
    body = text.removeprefix(mark)
    crlf = "\r\n" in body and body.count("\r\n") == body.count("\n")
    plain = body.replace("\r\n", "\n") if crlf else body
    return plain, lambda new: mark + (new.replace("\n", "\r\n") if crlf else new)


@dataclass(frozen=True, slots=True)
class Change:
    """A file's text before (None: it does not exist) and after ``vmem init``."""

    path: str  # relative to the root, with /
    old: str | None
    new: str
    parts: tuple[Part, ...]

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        """A unified diff, as ``git diff`` shows a new or changed file."""
        old = [] if self.old is None else self.old.splitlines(keepends=True)
        new = self.new.splitlines(keepends=True)
        lines = difflib.unified_diff(old, new, fromfile="/dev/null" if self.old is None
                                     else f"a/{self.path}", tofile=f"b/{self.path}")
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of "
                       "file\n" for line in lines)


def _parts(clients: Sequence[str], command: str) -> list[Part]:
    rules = prompt_file("memory_rules")
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        raise ValidationError(f"unknown client {unknown[0]!r}: choose from "
                              f"{', '.join(CLIENTS)}")
    return [part for client in dict.fromkeys(clients)
            for part in parts_for(client, command, rules)]


def plan(root: Path, clients: Sequence[str], *, command: str = "vmem") -> list[Change]:
    """Every file ``vmem init`` would write for ``clients``, in order, with its text
    before and after. Raises ``ValidationError`` (nothing is written then) for a file
    that cannot be edited safely, naming it. A file that parts of several clients edit
    (the same name, or a link to it) is one change."""
    by_path: dict[str, list[Part]] = {}
    for part in _parts(clients, command):
        by_path.setdefault(_edited(root, part.path), []).append(part)
    changes = []
    for relative, parts in by_path.items():
        old = _read(root, relative)
        new, restore = _unwrap(old)
        for part in parts:
            new = part.update(new, relative)
        assert new is not None
        changes.append(Change(relative, old, restore(new), tuple(parts)))
    return changes


def write(root: Path, changes: Sequence[Change]) -> list[Change]:
    """Write the changed files, each atomically (a temporary file in its directory,
    renamed over it; an existing file keeps its mode). Returns those written. A file
    this user may not write (read-only: a rename would replace it all the same), or
    whose directory they may not write, is refused before any file is written, so a
    client is never left wired halfway."""
    for change in changes:
        path = root / change.path
        if not change.changed:
            continue
        for where in ([path] if path.exists() else []) + [nearest_existing(path)]:
            if not os.access(where, os.W_OK):
                raise PermissionError(errno.EACCES, f"{os.strerror(errno.EACCES)} (this user "
                                      f"may not write {where}): nothing was written", str(path))
    written = []
    for change in changes:
        if not change.changed:
            continue
        path = root / change.path
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, change.new, keep_mode=True)
        written.append(change)
    return written


Status = Literal["wired", "outdated", "missing", "unreadable"]


@dataclass(frozen=True, slots=True)
class Wiring:
    """Where one part of one client stands."""

    client: str
    what: str
    path: str
    status: Status
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"client": self.client, "what": self.what, "path": self.path,
                "status": self.status, "detail": self.detail}


def check(root: Path, clients: Sequence[str], *, command: str = "vmem") -> list[Wiring]:
    """Each part of each client: ``wired`` (there, and as ``vmem init`` would write it),
    ``outdated`` (there, but different: re-run ``vmem init``), ``missing``, or
    ``unreadable`` (the file cannot be read or edited; ``detail`` says why)."""
    out = []
    for part in _parts(clients, command):
        try:
            text, _ = _unwrap(_read(root, _edited(root, part.path)))
            if not part.present(text):
                out.append(Wiring(part.client, part.what, part.path, "missing"))
                continue
            wired = part.same(part.update(text, part.path), text)
        except ValidationError as exc:
            out.append(Wiring(part.client, part.what, part.path, "unreadable", str(exc)))
            continue
        out.append(Wiring(part.client, part.what, part.path,
                          "wired" if wired else "outdated"))
    return out
