"""Definitions in source files, found with tree-sitter: ladder step 4's raw material.

A citation made inside a function should survive that function moving (another file,
another place in the file, code inserted above it) but not the function changing. So
when a memory is stored, the innermost definition around each cited range becomes the
citation's :class:`~verified_memory.models.Anchor`: its qualified name (``Session.request``,
``impl Trait for Type::fn``), node type and the hash of its normalised text. Later the
verifier lists the definitions of the current file (:func:`definitions`), looks the name
up (:func:`find`) and compares ``text_hash``: equal means relocated, different means
changed.

Design points:

* Line numbers are the project's, not tree-sitter's. Tree-sitter counts rows by ``\\n``
  only, while :func:`~verified_memory.anchors.normalize.split_lines` also splits on CR,
  form feed and other separators. The text is therefore re-joined with ``\\n`` from
  ``split_lines`` before parsing, so row *n* is line *n + 1* by construction. (A separator
  inside a string literal then parses as a newline; tree-sitter recovers, and the line
  numbering stays consistent with every other part of the system.)
* ``text_hash`` is :func:`~verified_memory.anchors.hashing.text_hash` of the
  definition's lines, the same hash citations use for their snippet: re-indentation,
  blank lines, CRLF, tabs and re-wrapping a statement do not change it, a real edit does,
  and an anchor's hash equals the snippet hash of a citation of exactly those lines.
* Each blob is parsed at most once per process run: :class:`DefinitionIndex` keeps an
  LRU cache keyed by (language, blob sha or text digest). The module-level functions use
  one shared index.
* A question about one place (the anchor of a citation) lists only the definitions
  around it (:func:`_around`, the query's captures limited to one node) from a tree the
  index keeps; on a large file that is a small part of listing every definition, with
  the same answer (the node is widened where a definition reaches outside its code).
  That tree is of the part of the file that holds the place (``_Outline.part_rows``: the
  statement at the margin, or one member of a long class), the other lines parsed as
  blank lines, unless the whole file's tree is at hand.
* Missing grammars never crash anything: :func:`language_for` still answers and parsing
  returns no definitions, so such files fall back to line hashes alone.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import threading
import weakref
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from itertools import accumulate, islice, pairwise
from types import MappingProxyType, MethodType
from typing import TYPE_CHECKING, NamedTuple

import xxhash

from verified_memory.anchors._languages import (
    EXTENSIONS,
    GRAMMARS,
    LEADING_SIBLINGS,
    RULES,
    SPAN_PARENTS,
    declaration_patterns,
    definition_kind,
    definition_patterns,
    outer_span,
    scope_labels,
    simple_name,
)
from verified_memory.anchors.hashing import BLANK, TextHasher, hash_line, line_hashes, text_hash
from verified_memory.anchors.normalize import split_lines
from verified_memory.cache import BoundedCache
from verified_memory.models import Anchor

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Parser, Query, Tree

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "MAX_PARSE_BYTES",
    "Definition",
    "DefinitionIndex",
    "anchor_for",
    "available",
    "default_index",
    "definitions",
    "extensions",
    "find",
    "innermost",
    "language_for",
    "unload_grammars",
]

log = logging.getLogger(__name__)

#: Parsed files kept per index. A cached file costs roughly its line count x 60 bytes.
DEFAULT_CACHE_SIZE = 2048
#: Larger texts (minified bundles, generated code) are not parsed: parsing them is slow
#: and their definitions are not what memories cite. They fall back to line hashes.
MAX_PARSE_BYTES = 4_000_000


@dataclass(eq=False, slots=True)
class Definition:
    """One named definition in a file.

    ``start_line``/``end_line`` are 1-based and inclusive and cover what belongs to the
    definition: Python decorators, a leading ``export``, Rust attributes. ``text_hash`` is
    ``hashing.text_hash`` of those lines (whitespace-blind); ``line_hashes`` has one
    ``hashing.hash_line`` per line, for line-level alignment (:mod:`.similarity`).

    A parse lists every definition around the place a question is about (the class
    around a method, all of a small file), and most are never asked for their hashes:
    a definition makes them on first use, from the lines it was parsed from
    (``_Rows``), which it lets go once both are made.
    """

    name: str  # qualified: "Class.method", "outer.inner", "impl Trait for Type::fn"
    kind: str  # tree-sitter node type, e.g. "function_definition", "arrow_function"
    start_line: int
    end_line: int
    #: A constant, variable, field or enum member (module, class or type level) rather
    #: than a function, class or type: anchored and followed by name all the same.
    declaration: bool = False
    _rows: _Rows | None = field(default=None, repr=False)
    _text_hash: str | None = field(default=None, repr=False)
    _line_hashes: tuple[int, ...] | None = field(default=None, repr=False)

    @property
    def text_hash(self) -> str:
        rows = self._rows  # None once both are made (here, or in another thread)
        if self._text_hash is None and rows is not None:
            self._text_hash = rows.text_hash(self.start_line - 1, self.end_line - 1)
            self._made()
        assert self._text_hash is not None
        return self._text_hash

    @property
    def line_hashes(self) -> tuple[int, ...]:
        rows = self._rows
        if self._line_hashes is None and rows is not None:
            self._line_hashes = rows.line_hashes(self.start_line - 1, self.end_line - 1)
            self._made()
        assert self._line_hashes is not None
        return self._line_hashes

    def _made(self) -> None:
        if self._text_hash is not None and self._line_hashes is not None:
            self._rows = None  # nothing more to make from them

    def _key(self) -> tuple[object, ...]:
        return (self.name, self.kind, self.start_line, self.end_line, self.text_hash,
                self.line_hashes, self.declaration)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Definition):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def contains(self, line_start: int, line_end: int) -> bool:
        """Whether the whole range ``line_start..line_end`` lies inside this definition."""
        return self.start_line <= line_start and line_end <= self.end_line

    def anchor(self, line_start: int, language: str) -> Anchor:
        """The anchor of a citation starting at ``line_start`` inside this definition."""
        return Anchor(
            kind=self.kind,
            name=self.name,
            text_hash=self.text_hash,
            offset=line_start - self.start_line,
            language=language,
        )


class _Rows:
    """The lines a parse listed definitions from, for each definition to make its
    hashes from on first use: from the file's line hashes when the caller had them
    made, else from the definition's own lines (a fraction of the file's for a method
    in a large class); the text of a span of most of the file from the caller's
    ``TextHasher`` (``hasher``, made once per file there), or one made then.

    It holds the lines, and the caller's ``hasher`` weakly when it is a method (a
    ``FileText``'s): the definitions outlive the run's files in the index's caches."""

    __slots__ = ("_give", "_hasher", "hashes", "lines")

    def __init__(self, lines: Sequence[str], hashes: Sequence[int] | None,
                 hasher: Callable[[], TextHasher] | None) -> None:
        self.lines = lines
        self.hashes = hashes if hashes is not None and len(hashes) == len(lines) else None
        self._give: Callable[[], TextHasher] | weakref.WeakMethod[Callable[[], TextHasher]] \
            | None = weakref.WeakMethod(hasher) if isinstance(hasher, MethodType) else hasher
        self._hasher: TextHasher | None = None

    def line_hashes(self, first: int, last: int) -> tuple[int, ...]:
        if self.hashes is not None:
            return tuple(self.hashes[first:last + 1])
        return line_hashes(self.lines[first:last + 1])

    def text_hash(self, first: int, last: int) -> str:
        if self._hasher is None and 2 * (last - first + 1) > len(self.lines):
            give = self._give() if isinstance(self._give, weakref.WeakMethod) else self._give
            self._hasher = give() if give is not None else TextHasher(self.lines)
            self._give = None
        if self._hasher is not None:
            return self._hasher.text_hash(first, last)
        return text_hash(self.lines[first:last + 1])


