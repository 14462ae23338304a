"""Tree-sitter anchors (definitions, qualified names, spans, hashes) and similarity scores.

Each language gets a small, real-looking file whose definitions are asserted exactly:
(qualified name, node type, first line, last line). Spans are 1-based and inclusive and
include Python decorators, a leading ``export`` and Rust attributes.
"""

from __future__ import annotations

import random
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import xxhash

from verified_memory.anchors import _languages, treesitter
from verified_memory.anchors.hashing import (
    WHITESPACE,
    TextHasher,
    hash_line,
    line_hashes,
    text_hash,
)
from verified_memory.anchors.normalize import normalize_line, split_lines, squeeze
from verified_memory.anchors.similarity import similarity, similarity_of_hashes
from verified_memory.anchors.treesitter import (
    Definition,
    DefinitionIndex,
    anchor_for,
    available,
    definitions,
    find,
    innermost,
    language_for,
)
from verified_memory.models import Anchor
from verified_memory.verify import naming

Row = tuple[str, str, int, int]

FIXTURES = Path(__file__).parent / "fixtures" / "anchors"


#: The least lines a file has for only a part of it to be parsed, as shipped.
PART_MIN_ROWS = treesitter._PART_MIN_ROWS


@pytest.fixture(autouse=True)
def parts_of_short_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of files are parsed whatever their length, so that the fixtures here (a
    few dozen lines) exercise them."""
    monkeypatch.setattr(treesitter, "_PART_MIN_ROWS", 0)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def rows(path: str, text: str, *, declarations: bool = False) -> list[Row]:
    """(name, kind, start, end) of every definition, through a fresh index (no cache);
    only the declarations (constants, fields, enum members) with ``declarations``."""
    return [(d.name, d.kind, d.start_line, d.end_line)
            for d in DefinitionIndex().definitions(path, text)
            if d.declaration == declarations]


def one(defs: tuple[Definition, ...], name: str) -> Definition:
    found = find(defs, name)
    assert len(found) == 1, (name, found)
    return found[0]


# --------------------------------------------------------------------------- languages


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("pkg/mod.py", "python"),
        ("stubs/mod.pyi", "python"),
        ("a.js", "javascript"),
        ("a.mjs", "javascript"),
        ("a.cjs", "javascript"),
        ("App.jsx", "javascript"),
        ("a.ts", "typescript"),
        ("a.mts", "typescript"),
        ("a.cts", "typescript"),
        ("App.tsx", "tsx"),
        ("main.go", "go"),
        ("lib.rs", "rust"),
        ("Main.java", "java"),
        ("UPPER.PY", "python"),
        ("README.md", None),
        ("notes.txt", None),
        ("Makefile", None),
        (".py", None),  # a dotfile named ".py", not a Python file
    ],
)
def test_language_for(path: str, language: str | None) -> None:
    assert language_for(path) == language


@pytest.mark.parametrize(
    "language", ["python", "javascript", "typescript", "tsx", "go", "rust", "java"]
)
def test_every_grammar_loads(language: str) -> None:
    assert available(language)


def test_unknown_language_is_unavailable() -> None:
    assert not available("cobol")


# ------------------------------------------------------------------------------ python

PYTHON = src('''
    """Sessions."""
    import functools


    def retry(times):
        def wrap(fn):
            @functools.wraps(fn)
            def inner(*args):
                return fn(*args)
            return inner
        return wrap


    @dataclass(frozen=True)
    class Session:
        timeout: float = 3.0

        @retry(3)
        async def request(self, method, url):
            resp = await self.send(method, url)
            return resp

        @property
        def closed(self):
            return False

        class Adapter:
            def send(self, req):
                return req

        key = lambda self: self.timeout
''')


def test_python_definitions() -> None:
    assert rows("session.py", PYTHON) == [
        ("retry", "function_definition", 5, 11),
        ("retry.wrap", "function_definition", 6, 10),
        ("retry.wrap.inner", "function_definition", 7, 9),
        ("Session", "class_definition", 14, 31),
        ("Session.request", "function_definition", 18, 21),
        ("Session.closed", "function_definition", 23, 25),
        ("Session.Adapter", "class_definition", 27, 29),
        ("Session.Adapter.send", "function_definition", 28, 29),
        ("Session.key", "lambda", 31, 31),
    ]


def test_python_anchor_is_innermost_with_offset() -> None:
    anchor = anchor_for("session.py", PYTHON, 20, 21)
    assert anchor == Anchor(
        kind="function_definition",
        name="Session.request",
        text_hash=one(definitions("session.py", PYTHON), "Session.request").text_hash,
        offset=2,
        language="python",
    )
    inner = anchor_for("session.py", PYTHON, 9, 9)
    assert inner is not None
    assert (inner.name, inner.offset) == ("retry.wrap.inner", 2)
    # a decorator line belongs to its definition
    decorated = anchor_for("session.py", PYTHON, 7, 7)
    assert decorated is not None
    assert (decorated.name, decorated.offset) == ("retry.wrap.inner", 0)
    # spanning two methods: the class around both
    both = anchor_for("session.py", PYTHON, 20, 24)
    assert both is not None
    assert (both.name, both.offset) == ("Session", 6)
    # module level code is in no definition
    assert anchor_for("session.py", PYTHON, 1, 2) is None


def test_definition_hashes_are_the_citation_hashes_of_its_lines() -> None:
    lines = split_lines(PYTHON)
    for d in definitions("session.py", PYTHON):
        expected = line_hashes(lines[d.start_line - 1 : d.end_line])
        assert d.line_hashes == expected
        assert d.text_hash == text_hash(lines[d.start_line - 1 : d.end_line])
        assert d.contains(d.start_line, d.end_line)


def test_python_duplicate_names_are_all_kept() -> None:
    text = src("""
        import sys

        if sys.platform == "win32":
            def home():
                return "C:/"
        else:
            def home():
                return "/"
    """)
    homes = find(definitions("compat.py", text), "home")
    assert [(d.start_line, d.end_line) for d in homes] == [(4, 5), (7, 8)]
    assert homes[0].text_hash != homes[1].text_hash


def test_non_ascii_source_keeps_line_numbers() -> None:
    text = src("""
        # ñandú, 日本語, emoji 🎉
        def grüße(name):
            return f"¡hola {name}! 🎉"


        class Ünïcode:
            def ß(self):
                return "日本"
    """)
    assert rows("i18n.py", text) == [
        ("grüße", "function_definition", 2, 3),
        ("Ünïcode", "class_definition", 6, 8),
        ("Ünïcode.ß", "function_definition", 7, 8),
    ]


# -------------------------------------------------------------------------- javascript

JAVASCRIPT = src("""
    import { api } from "./api.js";

    export class Cart {
      items = [];
      total = () => this.items.reduce((a, b) => a + b.price, 0);

      add(item) {
        this.items.push(item);
      }

      static from(json) {
        return Object.assign(new Cart(), json);
      }
    }

    export function checkout(cart) {
      return api.post("/checkout", cart);
    }

    const format = (cents) => `$${(cents / 100).toFixed(2)}`;

    export const handlers = {
      onAdd(event) {
        return event.detail;
      },
      onRemove: function (event) {
        return null;
      },
    };

    module.exports.legacy = async function () {
      return 1;
    };
