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
  That tree is of the part of the file that holds the place (:func:`_part_rows`: the
  statement at the margin, or one member of a long class), the other lines parsed as
  blank lines, unless the whole file's tree is at hand.
* Missing grammars never crash anything: :func:`language_for` still answers and parsing
  returns no definitions, so such files fall back to line hashes alone.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING

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
from verified_memory.anchors.hashing import BLANK, TextHasher, line_hashes
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


@dataclass(frozen=True, slots=True)
class Definition:
    """One named definition in a file.

    ``start_line``/``end_line`` are 1-based and inclusive and cover what belongs to the
    definition: Python decorators, a leading ``export``, Rust attributes. ``text_hash`` is
    ``hashing.text_hash`` of those lines (whitespace-blind); ``line_hashes`` has one
    ``hashing.hash_line`` per line, for line-level alignment (:mod:`.similarity`).
    """

    name: str  # qualified: "Class.method", "outer.inner", "impl Trait for Type::fn"
    kind: str  # tree-sitter node type, e.g. "function_definition", "arrow_function"
    start_line: int
    end_line: int
    text_hash: str
    line_hashes: tuple[int, ...]
    #: A constant, variable, field or enum member (module, class or type level) rather
    #: than a function, class or type: anchored and followed by name all the same.
    declaration: bool = False

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


@lru_cache(maxsize=8192)  # asked for every candidate file of every search
def language_for(path: str) -> str | None:
    """The language of a file by its extension, or None when no grammar covers it.

    Answers even when tree-sitter or a grammar is not installed (see :func:`available`).
    """
    _, ext = os.path.splitext(path)
    return EXTENSIONS.get(ext.lower())


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


def _extract(grammar: _Grammar, lines: Sequence[str],
             hashes: Sequence[int] | None = None,
             hasher: TextHasher | None = None) -> tuple[Definition, ...]:
    """Parse ``lines`` and list their definitions in source order with qualified names
    (``hashes`` and ``hasher``: the caller's, of these lines, when it has them)."""
    tree = _parse(grammar, lines)
    return () if tree is None else _build(grammar, tree, lines, hashes, hasher)


