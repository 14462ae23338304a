"""A memory as ``vmem store`` and ``vmem supersede`` take it: flags, a JSON memory (on
stdin or ``--input``), or both. Flags given with a JSON memory are never dropped: a flag
fills a field the JSON leaves out, agrees with the one it has, or is refused in one
line naming both values. And a cited file as ``--path`` names it (``CitedFile``), and
seconds as ``--time-limit`` gives them (``Seconds``), and ``-C``'s directory
(``Directory``)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from verified_memory.cli.env import Env
from verified_memory.config import time_limit
from verified_memory.errors import ValidationError
from verified_memory.models import (
    CitationRef,
    MemoryFilter,
    NewMemory,
    normalize_path,
    parse_citation,
)

if TYPE_CHECKING:
    from verified_memory.service import MemoryService

__all__ = ["CitedFile", "Directory", "FileLines", "Seconds", "memory_input", "parse_cite",
           "settled_path"]

#: A memory's field, and the flag that gives it.
FLAGS = {"subject": "--subject", "fact": "--fact", "reason": "--reason",
         "category": "--category", "created_by": "--created-by", "tags": "--tag",
         "citations": "--cite", "repo": "--repo"}


def parse_cite(text: str, where: str) -> CitationRef:
    """PATH:START[-END][@SHA] as typed on a command line. The line range follows the last
    ':' and the sha an '@' after it: a path may hold both (``img/logo@2x.txt:1``)."""
    path, sep, rest = text.rpartition(":")
    if not sep:
        raise ValidationError(f"{where}: expected PATH:START-END")
    lines, at, sha = rest.partition("@")
    start, _, end = lines.partition("-")
    return parse_citation({"path": path, "line_start": start, "line_end": end or start,
                           "sha": sha if at else None}, where)


class FileLines(NamedTuple):
    """A cited file named on the command line, and the lines asked for (None: any).

    ``whole``: the value as typed, when it was read as something else (lines of a file,
    a commit); ``refused``: the usage error it makes unless memories cite a file of the
    whole name. Both wait for the store (``settled``)."""

    path: str
    lines: tuple[int, int] | None
    whole: str | None = None
    refused: str | None = None

    def settled(self, cited: Callable[[str], bool]) -> FileLines:
        """The file as the command takes it: a file of the whole name that memories cite
        (``cited``: of any status), deleted since (``notes:2``, ``img/logo@2x.png``), is
        taken as it is, as one in the working copy is; else the value as it was read,
        or its usage error (``click.BadParameter``)."""
        if self.whole is not None and cited(self.whole):
            return FileLines(self.whole, None)
        if self.refused is not None:
            raise click.BadParameter(self.refused, param_hint="'--path'")
        return FileLines(self.path, self.lines)


_LINE_RANGE = re.compile(r"(?P<path>.+):(?P<start>\d+)(?:-(?P<end>\d+))?")

if TYPE_CHECKING:  # generic from click 8.4 on: subscripted before, it fails at run time
    _FileLinesType = click.ParamType[FileLines]
    _SecondsType = click.ParamType[float]
else:
    _FileLinesType = _SecondsType = click.ParamType


class Seconds(_SecondsType):
    """A time limit on the command line, checked as the settings' are
    (``config.time_limit``): above 0 and at most a day. Not ``click.FloatRange``: NaN
    passes its bounds (every comparison with NaN is false)."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            seconds = time_limit(str(value), "--time-limit", 0.0)  # 0.0: blank, refused
        except ValidationError:
            seconds = 0.0
        if not seconds:
            self.fail(f"{value!r} is not a number of seconds above 0 and at most 86400",
                      param, ctx)
        return seconds