""")


def test_javascript_definitions() -> None:
    assert rows("cart.js", JAVASCRIPT) == [
        ("Cart", "class_declaration", 3, 14),
        ("Cart.total", "arrow_function", 5, 5),
        ("Cart.add", "method_definition", 7, 9),
        ("Cart.from", "method_definition", 11, 13),
        ("checkout", "function_declaration", 16, 18),
        ("format", "arrow_function", 20, 20),
        ("handlers.onAdd", "method_definition", 23, 25),
        ("handlers.onRemove", "function_expression", 26, 28),
        ("module.exports.legacy", "function_expression", 31, 33),
    ]
    anchor = anchor_for("cart.js", JAVASCRIPT, 8, 8)
    assert anchor is not None
    assert (anchor.name, anchor.kind, anchor.offset, anchor.language) == (
        "Cart.add", "method_definition", 1, "javascript")
    # a callback inside a method is anonymous: the method is the anchor
    total = anchor_for("cart.js", JAVASCRIPT, 5, 5)
    assert total is not None
    assert total.name == "Cart.total"


def test_jsx_in_a_js_file() -> None:
    text = src("""
        export default function App({ user }) {
          return <div className="app">{user.name}</div>;
        }

        const Badge = ({ n }) => (
          <span>{n}</span>
        );
    """)
    assert rows("App.jsx", text) == [
        ("App", "function_declaration", 1, 3),
        ("Badge", "arrow_function", 5, 7),
    ]


# -------------------------------------------------------------------------- typescript

TYPESCRIPT = src("""
    export interface User {
      id: string;
      name(): string;
    }

    export type Id = string | number;

    export enum Role {
      Admin,
      Guest,
    }

    export abstract class Repo<T> {
      constructor(private readonly db: Db) {}

      @cached()
      async find(id: Id): Promise<T | undefined> {
        return this.db.get(id);
      }

      abstract save(item: T): void;

      protected log = (msg: string): void => {
        console.log(msg);
      };
    }

    export const toId = (u: User): Id => u.id;

    function parse(x: string): number;
    function parse(x: number): number;
    function parse(x: any): number {
      return Number(x);
    }

    namespace Util {
      export function clamp(n: number): number {
        return Math.max(0, n);
      }
    }
