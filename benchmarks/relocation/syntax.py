"""Tree-sitter facts the edits need: statement boundaries, argument lists, string spans.

Definitions come from the product (``verified_memory.anchors.treesitter.definitions``);
this module only adds what a refactoring tool would also look at: where statements
start and end (so a cited window is whole statements, as a person would cite), which
argument lists a formatter could re-wrap, and which rows are inside multi-line strings
(which a re-indenter must not touch).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache

import tree_sitter as ts

from verified_memory.anchors import treesitter

__all__ = ["ArgList", "FileSyntax", "parse"]

_GRAMMARS = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
}
_BLOCKS = {
    "python": {"block"},
    "javascript": {"statement_block"},
    "typescript": {"statement_block"},
    "tsx": {"statement_block"},
    "go": {"statement_list"},
    "rust": {"block"},
    "java": {"block", "constructor_body"},
}
_ARG_LISTS = {"argument_list", "arguments", "formal_parameters", "parameters",
              "parameter_list"}
_STRINGS = {"string", "template_string", "raw_string_literal", "string_literal",
            "text_block", "interpreted_string_literal", "concatenated_string"}


@cache
def _parser(language: str) -> ts.Parser:
    module, function = _GRAMMARS[language]
    return ts.Parser(ts.Language(getattr(importlib.import_module(module), function)()))


@dataclass(frozen=True, slots=True)
class ArgList:
    """An argument or parameter list: rows and columns of its parentheses, its items."""

    start_row: int  # 0-based, the row of "("
    start_col: int
    end_row: int  # the row of ")"
    end_col: int  # column just past ")"
    items: tuple[str, ...]  # source text of each argument
    has_comment: bool


@dataclass(frozen=True, slots=True)
class FileSyntax:
    """Statement groups (consecutive siblings in one block) and argument lists of a file."""

    statements: tuple[tuple[tuple[int, int], ...], ...]  # per block: (first, last) 1-based
    arg_lists: tuple[ArgList, ...]
    string_rows: frozenset[int]  # 0-based rows strictly inside a multi-line string
    has_errors: bool


def parse(path: str, lines: Sequence[str]) -> FileSyntax | None:
    language = treesitter.language_for(path)
    if language is None:
        return None
    source = "\n".join(lines).encode("utf-8", errors="surrogatepass")
    root = _parser(language).parse(source).root_node
    blocks = _BLOCKS[language]
    groups: list[tuple[tuple[int, int], ...]] = []
    args: list[ArgList] = []
    string_rows: set[int] = set()
    for node in _walk(root):
        kind = node.type
        if kind in blocks:
            groups.append(_statements(node, lines))
        elif kind in _ARG_LISTS:
            items = [c for c in node.named_children if c.type != "comment"]
            texts = tuple((c.text or b"").decode("utf-8", "replace") for c in items)
            args.append(ArgList(node.start_point.row, node.start_point.column,
                                node.end_point.row, node.end_point.column, texts,
                                any(c.type in ("comment", "line_comment", "block_comment")
                                    for c in node.named_children)))
        if kind in _STRINGS and node.end_point.row > node.start_point.row:
            string_rows.update(range(node.start_point.row + 1, node.end_point.row + 1))
    return FileSyntax(tuple(groups), tuple(args), frozenset(string_rows), root.has_error)


def _walk(node: ts.Node) -> Iterator[ts.Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _statements(block: ts.Node, lines: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """The block's statements that start and end their own lines, in order. A statement
    sharing a line with its neighbour breaks the group (a window must not cut a line)."""
    spans: list[list[int]] = []  # [start row, start col, end row]
    for child in block.named_children:
        end = child.end_point.row - (1 if child.end_point.column == 0 else 0)
        if spans and "comment" in child.type and child.start_point.row == spans[-1][2]:
            continue  # a trailing comment belongs to the statement before it
        spans.append([child.start_point.row, child.start_point.column, end])
    out: list[tuple[int, int]] = []
    for i, (row, col, end) in enumerate(spans):
        starts_line = not lines[row][:col].strip()
        ends_line = i + 1 >= len(spans) or spans[i + 1][0] > end
        out.append((row + 1, end + 1) if starts_line and ends_line else (-1, -1))
    return tuple(out)
