"""What became of each cited range at the new commit, by the oracles alone.

Identity is the oracle's qualified name: the definition around the cited lines (or the
declaration, for one-line citations), looked up at the new commit in the same file
first, then in any file where that name is new (a namesake that was already there at the
old commit is other code). Lines are compared without whitespace (the documented rule);
blank lines may come and go.

* unchanged: the file's blob did not change, or the code is at the same place; right:
  ``valid`` at the same range;
* moved: the definition by name holds the cited lines, intact, elsewhere; right:
  ``relocated`` to the exact range;
* renamed: the name is gone, but the cited lines (unique at the old commit) are found
  intact exactly once; right: ``relocated`` to the exact range;
* reformatted: only whitespace, line breaks or commas differ; held or changed (not
  scored);
* changed: the definition (declaration) exists by name but the cited lines are not in
  it; right: ``changed``, in that file;
* gone: the name is gone and neither the lines, nor a third of the definition's lines
  (together, in one definition), nor half of the cited lines that say something
  (together) are anywhere; right: ``missing``;
* unclear: several candidates, duplicated code, lines extracted elsewhere, a definition
  rebuilt under another name, a nested definition gone from one that stays, a file that
  does not parse: not scored.

A held range is the span of the cited non-blank lines at their new place, widened by
the blank lines the citation had at its edges where the new file has blank lines there.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.real_history.gitread import Git, lines_of, norm
from benchmarks.real_history.oracles import Decl, Def, Facts, Oracles
from benchmarks.real_history.repos import FAMILY, Repo
from benchmarks.real_history.sample import GENERATED, Cite

__all__ = ["Label", "Snapshot", "label"]

_NO_FACTS = Facts((), (), True)


@dataclass(frozen=True, slots=True)
class Label:
    category: str  # unchanged | moved | renamed | reformatted | changed | gone | unclear
    expect: str  # same | moved | either | changed | missing | unknown
    path: str | None = None
    start: int | None = None
    end: int | None = None
    why: str = ""


class Snapshot:
    """Every file of the repository's language at one commit: lines, facts, indexes."""

    def __init__(self, git: Git, oracles: Oracles, repo: Repo, commit: str) -> None:
        self.repo, self.commit, self.oracles = repo, commit, oracles
        self.tree = git.tree(commit)
        self._language = {p: lang for p in self.tree if not GENERATED.search(p)
                          and (lang := FAMILY[repo.language].get(_ext(p))) is not None}
        paths = list(self._language)
        texts = git.texts(self.tree[p] for p in paths)
        self.norms: dict[str, list[str]] = {}
        self.raw: dict[str, list[str]] = {}
        self._texts: dict[str, str] = {}
        for p in paths:
            text = texts.get(self.tree[p])
            if text is not None:
                self._texts[self.tree[p]] = text
                self.raw[p] = lines_of(text)
                self.norms[p] = [norm(x) for x in self.raw[p]]
        self._facts: dict[str, Facts] | None = None
        self._positions: dict[str, list[tuple[str, int]]] | None = None
        self._nonblank: dict[str, list[int]] = {}
        self._defs: dict[str, list[tuple[str, Def]]] = defaultdict(list)
        self._decls: dict[str, list[tuple[str, Decl]]] = defaultdict(list)

    # ------------------------------------------------------------------ facts

    def facts(self, path: str) -> Facts | None:
        self._load_facts()
        assert self._facts is not None
        return self._facts.get(path)

    def _load_facts(self) -> None:
        if self._facts is not None:
            return
        found: dict[str, Facts] = {}
        for language in set(self._language.values()):
            found.update(self.oracles.facts(language, {
                self.tree[p]: self._texts[self.tree[p]] for p in self.norms
                if self._language[p] == language}))
        self._facts = {p: found[self.tree[p]] for p in self.norms if self.tree[p] in found}
        for p, f in self._facts.items():
            for d in f.defs:
                self._defs[d.name].append((p, d))
            for c in f.decls:
                self._decls[c.name].append((p, c))

    def defs_named(self, name: str) -> list[tuple[str, Def]]:
        self._load_facts()
        return list(self._defs.get(name, ()))

    def decls_named(self, name: str) -> list[tuple[str, Decl]]:
        self._load_facts()
        return list(self._decls.get(name, ()))

    def unparsed(self) -> list[str]:
        self._load_facts()
        assert self._facts is not None
        return [p for p, f in self._facts.items() if not f.ok]

    # ------------------------------------------------------------------ runs of lines

    def nonblank(self, path: str) -> list[int]:
        rows = self._nonblank.get(path)
        if rows is None:
            rows = self._nonblank[path] = [i for i, x in enumerate(self.norms[path]) if x]
        return rows

    def runs(self, seq: Sequence[str], path: str | None = None,
             within: tuple[int, int] | None = None) -> list[tuple[str, int, int]]:
        """Every place (path, first row, last row; 0-based) whose non-blank lines are
        ``seq`` in order, blank lines between them allowed; only in ``path`` (and
        inside rows ``within``) when given."""
        if not seq:
            return []
        if self._positions is None:
            self._positions = defaultdict(list)
            for p in self.norms:
                norms = self.norms[p]
                for k, row in enumerate(self.nonblank(p)):
                    self._positions[norms[row]].append((p, k))
        out = []
        for p, k in self._positions.get(seq[0], ()):
            if path is not None and p != path:
                continue
            rows = self.nonblank(p)
            if k + len(seq) > len(rows):
                continue
            norms = self.norms[p]
            if all(norms[rows[k + j]] == seq[j] for j in range(1, len(seq))):
                first, last = rows[k], rows[k + len(seq) - 1]
                if within is None or (within[0] <= first and last <= within[1]):
                    out.append((p, first, last))
        return out


