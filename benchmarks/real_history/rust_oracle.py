"""The Rust oracle of the real-history benchmark: rustc's own parser, no tree-sitter.

``rustc -Z unpretty=ast-tree`` prints the syntax tree of one file as it is parsed, before
macro expansion and before ``mod x;`` files are loaded (so a file is read on its own),
as Rust's ``{:#?}`` debug text: every value that spans lines opens with ``{``, ``(`` or
``[`` at the end of a line, its contents four spaces deeper, and closes at the opening
line's indentation. That is all this module reads of the format: the lines become a
tree by indentation, and items are read from it by their field names. ``-Z`` options
are for nightly compilers; ``RUSTC_BOOTSTRAP=1`` lets a stable rustc take them.

Facts, in the shape of the other oracles:

* defs: functions and methods (``Type.method``; a trait's own methods ``Trait.method``;
  a method of a trait implementation ``Type.Trait.method``, since ``fmt`` of ``Display``
  and of ``Debug`` are two methods), structs, enums, unions, traits, type aliases,
  modules written inline (``mod m { ... }``: their items are ``m.name``);
* decls: consts and statics (``NAME``, ``Type.NAME`` inside an ``impl``), struct fields
  (``Struct.field``) and enum variants (``Enum.Variant``).

Spans are rustc's: an item's span leaves out its attributes and doc comments (as the Go
oracle leaves out doc comments). A file rustc cannot parse (in any edition) has
``error``.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field

__all__ = ["rust_facts"]

#: Tried in order: old code may use a word a later edition reserves (``async``, ``gen``).
EDITIONS = ("2021", "2018", "2015", "2024")
_SPAN = re.compile(r"span: \S+?:(\d+):\d+: (\d+):\d+ ")
_IDENT = re.compile(r"^(?:ident: )?(?:Some\()?(r#)?([A-Za-z_][A-Za-z0-9_]*)#\d+\)?,?$")


@dataclass(slots=True)
class _Node:
    text: str
    children: list[_Node] = field(default_factory=list)

    def get(self, name: str) -> _Node | None:
        """The child that is field ``name`` (``name: ...``)."""
        prefix = name + ":"
        return next((c for c in self.children if c.text.startswith(prefix)), None)

    def inner(self) -> _Node | None:
        """The one value inside a field that opens a bracket (``kind: Fn(`` -> ``Fn {``)."""
        return self.children[0] if self.children else None

    def span(self) -> tuple[int, int] | None:
        node = self.get("span")
        found = _SPAN.match(node.text) if node is not None else None
        return (int(found[1]), int(found[2])) if found else None


def _tree(text: str) -> _Node:
    root = _Node("")
    stack = [root]
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if stripped in ("}", "},", ")", "),", "]", "],"):
            if len(stack) > 1:
                stack.pop()
            continue
        node = _Node(stripped)
        stack[-1].children.append(node)
        if stripped.endswith(("{", "(", "[")):
            stack.append(node)
    return root


def _ident(node: _Node | None) -> str | None:
    if node is None:
        return None
    if node.children:  # ``ident: Some(`` with the name on the next line
        node = node.children[0]
    found = _IDENT.match(node.text)
    return found[2] if found else None


def _path_name(ty: _Node | None) -> str | None:
    """The last segment of a type or trait path (``fmt::Display`` -> ``Display``,
    ``Foo<T>`` -> ``Foo``; ``&Foo`` -> ``Foo``), or None for other types."""
    while ty is not None:
        segments = ty.get("segments")
        if segments is not None:
            names = [_ident(s.get("ident")) for s in segments.children]
            return names[-1] if names and names[-1] else None
        # Ty { kind: Path(None, Path {...}) }, Ref(None, MutTy { ty: Ty {...} }), TraitRef
        nxt = ty.get("kind") or ty.get("path") or ty.get("ty") or ty.get("trait_ref")
        if nxt is None:
            nxt = next((c for c in ty.children if c.text in ("Path {", "MutTy {", "Ty {",
                                                                "TraitRef {")), None)
        if nxt is None or not nxt.children:
            return None
        ty = nxt if nxt.text.endswith("{") else (
            next((c for c in nxt.children if c.text.endswith("{")), None))
    return None


class _Facts:
    def __init__(self) -> None:
        self.defs: list[dict[str, object]] = []
        self.decls: list[dict[str, object]] = []

    def items(self, items: list[_Node], scope: str, impl_of: str | None = None) -> None:
        for item in items:
            if item.text != "Item {":
                continue
            span, kind = item.span(), item.get("kind")
            if span is None or kind is None or not kind.children:
                continue
            variant = kind.text.removeprefix("kind: ").rstrip("(")
            body = kind.children
            first = body[0]

            def named(name: str | None) -> str | None:
                return None if name is None else f"{scope}.{name}" if scope else name

            if variant == "Fn":
                name = named(_ident(first.get("ident")))
                if name:
                    self.defs.append(_def(name, "function", span))
            elif variant in ("Const", "Static"):
                name = named(_ident(first.get("ident")))
                if name:
                    self.decls.append({"name": name, "line": span[0], "end": span[1]})
            elif variant in ("Struct", "Union", "Enum"):
                name = named(_ident(first))
                if not name:
                    continue
                self.defs.append(_def(name, "type", span))
                self._members(body[2] if len(body) > 2 else None, name)
            elif variant in ("Trait", "TyAlias"):
                name = named(_ident(first.get("ident")))
                if not name:
                    continue
                self.defs.append(_def(name, "type", span))
                listed = first.get("items")
                if variant == "Trait" and listed is not None:
                    self.items(listed.children, name)
            elif variant == "Mod":
                name = named(_ident(body[1] if len(body) > 1 else None))
                loaded = body[2] if len(body) > 2 else None
                if name and loaded is not None and loaded.text.startswith("Loaded(") \
                        and loaded.children:
                    self.defs.append(_def(name, "type", span))
                    self.items(loaded.children[0].children, name)
            elif variant == "Impl":
                self_ty = _path_name(first.get("self_ty"))
                if not self_ty:
                    continue
                trait = first.get("of_trait")
                trait_name = None
                if trait is not None and trait.children:
                    trait_name = _path_name(trait.children[0])
                inner = ".".join(n for n in ((named(self_ty) or self_ty), trait_name) if n)
                listed = first.get("items")
                if listed is not None:
                    self.items(listed.children, inner, impl_of=self_ty)

    def _members(self, data: _Node | None, owner: str) -> None:
        """Struct fields (``Struct { fields: [...] }``) and enum variants."""
        if data is None:
            return
        for group in ("fields", "variants"):
            listed = data.get(group)
            for member in listed.children if listed is not None else ():
                span, name = member.span(), _ident(member.get("ident"))
                if span is not None and name:
                    self.decls.append({"name": f"{owner}.{name}", "line": span[0],
                                       "end": span[1]})


def _def(name: str, kind: str, span: tuple[int, int]) -> dict[str, object]:
    return {"name": name, "kind": kind, "start": span[0], "end": span[1]}


def rust_facts(text: str) -> dict[str, object]:
    """The facts of one Rust file's text (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="vmem-rust-oracle-") as tmp:
        path = os.path.join(tmp, "file.rs")
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        error = ""
        for edition in EDITIONS:
            proc = subprocess.run(
                ["rustc", "-Z", "unpretty=ast-tree", "--edition", edition, path],
                capture_output=True, check=False, cwd=tmp,
                env={**os.environ, "RUSTC_BOOTSTRAP": "1"})
            if proc.returncode == 0:
                break
            error = proc.stderr.decode("utf-8", "replace")[-500:]
        else:
            return {"defs": [], "decls": [], "error": error or "rustc failed"}
    root = _tree(proc.stdout.decode("utf-8", "replace"))
    crate = root.children[0] if root.children else None
    items = crate.get("items") if crate is not None else None
    facts = _Facts()
    facts.items(items.children if items is not None else [], "")
    return {"defs": facts.defs, "decls": facts.decls}
