"""Promoted memories as rules in a rules file (``AGENTS.md``, ``CLAUDE.md``, a
``.cursor/rules/*.mdc`` file): the last step of the lifecycle of seed 000, always taken
by a person (``vmem promote``).

A rule is a block between markers that carry the memory's id, under a section heading
(``## Conventions from verified memory`` unless told otherwise), so that promoting again
replaces the block in place and nothing else in the file is touched: not its other
lines, not their line ends (a CRLF file stays CRLF), not a link to it (the file it names
is written). The rule cites the lines the memory was verified at, with the commit, so a
reader can check it as an agent would. Text is written with invisible characters shown
(``prompt.sanitize``), and a marker quoted in a fact cannot be read as one.

A file people edited so that its markers no longer pair up (a start marker whose end
was deleted) is refused, naming the line, rather than guessed at: replacing up to some
later end marker would delete what lies between. The file is written whole or not at
all (``atomic.py``).
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from verified_memory.atomic import write_atomically
from verified_memory.errors import ValidationError
from verified_memory.models import CitationCheck, Memory, Verification, place
from verified_memory.prompt import sanitize, sanitize_line

__all__ = ["DEFAULT_SECTION", "promote_rule", "remove_rule", "render_rule", "write_rule"]

DEFAULT_SECTION = "Conventions from verified memory"

#: A marker line: ``<!-- vmem:rule ID -->`` opens a rule, ``<!-- /vmem:rule ID -->``
#: closes it.
_MARKER = re.compile(r"<!-- (/?)vmem:rule (\S+) -->")
#: Where a stored text would spell a marker: its ``<`` is written as ``&lt;`` (shown
#: the same in markdown, never read as a marker).
_SPELLED_MARKER = re.compile(r"<(?=!-- /?vmem:rule )")


def _markers(memory_id: str) -> tuple[str, str]:
    return f"<!-- vmem:rule {memory_id} -->", f"<!-- /vmem:rule {memory_id} -->"


def _quoted(text: str) -> str:
    return _SPELLED_MARKER.sub("&lt;", sanitize(text).strip())


def render_rule(memory: Memory, checks: Sequence[CitationCheck], revision: str) -> str:
    """The rule block of a memory whose citations were verified at ``revision``."""
    start, end = _markers(memory.id)
    places = [c.location or c.citation.location for c in checks]
    cites = ", ".join(f"`{place(p.path, p.line_start, p.line_end)}`" for p in places)
    lines = [start, f"### {sanitize_line(memory.subject)}", "", _quoted(memory.fact)]
    if memory.reason:
        lines += ["", f"Why: {_quoted(memory.reason)}"]
    lines += ["", f"Cites {cites} (verified at `{revision[:12]}`).", end]
    return "\n".join(lines)


def write_rule(path: str | os.PathLike[str], memory: Memory,
               checks: Sequence[CitationCheck], revision: str, *,
               section: str = DEFAULT_SECTION) -> str:
    """Write (or replace) the memory's rule in the file at ``path`` (created with the
    section when missing); the file's new text. Refuses, writing nothing, a path that
    is a directory, a file that is not UTF-8 or whose markers do not pair up
    (``ValidationError``), and a file this user may not write (``PermissionError``)."""
    target = _rules_file(path)
    lines = _read_lines(target)
    eol = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    blocks = _blocks(lines, target)
    block = [line + eol for line in render_rule(memory, checks, revision).split("\n")]
    if memory.id in blocks:
        first, last = blocks[memory.id]
        lines[first:last + 1] = block
    else:
        lines = _added(lines, block, blocks, f"## {sanitize_line(section)}", eol)
    text = "".join(lines)
    _write(target, text)
    return text


def promote_rule(path: str | os.PathLike[str], check: Verification, *,
                 section: str = DEFAULT_SECTION) -> Callable[[], None]:
    """``MemoryService.promote``'s ``write``: the rule of the memory ``check`` verified,
    written into the file at ``path`` (``write_rule``); returns what takes it back out
    (the file as it was, or no file), for a promotion that then cannot be recorded."""
    target = _file(path)
    before = "".join(_read_lines(target)) if target.is_file() else None
    write_rule(target, check.memory, check.checks, check.revision, section=section)

    def undo() -> None:
        if before is None:
            target.unlink(missing_ok=True)
        else:
            write_atomically(target, before, keep_mode=True)

    return undo


def remove_rule(path: str | os.PathLike[str], memory_id: str) -> Callable[[], None] | None:
    """``MemoryService.demote``'s ``remove``: the rule of memory ``memory_id`` taken out
    of the file at ``path`` (its block, the blank line that set it apart, and its
    section's heading when nothing is left under it, as a promotion into a file without
    the section adds it), nothing else changed. Returns what puts the file back as it
    was, for a removal that then cannot be recorded; None when the file (or no file)
    holds no rule of the memory, and nothing is written. Refused as ``write_rule``
    refuses, writing nothing."""
    target = _rules_file(path)
    lines = _read_lines(target)
    blocks = _blocks(lines, target)
    if memory_id not in blocks:
        return None
    before = "".join(lines)
    first, last = blocks.pop(memory_id)
    del lines[first:last + 1]
    at = _close_gap(lines, first)
    emptied = _emptied_section(lines, at, _blocks(lines, target))
    if emptied is not None:
        del lines[slice(*emptied)]
        _close_gap(lines, emptied[0])
    _write(target, "".join(lines))
    return lambda: write_atomically(target, before, keep_mode=True)


def _close_gap(lines: list[str], at: int) -> int:
    """Drop the blank lines before ``at`` that a blank line or the end of the file
    follows (what set a removed block apart); where ``at`` is then."""
    while at > 0 and _blank(lines[at - 1]) and (at == len(lines) or _blank(lines[at])):
        del lines[at - 1]
        at -= 1
    return at


def _emptied_section(lines: Sequence[str], at: int,
                     blocks: dict[str, tuple[int, int]]) -> tuple[int, int] | None:
    """The lines (from its heading to its end, the next heading of the same or a higher
    level or the end of the file) of the ``## `` section ``at`` is in, when it holds
    nothing but blank lines; else None. Lines inside rule blocks are a rule's text."""
    inside = {line for first, last in blocks.values() for line in range(first, last + 1)}
    heading = next((line for line in range(at - 1, -1, -1)
                    if line not in inside and re.match(r"#{1,2} ", lines[line])), None)
    if heading is None or not lines[heading].startswith("## "):
        return None
    end = next((line for line in range(heading + 1, len(lines))
                if line not in inside and re.match(r"#{1,2} ", lines[line])), len(lines))
    return (heading, end) if all(_blank(line) for line in lines[heading + 1:end]) else None