class Directory(click.Path):
    """``-C DIR``: an existing directory; an empty one is where the command was started,
    as git's ``-C ""`` is (the wired hooks pass ``-C "$CLAUDE_PROJECT_DIR"``, which a
    client may leave unset)."""

    def __init__(self) -> None:
        super().__init__(exists=True, file_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        return Path(".") if value == "" else super().convert(value, param, ctx)


class CitedFile(_FileLinesType):
    """``--path FILE[:START-END]`` (``vmem search``, and ``vmem list`` without lines).

    Read in this order: a file of the whole name in the working copy is taken as it is
    (``src/x:5`` names that file); else an '@' in the name's last part is a commit, and
    refused (memories are found by the file they cite, at any commit); else a trailing
    ``:START`` or ``:START-END`` of whole numbers is a line range (refused without
    ``lines``); else the whole value is the file (``docs/a:b.md``). A mistake is a
    usage error naming the option. A value read as lines or refused is taken whole
    when memories cite a file of that name (``FileLines.settled``, once the store is
    open): a file deleted since is no longer in the working copy."""

    name = "file"

    def __init__(self, *, lines: bool) -> None:
        self.lines = lines

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> FileLines:
        if isinstance(value, FileLines):
            return value
        text = str(value)
        try:
            whole = normalize_path(text, "the file")
        except ValidationError as exc:
            self.fail(str(exc), param, ctx)
        if _in_working_copy(whole, ctx):
            return FileLines(whole, None)
        read = self._read(text, whole, ctx)
        if isinstance(read, str):
            return FileLines(whole, None, whole, read)
        return read if read.path == whole else read._replace(whole=whole)

    def _read(self, text: str, whole: str, ctx: click.Context | None) -> FileLines | str:
        """``whole`` as a file and lines, or why it is refused."""
        name, at, commit = whole.rpartition("@")
        if at and name and "/" not in commit:
            return (f"{text!r} names a commit: memories are found by the file they cite, "
                    f"at any commit; give {self._without_lines(name)}")
        found = _LINE_RANGE.fullmatch(whole)
        if found is None:
            return FileLines(whole, None)
        if not self.lines:
            command = ctx.command_path if ctx is not None else "this command"
            return (f"{text!r} names lines, and {command} lists the memories citing a "
                    f"whole file: give {found['path']}")
        start = int(found["start"])
        end = int(found["end"] or start)
        if start < 1:
            return f"{text!r}: line numbers start at 1"
        if end < start:
            return f"{text!r}: line {end} is before line {start}"
        return FileLines(found["path"], (start, end))

    def _without_lines(self, path: str) -> str:
        """``path`` as this option takes it: a line range dropped where none is taken."""
        found = None if self.lines else _LINE_RANGE.fullmatch(path)
        return path if found is None else found["path"]


def settled_path(given: FileLines | None, service: MemoryService,
                 repo: str) -> FileLines | None:
    """``--path`` as the command takes it (``FileLines.settled``): whether memories of
    ``repo`` cite a file is asked of every status (a deleted file's memories are
    invalid by the next pass), as an audit read: nothing is counted as retrieved."""
    if given is None:
        return None
    return given.settled(lambda path: bool(service.list_memories(
        repo, MemoryFilter(status=None, path=path), limit=1)))


def _in_working_copy(path: str, ctx: click.Context | None) -> bool:
    """Whether ``path`` is a file of the working copy the command runs in."""
    env = ctx.find_object(Env) if ctx is not None else None
    top = env.working_copy if env is not None else None
    try:
        return top is not None and (top / path).is_file()
    except OSError:  # a name too long for this system, ...: no file of it here
        return False


def memory_input(input_file: str | None, repo: str | None, default_repo: Callable[[], str],
                 flags: Mapping[str, Any], cites: tuple[str, ...]) -> NewMemory:
    """The memory the command line describes. JSON is read from ``input_file`` ('-':
    stdin), or from stdin when it is a pipe and no --subject is given; ``repo`` is the
    --repo flag, ``default_repo`` the repository otherwise."""
    given: dict[str, Any] = {k: v for k, v in flags.items() if v not in (None, ())}
    if "tags" in given:
        given["tags"] = list(given["tags"])
    if cites:
        given["citations"] = [parse_cite(c, f"--cite {c}") for c in cites]
    if repo:
        given["repo"] = repo
    if input_file is None and (flags.get("subject") is not None or sys.stdin.isatty()):
        missing = [f for f in ("fact", "citations") if f not in given]
        given.setdefault("tags", [])
        given.setdefault("citations", [])
        if "repo" not in given:
            given["repo"] = default_repo()
        try:
            return NewMemory.parse(given)
        except ValidationError as exc:
            if not missing or sys.stdin.isatty():
                raise
            # A JSON memory piped in beside --subject is not read (stdin may be a pipe
            # that never ends): say so, rather than only that the fact is missing.
            raise ValidationError(
                f"{exc} (stdin was not read, as --subject was given: add --input - to "
                f"merge a JSON memory from it)") from None
    from verified_memory.limits import (
        IMPORT_LINE_MAX,
        TEXT_ENCODING,
        TEXT_ERRORS,
        load_json,
        read_bounded,
        refuse_undecoded,
    )

    where = "stdin" if input_file in (None, "-") else input_file
    with click.open_file(input_file or "-", encoding=TEXT_ENCODING, errors=TEXT_ERRORS) as fh:
        text = read_bounded(fh, IMPORT_LINE_MAX, f"the memory on {where}")
    try:
        refuse_undecoded(text)
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None
    if not text.strip():
        raise ValidationError("no memory given: pass --subject, --fact and --cite, "
                              "or a JSON memory on stdin")
    data = load_json(text, where)
    if not isinstance(data, dict):
        return NewMemory.parse(data)  # refused: one line saying what a memory is
    for field, value in given.items():
        held = data.get(field)
        if held is not None and not _same(field, held, value):
            raise ValidationError(
                f"{FLAGS[field]} says {_shown(field, value)} but the JSON memory's {field} "
                f"is {_shown(field, held)}: give it once (the flag, or the JSON field)")
        data[field] = value
    if "repo" not in data:
        data["repo"] = default_repo()
    return NewMemory.parse(data)


def _same(field: str, held: Any, value: Any) -> bool:
    """Whether a JSON field and a flag say the same thing (after the parsing a memory's
    fields get: stripped text, tags as a set, citations parsed)."""
    try:
        if field == "citations":
            return [parse_citation(c) for c in held] == list(value)
        if field == "tags":
            return {str(t).strip() for t in held} == {t.strip() for t in value}
    except (TypeError, ValidationError):
        return False  # a malformed JSON field never agrees with a flag
    return isinstance(held, str) and held.strip() == str(value).strip()


def _shown(field: str, value: Any) -> str:
    if field == "citations":
        return ", ".join(str(c.location) if isinstance(c, CitationRef) else repr(c)
                         for c in value) or "none"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
