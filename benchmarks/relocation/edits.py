"""Scripted refactors on real files, with every cited line tracked to its answer.

Each file of a language's repository gets one kind of edit (``EDITS``). A file is a list
of :class:`Line` objects; each remembers which base lines it came from (``origins``) and
whether their code really changed (``edited``). Whitespace edits (re-indent, CRLF, blank
lines, re-wrapping a statement over more or fewer lines, the trailing comma a formatter
adds or drops when it does so) keep ``edited`` False; a body edit sets it.

A citation's answer is derived from its non-blank base lines after all edits
(:func:`expect`): all gone -> ``missing``; some gone or edited, or new code inserted
between them -> ``changed``; all there, in one file, with nothing foreign between them ->
``same`` (same path and range) or ``moved`` (the exact new range, from the first line
holding any of them to the last); split over files -> ``unclear`` (not scored).

The edits are meant to look like what people and tools do: functions keep their leading
comments and decorators when moved, a moved method lands in another class (its qualified
name changes), a file moved to another package gets its ``package`` line updated, a
formatter re-wraps only lines over its width, and a body edit changes one literal,
operator or name.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from benchmarks.relocation import syntax
from benchmarks.relocation.corpus import SourceFile
from verified_memory.anchors import treesitter
from verified_memory.anchors.normalize import normalize_line
from verified_memory.anchors.treesitter import Definition

__all__ = ["EDITS", "Case", "Line", "Scenario", "build_scenario", "expect"]

#: Edit kinds, in table order.
EDITS = ("insert_above", "move_within", "move_to_file", "rename_file", "reformat", "rewrap",
         "rename_symbol", "edit_body", "move_and_edit", "delete")
#: Kinds that move code to a neighbouring file (files are paired by folder for them).
PAIRED = ("move_to_file", "move_and_edit")

Origin = tuple[str, int]  # (base path, 1-based base line)

FUNCTION_KINDS = {
    "python": {"function_definition"},
    "javascript": {"function_declaration", "generator_function_declaration",
                   "method_definition", "arrow_function", "function_expression"},
    "go": {"function_declaration", "method_declaration"},
    "rust": {"function_item"},
    "java": {"method_declaration", "constructor_declaration"},
}
FUNCTION_KINDS["typescript"] = FUNCTION_KINDS["tsx"] = FUNCTION_KINDS["javascript"]
CONTAINER_KINDS = {"class_definition", "class_declaration", "class", "abstract_class_declaration",
                   "impl_item", "enum_declaration", "record_declaration"}
_CLASS_KINDS = {"class_definition", "class_declaration", "class", "abstract_class_declaration"}
MAX_DEF_LINES = 150
MAX_CITED_DEF_LINES = 120


@dataclass(slots=True)
class Line:
    text: str
    origins: tuple[Origin, ...] = ()
    edited: bool = False


@dataclass(frozen=True, slots=True)
class Case:
    """One citation made at the base commit, and its known answer at the head commit."""

    id: str
    language: str
    edit: str
    shape: str  # "definition" or "window"
    path: str
    line_start: int
    line_end: int
    expect: str  # same | moved | changed | missing | unclear
    new_path: str | None = None
    new_start: int | None = None
    new_end: int | None = None
    name: str = ""  # the definition cited or around the window


@dataclass
class Scenario:
    """A language's repository: base files, head files (bytes), and the cases."""

    language: str
    base: dict[str, str]
    head: dict[str, bytes]
    cases: list[Case]
    skipped: Counter[str] = field(default_factory=Counter)


class Workspace:
    def __init__(self, base: dict[str, Sequence[str]]) -> None:
        self.base = base
        self.files: dict[str, list[Line]] = {
            p: [Line(t, ((p, i),)) for i, t in enumerate(lines, 1)] for p, lines in base.items()}
        self.crlf: set[str] = set()

    def index(self, path: str, origin: Origin) -> int:
        for i, line in enumerate(self.files[path]):
            if origin in line.origins:
                return i
        raise KeyError(origin)

    def line(self, origin: Origin) -> Line:
        """The line holding a base line now, wherever it went (moved files included)."""
        for lines in self.files.values():
            for line in lines:
                if origin in line.origins:
                    return line
        raise KeyError(origin)

    def cut(self, path: str, start: int, end: int, blank_lines: int = 1) -> list[Line]:
        """Remove base lines ``start..end`` of ``path`` (still in place) and the blank
        lines that separated them from the code below."""
        lines = self.files[path]
        i, j = self.index(path, (path, start)), self.index(path, (path, end))
        block = lines[i:j + 1]
        del lines[i:j + 1]
        removed = 0
        while removed < blank_lines and i < len(lines) and not lines[i].text.strip() and (
                i == 0 or not lines[i - 1].text.strip()):
            del lines[i]
            removed += 1
        return block

    def render(self, path: str) -> bytes:
        newline = "\r\n" if path in self.crlf else "\n"
        lines = self.files[path]
        return (newline.join(line.text for line in lines) + (newline if lines else "")).encode()


# ----------------------------------------------------------------------------- answers