def _ext(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name[name.rfind("."):].lower() if "." in name else ""


def _squeeze(lines: Sequence[str]) -> str:
    return "".join(lines).replace(",", "")


def _loosely(c: Cite, old: Snapshot, new: Snapshot) -> list[tuple[str, int, int]]:
    loose = _loose(c.name)
    then = [d for d in (old.facts(c.path) or _NO_FACTS).defs if _loose(d.name) == loose]
    now = [(c.path, d.start, d.end) for d in (new.facts(c.path) or _NO_FACTS).defs
           if _loose(d.name) == loose] if c.path in new.norms else []
    return now if len(then) == 1 and len(now) == 1 else []


def _held(c: Cite, cited: Sequence[str], new: Snapshot, place: tuple[str, int, int],
          category: str, why: str) -> Label:
    path, first, last = place
    norms = new.norms[path]
    lead = next(i for i, x in enumerate(cited) if x)
    trail = next(i for i, x in enumerate(reversed(cited)) if x)
    while lead and first > 0 and not norms[first - 1]:
        first, lead = first - 1, lead - 1
    while trail and last + 1 < len(norms) and not norms[last + 1]:
        last, trail = last + 1, trail - 1
    start, end = first + 1, last + 1
    if (path, start, end) == (c.path, c.start, c.end):
        return Label("unchanged", "same", path, start, end, why)
    return Label(category, "moved", path, start, end, why)


def _spans(snapshot: Snapshot, name: str) -> list[tuple[str, int, int]]:
    """Where ``name`` is defined or declared: (path, first line, last line)."""
    return [(p, d.start, d.end) for p, d in snapshot.defs_named(name)] + \
        [(p, d.line, d.end) for p, d in snapshot.decls_named(name)]


def _loose(name: str) -> str:
    """A name without Java's parameter types and without the leading underscores that
    make a Python name private: ``KeepOpenFile`` became ``_KeepOpenFile``, a constructor
    took one more parameter; still the same definition."""
    return ".".join(part.lstrip("_") for part in name.split("(")[0].split("."))


def _named(c: Cite, old: Snapshot, new: Snapshot) -> list[tuple[str, int, int]] | None:
    """Candidates by name at the new commit: those in the cited file's path, else those
    in files where the name is new (a namesake already there at the old commit is other
    code). A name is an identity across files only if the old commit defined it in the
    cited file alone (None otherwise: unclear). Without the exact name, a name equal
    but for parameter types or leading underscores (``_loose``) stands in when it is the
    only one of the cited file, then and now."""
    found = _spans(new, c.name) or _loosely(c, old, new)
    same = [s for s in found if s[0] == c.path]
    if same:
        return same
    before = {p for p, _, _ in _spans(old, c.name)}
    if before - {c.path}:
        return None if found else []
    return [s for s in found if s[0] not in before]


def label(c: Cite, old: Snapshot, new: Snapshot) -> Label:
    if new.tree.get(c.path) == old.tree[c.path]:
        return Label("unchanged", "same", c.path, c.start, c.end, "file unchanged")
    cited = old.norms[c.path][c.start - 1:c.end]
    seq = [x for x in cited if x]
    spans = _named(c, old, new)
    if spans is None:
        return Label("unclear", "unknown", why=f"{c.name} was defined in several files")
    if len(spans) > 1:
        # several by that name (overloads, variants): the one holding the cited lines
        holding = [s for s in spans if new.runs(seq, s[0], (s[1] - 1, s[2] - 1))]
        if len(holding) != 1:
            return Label("unclear", "unknown", why=f"{len(spans)} definitions named {c.name}")
        spans = holding
    if spans:
        path, lo, hi = spans[0]
        hits = new.runs(seq, path, (lo - 1, hi - 1))
        if len(hits) == 1:
            return _held(c, cited, new, hits[0], "moved", f"in {c.name} at {path}")
        if len(hits) > 1:
            return Label("unclear", "unknown", why="the cited lines repeat in the definition")
        if _squeeze(seq) in _squeeze(new.norms[path][lo - 1:hi]):
            return Label("reformatted", "either", path, lo, hi, "whitespace or commas only")
        if _elsewhere(c, seq, old, new, exclude=(path, lo - 1, hi - 1)):
            return Label("unclear", "unknown", why="lines extracted from the definition")
        return Label("changed", "changed", path, lo, hi, f"{c.name} edited at {path}")
    if _parent_stays(c, old, new):
        return Label("unclear", "unknown", why="a nested definition gone from one that stays")
    # the name is gone: follow the lines themselves, when they were unique
    others = [r for r in old.runs(seq) if r != _own_run(c, old)]
    if others:
        return Label("unclear", "unknown", why="the cited lines were not unique")
    hits = new.runs(seq)
    if len(hits) == 1:
        return _held(c, cited, new, hits[0], "renamed", f"{c.name} gone; lines at {hits[0][0]}")
    if len(hits) > 1:
        return Label("unclear", "unknown", why="the cited lines were duplicated")
    if _rebuilt(c, old, new):
        return Label("unclear", "unknown", why="a third of the definition survives elsewhere")
    if _survives(seq, old, new):
        return Label("unclear", "unknown", why="half of the cited lines survive together")
    if new.unparsed():
        word = c.name.rsplit(".", 1)[-1].split("(")[0]
        if any(word in "".join(new.raw[p]) for p in new.unparsed()):
            return Label("unclear", "unknown", why="a file that does not parse may hold it")
    return Label("gone", "missing", why=f"{c.name} and its lines are gone")


def _parent_stays(c: Cite, old: Snapshot, new: Snapshot) -> bool:
    """Whether the cited definition was nested in another that the new file still has:
    the code is gone from a definition that stays (changed, or missing: the parsers
    need not agree on what is a definition there)."""
    facts = old.facts(c.path)
    if facts is None or c.kind == "line":
        return False
    own = next((d for d in facts.defs if d.name == c.name), None)
    outer = [d for d in facts.defs if own is not None and d is not own
             and d.start <= own.start and own.end <= d.end]
    return bool(outer) and any(p == c.path for p, _ in
                               new.defs_named(min(outer, key=lambda d: d.end - d.start).name))


def _survives(seq: Sequence[str], old: Snapshot, new: Snapshot) -> bool:
    """Whether half of the cited lines that say something (8 characters or more), at
    least one, are together (within twice the citation's length) in a changed or new
    file: what is left of the code may be that, edited (a template moved from a function
    into a constant), so neither clearly changed nor clearly gone."""
    wanted = {x for x in seq if len(x) >= 8}
    if not wanted:
        return False
    enough = math.ceil(len(wanted) / 2)
    reach = 2 * len(seq)
    for p, norms in new.norms.items():
        if new.tree[p] == old.tree.get(p):
            continue
        rows = [i for i, x in enumerate(norms) if x in wanted]
        for k, first in enumerate(rows):
            near = {norms[i] for i in rows[k:] if i - first < reach}
            if len(near) >= enough:
                return True
    return False


def _own_run(c: Cite, old: Snapshot) -> tuple[str, int, int] | None:
    rows = [i for i in range(c.start - 1, c.end) if old.norms[c.path][i]]
    return (c.path, rows[0], rows[-1]) if rows else None


def _elsewhere(c: Cite, seq: Sequence[str], old: Snapshot, new: Snapshot,
               exclude: tuple[str, int, int]) -> bool:
    """Whether the cited lines appear at the new commit outside the definition, where
    the old commit did not have them (extracted into a helper, say)."""
    if len(seq) < 2:
        return False
    before = {(p, old.tree[p]) for p, _, _ in old.runs(seq)}
    for p, first, last in new.runs(seq):
        if p == exclude[0] and exclude[1] <= first and last <= exclude[2]:
            continue
        if (p, new.tree[p]) not in before:
            return True
    return False


def _rebuilt(c: Cite, old: Snapshot, new: Snapshot) -> bool:
    """Whether half or more of the old definition's distinctive lines are together in
    one definition of a changed or new file (the definition renamed and edited: neither
    clearly changed nor clearly gone)."""
    facts = old.facts(c.path)
    if facts is None:
        return False
    if c.kind == "line":
        d = facts.innermost(c.start, c.end)
        span = (d.start, d.end) if d is not None else (c.start, c.end)
    else:
        d = next((x for x in facts.defs if x.name == c.name
                  and x.start <= c.start and c.end <= x.end), None)
        span = (d.start, d.end) if d is not None else (c.start, c.end)
    lines = {x for x in old.norms[c.path][span[0] - 1:span[1]] if len(x) >= 8}
    if len(lines) < 2:
        lines = {x for x in old.norms[c.path][span[0] - 1:span[1]] if x}
    if not lines:
        return False
    enough = max(2, math.ceil(len(lines) / 3)) if len(lines) > 1 else 1
    for p, norms in new.norms.items():
        if new.tree[p] == old.tree.get(p):
            continue
        f = new.facts(p)
        hits = [i for i, x in enumerate(norms) if x in lines]
        if len(hits) < enough:
            continue
        for d2 in (f.defs if f is not None else ()):
            inside = {norms[i] for i in hits if d2.start - 1 <= i <= d2.end - 1}
            if len(inside) >= enough and d2.end - d2.start < 4 * (span[1] - span[0] + 1):
                return True
    return False
