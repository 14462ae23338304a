"""Whitespace rules: what counts as the same line of code.

A line is normalised by removing all whitespace, so re-indentation, reformatting
inside a line, tabs versus spaces, trailing blanks and CRLF endings are not changes.
Blank lines normalise to the empty string and are ignored when matching, so adding
or removing blank lines is not a change either.
"""

from __future__ import annotations

import re

__all__ = ["OTHER_SPACES", "WHITESPACE", "decode_text", "normalize_line", "split_lines",
           "squeeze"]

#: Every character ``str.split`` treats as whitespace (``str.isspace``), as of Unicode
#: 15; ``tests/test_anchors.py`` checks the list against the running Python.
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003"
              "\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
#: The whitespace that is not ASCII, rare in code: ``bytes.translate`` cannot delete
#: its UTF-8 bytes, so a text holding any is normalised with ``str.split``.
OTHER_SPACES = tuple(c for c in WHITESPACE if not c.isascii())
#: What ``squeeze`` deletes from an ASCII-whitespace text, as UTF-8 bytes.
_SQUEEZED_OUT = ("".join(c for c in WHITESPACE if c.isascii()) + ",").encode()

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def normalize_line(line: str) -> str:
    """The line with every whitespace character removed (str.split's definition)."""
    return "".join(line.split())


def squeeze(text: str) -> str:
    """``text`` without whitespace (as ``normalize_line`` removes it) and without commas.

    ``text_hash`` ignores whitespace and drops some commas, so code whose ``text_hash``
    is equal squeezes to the same text: ``squeeze(a) in squeeze(b)`` is a cheap test
    that ``b`` may hold code that hashes like ``a``.

    The bytes are translated where they can be (about three times faster on a
    source file than splitting it into words)."""
    if text.isascii() or not any(c in text for c in OTHER_SPACES):
        return text.encode("utf-8", "surrogatepass").translate(None, _SQUEEZED_OUT).decode(
            "utf-8", "surrogatepass")
    return "".join(text.split()).replace(",", "")


def split_lines(text: str) -> list[str]:
    """Lines as editors and GitHub number them: broken at LF, CRLF or CR only (not at
    form feeds or Unicode separators, which ``str.splitlines`` would also break at);
    a final line break does not start another line."""
    lines = text.split("\n") if "\r" not in text else _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def decode_text(data: bytes) -> str | None:
    """The text of a file, or None when it is binary or not UTF-8 (not citable)."""
    if b"\x00" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.removeprefix("\ufeff")