def expect(ws: Workspace, path: str, start: int, end: int,
           where: dict[Origin, list[tuple[str, int, bool]]]) -> tuple[str, str | None, int, int]:
    """The known answer for base lines ``path:start-end`` (see the module docstring)."""
    base = ws.base[path]
    wanted = [(path, i) for i in range(start, end + 1) if base[i - 1].strip()]
    every = {(path, i) for i in range(start, end + 1)}
    found = [where.get(o, []) for o in wanted]
    if not any(found):
        return "missing", None, 0, 0
    if any(not f or any(edited for _, _, edited in f) for f in found):
        return "changed", None, 0, 0
    places = [place for f in found for place in f]
    paths = {p for p, _, _ in places}
    if len(paths) != 1:
        return "unclear", None, 0, 0
    new_path = places[0][0]
    lo, hi = min(n for _, n, _ in places), max(n for _, n, _ in places)
    for line in ws.files[new_path][lo - 1:hi]:
        if line.text.strip() and not set(line.origins) <= every:
            return "changed", None, 0, 0  # code was added inside the cited range
    if new_path == path and (lo, hi) == (start, end):
        return "same", new_path, lo, hi
    return "moved", new_path, lo, hi


def _where(ws: Workspace) -> dict[Origin, list[tuple[str, int, bool]]]:
    """Where each base line went: every line that holds (part of) it."""
    out: dict[Origin, list[tuple[str, int, bool]]] = {}
    for path, lines in ws.files.items():
        for n, line in enumerate(lines, 1):
            for origin in line.origins:
                out.setdefault(origin, []).append((path, n, line.edited))
    return out


# ----------------------------------------------------------------------------- helpers


def _indent(text: str) -> str:
    return text[:len(text) - len(text.lstrip())]


def _unit(lines: Sequence[str]) -> str:
    """The file's indentation unit: a tab, 2 or 4 spaces."""
    tabs = spaces = 0
    sizes: Counter[int] = Counter()
    for line in lines:
        ws = _indent(line)
        if not ws or not line.strip():
            continue
        if ws.startswith("\t"):
            tabs += 1
        elif ws.startswith(" "):
            spaces += 1
            sizes[len(ws)] += 1
    if tabs > spaces:
        return "\t"
    odd = sum(c for n, c in sizes.items() if n % 4 == 2)
    return "  " if spaces and odd >= 0.15 * spaces else "    "


def _comment_prefixes(language: str) -> tuple[str, ...]:
    return ("#",) if language == "python" else ("//", "/*", "*", "*/")