""")


def test_typescript_definitions() -> None:
    assert rows("repo.ts", TYPESCRIPT) == [
        ("User", "interface_declaration", 1, 4),
        ("User.name", "method_signature", 3, 3),
        ("Id", "type_alias_declaration", 6, 6),
        ("Role", "enum_declaration", 8, 11),
        ("Repo", "abstract_class_declaration", 13, 26),
        ("Repo.constructor", "method_definition", 14, 14),
        ("Repo.find", "method_definition", 16, 19),
        ("Repo.save", "abstract_method_signature", 21, 21),
        ("Repo.log", "arrow_function", 23, 25),
        ("toId", "arrow_function", 28, 28),
        ("parse", "function_signature", 30, 30),
        ("parse", "function_signature", 31, 31),
        ("parse", "function_declaration", 32, 34),
        ("Util", "internal_module", 36, 40),
        ("Util.clamp", "function_declaration", 37, 39),
    ]
    # overloads are all kept; the verifier decides between them
    assert len(find(definitions("repo.ts", TYPESCRIPT), "parse")) == 3
    # the member decorator is part of the method: citing it anchors to the method
    decorated = anchor_for("repo.ts", TYPESCRIPT, 16, 17)
    assert decorated is not None
    assert (decorated.name, decorated.offset, decorated.language) == (
        "Repo.find", 0, "typescript")


def test_tsx_components() -> None:
    text = src("""
        import React from "react";

        type Props = { label: string; onClick(): void };

        export const Button = ({ label, onClick }: Props) => {
          return <button onClick={onClick}>{label}</button>;
        };

        export default class Page extends React.Component<Props> {
          render() {
            return (
              <main>
                <Button label="ok" onClick={() => {}} />
              </main>
            );
          }
        }
    """)
    assert rows("Page.tsx", text) == [
        ("Props", "type_alias_declaration", 3, 3),
        ("Props.onClick", "method_signature", 3, 3),  # members of object types, as in interfaces
        ("Button", "arrow_function", 5, 7),
        ("Page", "class_declaration", 9, 17),
        ("Page.render", "method_definition", 10, 16),
    ]
    # a line holding a definition and its members anchors to the definition
    props = anchor_for("Page.tsx", text, 3, 3)
    assert props is not None
    assert (props.name, props.offset) == ("Props", 0)
    anchor = anchor_for("Page.tsx", text, 13, 13)
    assert anchor is not None
    assert (anchor.name, anchor.offset, anchor.language) == ("Page.render", 3, "tsx")


# ---------------------------------------------------------------------------------- go

GO = (FIXTURES / "stack.go").read_text(encoding="utf-8")  # gofmt style: tab-indented


def test_go_definitions() -> None:
    assert rows("stack.go", GO) == [
        ("Stack", "type_spec", 8, 10),
        ("Sizer", "type_spec", 13, 15),
        ("Sizer.Len", "method_elem", 14, 14),
        ("ID", "type_alias", 16, 16),
        ("New", "function_declaration", 19, 21),
        ("Stack.Push", "method_declaration", 23, 25),
        ("Stack.Len", "method_declaration", 27, 29),
        ("Stack.Pop", "method_declaration", 31, 39),
    ]
    anchor = anchor_for("stack.go", GO, 33, 35)
    assert anchor is not None
    assert (anchor.name, anchor.kind, anchor.offset) == ("Stack.Pop", "method_declaration", 2)


# -------------------------------------------------------------------------------- rust

RUST = src("""
    use std::fmt;

    #[derive(Debug, Clone)]
    pub struct Point<T> {
        x: T,
        y: T,
    }

    impl<T: Copy> Point<T> {
        pub fn new(x: T, y: T) -> Self {
            Point { x, y }
        }
    }

    impl fmt::Display for Point<f64> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "({}, {})", self.x, self.y)
        }
    }

    pub trait Shape {
        fn area(&self) -> f64;
        fn name(&self) -> &str {
            "shape"
        }
    }

    pub enum Kind { Circle, Square }

    mod geometry {
        pub fn distance(a: f64, b: f64) -> f64 {
            (a - b).abs()
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn it_works() {
            assert_eq!(2 + 2, 4);
        }
    }
""")


def test_rust_definitions() -> None:
    assert rows("point.rs", RUST) == [
        ("Point", "struct_item", 3, 7),
        ("impl Point<T>", "impl_item", 9, 13),
        ("impl Point<T>::new", "function_item", 10, 12),
        ("impl fmt::Display for Point<f64>", "impl_item", 15, 19),
        ("impl fmt::Display for Point<f64>::fmt", "function_item", 16, 18),
        ("Shape", "trait_item", 21, 26),
        ("Shape::area", "function_signature_item", 22, 22),
        ("Shape::name", "function_item", 23, 25),
        ("Kind", "enum_item", 28, 28),
        ("geometry", "mod_item", 30, 34),
        ("geometry::distance", "function_item", 31, 33),
        ("tests", "mod_item", 36, 42),
        ("tests::it_works", "function_item", 38, 41),
    ]
    anchor = anchor_for("point.rs", RUST, 17, 17)
    assert anchor is not None
    assert (anchor.name, anchor.offset, anchor.language) == (
        "impl fmt::Display for Point<f64>::fmt", 1, "rust")


def test_rust_impl_names_ignore_whitespace_in_types() -> None:
    spaced = (
        "impl  From< Vec<u8> ,  u8 >  for  Wrapper {\n"
        "    fn from(v: (Vec<u8>, u8)) -> Self { todo!() }\n"
        "}\n"
    )
    names = [d.name for d in DefinitionIndex().definitions("w.rs", spaced)]
    assert names == [
        "impl From<Vec<u8>,u8> for Wrapper",
        "impl From<Vec<u8>,u8> for Wrapper::from",
    ]


# -------------------------------------------------------------------------------- java

JAVA = src("""
    package com.example;

    import java.util.List;

    @Service
    public class OrderService {
        private final Repo repo;

        public OrderService(Repo repo) {
            this.repo = repo;
        }

        public List<Order> open() {
            return repo.findOpen();
        }

        public static class Builder {
            private Repo repo;

            Builder() {}

            public OrderService build() {
                return new OrderService(repo);
            }
        }

        interface Listener {
            void onOrder(Order order);
        }

        enum State { OPEN, CLOSED }

        record Line(String sku, int qty) {}
    }
""")


def test_java_definitions() -> None:
    assert rows("OrderService.java", JAVA) == [
        ("OrderService", "class_declaration", 5, 34),
        ("OrderService.OrderService", "constructor_declaration", 9, 11),
        ("OrderService.open", "method_declaration", 13, 15),
        ("OrderService.Builder", "class_declaration", 17, 25),
        ("OrderService.Builder.Builder", "constructor_declaration", 20, 20),
        ("OrderService.Builder.build", "method_declaration", 22, 24),
        ("OrderService.Listener", "interface_declaration", 27, 29),
        ("OrderService.Listener.onOrder", "method_declaration", 28, 28),
        ("OrderService.State", "enum_declaration", 31, 31),
        ("OrderService.Line", "record_declaration", 33, 33),
    ]
    anchor = anchor_for("OrderService.java", JAVA, 23, 23)
    assert anchor is not None
    assert (anchor.name, anchor.kind, anchor.offset) == (
        "OrderService.Builder.build", "method_declaration", 1)


# ------------------------------------------------------------------------ text hashes

BASE = src("""
    def total(items):
        subtotal = sum(i.price for i in items)
        if subtotal > 100:
            subtotal *= 0.9
        return round(subtotal, 2)
""")


def _total_hash(path: str, text: str) -> str:
    return one(DefinitionIndex().definitions(path, text), "total").text_hash


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(BASE.replace("\n", "\r\n"), id="crlf"),
        pytest.param(BASE.replace("    ", "\t"), id="tabs"),
        pytest.param(BASE.replace("\n    ", "\n\n    "), id="blank-lines"),
        pytest.param(BASE.replace("subtotal > 100", "subtotal>100"), id="spacing"),
        pytest.param(BASE.replace("sum(i.price", "sum(\n        i.price"), id="rewrapped"),
        pytest.param("import os\n\n\n" + BASE + "\n\ndef other():\n    pass\n", id="moved"),
    ],
)
def test_text_hash_ignores_layout(variant: str) -> None:
    assert _total_hash("cart.py", variant) == _total_hash("cart.py", BASE)


def test_text_hash_ignores_reindentation() -> None:
    flat = "function total(items) {\n  return items.length;\n}\n"
    nested = "if (x) {\n    function total(items) {\n          return items.length;\n    }\n}\n"
    assert _total_hash("a.js", flat) == _total_hash("a.js", nested)


def test_text_hash_changes_with_the_body() -> None:
    edited = BASE.replace("0.9", "0.8")
    assert _total_hash("cart.py", edited) != _total_hash("cart.py", BASE)


#: Lines that stress the whole-file hashing: Unicode whitespace that ``bytes.translate``
#: cannot delete, a line feed inside a "line", trailing commas before closers, non-ASCII.
ODD_LINES = ["  a = f(x,\t", "", "  \u3000 ", ")", "    ],", "}", "b,", " , ", "é ü,",
             "\u2028]", "x\x1cy", "\x85q,", "t = (y,)", "]]", ",", "日本 語", "a\nb", "\x0c"]


def _text_hash_line_by_line(lines: list[str]) -> str:
    """``text_hash`` as its docstring defines it, one line at a time."""
    parts = [text for text in map(normalize_line, lines) if text]
    for i in range(len(parts) - 1):
        if parts[i].endswith(",") and parts[i + 1][0] in ")]}":
            parts[i] = parts[i][:-1]
    return xxhash.xxh3_64_hexdigest("".join(parts).encode())


def test_whole_file_hashing_matches_line_by_line() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        lines = rng.choices(ODD_LINES, k=rng.randint(0, 9))
        assert line_hashes(lines) == tuple(hash_line(line) for line in lines), lines
        assert text_hash(lines) == _text_hash_line_by_line(lines), lines
        if lines:
            first = rng.randrange(len(lines))
            last = rng.randrange(first, len(lines))
            assert TextHasher(lines).text_hash(first, last) == text_hash(
                lines[first:last + 1]), (lines, first, last)


def test_whitespace_is_what_str_split_splits_on() -> None:
    assert set(WHITESPACE) == {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}


def test_code_that_hashes_the_same_squeezes_the_same() -> None:
    wrapped = ["total = add(", "    price,", "    tax,", ")"]
    joined = ["total = add(price, tax)"]
    assert text_hash(wrapped) == text_hash(joined)
    assert squeeze("\n".join(wrapped)) == squeeze("\n".join(joined)) == "total=add(pricetax)"
    assert squeeze("\n".join(joined)) in squeeze("x = 1\n" + "\n".join(wrapped) + "\n")


def test_squeeze_is_str_split_without_commas() -> None:
    """``squeeze`` deletes bytes where it can; the same text as splitting on every
    whitespace character (ASCII or not) and dropping commas."""
    rng = random.Random(5)
    alphabet = "ab, \t\x0b\x1c\n\r\u00e9" + WHITESPACE[-6:] + "\x85\xa0"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(16)))
        assert squeeze(text) == "".join(text.split()).replace(",", ""), repr(text)


def test_definitions_reuse_what_the_caller_has_of_the_text() -> None:
    """Given the lines, hashes and ``TextHasher`` of a file (the verifier's), the index
    parses the same definitions as from the text alone, and asks for the hasher only
    when it parses."""
    text = BASE + "\nX = [\n    1,\n]\n"
    lines = split_lines(text)
    asked: list[TextHasher] = []

    def hasher() -> TextHasher:
        asked.append(TextHasher(lines))
        return asked[-1]

    index = DefinitionIndex()
    given = index.definitions("cart.py", text, key="k", hashes=line_hashes(lines),
                              lines=lines, hasher=hasher)
    assert given == DefinitionIndex().definitions("cart.py", text)
    assert [d.name for d in given] == ["total", "X"]
    assert len(asked) == 1
    assert index.definitions("cart.py", text, key="k", lines=lines, hasher=hasher) == given
    assert len(asked) == 1  # from the cache: nothing parsed, no hasher asked for


BIG_CLASS = ["class Big {", *(f"    int m{i}() {{ return {i}; }}" for i in range(40)), "}"]


def test_definitions_make_their_hashes_when_first_asked() -> None:
    """A parse lists every definition around a place (the class around a method, all
    of a small file), and most are never asked for their hashes: each makes them on
    first use, the same as made up front, from its own lines; from the file's
    ``TextHasher`` only for a span of most of the file."""
    lines = BIG_CLASS
    asked: list[TextHasher] = []

    def hasher() -> TextHasher:
        asked.append(TextHasher(lines))
        return asked[-1]

    defs = DefinitionIndex().definitions("Big.java", "\n".join(lines) + "\n", lines=lines,
                                         hasher=hasher)
    (method,) = find(defs, "Big.m7")
    own = lines[method.start_line - 1:method.end_line]
    assert (method.text_hash, method.line_hashes) == (text_hash(own), line_hashes(own))
    assert asked == []  # the method's own line, not the file, was normalised
    (whole,) = find(defs, "Big")
    assert (whole.text_hash, whole.line_hashes) == (text_hash(lines), line_hashes(lines))
    assert len(asked) == 1
    assert defs == DefinitionIndex().definitions("Big.java", "\n".join(lines) + "\n")


def test_definitions_do_not_keep_the_file_they_were_parsed_from() -> None:
    """The index's caches outlive a run's files: a definition holds the lines, and the
    file's ``TextHasher`` only weakly (one made from the lines once the file is gone)."""
    import gc
    import weakref

    from verified_memory.verify.files import FileText

    file = FileText("0" * 40, "\n".join(BIG_CLASS) + "\n")
    defs = DefinitionIndex().definitions("Big.java", file.text, key=file.blob_sha,
                                         lines=file.lines, hasher=file.hasher)
    gone = weakref.ref(file)
    del file
    gc.collect()
    assert gone() is None
    (whole,) = find(defs, "Big")
    assert whole.text_hash == text_hash(BIG_CLASS)


def test_names_with_spaces_are_compacted_and_plain_ones_kept() -> None:
    rust = "impl  From< u8 >  for Wrapper {\n    fn from(x: u8) -> Self { Wrapper }\n}\n"
    names = [d.name for d in definitions("conv.rs", rust)]
    assert names == ["impl From<u8> for Wrapper", "impl From<u8> for Wrapper::from"]
    assert [d.name for d in definitions("cart.py", BASE)] == ["total"]


def test_relocated_definition_keeps_hash_and_offset() -> None:
    """What the verifier does in step 4: find by name, compare hash, apply the offset."""
    anchor = anchor_for("cart.py", BASE, 3, 4)
    assert anchor is not None
    moved = "import os\n\n\nclass Unrelated:\n    pass\n\n\n" + BASE
    (found,) = find(definitions("cart.py", moved), anchor.name)
    assert found.text_hash == anchor.text_hash
    new_start = found.start_line + anchor.offset
    assert split_lines(moved)[new_start - 1] == split_lines(BASE)[2]


# ------------------------------------------------------------------------- edge cases


@pytest.mark.parametrize("path", ["a.py", "a.js", "a.ts", "a.tsx", "a.go", "a.rs", "a.java"])
@pytest.mark.parametrize("text", ["", "\n\n\n", "   "])
def test_empty_files_have_no_definitions(path: str, text: str) -> None:
    assert definitions(path, text) == ()
    assert anchor_for(path, text, 1, 1) is None


@pytest.mark.parametrize("path", ["README.md", "notes.txt", "Dockerfile", "data.json"])
def test_unsupported_files(path: str) -> None:
    assert definitions(path, PYTHON) == ()
    assert anchor_for(path, PYTHON, 5, 6) is None


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        ("broken.py", "def ok():\n    return 1\n\ndef broken(:\n    x = \n\n"
         "class Z:\n    def m(self):\n        pass\n", ["ok", "Z", "Z.m"]),
        ("broken.ts", "function ok() { return 1; }\nclass {{{ oops\n", ["ok"]),
        ("broken.go", "package x\nfunc ok() {}\nfunc (\n", ["ok"]),
        ("broken.rs", "fn ok() {}\nimpl for {\n", ["ok"]),
        ("Broken.java", "class A { void ok() {} void bad( { }\n", ["A", "A.ok"]),
    ],
)
def test_syntax_errors_keep_what_parses(path: str, text: str, expected: list[str]) -> None:
    names = [d.name for d in definitions(path, text)]
    for name in expected:
        assert name in names


