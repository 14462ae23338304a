"""Input limits, in one place (the README's "Limits" section lists them).

What a memory may hold is checked where memories are parsed (``models``: subject,
fact, reason, tags, citations per memory, lines per citation), at every entry point
alike; this module holds the limits on raw input (a line of ``vmem citations check``
or ``vmem db import``, a memory on stdin) and the readers that enforce them without
first reading an endless line into memory, and it refuses JSON nested deeper than a
memory ever is, with one clear line instead of a ``RecursionError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import IO, Any

from verified_memory.errors import ValidationError
from verified_memory.models import (
    CITATION_LINES_MAX,
    CITATIONS_MAX,
    FACT_MAX,
    SUBJECT_MAX,
    TAG_MAX,
    TAGS_MAX,
)

__all__ = [
    "CHECK_LINE_MAX",
    "CITATIONS_MAX",
    "CITATION_LINES_MAX",
    "FACT_MAX",
    "IMPORT_LINE_MAX",
    "JSON_DEPTH_MAX",
    "SUBJECT_MAX",
    "TAGS_MAX",
    "TAG_MAX",
    "TEXT_ENCODING",
    "TEXT_ERRORS",
    "bounded_lines",
    "check_depth",
    "load_json",
    "read_bounded",
    "refuse_undecoded",
    "too_long",
]

#: Levels of nesting any JSON input may have (a memory has four: memory, citations, a
#: citation, its anchor; an event's detail a few more).
JSON_DEPTH_MAX = 64
#: Characters in one input line of ``vmem citations check`` (a citation is ~200).
CHECK_LINE_MAX = 64 * 1024
#: Characters in one line of ``vmem db import`` (a memory at every limit above takes
#: about 1.8 million), and in a memory given as JSON on stdin.
IMPORT_LINE_MAX = 4 * 1024 * 1024

_CHUNK = 64 * 1024


def bounded_lines(stream: IO[str], limit: int) -> Iterator[str]:
    """The lines of ``stream``, each cut to at most ``limit + 1`` characters: the rest
    of a longer line is read in chunks and dropped, so memory stays bounded, and the
    reader can tell the line was too long (``too_long``)."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith("\n"):
            while True:  # drop the rest of the overlong line
                rest = stream.readline(_CHUNK)
                if not rest or rest.endswith("\n"):
                    break
        yield line


def too_long(line: str, limit: int) -> bool:
    """Whether a line from ``bounded_lines`` exceeded ``limit`` (its newline not counted)."""
    return len(line.rstrip("\r\n")) > limit


#: A byte that is not UTF-8, as ``errors="surrogateescape"`` keeps it.
_UNDECODED = re.compile("[\udc80-\udcff]")
#: How text files given to a command are decoded: a byte order mark (a file saved by a
#: Windows editor) is no content, and a byte that is not UTF-8 is kept, to be named by
#: its line (``refuse_undecoded``: a decoder's own error counts bytes from where its last
#: chunk began, not from the file's start, and names no line).
TEXT_ENCODING, TEXT_ERRORS = "utf-8-sig", "surrogateescape"


def refuse_undecoded(text: str, line: int | None = None) -> None:
    """Refuse (``ValidationError``) text read with ``TEXT_ERRORS`` that holds a byte
    that is not UTF-8, naming its line (``line``: the number of ``text``'s first line,
    when it is one line of a file) and character."""
    found = _UNDECODED.search(text)
    if found is None:
        return
    first = line or 1
    number = first + text.count("\n", 0, found.start())
    column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
    raise ValidationError(f"line {number}: not UTF-8 text (byte "
                          f"0x{ord(found.group()) - 0xDC00:02x} at character {column}): "
                          "save the file as UTF-8")


def read_bounded(stream: IO[str], limit: int, what: str) -> str:
    """All of ``stream``, refused with ``ValidationError`` past ``limit`` characters."""
    text = stream.read(limit + 1)
    if len(text) > limit:
        raise ValidationError(f"{what} is longer than {limit:,} characters (the limit)")
    return text


def load_json(text: str, where: str) -> Any:
    """``json.loads``, with every failure a ``ValidationError`` naming ``where``, and no
    value nested deeper than ``JSON_DEPTH_MAX`` (``check_depth``)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} "
                              f"column {exc.colno}") from None
    except RecursionError:
        raise ValidationError(f"{where} is JSON nested too deeply") from None
    check_depth(value, where)
    return value


def check_depth(value: Any, where: str, limit: int | None = None) -> None:
    """Refuse (``ValidationError``) JSON nested deeper than ``limit`` levels (default
    ``JSON_DEPTH_MAX``). What the parser accepts (about 1,000 levels) is still deep
    enough to exhaust the stack of whatever walks it next (writing it back, a database
    driver): nothing a memory holds is nested more than a few levels. Walked without
    recursion."""
    limit = JSON_DEPTH_MAX if limit is None else limit
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                raise ValidationError(f"{where} is JSON nested more than {limit} levels deep")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
