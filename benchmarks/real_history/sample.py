"""Commit pairs and citations, drawn with a seeded RNG.

Pairs: for each repository, new commits on the main line (its tip and random older
ones), each with old commits 10 to 1,000 first-parent commits before it (the gap drawn
log-uniformly), plus one pair across each restructuring named in ``Repo.spans``.

Citations, at the old commit, in source files of the repository's language (tests,
fixtures, docs examples, vendored and generated files left out): whole definitions,
windows of 2-6 lines inside functions (a quarter of them with a blank line at an edge,
as agents often cite one; a fifth of the definitions too), and one-line declarations
(constants, fields, variables). Most come from files that changed between the two
commits (unchanged files are decided by their blob alone, step 1, so they say little),
and a third, where there are any, from files gone at the new commit (moved, renamed,
split or deleted): the hard cases.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from benchmarks.real_history.gitread import Git, lines_of, norm
from benchmarks.real_history.oracles import Facts, Oracles
from benchmarks.real_history.repos import Repo

__all__ = ["Cite", "Pair", "citations", "pairs"]

MIN_GAP, MAX_GAP = 10, 1000
#: Paths never cited: tests, fixtures, examples, vendored or generated code.
_SKIP = re.compile(r"(^|/)(tests?|__tests__|testdata|test-jdk\d+|fixtures?|examples?|docs?|"
                   r"docs_src|vendor|node_modules|dist|build|benchmarks?|scripts)/"
                   r"|_test\.go$|\.test\.[jt]s$|\.spec\.[jt]s$|\.min\.js$|\.d\.ts$"
                   r"|(^|/)src/test/|(^|/)test_[^/]*\.py$|(^|/)conftest\.py$")
#: Generated or vendored code: never cited, and not where the oracle looks for code.
GENERATED = re.compile(r"(^|/)(vendor|node_modules|dist|build)/|\.min\.js$|\.d\.ts$")
MAX_FILE_LINES = 6000
#: Share of citations drawn from files whose blob changed between the two commits...
CHANGED_SHARE = 0.85
#: ... and, of those, from files gone at the new commit, when there are any.
GONE_SHARE = 0.35


@dataclass(frozen=True, slots=True)
class Pair:
    repo: str
    old: str
    new: str
    gap: int
    why: str  # "random" or the restructuring spanned


@dataclass(frozen=True, slots=True)
class Cite:
    id: str
    repo: str
    language: str
    old: str
    new: str
    gap: int
    path: str
    start: int
    end: int
    kind: str  # definition | window | line
    name: str  # the oracle's identity: the definition around it, or the declaration
    blank_edge: bool


def citable(repo: Repo, path: str) -> bool:
    return path.endswith(repo.extensions) and not _SKIP.search(path)


def pairs(git: Git, repo: Repo, rng: random.Random, news: int, olds: int) -> list[Pair]:
    history = git.first_parent()
    found: list[Pair] = []
    if len(history) <= MIN_GAP:
        return found
    last = len(history) - 1 - MIN_GAP
    starts = [0, *sorted(rng.sample(range(1, last + 1), min(news - 1, last)))]
    for i in starts[:news]:
        room = min(MAX_GAP, len(history) - 1 - i)
        for _ in range(olds):
            gap = round(math.exp(rng.uniform(math.log(MIN_GAP), math.log(room))))
            found.append(Pair(repo.name, history[i + gap], history[i], gap, "random"))
    index = {sha: i for i, sha in enumerate(history)}
    for path in repo.spans:
        added = git.run("log", "--first-parent", "--diff-filter=A", "--format=%H", "HEAD",
                        "--", path).split()
        if not added or added[-1] not in index:
            continue
        at = index[added[-1]]
        new = max(0, at - rng.randint(0, 40))
        gap = min(at - new + rng.randint(MIN_GAP, 300), len(history) - 1 - new, MAX_GAP)
        found.append(Pair(repo.name, history[new + gap], history[new], gap, f"across {path}"))
    return found


def citations(git: Git, oracles: Oracles, repo: Repo, pair: Pair, rng: random.Random,
              count: int) -> list[Cite]:
    old_tree, new_tree = git.tree(pair.old), git.tree(pair.new)
    paths = sorted(p for p in old_tree if citable(repo, p))
    changed = [p for p in paths if p in new_tree and new_tree[p] != old_tree[p]]
    gone = [p for p in paths if p not in new_tree]
    same = [p for p in paths if new_tree.get(p) == old_tree[p]]
    texts = {b: t for b, t in git.texts(old_tree[p] for p in paths).items() if t is not None}
    facts = oracles.facts(repo.language, texts)
    out: list[Cite] = []
    tries = 0
    while len(out) < count and tries < count * 20 and (changed or gone or same):
        tries += 1
        if (changed or gone) and (not same or rng.random() < CHANGED_SHARE):
            pool = gone if gone and (not changed or rng.random() < GONE_SHARE) else changed
        else:
            pool = same
        path = rng.choice(pool)
        blob = old_tree[path]
        text, found = texts.get(blob), facts.get(blob)
        if text is None or found is None or not found.ok:
            continue
        lines = lines_of(text)
        if len(lines) > MAX_FILE_LINES or "\u2028" in text or "\u2029" in text:
            continue
        cite = _one(repo, pair, path, lines, found, rng)
        if cite is not None and all(c.id != cite.id for c in out):
            out.append(cite)
    return out


def _one(repo: Repo, pair: Pair, path: str, lines: list[str], facts: Facts,
         rng: random.Random) -> Cite | None:
    kind = rng.choices(("definition", "window", "line"), (0.35, 0.4, 0.25))[0]
    span: tuple[int, int, str, bool] | None = None
    if kind == "definition" and facts.defs:
        d = rng.choice(facts.defs)
        span = (d.start, d.end, d.name, False)
        if rng.random() < 0.2:  # the blank line after (or before) it, cited along
            if d.end < len(lines) and not norm(lines[d.end]):
                span = (d.start, d.end + 1, d.name, True)
            elif d.start > 1 and not norm(lines[d.start - 2]):
                span = (d.start - 1, d.end, d.name, True)
    elif kind == "window":
        functions = [d for d in facts.defs if d.kind == "function" and d.end - d.start >= 3]
        if functions:
            span = _window(rng.choice(functions), lines, facts, rng)
    elif kind == "line" and facts.decls:
        decl = rng.choice(facts.decls)
        text = norm(lines[decl.line - 1])
        # Go's blank identifier names nothing; `var x = require(...)` is an import
        if decl.end == decl.line and len(text) >= 4 and "require(" not in text \
                and decl.name.rsplit(".", 1)[-1] != "_":
            span = (decl.line, decl.line, decl.name, False)
    if span is None:
        return None
    start, end, name, blank = span
    cid = f"{repo.name}@{pair.old[:10]}..{pair.new[:10]}:{path}:{start}-{end}"
    return Cite(cid, repo.name, repo.language, pair.old, pair.new, pair.gap, path, start,
                end, kind, name, blank)


def _window(d: object, lines: list[str], facts: Facts, rng: random.Random
            ) -> tuple[int, int, str, bool] | None:
    from benchmarks.real_history.oracles import Def

    assert isinstance(d, Def)
    body_first, body_last = d.start + 1, d.end - 1
    size = rng.randint(2, 6)
    if body_last - body_first + 1 < size:
        return None
    start = rng.randint(body_first, body_last - size + 1)
    end = start + size - 1
    texts = [norm(x) for x in lines[start - 1:end]]
    if not any(len(t) >= 10 for t in texts) or not texts[0] or not texts[-1]:
        return None  # nothing an agent would cite; blank edges are added on purpose below
    inner = facts.innermost(start, end)
    if inner is None or inner.kind != "function":
        return None
    blank = False
    if rng.random() < 0.25:
        if end < body_last and not norm(lines[end]):
            end, blank = end + 1, True
        elif start > body_first and not norm(lines[start - 2]):
            start, blank = start - 1, True
    return start, end, inner.name, blank
