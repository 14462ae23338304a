"""Relocation that survives real refactors, on real git histories, in every language.

Every test builds a small repository, cites code at the first commit exactly as a memory
would (``verify.citing.fingerprint_citation``: line hashes plus the tree-sitter anchor),
edits and commits, then verifies at HEAD with ``Verifier(source, locator=AnchorLocator())``.

The matrix (language x kind of edit) cites two things per file: a whole definition and a
window of a few lines inside it. Expected places are derived from the edited text itself
(where the cited code now is), and every outcome and range is asserted exactly:

* moved code (lines inserted above, moved within the file or to another file, the file
  renamed, reformatted) is ``valid`` at the same place or ``relocated`` to the exact new
  range, never ``changed``/``missing``;
* edited code is ``changed`` with 0 < similarity < 1 at its current place;
* deleted code is ``missing``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo
from verified_memory.anchors.hashing import line_hashes
from verified_memory.anchors.treesitter import Definition, DefinitionIndex
from verified_memory.models import (
    Citation,
    CitationCheck,
    CitationRef,
    Fingerprint,
    Location,
    Outcome,
)
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.verify.anchored import AnchorLocator
from verified_memory.verify.bulk import check_citations
from verified_memory.verify.citing import fingerprint_citation
from verified_memory.verify.files import FileCache
from verified_memory.verify.ladder import Verifier


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def outdent(text: str, unit: str = "    ") -> str:
    """One level of indentation less on every line."""
    return "".join(line.removeprefix(unit) for line in text.splitlines(keepends=True))


def member(text: str) -> str:
    """A class member: dedented, then indented one level (Java methods)."""
    return textwrap.indent(src(text), "    ")


# ------------------------------------------------------------------------ the harness


@dataclass
class History:
    """A repository with a first commit to cite at, and a way to check at HEAD."""

    repo: GitRepo
    first: str = ""

    def start(self, files: dict[str, str | bytes]) -> None:
        for path, text in files.items():
            self.repo.write(path, text)
        self.first = self.repo.commit("initial")

    def cite(self, path: str, start: int, end: int) -> Citation:
        with LocalGitSource(self.repo.path) as source:
            return fingerprint_citation(source, FileCache(source), self.first,
                                        CitationRef(path, start, end, self.first))

    def cite_text(self, path: str, text: str, snippet: str) -> Citation:
        """Cite the lines of ``snippet`` inside ``text`` (the content of ``path``)."""
        start, end = span(text, snippet)
        return self.cite(path, start, end)

    def check(self, *citations: Citation) -> list[CitationCheck]:
        """Checks at HEAD, as the service checks stored citations; and the bulk check's
        way too (fingerprints without anchors, each derived when a step needs it),
        which must come to exactly the same answers."""
        with LocalGitSource(self.repo.path) as source:
            head = source.resolve("HEAD")
            verifier = Verifier(source, locator=AnchorLocator(DefinitionIndex()))
            checks = verifier.check(list(citations), head)
            lazy = Verifier(source, locator=AnchorLocator(DefinitionIndex(),
                                                          derive_anchors=True))
            derived = lazy.check([unanchored(c) for c in citations], head)
        assert [answer(c) for c in derived] == [answer(c) for c in checks]
        return checks


@pytest.fixture
def history(tmp_path: Path) -> History:
    return History(GitRepo(tmp_path / "repo"))


def unanchored(citation: Citation) -> Citation:
    fingerprint = citation.fingerprint
    return replace(citation, fingerprint=Fingerprint(fingerprint.snippet_hash,
                                                     fingerprint.line_hashes))


def answer(check: CitationCheck) -> tuple[object, ...]:
    """Everything a check says, but the citation it was given."""
    return (check.outcome, check.location, check.blob_sha, check.similarity,
            check.ambiguous, check.step, check.detail)


def span(text: str, snippet: str) -> tuple[int, int]:
    """1-based inclusive lines of ``snippet`` (whole lines) in ``text``; it must be unique."""
    assert text.count(snippet) == 1, f"{snippet!r} occurs {text.count(snippet)} times"
    at = text.index(snippet)
    assert at == 0 or text[at - 1] == "\n", "snippets are whole lines"
    first = text.count("\n", 0, at) + 1
    return first, first + snippet.rstrip("\n").count("\n")


def within(text: str, outer: str, inner: str) -> tuple[int, int]:
    """Lines of ``inner`` inside the unique occurrence of ``outer`` in ``text``."""
    first, _ = span(text, outer)
    lo, hi = span(outer, inner)
    return first + lo - 1, first + hi - 1


def outcome(check: CitationCheck) -> tuple[Outcome, Location | None]:
    return check.outcome, check.location


def moved(check: CitationCheck, path: str, lines: tuple[int, int]) -> None:
    """The code held: valid when it is where it was, else relocated to exactly there."""
    place = Location(path, *lines)
    same = place == check.citation.location
    expected = Outcome.VALID if same else Outcome.RELOCATED
    assert outcome(check) == (expected, place), check.detail
    assert check.similarity == 1.0


def changed(check: CitationCheck, path: str, lines: tuple[int, int]) -> None:
    assert outcome(check) == (Outcome.CHANGED, Location(path, *lines)), check.detail
    assert check.similarity is not None
    assert 0.0 < check.similarity < 1.0, check.similarity


def missing(check: CitationCheck) -> None:
    assert outcome(check) == (Outcome.MISSING, None), check.detail


def reindent(text: str, unit: str, new_unit: str) -> str:
    """Replace each leading ``unit`` of indentation by ``new_unit``."""
    out = []
    for line in text.splitlines(keepends=True):
        depth = 0
        while line.startswith(unit * (depth + 1)):
            depth += 1
        out.append(new_unit * depth + line[len(unit) * depth:])
    return "".join(out)


# --------------------------------------------------------------------------- samples


@dataclass(frozen=True)
class Sample:
    """One language: a file of definitions, the cited one among them, and its edits.

    The file is ``prefix + sep.join(blocks) + suffix``; ``blocks[target]`` is the cited
    definition and ``window`` a few of its lines (1-based, inclusive). ``edit`` changes
    one line inside the window, ``rewrap`` spreads a long call inside the window over
    several lines (as a formatter would), ``added`` is a new definition for inserting,
    and ``other`` is another existing file of the same language that code can move to.
    """

    lang: str
    path: str
    renamed: str
    prefix: str
    blocks: tuple[str, ...]
    target: int
    window: tuple[int, int]
    edit: tuple[str, str]
    rewrap: tuple[str, str]
    added: str
    other: str
    other_prefix: str
    other_blocks: tuple[str, ...]
    sep: str = "\n"
    suffix: str = ""
    other_suffix: str = ""
    indent: str = "    "

    def text(self, blocks: Sequence[str] | None = None) -> str:
        return self.prefix + self.sep.join(self.blocks if blocks is None else blocks) + self.suffix

    def other_text(self, blocks: Sequence[str] | None = None) -> str:
        chosen = self.other_blocks if blocks is None else blocks
        return self.other_prefix + self.sep.join(chosen) + self.other_suffix

    @property
    def code(self) -> str:
        return self.blocks[self.target]

    @property
    def window_text(self) -> str:
        lines = self.code.splitlines(keepends=True)
        return "".join(lines[self.window[0] - 1 : self.window[1]])

    def without_target(self) -> list[str]:
        return [b for i, b in enumerate(self.blocks) if i != self.target]


PYTHON = Sample(
    lang="python",
    path="app/config.py",
    renamed="app/settings/loader.py",
    prefix=src('''
        """Load and save the application configuration."""

        import json
        import os

        DEFAULT_PATH = "~/.config/app.json"


    '''),
    blocks=(
        src('''
            def normalize_keys(data, *, lowercase=True, drop_empty=False, source=None):
                out = {}
                for key, value in data.items():
                    if drop_empty and value in (None, ""):
                        continue
                    out[key.lower() if lowercase else key] = value
                return out
        '''),
        src('''
            def load_config(path=DEFAULT_PATH, *, strict=False):
                full = os.path.expanduser(path)
                if not os.path.exists(full):
                    if strict:
                        raise FileNotFoundError(full)
                    return {}
                with open(full, encoding="utf-8") as fh:
                    data = json.load(fh)
                return normalize_keys(data, lowercase=True, drop_empty=not strict, source=full)
        '''),
        src('''
            def save_config(data, path=DEFAULT_PATH):
                full = os.path.expanduser(path)
                with open(full, "w", encoding="utf-8") as fh:
                    json.dump(data, fh, indent=2, sort_keys=True)
        '''),
    ),
    target=1,
    window=(7, 9),
    edit=("data = json.load(fh)", "data = json.load(fh, parse_float=str)"),
    rewrap=(
        "    return normalize_keys(data, lowercase=True, drop_empty=not strict, source=full)\n",
        "    return normalize_keys(\n"
        "        data, lowercase=True, drop_empty=not strict, source=full\n"
        "    )\n",
    ),
    added=src('''
        def config_dir():
            return os.path.dirname(os.path.expanduser(DEFAULT_PATH))
    '''),
    other="app/storage.py",
    other_prefix=src('''
        """Where files live on disk."""

        import os


    '''),
    other_blocks=(
        src('''
            def ensure_dir(path):
                os.makedirs(path, exist_ok=True)
                return path
        '''),
    ),
    sep="\n\n",
)

JAVASCRIPT = Sample(
    lang="javascript",
    path="src/cart.js",
    renamed="src/checkout/cart.mjs",
    prefix=src('''
        import { roundTo } from "./math.js";

        const TAX_RATE = 0.2;

    '''),
    blocks=(
        src('''
            export function addItem(cart, item) {
              return { ...cart, items: [...cart.items, item] };
            }
        '''),
        src('''
            export function cartTotal(cart, { includeTax = true } = {}) {
              let total = 0;
              for (const item of cart.items) {
                total += item.price * item.quantity;
              }
              if (includeTax) {
                total += total * TAX_RATE;
              }
              return roundTo(total, { digits: 2, mode: "half-even", currency: cart.currency });
            }
        '''),
        src('''
            export function describeCart(cart) {
              const names = cart.items.map((item) => item.name);
              return names.join(", ");
            }
        '''),
    ),
    target=1,
    window=(6, 9),
    edit=("total += total * TAX_RATE;", "total += total * cart.taxRate;"),
    rewrap=(
        '  return roundTo(total, { digits: 2, mode: "half-even", currency: cart.currency });\n',
        "  return roundTo(total, {\n"
        "    digits: 2,\n"
        '    mode: "half-even",\n'
        "    currency: cart.currency,\n"
        "  });\n",
    ),
    added=src('''
        export function isEmpty(cart) {
          return cart.items.length === 0;
        }
    '''),
    other="src/orders.js",
    other_prefix=src('''
        import { api } from "./api.js";

    '''),
    other_blocks=(
        src('''
            export async function placeOrder(cart) {
              const response = await api.post("/orders", cart);
              return response.data;
            }
        '''),
    ),
    indent="  ",
)

TYPESCRIPT = Sample(
    lang="typescript",
    path="src/services/userService.ts",
    renamed="src/users/queries.ts",
    prefix=src('''
        import { Database } from "../db";
        import type { User } from "../models/user";

    '''),
    blocks=(
        src('''
            export interface UserQuery {
              email?: string;
              active?: boolean;
            }
        '''),
        src('''
            export async function findUsers(db: Database, query: UserQuery): Promise<User[]> {
              const clauses: string[] = [];
              const params: unknown[] = [];
              if (query.email) {
                clauses.push("email = ?");
                params.push(query.email.toLowerCase());
              }
              if (query.active !== undefined) {
                clauses.push("active = ?");
                params.push(query.active ? 1 : 0);
              }
              const where = clauses.length ? ` WHERE ${clauses.join(" AND ")}` : "";
              return db.all<User>(`SELECT * FROM users${where}`, params, { cache: true });
            }
        '''),
        src('''
            export function displayName(user: User): string {
              return user.nickname ?? `${user.firstName} ${user.lastName}`;
            }
        '''),
    ),
    target=1,
    window=(8, 13),
    edit=('params.push(query.active ? 1 : 0);', 'params.push(query.active ? "t" : "f");'),
    rewrap=(
        "  return db.all<User>(`SELECT * FROM users${where}`, params, { cache: true });\n",
        "  return db.all<User>(\n"
        "    `SELECT * FROM users${where}`,\n"
        "    params,\n"
        "    { cache: true },\n"
        "  );\n",
    ),
    added=src('''
        export const isAdmin = (user: User): boolean => user.roles.includes("admin");
    '''),
    other="src/services/accountService.ts",
    other_prefix=src('''
        import { Database } from "../db";

    '''),
    other_blocks=(
        src('''
            export async function deactivate(db: Database, id: string): Promise<void> {
              await db.run("UPDATE users SET active = 0 WHERE id = ?", [id]);
            }
        '''),
    ),
    indent="  ",
)

TSX = Sample(
    lang="tsx",
    path="src/components/UserCard.tsx",
    renamed="src/components/users/Card.tsx",
    prefix=src('''
        import React, { useState } from "react";
        import type { User } from "../models/user";

        type Props = { user: User; onSelect?: (id: string) => void };

    '''),
    blocks=(
        src('''
            export function Avatar({ url, size = 32 }: { url: string; size?: number }) {
              return <img className="avatar" src={url} width={size} height={size} alt="" />;
            }
        '''),
        src('''
            export const UserCard = ({ user, onSelect }: Props) => {
              const [expanded, setExpanded] = useState(false);
              const name = user.nickname ?? user.firstName;
              const handleClick = () => {
                setExpanded(!expanded);
                onSelect?.(user.id);
              };
              return (
                <div className="user-card" onClick={handleClick}>
                  <Avatar url={user.avatarUrl} size={expanded ? 64 : 32} />
                  <span className="user-card__name">{name}</span>
                </div>
              );
            };
        '''),
        src('''
            export function UserList({ users }: { users: User[] }) {
              return <ul>{users.map((u) => <li key={u.id}><UserCard user={u} /></li>)}</ul>;
            }
        '''),
    ),
    target=1,
    window=(4, 10),
    edit=("onSelect?.(user.id);", "onSelect?.(user.email);"),
    rewrap=(
        "      <Avatar url={user.avatarUrl} size={expanded ? 64 : 32} />\n",
        "      <Avatar\n"
        "        url={user.avatarUrl}\n"
        "        size={expanded ? 64 : 32}\n"
        "      />\n",
    ),
    added=src('''
        export const Badge = ({ label }: { label: string }) => <em className="badge">{label}</em>;
    '''),
    other="src/components/Layout.tsx",
    other_prefix=src('''
        import React from "react";

    '''),
    other_blocks=(
        src('''
            export function Layout({ children }: { children: React.ReactNode }) {
              return <main className="layout">{children}</main>;
            }
        '''),
    ),
    indent="  ",
)

GO = Sample(
    lang="go",
    path="internal/cache/evict.go",
    renamed="internal/store/expiry.go",
    prefix=src('''
        package cache

        import (
        \t"log"
        \t"time"
        )

    '''),
    blocks=(
        src('''
            func newEntry(value string, ttl time.Duration) entry {
            \treturn entry{value: value, expires: time.Now().Add(ttl)}
            }
        '''),
        src('''
            func evictExpired(entries map[string]entry, now time.Time) int {
            \tremoved := 0
            \tfor key, e := range entries {
            \t\tif now.After(e.expires) {
            \t\t\tdelete(entries, key)
            \t\t\tremoved++
            \t\t}
            \t}
            \tlog.Printf("evicted %d of %d at %s", removed, len(entries), now.Format(time.RFC3339))
            \treturn removed
            }
        '''),
        src('''
            func keys(entries map[string]entry) []string {
            \tout := make([]string, 0, len(entries))
            \tfor key := range entries {
            \t\tout = append(out, key)
            \t}
            \treturn out
            }
        '''),
    ),
    target=1,
    window=(4, 9),
    edit=("removed++", "removed += 2"),
    rewrap=(
        '\tlog.Printf("evicted %d of %d at %s", removed, len(entries), '
        'now.Format(time.RFC3339))\n',
        '\tlog.Printf(\n'
        '\t\t"evicted %d of %d at %s",\n'
        '\t\tremoved, len(entries), now.Format(time.RFC3339),\n'
        '\t)\n',
    ),
    added=src('''
        func expired(e entry, now time.Time) bool {
        \treturn now.After(e.expires)
        }
    '''),
    other="internal/cache/cache.go",
    other_prefix=src('''
        package cache

        import "time"

    '''),
    other_blocks=(
        src('''
            type entry struct {
            \tvalue   string
            \texpires time.Time
            }
        '''),
    ),
    indent="\t",
)

RUST = Sample(
    lang="rust",
    path="src/config.rs",
    renamed="src/settings/parse.rs",
    prefix=src('''
        use std::collections::HashMap;
        use std::fs;
        use std::path::Path;

    '''),
    blocks=(
        src('''
            pub struct Config {
                values: HashMap<String, String>,
            }
        '''),
        src('''
            pub fn parse_line(line: &str) -> Option<(String, String)> {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    return None;
                }
                let (key, value) = line.split_once('=')?;
                Some((key.trim().to_lowercase(), value.trim().trim_matches('"').to_string()))
            }
        '''),
        src('''
            pub fn load(path: &Path) -> std::io::Result<Config> {
                let text = fs::read_to_string(path)?;
                let values = text.lines().filter_map(parse_line).collect();
                Ok(Config { values })
            }
        '''),
    ),
    target=1,
    window=(3, 7),
    edit=("line.split_once('=')?;", "line.split_once(':')?;"),
    rewrap=(
        "    Some((key.trim().to_lowercase(), value.trim().trim_matches('\"').to_string()))\n",
        "    Some((\n"
        "        key.trim().to_lowercase(),\n"
        "        value.trim().trim_matches('\"').to_string(),\n"
        "    ))\n",
    ),
    added=src('''
        pub fn is_comment(line: &str) -> bool {
            line.trim_start().starts_with('#')
        }
    '''),
    other="src/env.rs",
    other_prefix=src('''
        use std::env;

    '''),
    other_blocks=(
        src('''
            pub fn from_env(key: &str) -> Option<String> {
                env::var(key).ok().filter(|v| !v.is_empty())
            }
        '''),
    ),
)

JAVA = Sample(
    lang="java",
    path="src/main/java/com/example/orders/OrderService.java",
    renamed="src/main/java/com/example/billing/OrderService.java",
    prefix=src('''
        package com.example.orders;

        import java.math.BigDecimal;
        import java.math.RoundingMode;
        import java.util.List;

        public class OrderService {

    '''),
    blocks=(
        member('''
        private final OrderRepository repository;

        public OrderService(OrderRepository repository) {
            this.repository = repository;
        }
        '''),
        member('''
        public BigDecimal total(Order order) {
            BigDecimal sum = BigDecimal.ZERO;
            for (OrderLine line : order.getLines()) {
                BigDecimal price = line.price().multiply(BigDecimal.valueOf(line.getQuantity()));
                sum = sum.add(price);
            }
            return sum.setScale(2, RoundingMode.HALF_UP);
        }
        '''),
        member('''
        public List<Order> openOrders(String customerId) {
            return repository.findByCustomer(customerId).stream()
                    .filter(Order::isOpen)
                    .toList();
        }
        '''),
    ),
    target=1,
    window=(3, 6),
    edit=("sum = sum.add(price);", "sum = sum.add(price.negate());"),
    rewrap=(
        "            BigDecimal price = line.price().multiply("
        "BigDecimal.valueOf(line.getQuantity()));\n",
        "            BigDecimal price = line.price()\n"
        "                    .multiply(BigDecimal.valueOf(line.getQuantity()));\n",
    ),
    added=member('''
            public boolean isEmpty(Order order) {
                return order.getLines().isEmpty();
            }
    '''),
    other="src/main/java/com/example/orders/PriceCalculator.java",
    other_prefix=src('''
        package com.example.orders;

        import java.math.BigDecimal;
        import java.math.RoundingMode;

        public final class PriceCalculator {

    '''),
    other_blocks=(
        member('''
        public static BigDecimal discount(BigDecimal amount, int percent) {
            return amount.multiply(BigDecimal.valueOf(100 - percent)).movePointLeft(2);
        }
        '''),
    ),
    suffix="}\n",
    other_suffix="}\n",
)

SAMPLES = {s.lang: s for s in (PYTHON, JAVASCRIPT, TYPESCRIPT, TSX, GO, RUST, JAVA)}


def test_samples_are_what_they_claim() -> None:
    """Guard the fixtures: the window and every edit sit inside the cited definition."""
    for sample in SAMPLES.values():
        assert sample.text().count(sample.window_text) == 1, sample.lang
        for old, _ in (sample.edit, sample.rewrap):
            assert sample.text().count(old) == 1, (sample.lang, old)
            assert old in sample.window_text, (sample.lang, old)


# ------------------------------------------------------------------------ the matrix


@dataclass(frozen=True)
class After:
    """What an edit did: the files now, and where the cited code should be found.

    ``code`` and ``window`` are the cited definition and window as they read now (None
    when deleted); ``path`` is the file they are in; ``verdict`` says what must be
    reported: "moved" (valid or relocated), "changed" or "missing".
    """

    files: dict[str, str | None]
    path: str
    code: str | None
    window: str | None
    verdict: str
    git_mv: tuple[str, str] | None = None


def _same(sample: Sample, blocks: Sequence[str], path: str | None = None) -> After:
    return After({sample.path: sample.text(blocks)}, path or sample.path, sample.code,
                 sample.window_text, "moved")


def insert_above(s: Sample) -> After:
    return _same(s, [*s.blocks[:s.target], s.added, *s.blocks[s.target:]])


def move_within(s: Sample) -> After:
    return _same(s, [*s.without_target(), s.code])


def move_to_top(s: Sample) -> After:
    return _same(s, [s.code, *s.without_target()])


def move_to_other_file(s: Sample) -> After:
    return After({s.path: s.text(s.without_target()),
                  s.other: s.other_text([*s.other_blocks, s.code])},
                 s.other, s.code, s.window_text, "moved")


def move_to_new_file(s: Sample) -> After:
    new = s.other.rsplit("/", 1)[0] + "/extracted" + s.path[s.path.rindex("."):]
    return After({s.path: s.text(s.without_target()),
                  new: s.other_text([s.code])},
                 new, s.code, s.window_text, "moved")


def rename_file(s: Sample) -> After:
    return After({}, s.renamed, s.code, s.window_text, "moved", git_mv=(s.path, s.renamed))


def rename_file_and_add_definition(s: Sample) -> After:
    return After({s.renamed: s.text([*s.blocks, s.added])}, s.renamed, s.code, s.window_text,
                 "moved", git_mv=(s.path, s.renamed))


def rename_file_and_edit_elsewhere(s: Sample) -> After:
    blocks = list(s.blocks)
    last = len(blocks) - 1 if s.target != len(blocks) - 1 else 0
    first_line, rest = blocks[last].split("\n", 1)
    # one line added to another definition's body, right after its first line
    blocks[last] = first_line + "\n" + s.indent + _comment(s.lang, "reviewed") + "\n" + rest
    return After({s.renamed: s.text(blocks)}, s.renamed, s.code, s.window_text, "moved",
                 git_mv=(s.path, s.renamed))


def _comment(lang: str, text: str) -> str:
    return f"# {text}" if lang == "python" else f"// {text}"


def _transformed(s: Sample, change: Callable[[str], str]) -> After:
    return After({s.path: change(s.text())}, s.path, change(s.code), change(s.window_text), "moved")


def reindent_file(s: Sample) -> After:
    new_unit = "  " if s.indent != "  " else "    "
    return _transformed(s, lambda t: reindent(t, s.indent, new_unit))


def tabs_versus_spaces(s: Sample) -> After:
    new_unit = "\t" if s.indent != "\t" else "    "
    return _transformed(s, lambda t: reindent(t, s.indent, new_unit))


def rewrap_long_call(s: Sample) -> After:
    return _transformed(s, lambda t: t.replace(*s.rewrap))


def crlf_line_endings(s: Sample) -> After:
    return _transformed(s, lambda t: t.replace("\n", "\r\n"))


def reformat_and_insert_above(s: Sample) -> After:
    new_unit = "\t" if s.indent != "\t" else "  "
    blocks = [*s.blocks[:s.target], s.added, *s.blocks[s.target:]]

    def change(text: str) -> str:
        return reindent(text.replace(*s.rewrap), s.indent, new_unit)

    return After({s.path: change(s.text(blocks))}, s.path, change(s.code), change(s.window_text),
                 "moved")


def edit_one_line(s: Sample) -> After:
    after = _transformed(s, lambda t: t.replace(*s.edit))
    return replace(after, verdict="changed")


def edit_and_move_to_other_file(s: Sample) -> After:
    code = s.code.replace(*s.edit)
    return After({s.path: s.text(s.without_target()),
                  s.other: s.other_text([*s.other_blocks, code])},
                 s.other, code, s.window_text.replace(*s.edit), "changed")


def edit_and_insert_above(s: Sample) -> After:
    code = s.code.replace(*s.edit)
    blocks = [*s.blocks[:s.target], s.added, code, *s.blocks[s.target + 1:]]
    return After({s.path: s.text(blocks)}, s.path, code, s.window_text.replace(*s.edit), "changed")


def delete_definition(s: Sample) -> After:
    return After({s.path: s.text(s.without_target())}, s.path, None, None, "missing")


def delete_file(s: Sample) -> After:
    return After({s.path: None}, s.path, None, None, "missing")


EDITS: dict[str, Callable[[Sample], After]] = {f.__name__: f for f in (
    insert_above, move_within, move_to_top, move_to_other_file, move_to_new_file,
    rename_file, rename_file_and_add_definition, rename_file_and_edit_elsewhere,
    reindent_file, tabs_versus_spaces, rewrap_long_call, crlf_line_endings,
    reformat_and_insert_above, edit_one_line, edit_and_move_to_other_file,
    edit_and_insert_above, delete_definition, delete_file,
)}


def apply(repo: GitRepo, after: After) -> None:
    if after.git_mv is not None:
        (repo.path / after.git_mv[1]).parent.mkdir(parents=True, exist_ok=True)
        repo.run("mv", *after.git_mv)
    for path, text in after.files.items():
        if text is None:
            repo.remove(path)
        else:
            repo.write(path, text)
    repo.commit("refactor")


def now_text(repo: GitRepo, path: str) -> str:
    return (repo.path / path).read_bytes().decode("utf-8")


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("lang", list(SAMPLES))
def test_matrix(history: History, lang: str, edit: str) -> None:
    s = SAMPLES[lang]
    history.start({s.path: s.text(), s.other: s.other_text(), "README.md": "# shop\n",
                   "docs/empty.txt": ""})
    whole = history.cite_text(s.path, s.text(), s.code)
    window = history.cite_text(s.path, s.text(), s.window_text)
    assert whole.fingerprint.anchor is not None
    assert window.fingerprint.anchor is not None
    assert window.fingerprint.anchor.name == whole.fingerprint.anchor.name

    after = EDITS[edit](s)
    apply(history.repo, after)
    got_whole, got_window = history.check(whole, window)

    if after.verdict == "missing":
        missing(got_whole)
        missing(got_window)
        return
    assert after.code is not None
    assert after.window is not None
    text = now_text(history.repo, after.path)
    lines_whole = span(text, after.code)
    lines_window = within(text, after.code, after.window)
    if after.verdict == "moved":
        moved(got_whole, after.path, lines_whole)
        moved(got_window, after.path, lines_window)
    else:
        changed(got_whole, after.path, lines_whole)
        changed(got_window, after.path, lines_window)


@pytest.mark.parametrize("lang", list(SAMPLES))
def test_edit_outside_the_window_changes_the_definition_only(history: History,
                                                             lang: str) -> None:
    s = SAMPLES[lang]
    history.start({s.path: s.text()})
    whole = history.cite_text(s.path, s.text(), s.code)
    window = history.cite_text(s.path, s.text(), s.window_text)
    first_line = s.code.split("\n", 1)[0]
    code = s.code.replace(first_line, first_line + " " + _comment(s.lang, "hot path"), 1)
    if lang == "python":  # a comment after the colon is still Python
        code = s.code.replace(first_line, first_line + "  # hot path", 1)
    blocks = [*s.blocks[:s.target], s.added, code, *s.blocks[s.target + 1:]]
    history.repo.write(s.path, s.text(blocks))
    history.repo.commit("comment")
    got_whole, got_window = history.check(whole, window)
    text = s.text(blocks)
    changed(got_whole, s.path, span(text, code))
    moved(got_window, s.path, within(text, code, s.window_text))
    assert got_whole.similarity is not None
    assert got_whole.similarity > 0.8


# ------------------------------------------------------------- language-specific shapes


def check_one(history: History, citation: Citation) -> CitationCheck:
    (result,) = history.check(citation)
    return result


RETRY = src('''
    import functools
    import time


    def retry(times=3, delay=0.5):
        def decorate(func):
            @functools.wraps(func)
            def wrapper(*args, **kwargs):
                for attempt in range(times - 1):
                    try:
                        return func(*args, **kwargs)
                    except ConnectionError:
                        time.sleep(delay * (attempt + 1))
                return func(*args, **kwargs)
            return wrapper
        return decorate


    class Client:
        def __init__(self, session):
            self.session = session

        @retry(times=5)
        @functools.lru_cache(maxsize=128)
        def fetch(self, url):
            response = self.session.get(url, timeout=10)
            response.raise_for_status()
            return response.json()

        @property
        def closed(self):
            return self.session is None
''')

def _method(text: str) -> str:
    return textwrap.indent(src(text), "    ")


FETCH = _method('''
    @retry(times=5)
    @functools.lru_cache(maxsize=128)
    def fetch(self, url):
        response = self.session.get(url, timeout=10)
        response.raise_for_status()
        return response.json()
''')
CLOSED = _method('''
    @property
    def closed(self):
        return self.session is None
''')
LOOP = """\
            for attempt in range(times - 1):
                try:
                    return func(*args, **kwargs)
                except ConnectionError:
                    time.sleep(delay * (attempt + 1))