@lru_cache(maxsize=8192)  # asked for every candidate file of every search
def language_for(path: str) -> str | None:
    """The language of a file by its extension, or None when no grammar covers it.

    Answers even when tree-sitter or a grammar is not installed (see :func:`available`).
    """
    _, ext = os.path.splitext(path)
    return EXTENSIONS.get(ext.lower())


def extensions() -> Mapping[str, str]:
    """Every file extension a grammar covers (lower case, with the dot) -> its language."""
    return _EXTENSIONS_VIEW


_EXTENSIONS_VIEW = MappingProxyType(EXTENSIONS)


def available(language: str) -> bool:
    """Whether ``language``'s grammar loads here (tree-sitter and the wheel installed)."""
    return _grammar(language) is not None


def find(defs: Iterable[Definition], name: str) -> list[Definition]:
    """Definitions with exactly this qualified name, in source order.

    Several results are normal (overloads, ``if``/``else`` variants, duplicate names);
    choosing between them is the verifier's job.
    """
    return [d for d in defs if d.name == name]


def innermost(defs: Sequence[Definition], line_start: int, line_end: int) -> Definition | None:
    """The definition with the fewest lines that contains the whole range, or None.

    ``defs`` must be in source order (as :func:`definitions` returns them). Among equally
    small candidates the first wins, which is the outermost when definitions nest on the
    same lines (``type Props = { onClick(): void }`` anchors to ``Props``): its text is
    exactly the cited lines, whereas an inner one is only part of them.
    """
    best: Definition | None = None
    for d in defs:
        if d.start_line > line_start:
            break  # source order: nothing later can start early enough
        if d.end_line >= line_end and (
            best is None or d.end_line - d.start_line < best.end_line - best.start_line
        ):
            best = d
    return best


# --------------------------------------------------------------------------- grammars


@dataclass(frozen=True, slots=True)
class _Grammar:
    name: str
    language: Language
    query: Query | None
    separator: str


@cache
def _grammar(name: str) -> _Grammar | None:
    """Load a grammar and compile its definition query, once per process.

    Any failure (tree-sitter or the wheel missing, an ABI mismatch) is logged and gives
    None, so the caller falls back to line hashes rather than failing a verification.
    """
    spec = GRAMMARS.get(name)
    rules = RULES.get(name)
    if spec is None or rules is None:
        return None
    module_name, function_name = spec
    try:
        ts = importlib.import_module("tree_sitter")
        module = importlib.import_module(module_name)
        language = ts.Language(getattr(module, function_name)())
    except Exception as exc:  # ImportError, ValueError (ABI), anything a wheel may raise
        log.warning("tree-sitter grammar for %s unavailable (%s); using line hashes", name, exc)
        return None
    patterns = definition_patterns(rules, language) + declaration_patterns(rules, language)
    try:
        # all patterns at once: compiling each on its own costs five times as much
        query = ts.Query(language, "\n".join(patterns)) if patterns else None
    except Exception:  # QueryError: keep what this grammar knows, pattern by pattern
        valid: list[str] = []
        for pattern in patterns:
            try:
                ts.Query(language, pattern)
            except Exception as exc:  # a node type or field this grammar lacks
                log.debug("skipping query pattern %r for %s: %s", pattern, name, exc)
                continue
            valid.append(pattern)
        query = ts.Query(language, "\n".join(valid)) if valid else None
    return _Grammar(name, language, query, rules.separator)