def test_garbage_does_not_crash() -> None:
    garbage = "\x00\x01 }{ ]] def class fn impl <<<>>> \ufffd\ud800" * 50
    for path in ("g.py", "g.js", "g.ts", "g.tsx", "g.go", "g.rs", "g.java"):
        assert isinstance(definitions(path, garbage), tuple)


def test_byte_order_mark_is_not_a_syntax_error() -> None:
    assert rows("bom.py", "\ufeffdef f():\n    return 1\n") == [
        ("f", "function_definition", 1, 2)]
    assert rows("Bom.java", "\ufeffclass A {}\n") == [("A", "class_declaration", 1, 1)]


def test_line_numbers_follow_split_lines_for_odd_line_breaks() -> None:
    """CR-only files and form feeds: tree-sitter's rows must not drift from our lines."""
    cr = "def f():\r    pass\r\rdef g():\r    pass\r"
    assert [(d.name, d.start_line, d.end_line) for d in definitions("cr.py", cr)] == [
        ("f", 1, 2), ("g", 4, 5)]
    ff = "def f():\n    pass\n\x0c\ndef g():\n    pass\n"
    lines = split_lines(ff)
    g = one(definitions("ff.py", ff), "g")
    assert lines[g.start_line - 1] == "def g():"


def test_innermost_and_find_helpers() -> None:
    defs = definitions("session.py", PYTHON)
    found = innermost(defs, 28, 29)
    assert found is not None
    assert found.name == "Session.Adapter.send"
    assert innermost(defs, 13, 15) is None  # starts before any definition around it
    assert innermost((), 1, 1) is None
    assert find(defs, "nope") == []
    assert found.anchor(29, "python") == Anchor(
        "function_definition", "Session.Adapter.send", found.text_hash, 1, "python")


def test_missing_grammar_falls_back_to_no_definitions(monkeypatch: pytest.MonkeyPatch) -> None:
    treesitter._grammar.cache_clear()
    monkeypatch.setitem(_languages.GRAMMARS, "go", ("tree_sitter_not_installed", "language"))
    try:
        assert language_for("main.go") == "go"
        assert not available("go")
        assert DefinitionIndex().definitions("main.go", GO) == ()
        assert DefinitionIndex().anchor_for("main.go", GO, 23, 25) is None
    finally:
        treesitter._grammar.cache_clear()