def _build(grammar: _Grammar, tree: Tree, lines: Sequence[str],
           hashes: Sequence[int] | None = None, hasher: TextHasher | None = None,
           within: Node | None = None) -> tuple[Definition, ...]:
    """The definitions of a parsed file in source order with qualified names; with
    ``within``, only those whose node overlaps that node (its enclosing definitions
    among them, so their names are the same as in the whole list)."""
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
    if hashes is None or len(hashes) != len(lines):
        hashes = line_hashes(lines)
    if hasher is None:
        hasher = TextHasher(lines)
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
                text_hash=hasher.text_hash(first, last),
                line_hashes=tuple(hashes[first : last + 1]),
                declaration=node.id in declared,
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
        # trees of a part of a file (``_part``) and the rows a place must lie in to use it
        self._parts: BoundedCache[tuple[str, str], tuple[Tree, int, int]] = BoundedCache(
            self.TREES)
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
        ``TextHasher``, asked only when the text is parsed).
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
                grammar, tree, split, hashes, hasher() if hasher is not None else None))

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
                    grammar, tree, parsed, part, hasher() if hasher is not None else None,
                    within=_around(tree, parsed, first, last)))

            part = self._part(grammar, cache_key, split, first, last, path)
            if part is not None:  # the statement or member around the place, alone
                found = around(part, split)
                if innermost(found, first, last) is not None:
                    return found
            whole = self._tree(grammar, cache_key, split, path)
            return () if whole is None else around(whole, split)

        return self._around.get_or_compute((*cache_key, first, last), build)

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
        if hashes is None:
            hashes = line_hashes(split_lines(text) if lines is None else lines)
        first, last = line_start, min(line_end, len(hashes))
        while first < last and hashes[first - 1] == BLANK:
            first += 1
        while last > first and hashes[last - 1] == BLANK:
            last -= 1
        if 1 <= first <= last <= len(hashes) and hashes[first - 1] != BLANK:
            defs = self.definitions_around(path, text, first, last, key, hashes,
                                           lines=lines, hasher=hasher)
        else:  # only blank lines, or none: no place to look around
            defs = self.definitions(path, text, key, hashes, lines=lines, hasher=hasher)
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
        definition around them (``_part_rows``), every other line parsed as blank: rows
        keep their numbers, and a large file costs the parse of one statement or
        member. Kept per file, and parsed again only for a place outside the part kept.
        None when the whole file's tree is at hand (or will serve as cheaply: a part of
        most of the file), or the part does not parse cleanly."""
        if cache_key in self._trees:
            return None
        kept = self._parts.get(cache_key)
        if kept is not None and kept[1] <= first - 1 and last <= kept[2]:
            return kept[0]
        part = _part_rows(lines, first, last, grammar.name)
        if part is None:
            return None
        ranges, lo, hi = part
        if sum(b - a for a, b in ranges) > _PART_SHARE * len(lines):
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
        self._parts.pop(cache_key)  # the part of another place replaces the one kept
        return self._parts.put(cache_key, (tree, lo, hi))[0]

    def clear(self) -> None:
        self._cache.clear()
        self._trees.clear()
        self._parts.clear()
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
#: A top-level statement longer than this (in lines) is cut down to the member around
#: the place, in a language whose blocks are braces (a class, an ``impl``, a function).
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


def _starts(lines: Sequence[str], rows: Iterable[int], language: str,
            indent: str) -> Iterator[int]:
    """The rows of ``rows`` that start a statement at ``indent`` (``_starts_statement``),
    in their order. Each row is first tested cheaply: most lines are indented deeper,
    and a scan passes hundreds of them."""
    width = len(indent)
    for at in rows:
        char = lines[at][width:width + 1]
        if (char.isalpha() or (char != "" and char in "_$@#")) \
                and _starts_statement(lines, at, language, indent):
            yield at


def _top_level_after(lines: Sequence[str], last: int, language: str, indent: str = "",
                     floor: int = 0) -> int | None:
    """The index of the first line after line ``last`` (1-based) that starts another
    statement at the margin (at ``indent``: ``_starts_statement``) than the one that
    holds line ``last`` (which starts at ``floor`` or after); the statement after a
    decorator, annotation or attribute is the one it belongs to, not another. None
    when there is none."""
    holding = next(_starts(lines, range(last - 1, floor - 1, -1), language, indent), None)
    decorated = holding is not None and _decorates(lines[holding], indent)
    for at in _starts(lines, range(last, len(lines)), language, indent):
        if not decorated:
            return at
        decorated = _decorates(lines[at], indent)
    return None


def _decorates(line: str, indent: str) -> bool:
    """Whether a statement start is a decorator, annotation or attribute: it belongs to
    the statement after it (``@Override``, ``@property``, ``#[test]``)."""
    return line.startswith(("@", "#["), len(indent))


def _top_level_before(lines: Sequence[str], first: int, language: str, indent: str = "",
                      floor: int = 0) -> int:
    """The index of the line that starts the statement at the margin (at ``indent``)
    holding line ``first`` (1-based): the last statement start at or before it, or the
    decorator, annotation or attribute above it that belongs to it; ``floor`` when
    there is none from there."""
    starts = _starts(lines, range(first - 1, floor - 1, -1), language, indent)
    start = next(starts, floor)
    for above in starts:
        if not _decorates(lines[above], indent):
            break
        start = above  # the definition's own decorator, annotation or attribute
    return start


def _part_rows(lines: Sequence[str], first: int, last: int,
               language: str) -> tuple[list[tuple[int, int]], int, int] | None:
    """The rows to parse for the definitions around lines ``first..last`` (1-based), as
    half-open 0-based ranges, and the rows ``lo..hi`` a later place must lie in for the
    same tree to serve it.

    A definition around the place lies inside the statements at the margin that hold
    it (``_top_level_before``, ``_top_level_after``): the rest of the file cannot change
    it. In a language whose blocks are braces, a long statement (a class, an ``impl``)
    is cut down further to the member that holds the place (the same test at the
    members' indentation), with the statement's head and closing lines: the class
    around the member keeps its first and last row, and so its name and span. None
    when no part of the file is smaller than the file."""
    end = _top_level_after(lines, last, language)
    end = len(lines) if end is None else end
    start = _top_level_before(lines, first, language)
    if language != "python" and end - start > _MEMBER_ROWS:
        member = _member_rows(lines, first, last, language, start, end)
        if member is not None:
            return member
    if start == 0 and end == len(lines):
        return None
    return [(start, end)], start, end


def _member_rows(lines: Sequence[str], first: int, last: int, language: str, start: int,
                 end: int) -> tuple[list[tuple[int, int]], int, int] | None:
    """``_part_rows`` within the statement of rows ``start..end`` (half-open): its head
    (up to its first member), the members that hold lines ``first..last`` and its
    closing lines (less indented than its members). None when the place is not inside
    its members, or they cannot be told (no indented statement, a head that does not
    open a brace)."""
    indent = ""  # the members': the least indentation a statement has
    for at in range(start + 1, end):
        line = lines[at]
        if line[:1] not in (" ", "\t") or (indent and line.startswith(indent)):
            continue  # at the margin, or indented as deep as a statement seen already
        code = line.lstrip(" \t")
        width = len(line) - len(code)
        if code and (not indent or width < len(indent)) \
                and _starts_statement(lines, at, language, line[:width]):
            indent = line[:width]
    if not indent:
        return None
    head_end = _top_level_after(lines, start + 1, language, indent, floor=start + 1)
    if head_end is None or head_end >= first or not any(
            lines[at].rstrip().endswith("{") for at in range(start, head_end)):
        return None  # the place is in the head, or the head opens no block
    close = end
    while close > head_end and (not lines[close - 1].strip()
                                or not lines[close - 1].startswith(indent)):
        close -= 1  # the statement's closing lines (``}``), and blank lines
    if last > close:
        return None
    member = _top_level_before(lines, first, language, indent, floor=head_end)
    after = _top_level_after(lines, last, language, indent, floor=member)
    after = close if after is None or after > close else after
    return [(start, head_end), (member, after), (close, end)], member, after


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