# ----------------------------------------------------------------------------- parsing

_local = threading.local()


def unload_grammars() -> None:
    """Forget every loaded grammar and this thread's parsers, so that the next parse
    loads them again as a new process would (benchmarks time a cold start with it)."""
    _grammar.cache_clear()
    _local.__dict__.pop("parsers", None)


def _parser(grammar: _Grammar) -> Parser:
    """A parser for this grammar owned by the calling thread (parsers are not thread-safe)."""
    parsers: dict[str, Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(grammar.name)
    if parser is None:
        ts = importlib.import_module("tree_sitter")
        parser = parsers[grammar.name] = ts.Parser(grammar.language)
    return parser


def _parse(grammar: _Grammar, lines: Sequence[str]) -> Tree | None:
    """The syntax tree of ``lines`` (None: no query to run, or too big to parse)."""
    if grammar.query is None:
        return None
    joined = "\n".join(lines).removeprefix("\ufeff")  # a BOM would parse as an error
    source = joined.encode("utf-8", errors="surrogatepass")
    if len(source) > MAX_PARSE_BYTES:
        log.info("not parsing a %d-byte file: over MAX_PARSE_BYTES", len(source))
        return None
    return _parser(grammar).parse(source)


def _build(grammar: _Grammar, tree: Tree, lines: Sequence[str],
           hashes: Sequence[int] | None = None,
           hasher: Callable[[], TextHasher] | None = None,
           within: Node | None = None) -> tuple[Definition, ...]:
    """The definitions of a parsed file in source order with qualified names; with
    ``within``, only those whose node overlaps that node (its enclosing definitions
    among them, so their names are the same as in the whole list). ``hashes``: the
    lines' hashes when the caller has them made; ``hasher``: gives the lines'
    ``TextHasher`` (each definition makes its hashes when asked: ``_Rows``)."""
    ts = importlib.import_module("tree_sitter")
    cursor = ts.QueryCursor(grammar.query)
    if within is not None:
        cursor.set_byte_range(within.start_byte, within.end_byte)
    captures = cursor.captures(tree.root_node)
    nodes: list[Node] = list(captures.get("def", []))
    defined = {n.id for n in nodes}
    # a declaration whose value is a function or class is that definition (its kind)
    declared = {n.id for n in captures.get("decl", ()) if n.id not in defined}
    nodes += [n for n in captures.get("decl", ()) if n.id in declared]
    # capture order is not source order; outer before inner for equal starts
    nodes.sort(key=lambda n: (n.start_byte, -n.end_byte))
    rows = _Rows(lines, hashes, hasher)
    separator = grammar.separator

    result: list[Definition] = []
    # Definitions enclosing the current one: (end byte, node id, qualified name or None).
    open_defs: list[tuple[int, int, str | None]] = []
    seen: set[int] = set()
    for node in nodes:
        if node.id in seen:
            continue  # matched by two patterns
        seen.add(node.id)
        end_byte = node.end_byte
        while open_defs and open_defs[-1][0] < end_byte:
            open_defs.pop()  # ends before this one does: not an ancestor
        parent_name = open_defs[-1][2] if open_defs else None
        name = simple_name(node, grammar.name)
        qualified: str | None = None
        if name:
            parent = node.parent
            if parent is not None and parent.type == "object":
                stop = open_defs[-1][1] if open_defs else None
                labels = scope_labels(node, stop)
                if labels:
                    name = ".".join([*labels, name])
            qualified = f"{parent_name}{separator}{name}" if parent_name else name
        # an anonymous definition is skipped, and its children are named after the
        # nearest named definition around it
        open_defs.append((end_byte, node.id, qualified or parent_name))
        if not qualified:
            continue
        first, last = outer_span(node)
        result.append(
            Definition(
                name=qualified,
                kind=node.type if node.id in declared else definition_kind(node),
                start_line=first + 1,
                end_line=last + 1,
                declaration=node.id in declared,
                _rows=rows,
            )
        )
    # nodes were sorted by their own start; spans may start earlier (decorators)
    result.sort(key=lambda d: (d.start_line, -d.end_line))
    return tuple(result)


def _around(tree: Tree, lines: Sequence[str], first: int, last: int) -> Node:
    """The smallest node whose definitions include every definition that holds lines
    ``first..last`` (1-based, neither blank): the innermost node around their text,
    unless a definition can reach outside it (:func:`outer_span`): a wrapper on the
    way (decorators, ``export``, a lone ``const``) is taken whole, and so is the parent
    of a leading decorator or attribute (the definition it belongs to follows it)."""
    def point(row: int, text: str) -> tuple[int, int]:
        column = len(text.encode("utf-8", errors="surrogatepass"))
        if row == 0 and lines[0].startswith("\ufeff"):
            column = max(0, column - 3)  # the BOM is not parsed (see _parse)
        return row, column

    head, tail = lines[first - 1], lines[last - 1]
    start = point(first - 1, head[: len(head) - len(head.lstrip())])
    end = point(last - 1, tail.rstrip())
    node = tree.root_node.descendant_for_point_range(start, end) or tree.root_node
    chain = [node]
    while (parent := chain[-1].parent) is not None:
        chain.append(parent)
    chain.reverse()  # the root first
    for outer, inner in pairwise(chain):
        if outer.type in SPAN_PARENTS or inner.type in LEADING_SIBLINGS:
            return outer
    return node


class DefinitionIndex:
    """Definitions per file, parsed at most once per blob (an LRU of ``maxsize`` files).

    The verifier should pass the git blob sha as ``key``: it names the content exactly
    and saves hashing the text. Without a key, an xxh3-128 digest of the text is used.
    ``parses`` counts real parses (cache misses), for tests and telemetry. Thread-safe.

    Most questions are about one place in a file (the definition around a citation):
    :meth:`anchor_for` and :meth:`starting_at` list only the definitions around it, from
    a tree of the part of the file that holds it (``_part``), kept and used again for
    places in the same part; where no part is much smaller than the file, or a part
    does not parse cleanly, from the whole file's tree, kept so that listing the whole
    file later still parses it once (trees are kept for the last ``TREES`` files). A
    file asked about in part and then listed whole is parsed twice: over the
    real-history benchmark, 5 of 206 Java files were.
    """

    #: Syntax trees kept for files whose definitions were listed only in part.
    TREES = 32

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        self.maxsize = maxsize
        self.parses = 0
        self._cache: BoundedCache[tuple[str, str], tuple[Definition, ...]] = BoundedCache(
            maxsize)
        self._trees: BoundedCache[tuple[str, str], Tree | None] = BoundedCache(self.TREES)
        # trees of a part of a file (``_part``) and the rows kept in it
        self._parts: BoundedCache[tuple[str, str], tuple[Tree, list[tuple[int, int]]]] = \
            BoundedCache(self.TREES)
        self._outlines: BoundedCache[tuple[str, str], _Outline] = BoundedCache(self.TREES)
        # (language, key, word) -> the definitions of the parts that hold ``word`` (``named``)
        self._named: BoundedCache[tuple[str, str, str], tuple[Definition, ...]] = \
            BoundedCache(maxsize)
        self._around: BoundedCache[tuple[str, str, int, int], tuple[Definition, ...]] = \
            BoundedCache(maxsize)
        self._lock = threading.Lock()  # guards ``parses``

    def definitions(
        self, path: str, text: str, key: str | None = None,
        hashes: Sequence[int] | None = None, *, lines: Sequence[str] | None = None,
        hasher: Callable[[], TextHasher] | None = None,
    ) -> tuple[Definition, ...]:
        """Every definition in ``text`` (the content of ``path``), in source order.

        Empty for unsupported languages, missing grammars, empty files and unparseable
        input; syntax errors give whatever still parses.

        What the caller has of the text already is not made again: ``hashes`` (its
        line hashes), ``lines`` (``split_lines(text)``), ``hasher`` (gives its
        ``TextHasher``, asked only when a definition's span is most of the file). The
        definitions make their hashes on first use (``Definition``): most are never
        asked.
        """
        found = self._file(path, text, key)
        if found is None:
            return ()
        grammar, cache_key = found

        def build() -> tuple[Definition, ...]:
            split = split_lines(text) if lines is None else lines
            tree = self._tree(grammar, cache_key, split, path)
            self._trees.pop(cache_key)  # listed whole from now on
            return self._built(path, lambda: () if tree is None else _build(
                grammar, tree, split, hashes, hasher))

        return self._cache.get_or_compute(cache_key, build)

    def definitions_around(
        self, path: str, text: str, first: int, last: int, key: str | None = None,
        hashes: Sequence[int] | None = None, *, lines: Sequence[str] | None = None,
        hasher: Callable[[], TextHasher] | None = None,
    ) -> tuple[Definition, ...]:
        """Definitions of ``text`` in source order, among them every one that holds
        lines ``first..last`` (1-based; neither may be blank): the whole list when it
        is at hand, else those around that place (:func:`_around`), which costs a
        fraction of listing a large file. Arguments as for :meth:`definitions`."""
        found = self._file(path, text, key)
        if found is None:
            return ()
        grammar, cache_key = found
        whole = self._cache.get(cache_key)
        if whole is not None:
            return whole

        def build() -> tuple[Definition, ...]:
            split = split_lines(text) if lines is None else lines
            if not 1 <= first <= last <= len(split):
                return ()

            def around(tree: Tree, parsed: Sequence[str]) -> tuple[Definition, ...]:
                part = hashes if hashes is None or len(hashes) == len(parsed) \
                    else hashes[:len(parsed)]
                return self._built(path, lambda: _build(
                    grammar, tree, parsed, part, hasher,
                    within=_around(tree, parsed, first, last)))

            part = self._part(grammar, cache_key, split, first, last, path)
            if part is not None:  # the statement or member around the place, alone
                found = around(part, split)
                if innermost(found, first, last) is not None:
                    return found
            whole = self._tree(grammar, cache_key, split, path)
            return () if whole is None else around(whole, split)

        return self._around.get_or_compute((*cache_key, first, last), build)

    def named(
        self, path: str, text: str, word: str, key: str | None = None,
        hashes: Sequence[int] | None = None, *, lines: Sequence[str] | None = None,
        hasher: Callable[[], TextHasher] | None = None,
    ) -> tuple[Definition, ...]:
        """Definitions of ``text`` in source order, among them every one whose simple
        name holds ``word`` (an identifier), each as the whole list has it: the whole
        list when it is at hand, else the definitions of the parts of the file that hold
        the lines where ``word`` occurs (``_Outline.part_rows``), which costs a fraction of
        listing a large file when the name is written in a few places; none when no line
        holds it (a name's words are spelled in its definition's lines). Arguments as
        for :meth:`definitions`."""
        found = self._file(path, text, key)
        if found is None:
            return ()
        grammar, cache_key = found
        whole = self._cache.get(cache_key)
        if whole is not None or not word:
            return whole if whole is not None else self.definitions(
                path, text, key, hashes, lines=lines, hasher=hasher)

        def build() -> tuple[Definition, ...]:
            split = split_lines(text) if lines is None else lines
            rows = [i for i, line in enumerate(split) if word in line]
            if not rows:
                return ()  # a definition's name is spelled in its own lines
            tree = None if self._whole_serves(cache_key, split) else self._parse_part(
                grammar, split, self._outline(grammar, cache_key, split).part_rows(rows))
            if tree is None:
                return self.definitions(path, text, key, hashes, lines=split, hasher=hasher)
            return self._built(path, lambda: _build(
                grammar, tree, split, hashes, hasher))

        return self._named.get_or_compute((*cache_key, word), build)

    def anchor_for(
        self, path: str, text: str, line_start: int, line_end: int, key: str | None = None,
        hashes: Sequence[int] | None = None, *, lines: Sequence[str] | None = None,
        hasher: Callable[[], TextHasher] | None = None,
    ) -> Anchor | None:
        """The anchor of a citation: the innermost definition containing the whole range
        but for blank lines at its edges (agents often cite the blank line after a
        function: that line is outside it, yet the citation is of the function). The
        offset is from the range as given (-1 for one leading blank line).

        None when no definition contains it or the language is not supported.
        ``hashes``, ``lines``, ``hasher``: as for :meth:`definitions`.
        """
        language = language_for(path)
        if language is None:
            return None
        split = split_lines(text) if lines is None else lines
        size = len(split) if hashes is None else len(hashes)

        def blank(row: int) -> bool:  # 1-based; only the cited rows' edges are hashed
            return (hash_line(split[row - 1]) if hashes is None
                    else hashes[row - 1]) == BLANK

        first, last = line_start, min(line_end, size)
        while first < last and blank(first):
            first += 1
        while last > first and blank(last):
            last -= 1
        if 1 <= first <= last <= size and not blank(first):
            defs = self.definitions_around(path, text, first, last, key, hashes,
                                           lines=split, hasher=hasher)
        else:  # only blank lines, or none: no place to look around
            defs = self.definitions(path, text, key, hashes, lines=split, hasher=hasher)
        found = innermost(defs, first, last)
        return found.anchor(line_start, language) if found is not None else None

    def starting_at(
        self, path: str, text: str, line: int, name: str, key: str | None = None,
        hashes: Sequence[int] | None = None, *, lines: Sequence[str] | None = None,
        hasher: Callable[[], TextHasher] | None = None,
    ) -> Definition | None:
        """The first definition (in source order) named ``name`` whose span starts at
        ``line``, or None; lists only the definitions around that line when the file's
        whole list is not at hand. Arguments as for :meth:`definitions`."""
        if hashes is not None and not (1 <= line <= len(hashes) and hashes[line - 1] != BLANK):
            return None  # a definition's first line is never blank
        return next((d for d in self.definitions_around(path, text, line, line, key, hashes,
                                                         lines=lines, hasher=hasher)
                     if d.start_line == line and d.name == name), None)

    def _part(self, grammar: _Grammar, cache_key: tuple[str, str], lines: Sequence[str],
              first: int, last: int, path: str) -> Tree | None:
        """The tree of the part of the file that holds lines ``first..last`` with every
        definition around them (``_Outline.part_rows``), every other line parsed as blank: rows
        keep their numbers, and a large file costs the parse of one statement or
        member. Kept per file, and parsed again only for a place outside the part kept.
        None when the whole file's tree is at hand (or will serve as cheaply: a part of
        most of the file), or the part does not parse cleanly."""
        if self._whole_serves(cache_key, lines):
            return None
        kept = self._parts.get(cache_key)
        if kept is not None and any(a <= first - 1 and last <= b for a, b in kept[1]):
            return kept[0]
        ranges = self._outline(grammar, cache_key, lines).part_rows(range(first - 1, last))
        tree = self._parse_part(grammar, lines, ranges)
        if tree is None or ranges is None:
            return None
        self._parts.pop(cache_key)  # the part of another place replaces the one kept
        return self._parts.put(cache_key, (tree, ranges))[0]

    def _whole_serves(self, cache_key: tuple[str, str], lines: Sequence[str]) -> bool:
        """Whether the whole file's tree serves as well as a part's: it is at hand, or
        the file is too short for finding a part to pay (``_PART_MIN_ROWS``)."""
        return cache_key in self._trees or len(lines) < _PART_MIN_ROWS

    def _outline(self, grammar: _Grammar, cache_key: tuple[str, str],
                 lines: Sequence[str]) -> _Outline:
        """The file's ``_Outline``, kept for the last ``TREES`` files."""
        return self._outlines.get_or_compute(cache_key, lambda: _Outline(lines, grammar.name))

    def _parse_part(self, grammar: _Grammar, lines: Sequence[str],
                    ranges: Sequence[tuple[int, int]] | None) -> Tree | None:
        """The tree of ``lines`` with only the rows of ``ranges`` kept, the others blank
        (counted as a parse); None when the part is most of the file (no ranges, or
        more than ``_PART_SHARE`` of its lines), or does not parse cleanly."""
        if ranges is None or sum(b - a for a, b in ranges) > _PART_SHARE * len(lines):
            return None
        source = [""] * len(lines)
        for a, b in ranges:
            source[a:b] = lines[a:b]
        try:
            tree = _parse(grammar, source)
        except Exception:  # as in _tree: the whole file is tried next
            return None
        with self._lock:
            self.parses += 1
        if tree is None or tree.root_node.has_error:
            return None
        return tree

    def clear(self) -> None:
        self._cache.clear()
        self._trees.clear()
        self._parts.clear()
        self._named.clear()
        self._outlines.clear()
        self._around.clear()

    def __len__(self) -> int:
        return len(self._cache)

    # ------------------------------------------------------------------ helpers

    def _file(self, path: str, text: str,
              key: str | None) -> tuple[_Grammar, tuple[str, str]] | None:
        """The grammar of ``path`` and the cache key of its text, or None when it is not
        parsed at all (no language or grammar)."""
        language = language_for(path)
        if language is None:
            return None
        grammar = _grammar(language)
        if grammar is None:
            return None
        return grammar, (language, key if key is not None else _digest(text))

    def _tree(self, grammar: _Grammar, cache_key: tuple[str, str], lines: Sequence[str],
              path: str) -> Tree | None:
        """The file's syntax tree: kept, or parsed (and counted) now."""
        def parse() -> Tree | None:
            try:
                tree = _parse(grammar, lines)
            except Exception:  # a grammar bug must cost an anchor, not a verification
                log.exception("tree-sitter failed on %s; using line hashes", path)
                tree = None
            with self._lock:
                self.parses += 1
            return tree

        return self._trees.get_or_compute(cache_key, parse)

    @staticmethod
    def _built(path: str, build: Callable[[], tuple[Definition, ...]]) -> tuple[Definition, ...]:
        try:
            return build()
        except Exception:  # as in _tree
            log.exception("tree-sitter failed on %s; using line hashes", path)
            return ()


#: A part parsed for the definitions around a place is at most this share of its file's
#: lines (else the whole file is parsed: its tree serves every later question).
_PART_SHARE = 0.75
#: A file shorter than this (in lines) is parsed whole: finding the part of it to parse
#: would cost about as much as the parse it saves.
_PART_MIN_ROWS = 300
#: A top-level statement longer than this (in lines) is cut down to the member around
#: the place (a class, an ``impl``, a function; in Python only a class or function).
_MEMBER_ROWS = 100
#: Words that may start a line at the margin yet continue the statement before it (a
#: class head wrapped before ``extends``, a Rust ``where`` clause, ``} else {``...).
_CONTINUING = frozenset({"and", "as", "catch", "elif", "else", "except", "extends",
                         "finally", "implements", "in", "instanceof", "is", "not", "or",
                         "permits", "satisfies", "throws", "where", "while"})


def _starts_statement(lines: Sequence[str], at: int, language: str, indent: str = "") -> bool:
    """Whether line ``at`` (0-based) starts a statement at indentation ``indent``
    (exactly): a letter, ``_``, ``$`` or ``@`` right after it (``#[`` in Rust), no
    backslash continuing the line before, and no word that continues a statement
    (``else``, ``except``, ``as``...)."""
    line = lines[at]
    if indent and not line.startswith(indent):
        return False
    rest = line[len(indent):]
    if not rest or not (rest[0].isalpha() or rest[0] in "_$@"
                        or (language == "rust" and rest.startswith("#["))):
        return False
    if at and lines[at - 1].rstrip().endswith("\\"):
        return False
    return rest.split(None, 1)[0].rstrip(":;({") not in _CONTINUING


def _statement_starts(lines: Sequence[str], language: str, indent: str, lo: int,
                      hi: int) -> list[int]:
    """The first rows of the statements at ``indent`` among rows ``lo..hi`` (half-open),
    in order: each line that starts a statement (``_starts_statement``) and does not
    follow a decorator, annotation or attribute, which belongs to the statement after
    it (``@Override``, ``@property``, ``#[test]``). Rows before the first start belong
    to no statement (a file's opening comments). The lines that may start one are
    found by a regular expression over their text (most are indented deeper)."""
    starts: list[int] = []
    decorated = False
    for row, _ in _matching_rows(lines, _may_start(indent), lo, hi):
        if _starts_statement(lines, row, language, indent):
            if not decorated:
                starts.append(row)
            decorated = lines[row].startswith(("@", "#["), len(indent))
    return starts


def _matching_rows(lines: Sequence[str], pattern: re.Pattern[str], lo: int,
                   hi: int) -> Iterator[tuple[int, re.Match[str]]]:
    """Each match of ``pattern`` (one that starts at a line feed and stays on its line)
    in rows ``lo..hi`` (half-open), each row read after a line feed, with its row: one
    regular expression over the joined text, not a test of each line."""
    text = "\n" + "\n".join(lines[lo:hi])
    row, seen = lo - 1, 0
    for found in pattern.finditer(text):
        row += text.count("\n", seen, found.start() + 1)  # the feeds up to this match's
        seen = found.start() + 1
        yield row, found


@lru_cache(maxsize=64)
def _may_start(indent: str) -> re.Pattern[str]:
    """Lines whose character after ``indent`` may start a statement: a letter, ``_``,
    ``$``, ``@`` or ``#`` (``_starts_statement`` tells)."""
    return re.compile("\n" + re.escape(indent) + r"(?:[^\W\d]|[$@#])")  # "\n": fast to find


@lru_cache(maxsize=64)
def _shallower(width: int) -> re.Pattern[str]:
    """Lines indented by fewer than ``width`` spaces or tabs (one at least), followed by
    a character that may start a statement; group 1 is the indentation."""
    return re.compile(rf"\n([ \t]{{1,{width - 1}}})(?:[^\W\d]|[$@#])")


#: What may open a string over several lines, by language: the lines of a piece left
#: out must start and end outside them, and outside block comments.
_SPANNING = {"python": (b'"""', b"'''"), "java": (b'"""',), "rust": (b'"',), "go": (b"`",)}
_SPANNING_JS = (b"`",)
_NO_BLOCK_COMMENTS = frozenset({"python"})


class _Outline:
    """Where a file's statements and members start, and what each piece of it opens
    and closes, found once per file (``DefinitionIndex`` keeps the last ``TREES``):
    every part of the file parsed for a question is chosen from it."""

    def __init__(self, lines: Sequence[str], language: str) -> None:
        self.lines, self.language = lines, language
        tops = _statement_starts(lines, language, "", 0, len(lines))
        #: the first row of each statement at the margin, and of the rows before them
        self.tops = tops if tops[:1] == [0] else [0, *tops]
        self._members: dict[int, tuple[str, int, int, list[int]] | None] = {}
        self._quotes = _SPANNING.get(language, _SPANNING_JS)
        self._comments = language not in _NO_BLOCK_COMMENTS
        # the file's bytes, and where each row starts in them (each piece is counted in
        # a slice: no text is joined again per question)
        self._data = "\n".join(lines).encode("utf-8", "surrogatepass")
        lengths: Iterable[int] = map(len, lines) if self._data.isascii() else (
            len(line.encode("utf-8", "surrogatepass")) for line in lines)
        self._offsets = [at + row for row, at in enumerate(accumulate(lengths, initial=0))]
        # (start, end) -> what those rows hold (``_piece``)
        self._pieces: dict[tuple[int, int], tuple[bool, tuple[int, ...],
                                                  tuple[bool, bool] | None]] = {}

    def part_rows(self, rows: Iterable[int]) -> list[tuple[int, int]] | None:
        """The rows to parse (half-open 0-based ranges, merged, in order) so that every
        definition around each of ``rows`` (0-based) is in the tree as it is in the
        whole file's, the others parsed as blank lines; None when that is the whole file.

        A definition around a line lies inside the statement at the margin that holds
        it (``_statement_starts``): the other statements cannot change it. A long
        statement (a class, an ``impl``) is cut down further to its head (up to its
        first member), the members that hold rows (the same test at the members'
        indentation) and its closing lines (its closing brace; in Python, whose blocks
        end at their last statement, its last member): the class around a member keeps
        its first and last row, and so its name and span. A statement or member is
        left out only if it can be (``_blank``)."""
        wanted = sorted(set(rows))
        lines, bounds = self.lines, [*self.tops, len(self.lines)]
        # the file in pieces, in order: (first row, end row, whether a wanted row is in
        # it, whether it starts among a statement's members rather than at the margin)
        pieces: list[_Piece] = []
        for start, end in pairwise(bounds):
            holds = _holds(wanted, start, end)
            outline = self.members(start, end) if holds else None
            if outline is None:
                pieces.append(_Piece(start, end, holds, False))
                continue
            head_end, close, starts = outline[1:]
            pieces.append(_Piece(start, head_end, True, False))
            pieces += [_Piece(a, b, _holds(wanted, a, b), True)
                       for a, b in pairwise([*starts, close])]
            pieces.append(_Piece(close, end, True, True))
        kept = self._blank([p for p in pieces if p.start < p.end])
        return None if kept == [(0, len(lines))] else kept

    def members(self, start: int, end: int) -> tuple[str, int, int, list[int]] | None:
        """``_members`` of the statement of rows ``start..end``, where it is long (and,
        in Python, a class or function: other blocks continue at the margin, ``else:``)
        (else None)."""
        if end - start <= _MEMBER_ROWS:
            return None
        if self.language == "python" and not next(
                (line for line in islice(self.lines, start, end) if line[:1].isalpha()),
                "").startswith(("class ", "def ", "async def ")):
            return None  # the first line after the decorators says what it is
        if start not in self._members:
            self._members[start] = _members(self.lines, self.language, start, end)
        return self._members[start]

    def _blank(self, pieces: Sequence[_Piece]) -> list[tuple[int, int]]:
        """The rows of the pieces to parse (merged ranges, in order): those that hold a
        wanted row, and any other that cannot be parsed as blank lines without changing
        what the others are.

        A piece is left out only if it is whole, and so is the piece before it: it
        closes every bracket it opens, and starts and ends outside multi-line strings
        (an even count of their quotes from the start of the file) and block comments.
        A piece that is not whole is a fragment of a statement cut where a line inside
        it looked like the start of another (text at the margin in a string, a bundle's
        modules at the margin); the piece after such a fragment may be what it
        decorates. Told by counting, so a bracket or quote inside a string or comment
        keeps more lines than needed, never fewer."""
        state = _State((0,) * len(self._quotes), False)
        kept: list[tuple[int, int]] = []
        whole_before = True
        for index, piece in enumerate(pieces):
            balanced, parities, comments = self._piece(piece.start, piece.end)
            after = _State(tuple(a ^ b for a, b in zip(state.parity, parities, strict=True)),
                           comments[state.in_comment] if comments else state.in_comment)
            whole = balanced and state.outside() and after.outside()
            if piece.holds or not (whole and whole_before):
                if kept and kept[-1][1] == piece.start:
                    kept[-1] = (kept[-1][0], piece.end)
                else:
                    kept.append((piece.start, piece.end))
            # a cut statement's head opens the block its members are in: whole as a head
            head = not piece.member and index + 1 < len(pieces) and pieces[index + 1].member
            whole_before = whole or (head and state.outside() and after.outside())
            state = after
        return kept

    def _piece(self, start: int, end: int
               ) -> tuple[bool, tuple[int, ...], tuple[bool, bool] | None]:
        """What rows ``start..end`` hold, counted once per file: whether they close
        every bracket they open, the parity of each multi-line quote in them, and
        whether they end inside a block comment if they start outside one, and if
        inside (None where there are none)."""
        found = self._pieces.get((start, end))
        if found is None:
            data = self._data[self._offsets[start]:self._offsets[end]]
            brackets = data.translate(None, _NOT_BRACKETS)  # one pass, then a short one
            balanced = all(brackets.count(o) == brackets.count(c)
                           for o, c in (b"()", b"[]", b"{}"))
            parities = tuple(data.count(quote) % 2 for quote in self._quotes)
            comments = (_ends_in_comment(data, False), _ends_in_comment(data, True)) \
                if self._comments and (b"/*" in data or b"*/" in data) else None
            found = self._pieces[(start, end)] = (balanced, parities, comments)
        return found


class _Piece(NamedTuple):
    """A statement at the margin, a member of one, or a cut statement's head or closing
    lines: rows ``start..end`` (half-open)."""

    start: int
    end: int
    holds: bool  # a row the question is about
    member: bool  # starts among a statement's members, not at the margin


class _State(NamedTuple):
    """Where a file's lines stand after some rows: the parity of each multi-line
    quote seen, and whether a block comment is open."""

    parity: tuple[int, ...]
    in_comment: bool

    def outside(self) -> bool:
        return not self.in_comment and not any(self.parity)


#: Every byte but the brackets ``_Outline._piece`` counts.
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"()[]{}")))


