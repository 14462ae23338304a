"""Whitespace rules: what counts as the same line of code.

A line is normalised by removing all whitespace, so re-indentation, reformatting
inside a line, tabs versus spaces, trailing blanks and CRLF endings are not changes.
Blank lines normalise to the empty string and are ignored when matching, so adding
or removing blank lines is not a change either.
"""

from __future__ import annotations

__all__ = ["decode_text", "normalize_line", "split_lines"]

_WHITESPACE = str.maketrans("", "", " \t\r\n\f\v\u00a0\ufeff")


def normalize_line(line: str) -> str:
    return line.translate(_WHITESPACE)


def split_lines(text: str) -> list[str]:
    """Lines as editors number them (LF, CRLF or CR; no trailing empty line)."""
    return text.splitlines()


def decode_text(data: bytes) -> str | None:
    """The text of a file, or None when it is binary or not UTF-8 (not citable)."""
    if b"\x00" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.removeprefix("\ufeff")