def test_a_pattern_the_grammar_lacks_costs_only_that_pattern(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The patterns are compiled together; when that fails, one by one, keeping those
    that compile (a node type renamed in a grammar release must not cost a language)."""
    real = treesitter.definition_patterns
    monkeypatch.setattr(treesitter, "definition_patterns",
                        lambda rules, language: [*real(rules, language), "(no_such_node) @def"])
    treesitter.unload_grammars()
    try:
        assert rows("cart.py", BASE) == [("total", "function_definition", 1, 5)]
    finally:
        treesitter.unload_grammars()


def test_oversized_files_are_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(treesitter, "MAX_PARSE_BYTES", 100)
    assert DefinitionIndex().definitions("session.py", PYTHON) == ()
    assert rows("cart.py", BASE[:90]) != []


def test_parsing_from_many_threads() -> None:
    samples = [("session.py", PYTHON), ("cart.js", JAVASCRIPT), ("repo.ts", TYPESCRIPT),
               ("stack.go", GO), ("point.rs", RUST), ("OrderService.java", JAVA)] * 8
    expected = [rows(path, text) for path, text in samples]
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(lambda sample: rows(*sample), samples))
    assert got == expected


# ------------------------------------------------------------------------------- cache


def test_cache_parses_each_key_once() -> None:
    index = DefinitionIndex()
    first = index.definitions("session.py", PYTHON, key="blob1")
    second = index.definitions("session.py", PYTHON, key="blob1")
    assert second is first
    assert index.parses == 1
    # anchor_for goes through the same cache
    assert index.anchor_for("session.py", PYTHON, 20, 20, key="blob1") is not None
    assert index.parses == 1
    index.definitions("session.py", PYTHON, key="blob2")
    assert index.parses == 2


def test_cache_without_key_uses_the_text() -> None:
    index = DefinitionIndex()
    index.definitions("a.py", BASE)
    index.definitions("b.py", BASE)  # same content elsewhere: same blob, same parse
    assert index.parses == 1
    index.definitions("a.py", BASE + "\n# edit\n")
    assert index.parses == 2
    index.definitions("a.js", BASE)  # same bytes, another language: parsed separately
    assert index.parses == 3


def test_cache_is_bounded_lru() -> None:
    index = DefinitionIndex(maxsize=2)
    index.definitions("a.py", BASE, key="1")
    index.definitions("a.py", BASE, key="2")
    index.definitions("a.py", BASE, key="1")  # refresh 1
    index.definitions("a.py", BASE, key="3")  # evicts 2
    assert len(index) == 2
    index.definitions("a.py", BASE, key="1")
    assert index.parses == 3
    index.definitions("a.py", BASE, key="2")
    assert index.parses == 4
    index.clear()
    assert len(index) == 0


def test_module_functions_share_the_default_index() -> None:
    index = treesitter.default_index()
    before = index.parses
    text = BASE + "\n# test_module_functions_share_the_default_index\n"
    definitions("a.py", text, key="default-index-test")
    anchor_for("a.py", text, 2, 2, key="default-index-test")
    assert index.parses == before + 1


# ------------------------------------------------------- definitions around one place

#: Places whose definition reaches outside the code cited there: a decorator or an
#: attribute alone (the definition follows it), ``export`` and a lone ``const`` (a
#: wrapper), two statements on one line, a module assigned a function, a BOM.
AROUND_EDGES = [
    ("edges.py", src('''
        class Box:
            @property
            @functools.cache
            def size(self):
                return 1

            x = 1; y = 2
        @dataclass
        class Point:
            x: int
        ''')),
    ("edges.ts", src("""
        class Form {
          @Input()
          @Required() name: string;

          @HostListener("click")
          onClick(): void {}
        }
        export const handler = async () => {
          return 1;
        };
        a(); function b() { return 2; }
        exports.c = function () {
          return 3;
        };
        """)),
    ("edges.rs", src("""
        #[derive(Debug)]
        #[serde(rename_all = "camelCase")]
        pub struct Config {
            #[serde(default)]
            name: String,
        }

        #[test]
        fn works() {}
        """)),
    ("bom.go", "\ufeffpackage main\n\nfunc Run() {\n\treturn\n}\n"),
]


@pytest.mark.parametrize(("path", "text"), [
    *AROUND_EDGES, ("session.py", PYTHON), ("app.js", JAVASCRIPT), ("types.ts", TYPESCRIPT),
    ("stack.go", GO), ("point.rs", RUST), ("Repo.java", JAVA)])
@pytest.mark.parametrize("member_rows", [treesitter._MEMBER_ROWS, 0])
def test_the_definitions_around_a_place_answer_as_the_whole_list(
        path: str, text: str, member_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every anchor and every definition by its first line comes out the same from
    the definitions around the place as from the file's whole list, for every range
    of up to 12 lines with code at both ends; also where every statement at the margin
    is cut down to the member around the place (``_MEMBER_ROWS`` 0)."""
    monkeypatch.setattr(treesitter, "_MEMBER_ROWS", member_rows)
    lines = split_lines(text)
    hashes = line_hashes(lines)
    whole = DefinitionIndex().definitions(path, text, "k")
    code = [i for i, line in enumerate(lines, 1) if line.strip() and line != "\ufeff"]
    checked = 0
    for first in code:
        for last in (n for n in code if first <= n <= first + 12):
            index = DefinitionIndex()  # nothing listed yet: only the place is looked at
            around = index.definitions_around(path, text, first, last, "k", hashes)
            assert innermost(around, first, last) == innermost(whole, first, last), \
                (path, first, last)
            checked += 1
    assert checked > len(code)
    for d in whole:
        first_there = next(e for e in whole if e.start_line == d.start_line and e.name == d.name)
        assert DefinitionIndex().starting_at(path, text, d.start_line, d.name, "k") == first_there
    # the edge cases are really there: definitions that start before their node
    if path == "edges.py":
        assert innermost(whole, 2, 2) == one(whole, "Box.size")  # a decorator alone
    if path == "edges.ts":
        assert innermost(whole, 2, 2) == one(whole, "Form.name")  # a member's decorator
    if path == "edges.rs":
        assert innermost(whole, 1, 1) == one(whole, "Config")  # an attribute alone
        assert innermost(whole, 4, 4) == one(whole, "Config::name")


#: Objects whose members no line can tell apart (a quoted key starts no statement): a
#: block of them is parsed whole, never cut at a statement inside one of its functions.
QUOTED_MEMBERS = ("server.test.js", src("""
    module.exports = {
      'test a': function(){
        var app = create(function(req, res){
          res.send(1);
        });
        check(app);
      },

      'test b': function(){
        var server = create();
        server.get('/', function(req, res){
          res.end();
        });
      }
    };
    """))


@pytest.mark.parametrize(("path", "text"), [
    *AROUND_EDGES, QUOTED_MEMBERS, ("session.py", PYTHON), ("app.js", JAVASCRIPT),
    ("types.ts", TYPESCRIPT), ("stack.go", GO), ("point.rs", RUST), ("Repo.java", JAVA)])
@pytest.mark.parametrize("member_rows", [treesitter._MEMBER_ROWS, 0])
def test_the_definitions_of_a_name_answer_as_the_whole_list(
        path: str, text: str, member_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``named`` lists, for any word of a definition's name, every definition whose
    simple name holds it exactly as the whole list does (name, span, hashes), from the
    parts of the file where the word is written; also where every statement at the
    margin is cut down to its members (``_MEMBER_ROWS`` 0)."""
    monkeypatch.setattr(treesitter, "_MEMBER_ROWS", member_rows)
    whole = DefinitionIndex().definitions(path, text, "k")
    words = {w.lstrip("_") for d in whole for w in naming.words(d.name)} | {"create", "x"}
    for word in sorted(words - {""}):
        named = DefinitionIndex().named(path, text, word, "k")
        assert [d for d in named if word in naming.simple(d.name)] == \
            [d for d in whole if word in naming.simple(d.name)], (path, word)


def test_a_name_in_a_long_class_parses_only_the_members_that_write_it() -> None:
    """In a long class, the definitions of one name come from a parse of the class's
    head, its closing brace and the members where the name is written (declared or
    called); a name written nowhere costs no parse at all."""
    members = "".join(f"\n    int size{n}() {{\n        return {n};\n    }}\n" for n in range(40))
    text = f"class Big {{{members}\n    int total() {{\n        return size7() + size9();\n" \
           "    }\n}\n"
    index = DefinitionIndex()
    named = index.named("Big.java", text, "size7", "k")
    assert index.parses == 1
    assert [d.name for d in named] == ["Big", "Big.size7", "Big.total"]
    whole = DefinitionIndex().definitions("Big.java", text, "k")
    assert find(named, "Big.size7") == find(whole, "Big.size7")
    assert one(named, "Big") == one(whole, "Big")  # its span from the rows kept
    assert index.named("Big.java", text, "missing", "k") == ()
    assert index.parses == 1
    index.definitions("Big.java", text, "k")
    assert index.named("Big.java", text, "size8", "k") == whole  # the list at hand serves
    assert index.parses == 2


def test_a_long_python_class_keeps_its_last_member_for_its_span() -> None:
    """A Python block ends at its last statement, not at a closing brace: a long class
    is cut down to its head, the members that write the name and its last member, so
    the class keeps its span. A long statement that is not a class or function (an
    ``if`` whose ``else:`` is at the margin) is not cut into members."""
    members = "".join(f"\n    def size{n}(self):\n        return {n}\n" for n in range(40))
    text = f'class Big:\n    """Sizes."""\n{members}\n    def total(self):\n' \
           "        return self.size7() + self.size9()\n\n\ndef after():\n    pass\n"
    lines = split_lines(text)
    outline = treesitter._Outline(lines, "python")
    seven = lines.index("    def size7(self):")
    kept = outline.part_rows([seven])
    total = lines.index("    def total(self):")
    assert kept == [(0, 3), (seven, seven + 3), (total, len(lines) - 2)]  # not after()
    index = DefinitionIndex()
    named = index.named("big.py", text, "size7", "k")
    whole = DefinitionIndex().definitions("big.py", text, "k")
    assert [d.name for d in named] == ["Big", "Big.size7", "Big.total"]
    assert one(named, "Big") == one(whole, "Big")  # its last row from the member kept
    assert find(named, "Big.size7") == find(whole, "Big.size7")
    branches = "".join(f"    x{n} = {n}\n" for n in range(120))
    branchy = f"if ready:\n{branches}else:\n{branches}"
    assert treesitter._Outline(split_lines(branchy), "python").members(0, 243) is None


def test_a_short_file_is_parsed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below ``_PART_MIN_ROWS`` lines, finding the part of a file to parse would cost
    about what the parse saves: the whole file is parsed, and its tree kept."""
    monkeypatch.setattr(treesitter, "_PART_MIN_ROWS", PART_MIN_ROWS)
    text = _big_python_file()
    lines = split_lines(text)
    short = "\n".join(lines[:PART_MIN_ROWS - 1]) + "\n"
    index = DefinitionIndex()
    index.anchor_for("short.py", short, 20, 20, key="short")
    index.named("short.py", short, "handle", key="short")
    assert not index._parts._data
    assert index.parses == 1  # the whole file, once, for both questions
    index.anchor_for("big.py", text, 900, 900, key="big")
    assert index._parts._data  # a long one: a part


def test_an_anchor_parses_the_part_of_the_file_around_it_and_lists_only_its_definitions(
        ) -> None:
    """``anchor_for`` on a file not listed yet parses only the statements at the margin
    that hold the place (the rest of the file parsed as blank lines, so rows keep their
    numbers) and looks only around the place; a place in the same part is answered from
    the tree kept, one elsewhere parses its own part (kept in its stead), and listing
    the whole file parses all of it: the same definitions every way."""
    text = _big_python_file()
    lines = split_lines(text)
    index = DefinitionIndex()
    line = lines.index("    async def handle(self, request):", 200) + 2
    anchor = index.anchor_for("big.py", text, line, line, key="big")
    assert anchor is not None
    assert anchor.offset == 1
    assert index.parses == 1
    assert len(index) == 0
    (_, [(lo, hi)]), = index._parts._data.values()
    assert lines[lo].startswith("class Handler")
    assert lines[hi].startswith("class Handler")
    assert lo < line < hi
    assert hi - lo < len(lines) / 30  # the class the place is in
    around = index.definitions_around("big.py", text, line + 1, line + 1, "big")
    assert index.parses == 1  # answered from the part kept
    for later in (lines.index("    async def handle(self, request):", hi) + 2, len(lines) - 2):
        assert index.anchor_for("big.py", text, later, later, key="big") is not None
    assert index.parses == 3  # a part each
    whole = index.definitions("big.py", text, key="big")
    assert index.parses == 4
    assert len(around) < len(whole) / 20
    assert innermost(around, line, line) == innermost(whole, line, line) is not None
    assert anchor == DefinitionIndex().anchor_for("big.py", "\n".join(lines) + "\n", line,
                                                  line, key="other")


def test_in_a_long_class_only_the_member_around_the_place_is_parsed() -> None:
    """Where blocks are braces, a long statement at the margin (a Java class) is cut down
    to its head, the member that holds the place (its annotations with it) and its
    closing brace: the class keeps its name and span, the member its own."""
    members = "".join(f"\n    @Override\n    public int size{n}() {{\n        return {n};\n"
                      "    }\n" for n in range(40))
    text = f"package p;\n\nimport java.util.List;\n\npublic class Big\n        extends Base\n" \
           f"{{{members}}}\n"
    lines = split_lines(text)
    line = lines.index("        return 20;")
    index = DefinitionIndex()
    around = index.definitions_around("Big.java", text, line + 1, line + 1, "k")
    (tree, [head, (lo, hi), closing]), = index._parts._data.values()
    assert [lines[row] for row in range(*head)] == ["public class Big", "        extends Base",
                                                   "{"]
    assert (lines[lo], lines[hi]) == ("    @Override", "    @Override")
    assert hi - lo == 5
    assert lo < line < hi
    assert [lines[row] for row in range(*closing)] == ["}"]
    parsed = tree.root_node.text.decode()
    assert parsed.count("size") == 1
    assert "extends Base" in parsed
    assert "import" not in parsed
    whole = DefinitionIndex().definitions("Big.java", text, "k")
    assert [d for d in around if d.contains(line + 1, line + 1)] == \
        [d for d in whole if d.contains(line + 1, line + 1)]
    assert [d.name for d in around if d.contains(line + 1, line + 1)] == ["Big", "Big.size20"]
    assert one(whole, "Big.size20").start_line == lo + 1  # the annotation is the method's


def test_lines_that_leave_a_bracket_or_string_open_are_parsed_not_blanked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines between the parts kept are parsed as blank only when they close all they
    open (``_blank``). A ``case`` at the indentation of a long Go function's
    statements looks like one: the lines around it that open and close the ``switch``
    are parsed too. Code at the margin inside a bundle's object, or text at the margin
    inside a string, is not taken for a statement of its own either."""
    monkeypatch.setattr(treesitter, "_MEMBER_ROWS", 0)
    go = src("""
        package main

        func run(x int) {
        \tswitch x {
        \tcase 1:
        \t\tf := func() int { return 1 }
        \t\t_ = f
        \tdefault:
        \t}
        }
        """)
    bundle = src("""
        var modules = ({
        7: (function(module) {
        class Request {
          send() {
            return 1;
          }
        }
        module.exports = Request;
        })
        });
        """)
    docs = ('HELP = """\nUsage:\n\ndef handler(request):\n    return 1\n"""\n\n\n'
            'def main():\n    pass\n')
    for path, text, line in (("m.go", go, 6), ("dist.js", bundle, 5), ("cli.py", docs, 5)):
        index = DefinitionIndex()
        around = index.definitions_around(path, text, line, line, "k")
        whole = DefinitionIndex().definitions(path, text, "k")
        assert innermost(around, line, line) == innermost(whole, line, line), path
    assert innermost(DefinitionIndex().definitions("dist.js", bundle, "k"), 5, 5).name == \
        "modules.Request.send"  # type: ignore[union-attr]
    lines = split_lines(go)
    assert treesitter._Outline(lines, "go").part_rows([5]) == [(2, 10)]  # the function, whole
    # lines that close one string and open the next are even in quotes, yet start inside
    # a string: blanked, the first template would run on into the second
    templates = src("""
        package main

        var Help = `NAME:
        USAGE:
        `

        var Other = `OPTIONS:
        Help
        `
        """)
    named = DefinitionIndex().named("help.go", templates, "Help", "k")
    whole = DefinitionIndex().definitions("help.go", templates, "k")
    assert find(named, "Help") == find(whole, "Help")
    assert one(whole, "Help").end_line == 5


def test_lines_inside_a_block_comment_are_parsed_up_to_its_end() -> None:
    """A block comment whose lines start at the margin is cut into pieces that look
    like statements: every piece up to the one that closes it stands inside the
    comment (a piece without ``/*`` or ``*/`` leaves the file where it was), so the
    line that closes it is never parsed as blank (the comment would run on over the
    class)."""
    body = "".join(f"    int size{n}() {{ return {n}; }}\n" for n in range(8))
    lines = split_lines(f"/*\nAlpha text\nBeta text\nGamma text\n*/\nclass Big {{\n{body}}}\n")
    kept = treesitter._Outline(lines, "java").part_rows([8])
    assert kept is None or any(a <= 4 < b for a, b in kept)  # the row of "*/"


@pytest.mark.parametrize(("language", "text", "after"), [
    ("python", "def f():\n    x = 1\n# a comment at the margin\n    y = 2\nz = 3\n", 4),
    ("python", "if x:\n    def f():\n        pass\nelse:\n    g = 1\nh = 2\n", 5),
    ("python", "x = [1,\n2]\ny = 3\n", 2),
    ("python", "y = 3 + \\\nfour\nz = 1\n", 2),
    ("python", "def f():\n    s = \"\"\"\ntext at the margin\n\"\"\"\nz = 1\n", 2),
    ("typescript", "const x = {\n  a: 1,\n}\nas const;\nexport function f() {}\n", 4),
    ("rust", "fn f() {}\n#[test]\nfn g() {}\n", 1),
    ("rust", "#[test]\nfn g() {}\nfn f() {}\n", 2),
    ("go", "func f() {\n}\n\n// a comment\nfunc g() {}\n", 4),
])
def test_a_statement_at_the_margin_ends_where_the_next_one_starts(
        language: str, text: str, after: int) -> None:
    """Where the statement at the margin that holds line 1 ends (``_statement_starts``):
    at a line that starts a statement in its first column: not a comment, a closing
    bracket, a line a backslash continues, a word that continues the statement before
    (``else``, ``as``) or the definition an attribute belongs to. Text inside a string
    may start at the margin: the lines before it then hold an open string, and are not
    blanked (``_blank``)."""
    lines = split_lines(text)
    starts = treesitter._statement_starts(lines, language, "", 0, len(lines))
    assert next(start for start in starts if start > 0) == after


def test_a_part_that_does_not_parse_cleanly_gives_way_to_the_whole_file() -> None:
    """A part that ends inside a string (text at the margin) parses with an error: the
    definitions come from the whole file, the same as listing it."""
    text = ('def f():\n    s = """\nmargin text\n"""\n    return s\n\n\n'
            'def g():\n    return 1\n')
    index = DefinitionIndex()
    around = index.definitions_around("m.py", text, 2, 2, "m")
    assert not index._parts._data  # the part was not kept
    assert innermost(around, 2, 2) == one(DefinitionIndex().definitions("m.py", text, "m"),
                                          "f")
    assert innermost(around, 2, 2).end_line == 5  # type: ignore[union-attr]


def _big_python_file() -> str:
    block = src('''
        class Handler{n}:
            """Handles things."""

            def __init__(self, config):
                self.config = config
                self.cache = {{}}

            @property
            def name(self):
                return "handler-{n}"

            async def handle(self, request):
                key = (request.method, request.path)
                if key in self.cache:
                    return self.cache[key]
                result = await self.process(request)
                self.cache[key] = result
                return result

            def process(self, request):
                def helper(x):
                    return x * 2
                return helper(len(request.body))

    ''')
    return "".join(block.format(n=n) for n in range(40))


def test_parsing_a_thousand_lines_is_fast() -> None:
    text = _big_python_file()
    assert 900 <= len(split_lines(text)) <= 1100
    definitions("warmup.py", "def f(): pass\n")  # grammar loading is once per process
    best = float("inf")
    for _ in range(5):
        index = DefinitionIndex()
        started = time.perf_counter()
        defs = index.definitions("big.py", text)
        best = min(best, time.perf_counter() - started)
    assert len(defs) == 40 * 6
    assert find(defs, "Handler39.process.helper")
    assert best < 0.1  # about 10 ms here; generous for slow CI machines


# -------------------------------------------------------------------------- similarity

CITED = src('''
    def request(self, method, url, params=None):
        """Send a request."""
        req = Request(method=method.upper(), url=url, params=params)
        prep = self.prepare_request(req)
        settings = self.merge_environment_settings(prep.url, {}, None, None, None)

        send_kwargs = {"timeout": self.timeout, "allow_redirects": True}
        send_kwargs.update(settings)
        resp = self.send(prep, **send_kwargs)
        return resp
''').splitlines()

UNRELATED = src("""
    class Cache:
        def __init__(self, size):
            self.size = size
            self.items = {}

        def get(self, key):
            if key in self.items:
                return self.items[key]
            return None
""").splitlines()


@pytest.fixture
def cited_hashes() -> tuple[int, ...]:
    return line_hashes(CITED)


def test_similarity_identical(cited_hashes: tuple[int, ...]) -> None:
    assert similarity(cited_hashes, CITED) == 1.0
    assert similarity(cited_hashes, CITED, CITED) == 1.0
    assert similarity_of_hashes(cited_hashes, cited_hashes) == 1.0


def test_similarity_whitespace_only(cited_hashes: tuple[int, ...]) -> None:
    reformatted = ["", *("\t" + line.strip() + "  " for line in CITED), "", ""]
    assert similarity(cited_hashes, reformatted) == 1.0
    assert similarity(cited_hashes, reformatted, CITED) == 1.0
    assert similarity_of_hashes(cited_hashes, line_hashes(reformatted)) == 1.0


def test_similarity_one_line_edited(cited_hashes: tuple[int, ...]) -> None:
    edited = list(CITED)
    edited[7] = "    send_kwargs.update(settings, verify=False)"
    nonblank = sum(1 for line in CITED if line.strip())
    aligned = similarity(cited_hashes, edited)
    assert aligned == pytest.approx((nonblank - 1) / nonblank)
    assert similarity_of_hashes(cited_hashes, line_hashes(edited)) == aligned
    with_text = similarity(cited_hashes, edited, CITED)
    assert aligned < with_text < 1.0  # partial credit for the recognisably same line
    assert with_text > 0.95


def test_similarity_unrelated(cited_hashes: tuple[int, ...]) -> None:
    assert similarity(cited_hashes, UNRELATED) == 0.0
    assert similarity(cited_hashes, UNRELATED, CITED) < 0.2
    assert similarity_of_hashes(cited_hashes, line_hashes(UNRELATED)) == 0.0
    assert similarity(cited_hashes, []) == 0.0


def test_similarity_counts_the_cited_code_that_survives(cited_hashes: tuple[int, ...]) -> None:
    # half the citation deleted: half survives
    assert similarity(cited_hashes, CITED[:5]) == pytest.approx(5 / 9)
    # the cited code inside a bigger range (the function grew) survives whole
    grown = [*CITED[:3], "    log.debug('x')", *CITED[3:], *UNRELATED]
    assert similarity(cited_hashes, grown) == 1.0


def test_similarity_edge_cases() -> None:
    assert similarity_of_hashes([], []) == 1.0
    assert similarity_of_hashes([0, 0], [0]) == 1.0  # blank only on both sides
    assert similarity_of_hashes([0], line_hashes(["x = 1"])) == 0.0
    # old_lines of the wrong length are ignored rather than misaligned
    hashes = line_hashes(["a = 1", "b = 2"])
    assert similarity(hashes, ["a = 1", "b = 3"], ["a = 1"]) == 0.5


# ------------------------------------------------------------------------ declarations


@pytest.mark.parametrize(("path", "text", "expected"), [
    pytest.param("session.py", PYTHON, [("Session.timeout", "assignment", 16, 16)], id="python"),
    pytest.param("a.py", "MAX = 3\n__all__ = [\n    'a',\n]\ndef f():\n    x = 1\n",
                 [("MAX", "assignment", 1, 1), ("__all__", "assignment", 2, 4)],
                 id="python-module"),
    pytest.param("a.go", "package a\n\nconst X = 1\nconst (\n\tA = iota\n\tB\n)\n"
                 "var v = 2\ntype S struct {\n\tName string\n}\nfunc f() { var q = 1 }\n",
                 [("X", "const_spec", 3, 3), ("A", "const_spec", 5, 5),
                  ("B", "const_spec", 6, 6), ("v", "var_spec", 8, 8),
                  ("S.Name", "field_declaration", 10, 10)], id="go"),
    pytest.param("a.ts", "enum E { A, B = 2 }\ninterface I { x: number }\n"
                 "class C { f = 1; h = () => 1 }\nexport const K = 3;\nconst fn = () => 2;\n",
                 [("E.A", "property_identifier", 1, 1), ("E.B", "enum_assignment", 1, 1),
                  ("I.x", "property_signature", 2, 2), ("C.f", "public_field_definition", 3, 3),
                  ("K", "variable_declarator", 4, 4)], id="typescript"),
    pytest.param("a.js", "const A = 1;\nclass C { f = 2 }\nfunction g() { const q = 3 }\n",
                 [("A", "variable_declarator", 1, 1), ("C.f", "field_definition", 2, 2)],
                 id="javascript"),
    pytest.param("A.java", "class A {\n  static final int X = 1;\n  enum E { P }\n"
                 "  int f() { int q = 1; return q; }\n}\ninterface I { int Y = 2; }\n",
                 [("A.X", "field_declaration", 2, 2), ("A.E.P", "enum_constant", 3, 3),
                  ("I.Y", "constant_declaration", 6, 6)], id="java"),
    pytest.param("a.rs", "const X: u32 = 1;\nstruct S { a: u32 }\nenum E { A }\n",
                 [("X", "const_item", 1, 1), ("S::a", "field_declaration", 2, 2),
                  ("E::A", "enum_variant", 3, 3)], id="rust"),
])
def test_declarations_are_anchors_by_name(path: str, text: str,
                                          expected: list[Row]) -> None:
    """Constants, module and class variables, fields and enum members at module, class or
    type level are named like definitions (a one-line citation of one anchors to it);
    locals inside functions are not; a variable holding a function is that function."""
    assert rows(path, text, declarations=True) == expected


HOLDERS_TS = """\
const arrow = (a: number) => a + 1;
let fn = function named() { return 1; };
const gen = function* () { yield 1; };
const Klass = class {};
const table = { add: (a: number) => a, sub: function () { return 0; }, *each() {} };
class Widget {
  onClick = () => this.render();
  onKey = function () { return 1; };
  steps = function* () { yield 1; };
}
exports.handler = (event: unknown) => event;
module.exports.other = function () {};
Widget.prototype.make = function* () {};
window.Thing = class {};
export default () => 1;
"""


@pytest.mark.parametrize("name", ["typescript", "javascript", "python"])
def test_a_holder_s_values_are_one_pattern_that_finds_what_one_each_would(
        name: str) -> None:
    """``definition_patterns`` writes the values a holder may hold as alternatives of
    one pattern (tree-sitter analyses each pattern with a field at a cost: half of
    TypeScript's query compiled on a cold start): the same nodes as a pattern each."""
    import importlib

    import tree_sitter as ts

    module, function = _languages.GRAMMARS[name]
    language = ts.Language(getattr(importlib.import_module(module), function)())
    rules = _languages.RULES[name]
    patterns = _languages.definition_patterns(rules, language)
    holders = [p for p in patterns if ": [" in p]
    assert len(holders) == len({(h, f) for h, f, _ in rules.holders
                                if language.id_for_node_kind(h, True)})
    one_each = [f"({holder} {field}: ({value})) @def" for holder, field, values in rules.holders
                for value in values if language.id_for_node_kind(holder, True)
                and language.id_for_node_kind(value, True)]
    source = {"typescript": HOLDERS_TS, "javascript": HOLDERS_TS.replace(": number", "")
              .replace(": unknown", ""),
              "python": "f = lambda x: x\nclass A:\n    g = lambda s: s\n"}[name].encode()
    root = ts.Parser(language).parse(source).root_node

    def found(query: str) -> set[tuple[int, int]]:
        nodes = ts.QueryCursor(ts.Query(language, query)).captures(root).get("def", [])
        return {(n.start_byte, n.end_byte) for n in nodes}

    expected = found("\n".join(one_each))
    assert len(expected) >= (14 if name != "python" else 2)
    assert found("\n".join(holders)) == expected