def _ends_in_comment(data: bytes, inside: bool) -> bool:
    """Whether ``data`` ends inside a block comment, given whether it starts in one:
    each ``/*`` opens one, up to the next ``*/`` (banners of ``/*`` lines are one)."""
    at = 0
    while True:
        found = data.find(b"*/" if inside else b"/*", at)
        if found < 0:
            return inside
        at, inside = found + 2, not inside


def _holds(rows: Sequence[int], start: int, end: int) -> bool:
    """Whether one of ``rows`` (sorted) is in ``start..end`` (half-open)."""
    at = bisect_right(rows, start - 1)
    return at < len(rows) and rows[at] < end


def _members(lines: Sequence[str], language: str, start: int,
             end: int) -> tuple[str, int, int, list[int]] | None:
    """The members of the statement of rows ``start..end`` (half-open): their
    indentation (the first line's inside the block the statement opens), where its
    head ends (its first member), where its closing lines (less indented than its
    members; in Python, its last member) start, and the first row of each member
    before them. None when they cannot be told:
    the statement opens no block, its first line inside is not indented, or a
    statement inside is less indented than that line (not a block of members)."""
    opens = _opens_block_py if language == "python" else _opens_block
    opening = next((at for at in range(start, end) if opens(lines[at])), None)
    inside = None if opening is None else next(
        (at for at in range(opening + 1, end) if lines[at].strip()), None)
    if inside is None:
        return None
    indent = lines[inside][:len(lines[inside]) - len(lines[inside].lstrip(" \t"))]
    if not indent:
        return None
    if len(indent) > 1:  # a statement less indented (a line indented at all, less)
        for row, found in _matching_rows(lines, _shallower(len(indent)), inside + 1, end):
            if not lines[row].startswith(indent) and _starts_statement(
                    lines, row, language, found.group(1)):
                return None
    close = end
    while close > inside and (not lines[close - 1].strip()
                              or not lines[close - 1].startswith(indent)):
        close -= 1  # the statement's closing lines (``}``), and blank lines
    starts = _statement_starts(lines, language, indent, inside, close)
    if language == "python" and starts:
        # a block ends at its last statement (no closing brace): that member is kept
        # as the closing lines, so the statement keeps its span
        close = starts.pop()
    if not starts:
        return None
    return indent, starts[0], close, starts


def _opens_block(line: str) -> bool:
    return line.rstrip().endswith("{")


def _opens_block_py(line: str) -> bool:
    """Whether a Python line ends a block's head (``:``, then perhaps a comment)."""
    return _PY_BLOCK_HEAD.search(line) is not None


_PY_BLOCK_HEAD = re.compile(r":[ \t]*(?:#.*)?$")


def _digest(text: str) -> str:
    return "xxh128:" + xxhash.xxh3_128_hexdigest(text.encode("utf-8", errors="surrogatepass"))


_default = DefinitionIndex()


def default_index() -> DefinitionIndex:
    """The process-wide index behind :func:`definitions` and :func:`anchor_for`."""
    return _default


def definitions(path: str, text: str, key: str | None = None) -> tuple[Definition, ...]:
    """Every definition in a file, in source order (see :meth:`DefinitionIndex.definitions`)."""
    return _default.definitions(path, text, key)


def anchor_for(
    path: str, text: str, line_start: int, line_end: int, key: str | None = None,
    hashes: Sequence[int] | None = None,
) -> Anchor | None:
    """The innermost definition around ``line_start..line_end`` as an Anchor, or None."""
    return _default.anchor_for(path, text, line_start, line_end, key, hashes)