def _blank(line: str) -> bool:
    return not line.strip("\r\n")


def _rules_file(path: str | os.PathLike[str]) -> Path:
    """The file a rule is written into or taken out of (``_file``); a directory refused."""
    target = _file(path)
    if target.is_dir():
        raise ValidationError(f"{target} is a directory: name the rules file")
    return target


def _write(target: Path, text: str) -> None:
    """Write the rules file whole, or not at all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # A rename replaces a file whatever its mode: a read-only one is refused here.
    if target.exists() and not os.access(target, os.W_OK):
        raise PermissionError(errno.EACCES, f"{os.strerror(errno.EACCES)}: nothing was "
                              "written", str(target))
    write_atomically(target, text, keep_mode=True)


def _file(path: str | os.PathLike[str]) -> Path:
    """The file a rule is written into: a link's target (CLAUDE.md -> AGENTS.md: the
    rule goes into AGENTS.md, and the link stays)."""
    return Path(path).resolve() if Path(path).is_symlink() else Path(path)


def _read_lines(target: Path) -> list[str]:
    """The file's lines, each with its own line end (none when it does not exist)."""
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        return []
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{target} is not UTF-8 text ({exc.reason} at byte "
                              f"{exc.start}): save it as UTF-8 to edit rules in it; "
                              "nothing was written") from None


def _blocks(lines: Sequence[str], target: Path) -> dict[str, tuple[int, int]]:
    """Memory id -> the first and last line of its rule block (markers included).
    Markers that do not pair up are refused, naming the line."""
    blocks: dict[str, tuple[int, int]] = {}
    opened: tuple[str, int] | None = None
    for at, line in enumerate(lines):
        found = _MARKER.fullmatch(line.strip())
        if found is None:
            continue
        closing, memory_id = found.group(1) == "/", found.group(2)
        if opened is not None and (not closing or memory_id != opened[0]):
            raise _unpaired(target, opened, f"before line {at + 1}")
        if opened is None and closing:
            raise ValidationError(
                f"{target} line {at + 1}: the end of the rule of memory {memory_id} has no "
                f"start above it ({_markers(memory_id)[0]}): restore it, or delete the "
                "rule; nothing was written")
        if closing:
            assert opened is not None
            blocks.setdefault(memory_id, (opened[1], at))
            opened = None
        else:
            opened = (memory_id, at)
    if opened is not None:
        raise _unpaired(target, opened, "before the end of the file")
    return blocks


def _unpaired(target: Path, opened: tuple[str, int], where: str) -> ValidationError:
    memory_id, at = opened
    return ValidationError(
        f"{target} line {at + 1}: the rule of memory {memory_id} starts here but has no end "
        f"marker ({_markers(memory_id)[1]}) {where}: restore it, or delete the rule; "
        "nothing was written")


def _added(lines: list[str], block: list[str], blocks: dict[str, tuple[int, int]],
           heading: str, eol: str) -> list[str]:
    """``lines`` with ``block`` at the end of the section ``heading`` (added at the end
    of the file when missing). Lines inside rule blocks are a rule's text, never the
    section's heading or the next one (a fact may hold a ``## `` line)."""
    inside = {at for first, last in blocks.values() for at in range(first, last + 1)}
    outside = [at for at in range(len(lines)) if at not in inside]
    found = [at for at in outside if lines[at].rstrip("\r\n") == heading]
    if found:
        at = found[0] + 1
        # The end of the section: the next heading of the same or a higher level.
        while at < len(lines) and (at in inside or not re.match(r"#{1,2} ", lines[at])):
            at += 1
        before, after = lines[:at], lines[at:]
    else:
        before, after = [*lines, eol if lines else ""], []
        _trim(before)
        before += [eol, heading + eol] if before else [heading + eol]
    _trim(before)
    return [*before, eol, *block, *([eol, *after] if after else [])]


def _trim(lines: list[str]) -> None:
    """Drop trailing blank lines, and end the last line with a line end."""
    while lines and not lines[-1].strip("\r\n"):
        lines.pop()
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\r\n" if any(line.endswith("\r\n") for line in lines) else "\n"