def _is_comment(text: str, language: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and stripped.startswith(_comment_prefixes(language))


_FIRST_LINE = {
    "python": re.compile(r"(@|def |async def )"),
    "javascript": re.compile(r"(export |async |function|const |let |static |get |set |"
                             r"\*|#?[A-Za-z_$][\w$]*\s*[<(]|public |private |protected |@)"),
    "go": re.compile(r"func "),
    "rust": re.compile(r"(pub|fn |async |const fn|unsafe |extern |#\[)"),
    "java": re.compile(r"(@|public |private |protected |static |final |abstract |synchronized |"
                       r"<|[A-Za-z_][\w.<>\[\], ?]*\s+[A-Za-z_]\w*\s*\(|[A-Z]\w*\s*\()"),
}
_FIRST_LINE["typescript"] = _FIRST_LINE["tsx"] = _FIRST_LINE["javascript"]


@dataclass
class _File:
    """A base file being planned: its definitions, statements and parents."""

    source: SourceFile
    language: str
    defs: tuple[Definition, ...]
    syntax: syntax.FileSyntax
    parent: dict[int, Definition | None]  # index in defs -> innermost enclosing def

    @property
    def path(self) -> str:
        return self.source.path

    @property
    def lines(self) -> tuple[str, ...]:
        return self.source.lines

    def block(self, d: Definition) -> tuple[int, int]:
        """The definition with what moves with it: its leading comment lines and, in
        TypeScript, the overload signatures just above it."""
        start = d.start_line
        first_indent = _indent(self.lines[d.start_line - 1])
        while True:
            while start > 1:
                prev = self.lines[start - 2]
                if _is_comment(prev, self.language) and _indent(prev) == first_indent:
                    start -= 1
                else:
                    break
            overload = next((s for s in self.defs if s.name == d.name and s.end_line < start
                             and s.kind in ("function_signature", "method_signature")
                             and not any(ln.strip() for ln in self.lines[s.end_line:start - 1])),
                            None)
            if overload is None:
                return start, d.end_line
            start = overload.start_line

    def movable(self, i: int) -> bool:
        """A function or method whose lines hold nothing else (safe to cut and paste)."""
        d = self.defs[i]
        lang = self.language
        if d.kind not in FUNCTION_KINDS[lang] or not 3 <= d.end_line - d.start_line + 1 <= \
                MAX_DEF_LINES:
            return False
        parent = self.parent[i]
        if parent is not None and parent.kind not in CONTAINER_KINDS:
            return False
        if d.kind == "method_definition" and parent is None:
            return False  # a method of an object literal: it cannot stand alone
        first = self.lines[d.start_line - 1].strip()
        last = self.lines[d.end_line - 1].strip()
        if lang == "python" and sum(1 for other in self.defs if other.name == d.name) > 1:
            return False  # a property's getter and setter go together
        if not _FIRST_LINE[lang].match(first):
            return False
        if d.kind in ("arrow_function", "function_expression") and (
                parent is not None or not re.match(r"(export )?(const|let|var) ", first)):
            return False
        if lang != "python" and last not in ("}", "};"):
            return False
        if d.end_line < len(self.lines):
            after = self.lines[d.end_line].strip()
            if after.startswith((")", ",", ".", "]", "?", ":")):
                return False
        start, _ = self.block(d)
        if start > 1 and lang != "python":
            before = self.lines[start - 2].strip()
            if before and not before.endswith(("{", "}", ";", "*/", ")")) and not \
                    _is_comment(before, lang):
                return False
        return True

    def windows(self, d: Definition) -> list[tuple[int, int]]:
        """Runs of 2-5 lines of whole statements inside ``d``'s body."""
        out: list[tuple[int, int]] = []
        for group in self.syntax.statements:
            for i in range(len(group)):
                first, _ = group[i]
                if first < 0 or first <= d.start_line or first > d.end_line:
                    continue
                for j in range(i, len(group)):
                    if group[j][0] < 0:
                        break
                    last = group[j][1]
                    if last > d.end_line or last - first + 1 > 5:
                        break
                    if last - first + 1 >= 2 and self._meaningful(first, last):
                        out.append((first, last))
        return sorted(set(out))

    def _meaningful(self, first: int, last: int) -> bool:
        wordy = [ln for ln in self.lines[first - 1:last]
                 if re.search(r"[A-Za-z0-9_]{2}", ln) and not _is_comment(ln, self.language)]
        return len(wordy) >= 2

    def names(self) -> set[str]:
        return {d.name.rsplit(".", 1)[-1].rsplit(":", 1)[-1] for d in self.defs}


def _plan(source: SourceFile) -> _File | None:
    language = treesitter.language_for(source.path)
    if language is None:
        return None
    # declarations (constants, fields) are anchors too, but not what these edits move
    defs = tuple(d for d in treesitter.definitions(source.path, "\n".join(source.lines))
                 if not d.declaration)
    tree = syntax.parse(source.path, source.lines)
    if tree is None or tree.has_errors or not defs:
        return None
    parent: dict[int, Definition | None] = {}
    for i, d in enumerate(defs):
        best: Definition | None = None
        for j, other in enumerate(defs):
            if j != i and other.start_line <= d.start_line and d.end_line <= other.end_line \
                    and (other.start_line, other.end_line) != (d.start_line, d.end_line) and (
                    best is None or other.end_line - other.start_line
                    < best.end_line - best.start_line):
                best = other
        parent[i] = best
    return _File(source, language, defs, tree, parent)


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _reindent(block: Iterable[Line], old: str, new: str) -> list[Line]:
    out: list[Line] = []
    for line in block:
        if not line.text.strip():
            out.append(Line("", line.origins, line.edited))
        elif line.text.startswith(old):
            out.append(Line(new + line.text[len(old):], line.origins, line.edited))
        else:
            out.append(Line(line.text, line.origins, line.edited))
    return out


def _relocatable(d: Definition) -> bool:
    """Whether the definition could live in another class or file: not a constructor,
    not an entry point."""
    simple = re.split(r"[.:]", d.name)[-1]
    return d.kind != "constructor_declaration" and simple not in (
        "constructor", "__init__", "__new__", "main", "init")


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[_\W]+", name) if p)


def _blank() -> Line:
    return Line("")


# ----------------------------------------------------------------------------- the builder


class _Builder:
    def __init__(self, language: str, files: list[_File], spares: list[_File],
                 rng: random.Random) -> None:
        self.language = language
        self.files = files
        self.rng = rng
        self.ws = Workspace({f.path: f.lines for f in files})
        self.cites: list[tuple[str, str, str, int, int, str]] = []  # edit, shape, path, s, e, name
        self.spare_blocks = [
            (f.lines[f.block(d)[0] - 1:d.end_line], d, f.lines[d.start_line - 1])
            for f in spares for i, d in enumerate(f.defs) if f.movable(i) and _relocatable(d)]
        self.skipped: Counter[str] = Counter()

    # -- citations

    def cite_def(self, edit: str, f: _File, d: Definition) -> None:
        if d.end_line - d.start_line + 1 <= MAX_CITED_DEF_LINES:
            self.cites.append((edit, "definition", f.path, d.start_line, d.end_line, d.name))

    def cite_windows(self, edit: str, f: _File, d: Definition, count: int,
                     must: int | None = None) -> list[tuple[int, int]]:
        windows = f.windows(d)
        self.rng.shuffle(windows)
        if must is not None:
            windows.sort(key=lambda w: not w[0] <= must <= w[1])
        chosen: list[tuple[int, int]] = []
        for w in windows:
            if len(chosen) >= count:
                break
            if any(_overlaps(w, c) for c in chosen):
                continue
            chosen.append(w)
            self.cites.append((edit, "window", f.path, w[0], w[1], d.name))
        return chosen

    def cite_others(self, edit: str, f: _File, avoid: list[tuple[int, int]],
                    defs: int = 4, windows: int = 4) -> None:
        """Code of the same file that the edit does not touch (it may shift)."""
        pool = [d for d in f.defs if not any(_overlaps((d.start_line, d.end_line), a)
                                              for a in avoid)]
        self.rng.shuffle(pool)
        for d in pool[:defs]:
            self.cite_def(edit, f, d)
        funcs = [d for d in pool if d.kind in FUNCTION_KINDS[self.language]]
        n = 0
        for d in funcs:
            if n >= windows:
                break
            n += len(self.cite_windows(edit, f, d, 1))

    def targets(self, f: _File, count: int) -> list[Definition]:
        idx = [i for i in range(len(f.defs)) if f.movable(i)]
        self.rng.shuffle(idx)
        chosen: list[Definition] = []
        spans: list[tuple[int, int]] = []
        for i in idx:
            span = f.block(f.defs[i])
            if any(_overlaps(span, s) for s in spans):
                continue
            chosen.append(f.defs[i])
            spans.append(span)
            if len(chosen) >= count:
                break
        return chosen

    # -- edits

    def insert_above(self, f: _File) -> None:
        targets = self.targets(f, 1)
        if not targets or not self.spare_blocks:
            self.skipped["insert_above: no target"] += 1
            return
        names = f.names()
        for d in targets:
            block_start, _ = f.block(d)
            indent = _indent(f.lines[d.start_line - 1])
            same_kind = [b for b in self.spare_blocks if b[1].kind == d.kind and
                         b[1].name.rsplit(".", 1)[-1].rsplit(":", 1)[-1] not in names]
            if not same_kind:
                continue
            lines, _spare, first = self.rng.choice(same_kind)
            new = _reindent([Line(t) for t in lines], _indent(first), indent)
            gap = 2 if self.language == "python" and not indent else 1
            at = self.ws.index(f.path, (f.path, block_start))
            self.ws.files[f.path][at:at] = [*new, *(_blank() for _ in range(gap))]
            self.cite_def("insert_above", f, d)
            self.cite_windows("insert_above", f, d, 2)
        if self.rng.random() < 0.5:
            self._add_import(f)
        self.cite_others("insert_above", f, [f.block(d) for d in targets])

    def move_within(self, f: _File) -> None:
        targets = self.targets(f, 2)
        moved: list[Definition] = []
        spans = [f.block(d) for d in targets]
        for d in targets:
            i = f.defs.index(d)
            parent = f.parent[i]
            indent = _indent(f.lines[d.start_line - 1])
            siblings = [s for j, s in enumerate(f.defs) if s is not d and f.parent[j] is parent
                        and _indent(f.lines[s.start_line - 1]) == indent
                        and not any(_overlaps((s.start_line, s.end_line), sp) for sp in spans)
                        and (self.language == "python"
                             or f.lines[s.end_line - 1].strip() in ("}", "};"))]
            if not siblings:
                continue
            sibling = self.rng.choice(siblings)
            start, end = f.block(d)
            block = self.ws.cut(f.path, start, end, blank_lines=2 if not indent else 1)
            at = self.ws.index(f.path, (f.path, sibling.end_line)) + 1
            gap = 2 if self.language == "python" and not indent else 1
            self.ws.files[f.path][at:at] = [*(_blank() for _ in range(gap)), *block]
            moved.append(d)
            self.cite_def("move_within", f, d)
            self.cite_windows("move_within", f, d, 2)
        if not moved:
            self.skipped["move_within: no sibling"] += 1
        self.cite_others("move_within", f, spans)

    def move_and_edit(self, f: _File, dest: _File | None) -> None:
        """Move functions to a neighbouring file and change one line of each on the way."""
        self.move_to_file(f, dest, edit="move_and_edit")

    def move_to_file(self, f: _File, dest: _File | None, edit: str = "move_to_file") -> None:
        # moving free functions is the common refactor; methods move to another class
        idx = [i for i in range(len(f.defs)) if f.movable(i)]
        self.rng.shuffle(idx)
        idx.sort(key=lambda i: f.parent[i] is not None)
        spans: list[tuple[int, int]] = []
        moved: list[Definition] = []
        for i in idx:
            if len(moved) >= 2:
                break
            d, parent = f.defs[i], f.parent[i]
            if not _relocatable(d):
                continue
            span = f.block(d)
            if any(_overlaps(span, s) for s in spans):
                continue
            if parent is not None and self.language == "rust" and (
                    " for " in parent.name or not f.lines[parent.start_line - 1].rstrip()
                    .endswith("{")):
                continue  # a trait impl's method cannot leave it alone
            if not self._paste_elsewhere(f, d, parent, dest):
                continue
            spans.append(span)
            moved.append(d)
            row = self._edit_line(f, d) if edit == "move_and_edit" else None
            self.cite_def(edit, f, d)
            self.cite_windows(edit, f, d, 2, must=row)
        if not moved:
            self.skipped[f"{edit}: nothing movable"] += 1
        self.cite_others(edit, f, spans)

    def _paste_elsewhere(self, f: _File, d: Definition, parent: Definition | None,
                         dest: _File | None) -> bool:
        lang = self.language
        old_indent = _indent(f.lines[d.start_line - 1])
        unit = _unit(f.lines)
        start, end = f.block(d)
        stem = PurePosixPath(f.path).stem.replace(".", "_")
        member = parent is not None and parent.kind != "impl_item"
        if dest is not None and dest.path != f.path and (lang != "rust" or parent is None) \
                and self.rng.random() < 0.6:
            d_unit = _unit(dest.lines)
            if member:
                classes = [c for j, c in enumerate(dest.defs) if dest.parent[j] is None and
                           c.kind in _CLASS_KINDS and c.end_line - c.start_line > 3]
                if not classes or d.name.rsplit(".", 1)[-1] in dest.names():
                    return False
                cls = self.rng.choice(classes)
                cls_indent = _indent(dest.lines[cls.start_line - 1])
                new_indent = cls_indent + d_unit
                try:
                    at = self.ws.index(dest.path, (dest.path, cls.end_line))
                except KeyError:  # the class's last method has moved away itself
                    return False
                if lang == "python":
                    at += 1  # after the last line; elsewhere before the closing brace
                block = self.ws.cut(f.path, start, end)
                self.ws.files[dest.path][at:at] = [_blank(), *_reindent(block, old_indent,
                                                                         new_indent)]
                return True
            if d.name in dest.names():
                return False
            block = self.ws.cut(f.path, start, end, blank_lines=2 if not old_indent else 1)
            gap = [_blank(), _blank()] if lang == "python" else [_blank()]
            self.ws.files[dest.path].extend([*gap, *_reindent(block, old_indent, "")])
            return True
        # a new file next to the old one
        folder = str(PurePosixPath(f.path).parent)
        ext = PurePosixPath(f.path).suffix
        if lang == "java":
            cls_name = _camel(stem) + "Helpers"
            path = f"{folder}/{cls_name}{ext}"
        else:
            prefix = self.rng.choice(["_", ""])
            suffix = self.rng.choice(["helpers", "util", "internal"])
            path = f"{folder}/{prefix}{stem}_{suffix}{ext}"
        if path in self.ws.files:
            return False
        header = self._header(f, path)
        block = self.ws.cut(f.path, start, end, blank_lines=2 if not old_indent else 1)
        body: list[Line]
        if lang == "rust" and parent is not None:
            impl_line = f.lines[parent.start_line - 1].strip()
            body = [Line(impl_line), *_reindent(block, old_indent, unit), Line("}")]
        elif member or lang == "java":
            cls = PurePosixPath(path).stem
            cls_name = _camel(cls)
            opener = {"python": f"class {cls_name}:", "java": f"final class {cls_name} {{"}.get(
                lang, f"export class {cls_name} {{")
            closer = [] if lang == "python" else [Line("}")]
            body = [Line(opener), *_reindent(block, old_indent, unit), *closer]
        else:
            body = _reindent(block, old_indent, "")
        self.ws.files[path] = [*(Line(h) for h in header), *body]
        self.ws.base.setdefault(path, ())
        return True

    def _header(self, f: _File, path: str) -> list[str]:
        name = PurePosixPath(f.path).name
        if self.language == "python":
            return [f'"""Helpers moved out of {name}."""', "",
                    "from __future__ import annotations", "", ""]
        if self.language == "go":
            package = next((ln for ln in f.lines if ln.startswith("package ")), "package main")
            return [package, ""]
        if self.language == "rust":
            return ["use super::*;", ""]
        if self.language == "java":
            package = next((ln for ln in f.lines if ln.startswith("package ")), None)
            return [package, ""] if package else []
        return [f"// Helpers moved out of {name}.", ""]

    def rename_file(self, f: _File) -> None:
        p = PurePosixPath(f.path)
        lang = self.language
        if lang in ("java", "go") or self.rng.random() < 0.5:
            sub = self.rng.choice(["internal", "core", "impl", "legacy"])
            new = str(p.parent / sub / p.name)
            if lang == "java":
                self._edit_first(f, r"^package ([\w.]+);", lambda m: f"package {m[1]}.{sub};")
            elif lang == "go":
                self._edit_first(f, r"^package (\w+)", lambda m: f"package {sub}")
        else:
            new = str(p.parent / f"{p.stem}_{self.rng.choice(['impl', 'base', 'v2', 'old'])}"
                                 f"{p.suffix}")
        if new in self.ws.files:
            return
        if lang not in ("java", "go") and self.rng.random() < 0.5:
            self._add_import(f)
        self.ws.files[new] = self.ws.files.pop(f.path)
        self._cite_file("rename_file", f)

    def _edit_first(self, f: _File, pattern: str,
                    repl: Callable[[re.Match[str]], str]) -> None:
        for line in self.ws.files[f.path]:
            new = re.sub(pattern, repl, line.text, count=1)
            if new != line.text:
                line.text, line.edited = new, True
                return

    def _add_import(self, f: _File) -> None:
        lines = self.ws.files[f.path]
        lang = self.language
        pattern = {"python": r"^(import |from \S+ import )", "go": r"^import \($",
                   "rust": r"^use ", "java": r"^import ",
                   }.get(lang, r"^(import |const \w+ = require\()")
        hits = [i for i, line in enumerate(lines[:80]) if re.match(pattern, line.text)]
        if not hits:
            return
        text = {"python": "import logging", "go": '\t"strings"', "rust": "use std::fmt;",
                "java": "import java.util.Objects;"}.get(lang)
        if text is None:
            uses_require = "require(" in lines[hits[-1]].text
            text = ("const assert = require('assert');" if uses_require
                    else "import assert from 'node:assert';")
        at = hits[0] + 1 if lang == "go" else hits[-1] + 1
        if lang == "python":  # after the whole (possibly parenthesised) import
            while at < len(lines) and lines[at - 1].text.rstrip().endswith(("(", ",")):
                at += 1
            if at < len(lines) and lines[at].text.strip() == ")":
                at += 1
        lines.insert(at, Line(text))

    def _cite_file(self, edit: str, f: _File, focus: Sequence[int] = ()) -> None:
        """Definitions and windows anywhere in a file the edit reshapes as a whole,
        preferring those that hold ``focus`` lines (the lines the edit touched)."""
        funcs = [d for d in f.defs if d.kind in FUNCTION_KINDS[self.language]]
        self.rng.shuffle(funcs)
        if focus:
            funcs.sort(key=lambda d: not any(d.start_line <= r <= d.end_line for r in focus))
        for d in funcs[:4]:
            self.cite_def(edit, f, d)
            hits = [r for r in focus if d.start_line <= r <= d.end_line]
            self.cite_windows(edit, f, d, 2, must=hits[0] if hits else None)
        others = [d for d in f.defs if d not in funcs[:4]]
        self.rng.shuffle(others)
        for d in others[:3]:
            self.cite_def(edit, f, d)

    def reformat(self, f: _File) -> None:
        lang = self.language
        lines = self.ws.files[f.path]
        unit = _unit(f.lines)
        new_unit = {"python": "  " if unit == "    " else "    ",
                    "java": "    " if unit == "\t" else "\t",
                    "rust": "\t" if unit != "\t" else "    ",
                    "go": None}.get(lang, "    " if unit == "  " else "  ")
        for row, line in enumerate(lines):
            if row in f.syntax.string_rows or not line.text.strip():
                continue
            text = line.text.rstrip()
            if new_unit is not None:
                lead = _indent(text)
                levels, rest = 0, lead
                while rest.startswith(unit):
                    levels, rest = levels + 1, rest[len(unit):]
                text = new_unit * levels + rest + text[len(lead):]
            elif '"' not in text and "`" not in text:  # gofmt re-aligns columns
                text = re.sub(r"(?<=\S) {2,}(?=\S)", " ", text)
            line.text = text
        # blank lines: a formatter's limits on runs, and one blank line between definitions
        limit = 2 if lang == "python" else 1
        starts = {f.block(d)[0] for d in f.defs}
        out: list[Line] = []
        run = 0
        for row, line in enumerate(lines):
            if not line.text.strip():
                run += 1
                if run > limit:
                    continue
            else:
                run = 0
                if row + 1 in starts and out and out[-1].text.strip() and not \
                        out[-1].text.rstrip().endswith(("{", ":", "(")) and \
                        not _is_comment(out[-1].text, lang) and \
                        not out[-1].text.strip().startswith(("@", "#[")):
                    out.append(_blank())
            out.append(line)
        self.ws.files[f.path] = out
        if self.rng.random() < 0.4:
            self.ws.crlf.add(f.path)
        self._cite_file("reformat", f)

    def rewrap(self, f: _File) -> None:
        lang = self.language
        lines = self.ws.files[f.path]
        explode = self.rng.random() < 0.5
        touched = self._explode(f, lines) if explode else self._join(f, lines)
        if not touched:
            touched = self._join(f, lines) if explode else self._explode(f, lines)
        if not touched:
            self.skipped[f"rewrap ({lang}): nothing to re-wrap"] += 1
        self._cite_file("rewrap", f, focus=touched)

    def _explode(self, f: _File, lines: list[Line]) -> list[int]:
        """Split argument lists of lines over the width, the way the language's formatter
        (or gofmt's users) do; returns the base rows (1-based) touched."""
        lang = self.language
        width = 79 if lang == "python" else 80
        unit = _unit(f.lines)
        trailing = lang != "java"
        per_row: dict[int, syntax.ArgList] = {}
        for arg in f.syntax.arg_lists:
            if arg.start_row != arg.end_row or len(arg.items) < 2 or arg.has_comment:
                continue
            if arg.start_row in f.syntax.string_rows or len(f.lines[arg.start_row]) <= width:
                continue
            best = per_row.get(arg.start_row)
            if best is None or arg.end_col - arg.start_col > best.end_col - best.start_col:
                per_row[arg.start_row] = arg
        touched: list[int] = []
        for row in sorted(per_row, reverse=True):
            arg = per_row[row]
            text = f.lines[row]
            if not text.isascii():
                continue  # tree-sitter columns are bytes
            inner = text[arg.start_col + 1:arg.end_col - 1]
            if normalize_line(inner).rstrip(",") != normalize_line(",".join(arg.items)):
                continue
            suffix = text[arg.end_col - 1:]
            if "//" in suffix or "#" in suffix or "/*" in suffix:
                continue
            prefix = text[:arg.start_col + 1]
            ind = _indent(text)
            inner_ind = ind + unit * (2 if lang == "java" else 1)
            if len(prefix) > width or len(ind + suffix) > width:
                continue  # breaking this list would not make the line fit: not the one
            joined = ", ".join(arg.items)
            if lang == "java":
                if len(inner_ind + joined + suffix) <= 100:
                    new = [prefix, inner_ind + joined + suffix]
                else:
                    new = [prefix, *(inner_ind + it + "," for it in arg.items[:-1]),
                           inner_ind + arg.items[-1] + suffix]
            elif lang == "python" and len(inner_ind + joined) <= width:
                new = [prefix, inner_ind + joined, ind + suffix]  # black's first try
            else:
                new = [prefix, *(inner_ind + it + "," for it in arg.items[:-1]),
                       inner_ind + arg.items[-1] + ("," if trailing else ""), ind + suffix]
            i = self.ws.index(f.path, (f.path, row + 1))
            origins = lines[i].origins
            lines[i:i + 1] = [Line(t, origins) for t in new]
            touched.append(row + 1)
        return touched

    def _join(self, f: _File, lines: list[Line]) -> list[int]:
        """Join argument lists that fit on one line again (a wider formatter width)."""
        lang = self.language
        width = 100 if lang == "python" else 120
        done: list[tuple[int, int]] = []
        touched: list[int] = []
        comment = ("#",) if lang == "python" else ("//", "/*")
        candidates = sorted((a for a in f.syntax.arg_lists
                             if 2 <= a.end_row - a.start_row <= 8 and not a.has_comment),
                            key=lambda a: (a.start_row, -a.end_row))
        for arg in candidates:
            rows = range(arg.start_row, arg.end_row + 1)
            if any(_overlaps((arg.start_row, arg.end_row), d) for d in done):
                continue
            if any(r in f.syntax.string_rows for r in rows):
                continue
            first = f.lines[arg.start_row]
            if not all(f.lines[r].isascii() for r in rows):
                continue  # tree-sitter columns are bytes
            if len(first.rstrip()) != arg.start_col + 1:
                continue  # "(" must end the first line
            texts = [f.lines[r] for r in rows]
            if any(c in t for t in texts for c in comment):
                continue
            last = texts[-1]
            before = last[:arg.end_col - 1].strip()
            after = last[arg.end_col - 1:].rstrip()
            middle = [t.strip() for t in texts[1:-1]] + ([before] if before else [])
            args = " ".join(middle).rstrip()
            args = args.removesuffix(",")
            new = first.rstrip() + args + after
            if len(new) > width:
                continue
            old_norm = "".join(normalize_line(t) for t in texts)
            new_norm = normalize_line(new)
            if new_norm != old_norm and new_norm != _drop_trailing_comma(old_norm, new_norm):
                continue
            i = self.ws.index(f.path, (f.path, arg.start_row + 1))
            j = self.ws.index(f.path, (f.path, arg.end_row + 1))
            origins = tuple(o for line in lines[i:j + 1] for o in line.origins)
            lines[i:j + 1] = [Line(new, origins)]
            done.append((arg.start_row, arg.end_row))
            touched.append(arg.start_row + 1)
        return touched

    def edit_body(self, f: _File) -> None:
        targets = self.targets(f, 2)
        for d in targets:
            row = self._edit_line(f, d)
            if row is not None:
                self.cite_def("edit_body", f, d)
                self.cite_windows("edit_body", f, d, 3, must=row)
        self.cite_others("edit_body", f, [f.block(d) for d in targets])

    def _edit_line(self, f: _File, d: Definition) -> int | None:
        """Edit one line of ``d``'s body (wherever it is now); its base row, or None."""
        windows = f.windows(d)
        rows = [r for r in range(d.start_line + 1, d.end_line)
                if _editable(f.lines[r - 1], self.language)]
        if windows and self.rng.random() < 0.7:
            w = self.rng.choice(windows)
            in_window = [r for r in rows if w[0] <= r <= w[1]]
            rows = in_window or rows
        self.rng.shuffle(rows)
        for row in rows:
            line = self.ws.line((f.path, row))
            new = _mutate(line.text, self.language, self.rng)
            if new is not None:
                line.text, line.edited = new, True
                return row
        return None

    def rename_symbol(self, f: _File) -> None:
        """Rename a function and its uses in the file (an IDE's "rename symbol")."""
        targets = self.targets(f, 1)
        for d in targets:
            name = re.split(r"[.:]", d.name)[-1]
            if not re.fullmatch(r"[A-Za-z_$][\w$]{2,}", name) or name.startswith("__") or \
                    name in _KEYWORDS or name in ("constructor", "main", "init", "new"):
                self.skipped["rename_symbol: not renamable"] += 1
                continue
            new_name = name + ("_impl" if self.language in ("python", "rust") else "Impl")
            pattern = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")
            for line in self.ws.files[f.path]:
                renamed = pattern.sub(new_name, line.text)
                if renamed != line.text:
                    line.text, line.edited = renamed, True
            self.cite_def("rename_symbol", f, d)
            self.cite_windows("rename_symbol", f, d, 2)
        self.cite_others("rename_symbol", f, [f.block(d) for d in targets])

    def delete(self, f: _File) -> None:
        targets = self.targets(f, 2)
        for d in targets:
            start, end = f.block(d)
            self.ws.cut(f.path, start, end,
                        blank_lines=2 if not _indent(f.lines[d.start_line - 1]) else 1)
            self.cite_def("delete", f, d)
            self.cite_windows("delete", f, d, 2)
        self.cite_others("delete", f, [f.block(d) for d in targets])


def _common(a: str, b: str) -> int:
    """Number of leading folders two paths share."""
    n = 0
    for x, y in zip(a.split("/")[:-1], b.split("/")[:-1], strict=False):
        if x != y:
            break
        n += 1
    return n


def _drop_trailing_comma(old: str, new: str) -> str:
    """``old`` with one ``,`` removed where ``new`` lacks it (a collapsed trailing comma)."""
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return old[:i] + old[i + 1:] if a == "," else old
    return old


_KEYWORD_TEXT = """and as assert async await break case catch class const continue def default
del do elif else except export extends false final finally for from func function go if impl
import in instanceof interface is lambda let loop match mod mut new nil none not null or package
pass private protected pub public raise return self static struct super switch this throw
throws true try type typeof use var void while with yield range chan select defer goto map
fallthrough where enum trait dyn ref crate extern unsafe move async await loop int float str
bool string char byte long short double boolean object any unknown never readonly keyof
declare namespace module abstract implements override synchronized volatile transient native
debugger delete instanceof of get set let const static final elif nonlocal global print"""
_KEYWORDS = frozenset(_KEYWORD_TEXT.split())


def _editable(text: str, language: str) -> bool:
    stripped = text.strip()
    return bool(re.search(r"[A-Za-z0-9_]{2}", stripped)) and not _is_comment(text, language) \
        and not stripped.startswith(("@", "#["))


def _mutate(text: str, language: str, rng: random.Random) -> str | None:
    """One real one-line edit: a literal, an operator, a boolean, a message or a name."""
    ops = ["number", "compare", "bool", "string", "logic", "name"]
    rng.shuffle(ops)
    ops.remove("name")
    ops.append("name")  # renaming is the fallback
    for op in ops:
        new = None
        if op == "number":
            m = re.search(r"(?<![\w.])(\d+)(?![\w.])", text)
            if m:
                new = text[:m.start()] + str(int(m[1]) + 1) + text[m.end():]
        elif op == "compare":
            for a, b in ((" <= ", " < "), (" >= ", " > "), (" == ", " != "), (" != ", " == "),
                         (" < ", " <= "), (" > ", " >= ")):
                if a in text:
                    new = text.replace(a, b, 1)
                    break
        elif op == "bool":
            pairs = {"python": (("True", "False"), ("False", "True"))}.get(
                language, (("true", "false"), ("false", "true")))
            for a, b in pairs:
                if re.search(rf"\b{a}\b", text):
                    new = re.sub(rf"\b{a}\b", b, text, count=1)
                    break
        elif op == "string":
            m = re.search(r"([\"'])([A-Za-z][^\"'\\]{2,40})\1", text)
            if m:
                new = text[:m.start(2)] + m[2] + " (v2)" + text[m.end(2):]
        elif op == "logic":
            for a, b in ((" && ", " || "), (" || ", " && "), (" and ", " or "),
                         (" or ", " and ")):
                if a in text:
                    new = text.replace(a, b, 1)
                    break
        else:
            words = [m for m in re.finditer(r"\b[A-Za-z_]\w{2,}\b", text)
                     if m[0].lower() not in _KEYWORDS]
            if words:
                m = words[-1]
                new = text[:m.start()] + m[0] + "2" + text[m.end():]
        if new is not None and normalize_line(new) != normalize_line(text):
            return new
    return None


# ----------------------------------------------------------------------------- entry point


def _assign(files: list[_File], per_edit: int) -> dict[str, list[_File]]:
    """One edit kind per file; "move_to_file" gets pairs of files from one folder first
    (code moves to a neighbour), the other kinds take the rest in turn."""
    by_edit: dict[str, list[_File]] = {e: [] for e in EDITS}
    folders: dict[str, list[_File]] = {}
    for f in files:
        folders.setdefault(str(PurePosixPath(f.path).parent), []).append(f)
    for group in folders.values():
        for kind in PAIRED:
            movers = by_edit[kind]
            if len(group) >= 2 and len(movers) + 2 <= per_edit:
                movers.extend(group[:2])
                group = group[2:]
    taken = {id(f) for kind in PAIRED for f in by_edit[kind]}
    rest = [f for f in files if id(f) not in taken]
    others = [e for e in EDITS if e not in PAIRED]
    for kind in PAIRED:
        while len(by_edit[kind]) < per_edit and len(rest) > len(others) * per_edit:
            by_edit[kind].append(rest.pop())
    for i, f in enumerate(rest):
        by_edit[others[i % len(others)]].append(f)
    return by_edit


def build_scenario(language: str, sources: list[SourceFile], files_per_edit: int,
                   rng: random.Random) -> Scenario:
    """Plan the language's files, apply one kind of edit per file, derive every answer."""
    planned = [p for p in (_plan(s) for s in sources) if p is not None and
               any(p.movable(i) for i in range(len(p.defs)))]
    # a few files are kept out of the repository: their functions are the new code that
    # "insert lines above" adds (copies of code in the repository would be duplicates)
    n_spare = min(10, max(2, len(planned) // 8))
    spares = planned[len(planned) - n_spare:]
    files = planned[:min(files_per_edit * len(EDITS), len(planned) - n_spare)]
    builder = _Builder(language, files, spares, rng)
    by_edit = _assign(files, files_per_edit)
    for edit in EDITS:
        group = by_edit[edit]
        for f in group:
            if edit in PAIRED:
                # code moves to a neighbour: the other file with the longest common path
                others = [g for g in group if g is not f]
                partner = max(others, key=lambda g: (_common(g.path, f.path), g.path),
                              default=None)
                getattr(builder, edit)(f, partner)
            else:
                getattr(builder, edit)(f)
    ws = builder.ws
    where = _where(ws)
    cases: list[Case] = []
    seen: set[tuple[str, int, int]] = set()
    for n, (edit, shape, path, start, end, name) in enumerate(builder.cites):
        if (path, start, end) in seen:
            continue
        seen.add((path, start, end))
        outcome, new_path, lo, hi = expect(ws, path, start, end, where)
        cases.append(Case(f"{language}-{n}", language, edit, shape, path, start, end, outcome,
                          new_path, lo or None, hi or None, name))
    base = {p: "\n".join(lines) + "\n" for p, lines in ws.base.items() if lines}
    head = {p: ws.render(p) for p in ws.files}
    return Scenario(language, base, head, cases, builder.skipped)