"""
RETRY_DEF = RETRY[RETRY.index("def retry"):RETRY.index("\n\n\nclass Client")] + "\n"


def test_python_decorated_method_and_nested_function(history: History) -> None:
    history.start({"app/client.py": RETRY, "app/__init__.py": ""})
    fetch = history.cite_text("app/client.py", RETRY, FETCH)
    loop = history.cite_text("app/client.py", RETRY, LOOP)
    assert fetch.fingerprint.anchor is not None
    assert loop.fingerprint.anchor is not None
    assert fetch.fingerprint.anchor.name == "Client.fetch"
    assert loop.fingerprint.anchor.name == "retry.decorate.wrapper"
    # a new method above fetch, a new import, and the property moved above fetch
    text = RETRY.replace("import time\n", "import logging\nimport time\n").replace(
        FETCH, CLOSED + "\n" + _method('''
            def close(self):
                self.session = None
        ''') + "\n" + FETCH).replace("\n" + CLOSED, "")
    history.repo.write("app/client.py", text)
    history.repo.commit("reorder")
    got_fetch, got_loop = history.check(fetch, loop)
    moved(got_fetch, "app/client.py", span(text, FETCH))
    moved(got_loop, "app/client.py", span(text, LOOP))


def test_python_decorator_argument_edit_changes_the_decorated_definition(
        history: History) -> None:
    history.start({"app/client.py": RETRY})
    fetch = history.cite_text("app/client.py", RETRY, FETCH)
    body = history.cite_text("app/client.py", RETRY, FETCH.split("\n", 3)[3])
    text = RETRY.replace("@retry(times=5)", "@retry(times=2)")
    history.repo.write("app/client.py", text)
    history.repo.commit("fewer retries")
    got_fetch, got_body = history.check(fetch, body)
    changed(got_fetch, "app/client.py", span(text, FETCH.replace("times=5", "times=2")))
    moved(got_body, "app/client.py", span(text, FETCH.split("\n", 3)[3]))


def test_python_nested_function_moves_with_its_module(history: History) -> None:
    client = RETRY.replace(RETRY_DEF + "\n\n", "").replace(
        "import time\n", "import time\n\nfrom app.retrying import retry\n")
    retrying = '"""Retries with backoff."""\n\nimport time\n\n\n' + RETRY_DEF
    history.start({"app/client.py": RETRY, "app/retrying.py": '"""Retries."""\n'})
    loop = history.cite_text("app/client.py", RETRY, LOOP)
    whole = history.cite_text("app/client.py", RETRY, RETRY_DEF)
    history.repo.write("app/client.py", client)
    history.repo.write("app/retrying.py", retrying)
    history.repo.commit("move retry")
    got_loop, got_whole = history.check(loop, whole)
    moved(got_loop, "app/retrying.py", span(retrying, LOOP))
    moved(got_whole, "app/retrying.py", span(retrying, RETRY_DEF))


def test_python_nested_function_edited(history: History) -> None:
    history.start({"app/client.py": RETRY})
    loop = history.cite_text("app/client.py", RETRY, LOOP)
    text = RETRY.replace("time.sleep(delay * (attempt + 1))", "time.sleep(delay)")
    history.repo.write("app/client.py", "# client\n" + text)
    history.repo.commit("constant backoff")
    changed(check_one(history, loop), "app/client.py",
            span("# client\n" + text, LOOP.replace(" * (attempt + 1)", "")))


STORE_GO = src('''
    package store

    import (
    \t"errors"
    \t"sync"
    )

    var ErrNotFound = errors.New("store: not found")

    type Store struct {
    \tmu    sync.RWMutex
    \titems map[string][]byte
    }

    func (s *Store) Get(key string) ([]byte, error) {
    \ts.mu.RLock()
    \tdefer s.mu.RUnlock()
    \tv, ok := s.items[key]
    \tif !ok {
    \t\treturn nil, ErrNotFound
    \t}
    \treturn v, nil
    }

    func (s *Store) Take(key string) ([]byte, error) {
    \ts.mu.Lock()
    \tdefer s.mu.Unlock()
    \tv, ok := s.items[key]
    \tif !ok {
    \t\treturn nil, ErrNotFound
    \t}
    \tdelete(s.items, key)
    \treturn v, nil
    }

    func (s *Store) Put(key string, value []byte) {
    \ts.mu.Lock()
    \tdefer s.mu.Unlock()
    \ts.items[key] = value
    }
''')
GO_GET = STORE_GO[STORE_GO.index("func (s *Store) Get"):STORE_GO.index("func (s *Store) Take")]
GO_GET = GO_GET.rstrip("\n") + "\n"
GO_TAKE = STORE_GO[STORE_GO.index("func (s *Store) Take"):STORE_GO.index("func (s *Store) Put")]
GO_TAKE = GO_TAKE.rstrip("\n") + "\n"
GO_CHECK = "\tv, ok := s.items[key]\n\tif !ok {\n\t\treturn nil, ErrNotFound\n\t}\n"


def test_go_method_with_receiver_moves_to_another_file(history: History) -> None:
    history.start({"store/store.go": STORE_GO,
                   "store/doc.go": "// Package store.\npackage store\n"})
    whole = history.cite_text("store/store.go", STORE_GO, GO_GET)
    assert whole.fingerprint.anchor is not None
    assert whole.fingerprint.anchor.name == "Store.Get"
    check = history.cite("store/store.go", *within(STORE_GO, GO_GET, GO_CHECK))
    reads = "package store\n\n// Reads.\n\n" + GO_GET
    history.repo.write("store/store.go", STORE_GO.replace(GO_GET + "\n", ""))
    history.repo.write("store/read.go", reads)
    history.repo.commit("split reads")
    got_whole, got_check = history.check(whole, check)
    moved(got_whole, "store/read.go", span(reads, GO_GET))
    moved(got_check, "store/read.go", within(reads, GO_GET, GO_CHECK))


def test_go_value_receiver_changes_the_method_not_its_body(history: History) -> None:
    history.start({"store/store.go": STORE_GO})
    whole = history.cite_text("store/store.go", STORE_GO, GO_GET)
    body = history.cite("store/store.go", *within(STORE_GO, GO_GET, GO_CHECK))
    text = STORE_GO.replace("func (s *Store) Get", "func (s Store) Get")
    history.repo.write("store/store.go", text)
    history.repo.commit("value receiver")
    got_whole, got_body = history.check(whole, body)
    changed(got_whole, "store/store.go", span(STORE_GO, GO_GET))
    moved(got_body, "store/store.go", within(STORE_GO, GO_GET, GO_CHECK))


def test_duplicate_snippet_the_one_inside_the_anchor_wins(history: History) -> None:
    """The same four lines are in Get and in Take; Take moves to where Get was, so its
    copy is the nearest to the old place: the anchor (Store.Get) still decides."""
    history.start({"store/store.go": STORE_GO})
    in_get = history.cite("store/store.go", *within(STORE_GO, GO_GET, GO_CHECK))
    text = STORE_GO.replace(GO_GET + "\n" + GO_TAKE, GO_TAKE + "\n" + GO_GET)
    history.repo.write("store/store.go", text)
    history.repo.commit("swap")
    got = check_one(history, in_get)
    moved(got, "store/store.go", within(text, GO_GET, GO_CHECK))
    assert got.ambiguous


PPROF_GO = src('''
    package trace

    func computeSyscall(events []*Event) Profile {
    \tprof := make(map[uint64]Record)
    \tfor _, ev := range events {
    \t\tif ev.Type != EvGoSysCall || ev.Link == nil {
    \t\t\tcontinue
    \t\t}
    \t\toverlapping := overlap(ev)
    \t\tif overlapping > 0 {
    \t\t\trec := prof[ev.StkID]
    \t\t\trec.stk = ev.Stk
    \t\t\trec.n++
    \t\t\trec.time += overlapping.Nanoseconds()
    \t\t\tprof[ev.StkID] = rec
    \t\t}
    \t}
    \treturn build(prof)
    }

    func computeSched(events []*Event) Profile {
    \tprof := make(map[uint64]Record)
    \tfor _, ev := range events {
    \t\tif ev.Type != EvGoUnblock || ev.Link == nil {
    \t\t\tcontinue
    \t\t}
    \t\toverlapping := overlap(ev)
    \t\tif overlapping > 0 {
    \t\t\trec := prof[ev.StkID]
    \t\t\trec.stk = ev.Stk
    \t\t\trec.n++
    \t\t\trec.time += overlapping.Nanoseconds()
    \t\t\tprof[ev.StkID] = rec
    \t\t}
    \t}
    \treturn build(prof)
    }
''')
PPROF_SCHED = PPROF_GO[PPROF_GO.index("func computeSched"):]
PPROF_BLOCK = "\t\t\trec := prof[ev.StkID]\n\t\t\trec.stk = ev.Stk\n\t\t\trec.n++\n"


def test_an_edited_block_is_not_relocated_to_its_twin_among_the_same_neighbours(
        history: History) -> None:
    """Two functions share a block and the three lines on each side of it (Go's
    runtime/trace does). Editing the second copy changes it: the first copy, which was
    there all along, is not where the cited code went."""
    history.start({"trace/pprof.go": PPROF_GO})
    cited = history.cite("trace/pprof.go", *within(PPROF_GO, PPROF_SCHED, PPROF_BLOCK))
    edited = PPROF_SCHED.replace("rec.n++", "rec.n += 2")
    text = PPROF_GO.replace(PPROF_SCHED, edited)
    history.repo.write("trace/pprof.go", text)
    history.repo.commit("count twice")
    changed(check_one(history, cited), "trace/pprof.go",
            within(text, edited, PPROF_BLOCK.replace("rec.n++", "rec.n += 2")))


KEYMAP_RS = src('''
    use crate::Arg;

    pub struct MKeyMap {
        keys: Vec<Key>,
    }

    /// Generate key types for a specific Arg.
    fn append_keys(keys: &mut Vec<Key>, arg: &Arg, index: usize) {
        if let Some(short) = arg.short {
            let key = KeyType::Short(short);
            keys.push(Key { key, index });
        }
        if let Some(long) = arg.long.clone() {
            let key = KeyType::Long(long.into());
            keys.push(Key { key, index });
        }
        for (long, _) in arg.aliases.iter() {
            let key = KeyType::Long(long.into());
            keys.push(Key { key, index });
        }
    }
''')
KEYMAP_FN = KEYMAP_RS[KEYMAP_RS.index("/// Generate"):]
KEYMAP_ALIASES = "    for (long, _) in arg.aliases.iter() {\n"


def test_a_repeated_block_moved_and_edited_is_not_relocated_to_its_sibling(
        history: History) -> None:
    """The function pushes the same two lines for each kind of key; it moves to a new
    file and the last copy is edited. The first copy, which moved along unchanged, is
    not where the cited (last) copy went: aligning the two definitions says so."""
    history.start({"src/mkeymap.rs": KEYMAP_RS})
    last_push = within(KEYMAP_RS, KEYMAP_FN[KEYMAP_FN.index(KEYMAP_ALIASES):],
                       "        let key = KeyType::Long(long.into());\n"
                       "        keys.push(Key { key, index });\n")
    cited = history.cite("src/mkeymap.rs", *last_push)
    edited = KEYMAP_FN.replace("keys.push(Key { key, index });\n    }\n}",
                               "keys.push(Key { key, index: index + 1 });\n    }\n}")
    assert edited != KEYMAP_FN
    helpers = "use super::*;\n\n" + edited
    history.repo.write("src/mkeymap.rs", KEYMAP_RS.replace(KEYMAP_FN, "").rstrip() + "\n")
    history.repo.write("src/mkeymap_helpers.rs", helpers)
    history.repo.commit("move append_keys out and change the alias index")
    changed(check_one(history, cited), "src/mkeymap_helpers.rs",
            within(helpers, edited[edited.index(KEYMAP_ALIASES):],
                   "        let key = KeyType::Long(long.into());\n"
                   "        keys.push(Key { key, index: index + 1 });\n"))


CF_GO = src('''
    package macos

    func CFDataGetLength(data CFRef) int {
    \treturn int(syscall(abi.FuncPCABI0(lengthTramp), uintptr(data), 0, 0, 0, 0, 0))
    }

    func CFErrorGetCode(errRef CFRef) int {
    \treturn int(syscall(abi.FuncPCABI0(codeTramp), uintptr(errRef), 0, 0, 0, 0, 0))
    }
''')
CF_CODE = CF_GO[CF_GO.index("func CFErrorGetCode"):]
CF_CODE_EXPLODED = src('''
    func CFErrorGetCode(errRef CFRef) int {
    \treturn int(syscall(
    \t\tabi.FuncPCABI0(codeTramp),
    \t\tuintptr(errRef),
    \t\t0,
    \t\t0,
    \t\t0,
    \t\t0,
    \t\t0,
    \t))
    }
''')


def test_an_argument_list_exploded_one_per_line_is_the_same_code(history: History) -> None:
    """A formatter puts each argument on its own line (with Go's trailing comma): the
    three cited lines become eleven, more than any fixed multiple of the citation's
    length allows; the cited text's own length bounds the search instead."""
    history.start({"macos/cf.go": CF_GO})
    cited = history.cite_text("macos/cf.go", CF_GO, CF_CODE)
    assert (cited.line_start, cited.line_end) == (7, 9)
    text = "// Code generated by mkcf. DO NOT EDIT.\n\n" + CF_GO.replace(CF_CODE,
                                                                        CF_CODE_EXPLODED)
    history.repo.write("macos/cf.go", text)
    history.repo.commit("gofmt")
    moved(check_one(history, cited), "macos/cf.go", span(text, CF_CODE_EXPLODED))


def test_deleted_method_is_missing_even_when_its_lines_live_on_elsewhere(
        history: History) -> None:
    """Get is deleted; Take still has the same four lines. They are Take's, not Get's."""
    history.start({"store/store.go": STORE_GO})
    in_get = history.cite("store/store.go", *within(STORE_GO, GO_GET, GO_CHECK))
    whole = history.cite_text("store/store.go", STORE_GO, GO_GET)
    history.repo.write("store/store.go", STORE_GO.replace(GO_GET + "\n", ""))
    history.repo.commit("drop Get")
    got_window, got_whole = history.check(in_get, whole)
    missing(got_window)
    missing(got_whole)


def test_deleted_method_is_missing_even_when_its_lines_appear_in_another_file(
        history: History) -> None:
    """Get and Take are deleted; a new, different function elsewhere happens to hold the
    same four lines (boilerplate). Get's lines did not move there."""
    history.start({"store/store.go": STORE_GO, "store/cache.go": "package store\n"})
    in_get = history.cite("store/store.go", *within(STORE_GO, GO_GET, GO_CHECK))
    refresh = (
        "package store\n\nimport \"time\"\n\n"
        "func (s *Cache) Refresh(key string, load func(string) ([]byte, error)) ([]byte, error) {\n"
        "\tfresh, err := load(key)\n"
        "\tif err != nil {\n\t\treturn nil, err\n\t}\n"
        + GO_CHECK +
        "\ts.items[key] = fresh\n"
        "\ts.stamps[key] = time.Now()\n"
        "\ts.hits++\n"
        "\treturn v, nil\n"
        "}\n"
    )
    history.repo.write("store/store.go", STORE_GO.replace(GO_GET + "\n", "").replace(
        GO_TAKE + "\n", ""))
    history.repo.write("store/cache.go", refresh)
    history.repo.commit("drop Get and Take, add Cache.Refresh")
    missing(check_one(history, in_get))


def test_method_moved_and_renamed_into_another_type_is_followed(history: History) -> None:
    """Get becomes Cache.Lookup in another file, body unchanged: the same definition
    under another name (its lines match), so its lines are Get's lines."""
    history.start({"store/store.go": STORE_GO, "store/cache.go": "package store\n"})
    in_get = history.cite("store/store.go", *within(STORE_GO, GO_GET, GO_CHECK))
    lookup = "package store\n\n" + GO_GET.replace("(s *Store) Get", "(s *Cache) Lookup")
    history.repo.write("store/store.go", STORE_GO.replace(GO_GET + "\n", ""))
    history.repo.write("store/cache.go", lookup)
    history.repo.commit("Store.Get becomes Cache.Lookup")
    moved(check_one(history, in_get), "store/cache.go", within(lookup, lookup, GO_CHECK))


LIMITER_TS = src('''
    export class RateLimiter {
      private readonly hits = new Map<string, number[]>();

      constructor(private readonly limit: number, private readonly windowMs: number) {}

      allow(key: string, now: number = Date.now()): boolean {
        const recent = (this.hits.get(key) ?? []).filter((t) => now - t < this.windowMs);
        if (recent.length >= this.limit) {
          this.hits.set(key, recent);
          return false;
        }
        recent.push(now);
        this.hits.set(key, recent);
        return true;
      }

      reset(key: string): void {
        this.hits.delete(key);
      }
    }

    export const keyFor = (req: { ip: string; user?: { id: string } }): string =>
      req.user ? `user:${req.user.id}` : `ip:${req.ip}`;
''')
TS_ALLOW_WINDOW = """\
    if (recent.length >= this.limit) {
      this.hits.set(key, recent);
      return false;
    }
"""
TS_RESET = """\
  reset(key: string): void {
    this.hits.delete(key);
  }
"""
TS_KEYFOR = """\
export const keyFor = (req: { ip: string; user?: { id: string } }): string =>
  req.user ? `user:${req.user.id}` : `ip:${req.ip}`;
"""


def test_typescript_class_method_and_arrow_function_constant(history: History) -> None:
    keys = 'import type { Request } from "./types";\n\nexport const VERSION = 2;\n'
    history.start({"src/limiter.ts": LIMITER_TS, "src/keys.ts": keys})
    window = history.cite_text("src/limiter.ts", LIMITER_TS, TS_ALLOW_WINDOW)
    arrow = history.cite_text("src/limiter.ts", LIMITER_TS, TS_KEYFOR)
    assert window.fingerprint.anchor is not None
    assert arrow.fingerprint.anchor is not None
    assert window.fingerprint.anchor.name == "RateLimiter.allow"
    assert (arrow.fingerprint.anchor.name, arrow.fingerprint.anchor.kind) == (
        "keyFor", "arrow_function")
    # reset moves above allow; keyFor moves to keys.ts
    text = LIMITER_TS.replace(TS_RESET, "").replace(
        "  allow(key", TS_RESET + "\n  allow(key").replace("\n" + TS_KEYFOR, "")
    keys_now = keys + "\n" + TS_KEYFOR
    history.repo.write("src/limiter.ts", text)
    history.repo.write("src/keys.ts", keys_now)
    history.repo.commit("reorganise")
    got_window, got_arrow = history.check(window, arrow)
    moved(got_window, "src/limiter.ts", span(text, TS_ALLOW_WINDOW))
    moved(got_arrow, "src/keys.ts", span(keys_now, TS_KEYFOR))


def test_typescript_arrow_function_body_edit_is_changed(history: History) -> None:
    history.start({"src/limiter.ts": LIMITER_TS})
    arrow = history.cite_text("src/limiter.ts", LIMITER_TS, TS_KEYFOR)
    text = LIMITER_TS.replace("`ip:${req.ip}`", "`addr:${req.ip}`")
    history.repo.write("src/limiter.ts", "// limits\n" + text)
    history.repo.commit("rename key prefix")
    changed(check_one(history, arrow), "src/limiter.ts",
            span("// limits\n" + text, TS_KEYFOR.replace("ip:$", "addr:$")))


CACHE_RS = src('''
    use std::collections::HashMap;
    use std::fmt;

    pub struct Entry {
        value: String,
        hits: u32,
    }

    pub struct Cache {
        entries: HashMap<String, Entry>,
    }

    impl Cache {
        pub fn new() -> Self {
            Cache { entries: HashMap::new() }
        }

        pub fn get(&mut self, key: &str) -> Option<&str> {
            let entry = self.entries.get_mut(key)?;
            entry.hits += 1;
            Some(entry.value.as_str())
        }

        pub fn insert(&mut self, key: String, value: String) {
            self.entries.insert(key, Entry { value, hits: 0 });
        }
    }

    impl fmt::Display for Cache {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Cache({} entries)", self.entries.len())
        }
    }
''')
RS_GET = """\
    pub fn get(&mut self, key: &str) -> Option<&str> {
        let entry = self.entries.get_mut(key)?;
        entry.hits += 1;
        Some(entry.value.as_str())
    }
"""
RS_INSERT = """\
    pub fn insert(&mut self, key: String, value: String) {
        self.entries.insert(key, Entry { value, hits: 0 });
    }
"""
RS_DISPLAY = CACHE_RS[CACHE_RS.index("impl fmt::Display"):]


def test_rust_impl_methods_move_and_change(history: History) -> None:
    history.start({"src/cache.rs": CACHE_RS, "src/lib.rs": "pub mod cache;\n"})
    get = history.cite_text("src/cache.rs", CACHE_RS, RS_GET)
    fmt_body = history.cite_text("src/cache.rs", CACHE_RS,
                                 '        write!(f, "Cache({} entries)", self.entries.len())\n')
    assert get.fingerprint.anchor is not None
    assert fmt_body.fingerprint.anchor is not None
    assert get.fingerprint.anchor.name == "impl Cache::get"
    assert fmt_body.fingerprint.anchor.name == "impl fmt::Display for Cache::fmt"
    # get moves below insert; the Display impl moves to its own file
    text = CACHE_RS.replace(RS_GET + "\n" + RS_INSERT, RS_INSERT + "\n" + RS_GET).replace(
        "\n" + RS_DISPLAY, "")
    display = "use std::fmt;\n\nuse crate::cache::Cache;\n\n" + RS_DISPLAY
    history.repo.write("src/cache.rs", text)
    history.repo.write("src/display.rs", display)
    history.repo.commit("split")
    got_get, got_fmt = history.check(get, fmt_body)
    moved(got_get, "src/cache.rs", span(text, RS_GET))
    moved(got_fmt, "src/display.rs",
          span(display, '        write!(f, "Cache({} entries)", self.entries.len())\n'))
    # then get's body changes
    edited = text.replace("entry.hits += 1;", "entry.hits = entry.hits.saturating_add(1);")
    history.repo.write("src/cache.rs", edited)
    history.repo.commit("saturate")
    changed(check_one(history, get), "src/cache.rs",
            span(edited, RS_GET.replace("entry.hits += 1;",
                                        "entry.hits = entry.hits.saturating_add(1);")))


CLIENT_JAVA = src('''
    package com.example.http;

    import java.time.Duration;
    import java.util.Map;

    public class HttpClient {

        private final Config config;

        public HttpClient(Config config) {
            this.config = config;
        }

        public static class Config {
            private Duration timeout = Duration.ofSeconds(30);
            private int retries = 3;

            public Config withTimeout(Duration timeout) {
                this.timeout = timeout;
                return this;
            }

            public Config withRetries(int retries) {
                if (retries < 0) {
                    throw new IllegalArgumentException("retries must be >= 0");
                }
                this.retries = retries;
                return this;
            }
        }

        static final class Response {
            final int status;

            Response(int status) {
                this.status = status;
            }

            boolean isSuccess() {
                return status >= 200 && status < 300;
            }
        }
    }
''')
JAVA_CONFIG = CLIENT_JAVA[CLIENT_JAVA.index("    public static class Config"):
                          CLIENT_JAVA.index("    static final class Response")]
JAVA_RESPONSE = CLIENT_JAVA[CLIENT_JAVA.index("    static final class Response"):
                            CLIENT_JAVA.rindex("}")]
JAVA_WITH_RETRIES = """\
        public Config withRetries(int retries) {
            if (retries < 0) {
                throw new IllegalArgumentException("retries must be >= 0");
            }
            this.retries = retries;
            return this;
        }
"""


def test_java_methods_in_nested_classes(history: History) -> None:
    history.start({"src/HttpClient.java": CLIENT_JAVA})
    with_retries = history.cite_text("src/HttpClient.java", CLIENT_JAVA, JAVA_WITH_RETRIES)
    is_success = history.cite_text("src/HttpClient.java", CLIENT_JAVA,
                                   "            return status >= 200 && status < 300;\n")
    assert with_retries.fingerprint.anchor is not None
    assert with_retries.fingerprint.anchor.name == "HttpClient.Config.withRetries"
    # the nested classes swap places
    text = CLIENT_JAVA.replace(JAVA_CONFIG + JAVA_RESPONSE, JAVA_RESPONSE + "\n" + JAVA_CONFIG)
    history.repo.write("src/HttpClient.java", text)
    history.repo.commit("swap")
    got_retries, got_success = history.check(with_retries, is_success)
    moved(got_retries, "src/HttpClient.java", span(text, JAVA_WITH_RETRIES))
    moved(got_success, "src/HttpClient.java",
          span(text, "            return status >= 200 && status < 300;\n"))


def test_java_nested_class_extracted_to_its_own_file(history: History) -> None:
    history.start({"src/HttpClient.java": CLIENT_JAVA})
    with_retries = history.cite_text("src/HttpClient.java", CLIENT_JAVA, JAVA_WITH_RETRIES)
    assert with_retries.fingerprint.anchor is not None
    config = ("package com.example.http;\n\nimport java.time.Duration;\n\n"
              + textwrap.dedent(JAVA_CONFIG).replace("public static class", "public class"))
    history.repo.write("src/HttpClient.java", CLIENT_JAVA.replace(JAVA_CONFIG, ""))
    history.repo.write("src/Config.java", config)
    history.repo.commit("extract Config")
    got = check_one(history, with_retries)
    # one level less indented, and now named Config.withRetries: the same lines
    moved(got, "src/Config.java", span(config, outdent(JAVA_WITH_RETRIES)))


def test_java_method_edited_in_nested_class(history: History) -> None:
    history.start({"src/HttpClient.java": CLIENT_JAVA})
    with_retries = history.cite_text("src/HttpClient.java", CLIENT_JAVA, JAVA_WITH_RETRIES)
    text = CLIENT_JAVA.replace("if (retries < 0) {", "if (retries < 0 || retries > 10) {")
    history.repo.write("src/HttpClient.java", text)
    history.repo.commit("bound retries")
    changed(check_one(history, with_retries), "src/HttpClient.java",
            span(text, JAVA_WITH_RETRIES.replace("retries < 0", "retries < 0 || retries > 10")))


EXPORT_PY = src('''
    import csv


    def export_csv(rows, path):
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerows(rows)


    def backup_csv(rows, path):
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerows(rows)
        return path
''')
WRITE = """\
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerows(rows)
"""


def test_ambiguous_snippet_inside_the_anchor_wins_over_the_nearest(history: History) -> None:
    history.start({"tools/export.py": EXPORT_PY})
    lines = EXPORT_PY.splitlines(keepends=True)
    at = "".join(lines).index("def backup_csv")
    first = EXPORT_PY.count("\n", 0, at) + 2  # the line after `def backup_csv`
    in_backup = history.cite("tools/export.py", first, first + 2)
    assert in_backup.fingerprint.anchor is not None
    assert in_backup.fingerprint.anchor.name == "backup_csv"
    # export_csv's copy moves down to exactly where backup_csv's was; backup_csv moves down
    text = EXPORT_PY.replace("import csv\n", "import csv\nimport io\nimport os\nimport sys\n"
                             "import zipfile\n")
    history.repo.write("tools/export.py", text)
    history.repo.commit("imports")
    got = check_one(history, in_backup)
    backup = text[text.index("def backup_csv"):]
    moved(got, "tools/export.py", within(text, backup, WRITE))
    assert got.ambiguous


def test_ambiguity_without_an_anchor_takes_the_nearest_and_says_so(history: History) -> None:
    notes = ("# Notes\n\nRun:\n\n    make build\n    make test\n\n"
             "Then:\n\n    make build\n    make test\n")
    history.start({"docs/notes.txt": notes})
    second = history.cite("docs/notes.txt", 10, 11)
    history.repo.write("docs/notes.txt", "Updated.\n\n" + notes)
    history.repo.commit("intro")
    got = check_one(history, second)
    assert outcome(got) == (Outcome.RELOCATED, Location("docs/notes.txt", 12, 13))
    assert got.ambiguous


def test_empty_files_anywhere_in_the_story(history: History) -> None:
    s = PYTHON
    history.start({s.path: s.text(), "app/__init__.py": "", "app/empty.py": ""})
    whole = history.cite_text(s.path, s.text(), s.code)
    window = history.cite_text(s.path, s.text(), s.window_text)
    gone = history.cite_text(s.path, s.text(), s.blocks[2])
    # the function moves to a new module; two new empty files appear; app/empty.py gets it
    history.repo.write(s.path, s.text(s.without_target()))
    history.repo.write("app/new_empty.py", "")
    history.repo.write("app/also_empty.txt", "")
    history.repo.write("app/empty.py", s.code)
    history.repo.commit("move")
    got_whole, got_window, got_gone = history.check(whole, window, gone)
    moved(got_whole, "app/empty.py", span(s.code, s.code))
    moved(got_window, "app/empty.py", span(s.code, s.window_text))
    moved(got_gone, s.path, span(s.text(s.without_target()), s.blocks[2]))
    # then the cited file is emptied
    history.repo.write(s.path, "")
    history.repo.commit("empty it")
    missing(check_one(history, gone))


# --------------------------------------------------------------- languages without grammar


GUIDE_MD = src('''
    # Deploying

    Build the image first:

        docker build -t shop:latest .
        docker push registry.example.com/shop:latest

    Then roll it out:

        kubectl rollout restart deployment/shop
        kubectl rollout status deployment/shop --timeout=120s
''')
ROLLOUT = ("    kubectl rollout restart deployment/shop\n"
           "    kubectl rollout status deployment/shop --timeout=120s\n")

CLEANUP_RB = src('''
    module Tasks
      class Cleanup
        def initialize(store, days: 30)
          @store = store
          @days = days
        end

        def run
          cutoff = Time.now - (@days * 86_400)
          stale = @store.sessions.select { |s| s.updated_at < cutoff }
          stale.each(&:destroy)
          stale.size
        end
      end
    end
''')
RB_RUN = """\
    def run
      cutoff = Time.now - (@days * 86_400)
      stale = @store.sessions.select { |s| s.updated_at < cutoff }
      stale.each(&:destroy)
      stale.size
    end
"""


def test_non_grammar_file_insert_above_relocates(history: History) -> None:
    history.start({"docs/deploy.md": GUIDE_MD})
    rollout = history.cite_text("docs/deploy.md", GUIDE_MD, ROLLOUT)
    assert rollout.fingerprint.anchor is None
    text = GUIDE_MD.replace("# Deploying\n", "# Deploying\n\n> Needs cluster access.\n")
    history.repo.write("docs/deploy.md", text)
    history.repo.commit("note")
    moved(check_one(history, rollout), "docs/deploy.md", span(text, ROLLOUT))


def test_non_grammar_code_moved_to_another_file_is_found_by_line_hashes(
        history: History) -> None:
    maintenance = "module Tasks\n  class Maintenance\n  end\nend\n"
    history.start({"lib/tasks/cleanup.rb": CLEANUP_RB, "lib/tasks/maintenance.rb": maintenance,
                   "README.md": "# tasks\n"})
    run = history.cite_text("lib/tasks/cleanup.rb", CLEANUP_RB, RB_RUN)
    history.repo.write("lib/tasks/cleanup.rb", CLEANUP_RB.replace("\n" + RB_RUN, ""))
    now = maintenance.replace("  end\n", RB_RUN + "  end\n", 1)
    history.repo.write("lib/tasks/maintenance.rb", now)
    history.repo.commit("move run")
    moved(check_one(history, run), "lib/tasks/maintenance.rb", span(now, RB_RUN))


def test_non_grammar_file_renamed(history: History) -> None:
    history.start({"lib/tasks/cleanup.rb": CLEANUP_RB})
    run = history.cite_text("lib/tasks/cleanup.rb", CLEANUP_RB, RB_RUN)
    history.repo.run("mv", "lib/tasks/cleanup.rb", "lib/cleanup_task.rb")
    history.repo.commit("rename")
    moved(check_one(history, run), "lib/cleanup_task.rb", span(CLEANUP_RB, RB_RUN))


def test_non_grammar_edit_is_changed_and_delete_is_missing(history: History) -> None:
    history.start({"docs/deploy.md": GUIDE_MD, "lib/tasks/cleanup.rb": CLEANUP_RB})
    rollout = history.cite_text("docs/deploy.md", GUIDE_MD, ROLLOUT)
    run = history.cite_text("lib/tasks/cleanup.rb", CLEANUP_RB, RB_RUN)
    text = GUIDE_MD.replace("--timeout=120s", "--timeout=300s")
    history.repo.write("docs/deploy.md", text)
    history.repo.write("lib/tasks/cleanup.rb", CLEANUP_RB.replace("\n" + RB_RUN, ""))
    history.repo.commit("edit and delete")
    got_rollout, got_run = history.check(rollout, run)
    changed(got_rollout, "docs/deploy.md", span(text, ROLLOUT.replace("120s", "300s")))
    missing(got_run)


# --------------------------------------------------------------------------- cost model


def test_each_file_is_read_once_and_only_changed_files_are_searched(
        history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many citations, one refactor: every blob is read at most once, files whose blob
    did not change since the citations' commit are never read, and each blob is parsed
    at most once."""
    unchanged = {f"pkg/untouched_{i}.py": f"def f{i}():\n    return {i}\n" for i in range(20)}
    files: dict[str, str | bytes] = {s.path: s.text() for s in SAMPLES.values()}
    files.update({s.other: s.other_text() for s in SAMPLES.values()})
    files.update(unchanged)
    history.start(files)
    cited = []
    for s in SAMPLES.values():
        cited.append(history.cite_text(s.path, s.text(), s.code))
        cited.append(history.cite_text(s.path, s.text(), s.window_text))
        cited.append(history.cite_text(s.path, s.text(), s.blocks[0]))
    for s in SAMPLES.values():  # each target moves to the other file
        after = move_to_other_file(s)
        for path, text in after.files.items():
            assert text is not None
            history.repo.write(path, text)
    history.repo.commit("move everything")

    with LocalGitSource(history.repo.path) as source:
        head = source.resolve("HEAD")
        tree = source.tree(head)
        reads: list[str] = []
        real = source.read_blob
        monkeypatch.setattr(source, "read_blob", lambda sha: reads.append(sha) or real(sha))
        index = DefinitionIndex()
        results = Verifier(source, locator=AnchorLocator(index)).check(cited, head)

    assert len(reads) == len(set(reads))
    assert not {tree[p] for p in unchanged} & set(reads)
    assert index.parses <= len(set(reads))
    for s, (whole, window, first) in zip(SAMPLES.values(),
                                         zip(*[iter(results)] * 3, strict=True), strict=True):
        text = s.other_text([*s.other_blocks, s.code])
        moved(whole, s.other, span(text, s.code))
        moved(window, s.other, within(text, s.code, s.window_text))
        assert first.outcome in (Outcome.VALID, Outcome.RELOCATED), (s.lang, first.detail)


def parse_recorder(monkeypatch: pytest.MonkeyPatch) -> tuple[DefinitionIndex, list[str]]:
    """An index, and the paths it really parses (not those answered from its cache)."""
    parsed: list[str] = []
    index = DefinitionIndex()

    def recording(real: Callable[..., tuple[Definition, ...]]
                  ) -> Callable[..., tuple[Definition, ...]]:
        def listed(path: str, *args: Any, **given: Any) -> tuple[Definition, ...]:
            before = index.parses
            found = real(path, *args, **given)
            if index.parses > before:
                parsed.append(path)
            return found
        return listed

    # the whole file's definitions, or those around one place in it
    monkeypatch.setattr(index, "definitions", recording(index.definitions))
    monkeypatch.setattr(index, "definitions_around", recording(index.definitions_around))
    return index, parsed


TOTAL = src('''
    def compute_total(items, tax):
        subtotal = sum(item.price * item.quantity for item in items)
        discount = subtotal * 0.1 if subtotal > 100 else 0
        return (subtotal - discount) * (1 + tax)
''')


def test_files_that_only_mention_the_name_are_not_parsed(
        history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    """``compute_total`` moves to a new module; two changed modules that only call it
    come first among the candidates. Their text shows they cannot hold the function
    (or any of its lines), so they are never parsed: the new module answers first."""
    callers = "from pkg.engine import compute_total\n\n\ndef {0}(cart):\n" \
              "    return compute_total(cart.items, 0.2)\n"
    history.start({"pkg/engine.py": "import math\n\n\n" + TOTAL,
                   "pkg/a_orders.py": callers.format("order_total"),
                   "pkg/b_quotes.py": callers.format("quote_total")})
    whole = history.cite_text("pkg/engine.py", "import math\n\n\n" + TOTAL, TOTAL)
    window = history.cite("pkg/engine.py", 5, 6)
    history.repo.write("pkg/engine.py", "import math\n")
    history.repo.write("pkg/z_money.py", "import decimal\n\n\n" + TOTAL)
    for path, name in (("pkg/a_orders.py", "order_total"), ("pkg/b_quotes.py", "quote_total")):
        history.repo.write(path, callers.format(name).replace("pkg.engine", "pkg.z_money"))
    history.repo.commit("move compute_total")

    index, parsed = parse_recorder(monkeypatch)
    with LocalGitSource(history.repo.path) as source:
        results = Verifier(source, locator=AnchorLocator(index)).check(
            [whole, window], source.resolve("HEAD"))
    moved(results[0], "pkg/z_money.py", (4, 7))
    moved(results[1], "pkg/z_money.py", (5, 6))
    assert sorted(set(parsed)) == ["pkg/engine.py", "pkg/z_money.py"]


def test_files_that_cannot_hold_the_lines_are_not_split_into_lines(
        history: History) -> None:
    """``Cart`` is deleted. Of the changed modules searched, one holds the first line of
    ``Cart.checkout`` (another class's ``checkout``) and none of the rest, one holds
    nothing of it: their text (squeezed) tells that neither can hold the cited lines,
    nor half of the method's, so they are never split into lines and hashed; the
    method and a window inside it are ``missing``."""
    history.start({"pkg/cart.py": "import math\n\n\n" + CART,
                   "pkg/a_order.py": "class Order:\n    pass\n",
                   "pkg/b_other.py": "NAME = 'other'\n"})
    method = history.cite("pkg/cart.py", 8, 11)
    window = history.cite("pkg/cart.py", 9, 10)
    history.repo.write("pkg/cart.py", "import math\n")
    history.repo.write("pkg/a_order.py", "class Order:\n    def checkout(self, tax):\n"
                       "        return 0\n")
    history.repo.write("pkg/b_other.py", "NAME = 'another'\n")
    history.repo.commit("drop Cart")

    with LocalGitSource(history.repo.path) as source:
        verifier = Verifier(source, locator=AnchorLocator(DefinitionIndex()))
        head = source.resolve("HEAD")
        results = verifier.check([method, window], head)
        tree = source.tree(head)
        searched = [verifier.files.get(tree[p]) for p in ("pkg/a_order.py", "pkg/b_other.py")]
    assert [r.citation.fingerprint.anchor.name for r in results
            if r.citation.fingerprint.anchor] == ["Cart.checkout", "Cart.checkout"]
    missing(results[0])
    missing(results[1])
    assert all(f is not None and f._lines is None and f._hashes is None for f in searched)


def test_a_bulk_citation_of_a_file_that_did_not_change_hashes_only_its_lines(
        history: History) -> None:
    """The bulk check fingerprints each citation without an anchor: of a file not
    hashed yet, only the cited lines are hashed, and a file that did not change since
    is answered (step 1) without ever being hashed whole."""
    history.start({"pkg/cart.py": "import math\n\n\n" + CART})
    history.repo.write("README.md", "# other\n")
    history.repo.commit("another file")
    with LocalGitSource(history.repo.path) as source:
        files = FileCache(source)
        citation = fingerprint_citation(source, files, history.first,
                                        CitationRef("pkg/cart.py", 8, 11, history.first),
                                        with_anchor=False)
        verifier = Verifier(source, locator=AnchorLocator(DefinitionIndex(),
                                                          derive_anchors=True))
        verifier.files = files
        (check,) = verifier.check([citation], source.resolve("HEAD"))
        cited = files.get(source.tree(history.first)["pkg/cart.py"])
    assert check.outcome is Outcome.VALID
    assert citation.fingerprint.line_hashes == line_hashes(
        ["    def checkout(self, tax):", "        due = self.subtotal() * (1 + tax)",
         "        self.paid = due", "        return due"])
    assert cited is not None
    assert cited._hashes is None


def test_files_that_cannot_hold_an_edited_copy_are_not_parsed(
        history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    """``compute_total`` is deleted, and an edited copy of it (one line of four
    changed) lands in a new module; two changed modules still name it in a comment.
    Nothing holds the cited code, so edited copies are looked for: the callers cannot
    hold one (a plain function's name is no evidence, and they have none of its
    lines), so they are never parsed; the copy is found, ``changed`` there."""
    callers = "from pkg import engine\n\n\ndef {0}(cart):\n" \
              "    return engine.total(cart)  # was compute_total\n"
    history.start({"pkg/engine.py": "import math\n\n\n" + TOTAL,
                   "pkg/a_orders.py": callers.format("order_total"),
                   "pkg/b_quotes.py": callers.format("quote_total")})
    whole = history.cite_text("pkg/engine.py", "import math\n\n\n" + TOTAL, TOTAL)
    history.repo.write("pkg/engine.py", "import math\n\n\ndef total(cart):\n    return 0\n")
    history.repo.write("pkg/z_money.py", "import decimal\n\n\n"
                       + TOTAL.replace("* 0.1 if", "* 0.2 if"))
    for path, name in (("pkg/a_orders.py", "order_total"), ("pkg/b_quotes.py", "quote_total")):
        history.repo.write(path, callers.format(name).replace("cart)", "cart, 1)"))
    history.repo.commit("drop compute_total")

    index, parsed = parse_recorder(monkeypatch)
    with LocalGitSource(history.repo.path) as source:
        (result,) = Verifier(source, locator=AnchorLocator(index)).check(
            [whole], source.resolve("HEAD"))
    changed(result, "pkg/z_money.py", (4, 7))
    assert sorted(set(parsed)) == ["pkg/engine.py", "pkg/z_money.py"]


CART = src('''
    class Cart:
        def subtotal(self):
            return sum(item.price for item in self.items)

        def checkout(self, tax):
            due = self.subtotal() * (1 + tax)
            self.paid = due
            return due
''')


def test_a_method_s_words_inside_longer_names_are_no_reason_to_parse(
        history: History, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Cart.checkout`` is deleted; a changed module mentions ``Cart`` and
    ``checkouts``, never ``checkout`` as a word of its own, so it cannot define
    ``Cart.checkout`` anew and is not parsed: the code is ``missing``."""
    report = "from pkg.cart import Cart\n\n\ndef {0}(carts: list[Cart]):\n" \
             "    return len(carts)  # checkouts\n"
    history.start({"pkg/cart.py": CART, "pkg/report.py": report.format("count")})
    whole = history.cite_text("pkg/cart.py", CART, CART[CART.index("    def checkout"):])
    history.repo.write("pkg/cart.py", CART[:CART.index("\n    def checkout")] + "\n")
    history.repo.write("pkg/report.py", report.format("count_carts"))
    history.repo.commit("drop checkout")

    index, parsed = parse_recorder(monkeypatch)
    with LocalGitSource(history.repo.path) as source:
        (result,) = Verifier(source, locator=AnchorLocator(index)).check(
            [whole], source.resolve("HEAD"))
    missing(result)
    assert sorted(set(parsed)) == ["pkg/cart.py"]


def test_bulk_check_through_the_library(history: History) -> None:
    s = GO
    history.start({s.path: s.text(), s.other: s.other_text()})
    after = insert_above(s)
    apply(history.repo, after)
    start, end = span(s.text(), s.code)
    items: list[tuple[object, dict[str, object] | str]] = [
        ("a", {"path": s.path, "line_start": start, "line_end": end, "sha": history.first}),
        ("b", "line 2 is not valid JSON"),
    ]
    with LocalGitSource(history.repo.path) as source:
        results = [r.to_dict() for r in check_citations(source, iter(items), "HEAD")]
    new_start, new_end = span(now_text(history.repo, s.path), s.code)
    assert results == [
        {"id": "a", "status": "relocated", "path": s.path, "line_start": new_start,
         "line_end": new_end, "similarity": 1.0},
        {"id": "b", "error": "line 2 is not valid JSON"},
    ]


def test_history_helpers_are_sound() -> None:
    assert span("a\nb\nc\n", "b\nc\n") == (2, 3)
    assert within("x\ndef f():\n    y\n", "def f():\n    y\n", "    y\n") == (3, 3)
    assert reindent("a\n    b\n        c\n", "    ", "\t") == "a\n\tb\n\t\tc\n"
    assert list(_chunks([1, 2, 3, 4], 2)) == [[1, 2], [3, 4]]


def _chunks(items: Sequence[int], size: int) -> Iterator[list[int]]:
    for i in range(0, len(items), size):
        yield list(items[i:i + size])


# ------------------------------------------------------------------ harder real refactors


def test_code_moved_into_a_file_that_does_not_parse(history: History) -> None:
    """A work-in-progress commit: the destination has a syntax error above the moved
    function, so tree-sitter finds no definitions there. The old definition, found
    there line for line around the window, is evidence enough."""
    s = PYTHON
    history.start({s.path: s.text(), s.other: s.other_text()})
    window = history.cite_text(s.path, s.text(), s.window_text)
    broken = s.other_text() + "\n\nSETTINGS = dict(\n    debug=True,\n\n\n" + s.code
    history.repo.write(s.path, s.text(s.without_target()))
    history.repo.write(s.other, broken)
    history.repo.commit("move, half done")
    moved(check_one(history, window), s.other, within(broken, s.code, s.window_text))


def test_function_moved_out_leaving_a_stub_behind(history: History) -> None:
    """``load_config`` moves to another module; a same-named shim stays behind. The
    cited code is in the new module, not the shim."""
    s = PYTHON
    history.start({s.path: s.text(), s.other: s.other_text()})
    whole = history.cite_text(s.path, s.text(), s.code)
    window = history.cite_text(s.path, s.text(), s.window_text)
    shim = src('''
        def load_config(path=DEFAULT_PATH, *, strict=False):
            warnings.warn("use app.storage.load_config", DeprecationWarning, stacklevel=2)
            return storage.load_config(path, strict=strict)
    ''')
    text = s.text([s.blocks[0], shim, s.blocks[2]])
    other = s.other_text([*s.other_blocks, s.code])
    history.repo.write(s.path, text)
    history.repo.write(s.other, other)
    history.repo.commit("move load_config, keep a shim")
    got_whole, got_window = history.check(whole, window)
    moved(got_whole, s.other, span(other, s.code))
    moved(got_window, s.other, within(other, s.code, s.window_text))


def test_copy_that_was_already_in_a_renamed_file_is_not_the_deleted_code(
        history: History) -> None:
    """Two files carry the same helper (a vendored bundle). One copy is deleted and
    the other file is renamed in the same change: the surviving copy was there all
    along, under the old name, so the deleted one is missing."""
    helper = src('''
        func isNoCachedConnError(err error) bool {
        \t_, ok := err.(interface{ IsNoCachedConnError() })
        \treturn ok
        }
    ''')
    a = "package http\n\nimport \"errors\"\n\nvar errClosed = errors.New(\"closed\")\n\n" + helper
    b = ("package http\n\n// Bundled copy of x/net/http2.\n\n"
         + "".join(f"func bundled{i}() int {{ return {i} }}\n\n" for i in range(12)) + helper)
    history.start({"net/a.go": a, "net/bundle.go": b})
    line = history.cite("net/a.go", *within(a, helper, helper.splitlines(keepends=True)[1]))
    history.repo.write("net/a.go", a.replace("\n" + helper, ""))
    history.repo.run("mv", "net/bundle.go", "net/h2_bundle.go")
    history.repo.commit("drop the copy, rename the bundle")
    missing(check_one(history, line))


def test_blank_line_inserted_above_shifts_a_range_that_starts_with_code(
        history: History) -> None:
    """Cited: two commands and the blank line after them. A blank line added above
    puts the same pattern of non-blank lines one line lower: relocated, not valid."""
    text = GUIDE_MD + "\nMore.\n"
    cited = ROLLOUT + "\n"
    history.start({"docs/deploy.md": text})
    rollout = history.cite_text("docs/deploy.md", text, cited)
    now = text.replace("Then roll it out:\n\n", "Then roll it out:\n\n\n")
    history.repo.write("docs/deploy.md", now)
    history.repo.commit("blank line")
    got = check_one(history, rollout)
    moved(got, "docs/deploy.md", span(now, cited))
    assert got.outcome is Outcome.RELOCATED


OVERLOADS = src('''
    from typing import Literal, overload


    def _legacy(value, *, strict=False):
        if value is None:
            return []
        if strict and not isinstance(value, list):
            raise TypeError("a list is expected")
        items = list(value)
        items.sort()
        return items


    @overload
    def progress(
        label: str = "",
        width: int = 36,
        color: bool = False,
        fill_char: str = "#",
        empty_char: str = "-",
        template: str = "%(label)s [%(bar)s]",
        show_eta: bool = True,
        stream: Literal[False] = False,
    ) -> list[int]: ...


    @overload
    def progress(
        label: str = "",
        width: int = 36,
        color: bool = False,
        fill_char: str = "#",
        empty_char: str = "-",
        template: str = "%(label)s [%(bar)s]",
        show_eta: bool = True,
        stream: Literal[True] = True,
    ) -> list[str]: ...


    def progress(label="", width=36, color=False, fill_char="#", empty_char="-",
                 template="%(label)s [%(bar)s]", show_eta=True, stream=False):
        return []
''')
FILL = '    fill_char: str = "#",\n'


def test_repeated_code_with_repeated_neighbours_overloads(history: History) -> None:
    """The same parameter line, with the same three neighbours either side, in two
    overloads of the same name. Lines removed above shift both, so that the second
    overload's copy ends up nearer the old place than the cited copy in the first:
    the alignment, not the distance, tells them apart."""
    history.start({"app/progress.py": OVERLOADS})
    at = OVERLOADS.index("@overload")
    first = OVERLOADS[at:OVERLOADS.index("@overload", at + 1)]
    params = history.cite("app/progress.py", *within(OVERLOADS, first, FILL))
    legacy = OVERLOADS[OVERLOADS.index("def _legacy"):OVERLOADS.index("@overload")]
    now = OVERLOADS.replace(legacy, "")
    history.repo.write("app/progress.py", now)
    history.repo.commit("drop _legacy")
    got = check_one(history, params)
    lines = within(now, first, FILL)
    second_copy = now.index(FILL, now.index(first) + len(first))
    second_line = now.count("\n", 0, second_copy) + 1
    # the other copy is nearer the old place than the cited one
    assert abs(second_line - params.line_start) < abs(lines[0] - params.line_start)
    moved(got, "app/progress.py", lines)
    assert got.ambiguous


def test_a_namesake_in_another_module_is_not_the_deleted_definition(history: History) -> None:
    """Module ``__getattr__`` hooks share a name and their boilerplate; one is deleted
    while another module gains its own. Same qualified name, same two lines, but not
    the same definition (too few of its lines): missing."""
    old_hook = src('''
        def __getattr__(name):
            if name == "BaseCommand":
                warnings.warn(
                    "'BaseCommand' is deprecated; use 'Command'.",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return Command
            raise AttributeError(name)
    ''')
    new_hook = src('''
        def __getattr__(name):
            if name in {"OptionParser", "Argument", "Option"}:
                warnings.warn(
                    f"'parser.{name}' is deprecated and will be removed.",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return globals()[f"_{name}"]
            if name == "split_arg_string":
                from .shell import split_arg_string

                return split_arg_string
            raise AttributeError(name)
    ''')
    cli = "import warnings\n\nfrom .core import Command\n\n\n" + old_hook
    parser = "import warnings\n\n\ndef split(text):\n    return text.split()\n"
    history.start({"pkg/__init__.py": cli, "pkg/parser.py": parser})
    lines = history.cite("pkg/__init__.py",
                         *within(cli, old_hook, "            DeprecationWarning,\n"
                                                "            stacklevel=2,\n"))
    history.repo.write("pkg/__init__.py", cli.replace("\n\n" + old_hook, ""))
    history.repo.write("pkg/parser.py", parser + "\n\n" + new_hook)
    history.repo.commit("drop the old hook, add another")
    missing(check_one(history, lines))


def test_a_plain_function_moved_to_another_module_and_edited_is_changed_there(
        history: History) -> None:
    """A plain function (``_change``) leaves its module for a new one and gains a branch
    on the way: 6 of its 9 lines are the old ones, under the 70% a namesake elsewhere
    needs, but a definition of that name new in its file, gone from the cited one, has
    moved there: ``changed`` at its new place, not ``missing`` (this repository's own
    history: ``service._change`` into ``verify/passes.py``)."""
    old_change = src('''
        def _change(transition: Transition) -> str:
            """What an applied verdict did, in the word reports use."""
            if transition.status is Status.INVALID:
                return "invalidated"
            if transition.status is Status.ACTIVE and transition.expect is Status.INVALID:
                return "revived"
            return "refreshed"
    ''')
    new_change = src('''
        def _change(transition: Transition) -> str:
            """What an applied verdict did, in the word reports use."""
            if transition.status is Status.INVALID:
                return "invalidated"
            if transition.status is Status.ACTIVE and transition.expect is not Status.ACTIVE:
                return "revived"
            if transition.status is Status.EXPIRED:
                return "expired"
            return "refreshed"
    ''')
    service = ("from app.models import Status, Transition\n\n\n"
               "def verify(memories):\n    return [m for m in memories if m]\n\n\n"
               + old_change)
    history.start({"app/service.py": service})
    cited = history.cite("app/service.py", *within(service, old_change, old_change))
    passes = ("from app.models import Status, Transition\n\n\n"
              "def run(memories):\n    return len(memories)\n\n\n" + new_change)
    history.repo.write("app/service.py", service.replace("\n\n\n" + old_change, "\n"))
    history.repo.write("app/passes.py", passes)
    history.repo.commit("move _change into passes, and say expired")
    changed(check_one(history, cited), "app/passes.py", within(passes, new_change, new_change))


STYLED_RS = src("""
    pub struct Styled(Vec<String>);

    impl From<String> for Styled {
        fn from(name: String) -> Self {
            let mut styled = Styled::new();
            styled.push(name);
            styled
        }
    }

    impl From<&'_ String> for Styled {
        fn from(name: &'_ String) -> Self {
            let mut styled = Styled::new();
            styled.push(name);
            styled
        }
    }

    impl From<&'static str> for Styled {
        fn from(name: &'static str) -> Self {
            let mut styled = Styled::new();
            styled.push(name);
            styled
        }
    }
""")
BODY_RS = """\
        let mut styled = Styled::new();
        styled.push(name);
        styled
"""


def test_identical_bodies_in_several_impls_neighbours_deleted(history: History) -> None:
    """Three impls with the same body; the two around the cited one are deleted. A line
    alignment may pair the survivor's body with a deleted twin; the anchor's
    definition, intact, says whose body it is."""
    history.start({"src/styled.rs": STYLED_RS})
    middle = STYLED_RS[STYLED_RS.index("impl From<&'_ String>"):
                       STYLED_RS.index("impl From<&'static str>")]
    body = history.cite("src/styled.rs", *within(STYLED_RS, middle, BODY_RS))
    assert body.fingerprint.anchor is not None
    assert body.fingerprint.anchor.name == "impl From<&'_ String> for Styled::from"
    first = STYLED_RS[STYLED_RS.index("impl From<String>"):STYLED_RS.index(middle)]
    last = STYLED_RS[STYLED_RS.index("impl From<&'static str>"):]
    now = STYLED_RS.replace(first, "").replace(last, "").rstrip("\n") + "\n"
    history.repo.write("src/styled.rs", now)
    history.repo.commit("keep one impl")
    got = check_one(history, body)
    moved(got, "src/styled.rs", within(now, middle.rstrip("\n") + "\n", BODY_RS))


def test_edited_function_moved_into_a_file_that_does_not_parse(history: History) -> None:
    """As above, but the function was also edited outside the cited window: the old
    definition is no longer there line for line, only mostly."""
    s = PYTHON
    history.start({s.path: s.text(), s.other: s.other_text()})
    window = history.cite_text(s.path, s.text(), s.window_text)
    code = s.code.replace("return {}", "return dict()")
    broken = s.other_text() + "\n\nSETTINGS = dict(\n    debug=True,\n\n\n" + code
    history.repo.write(s.path, s.text(s.without_target()))
    history.repo.write(s.other, broken)
    history.repo.commit("move and tweak, half done")
    moved(check_one(history, window), s.other, within(broken, code, s.window_text))
