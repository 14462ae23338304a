"""Per-language rules for finding definitions in a tree-sitter tree and naming them.

``treesitter.py`` owns parsing, caching and the public API; this module owns the
grammar-specific knowledge: which node types are definitions, which wrapper nodes
belong to a definition's span (decorators, ``export``), and how a definition is named.
Node type names differ between grammar releases, so nothing here is trusted blindly:
``definition_patterns`` only emits patterns for node types and fields the loaded grammar
actually has, and the caller compiles each pattern on its own so that one unknown name
cannot disable a whole language.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Language, Node

__all__ = [
    "EXTENSIONS",
    "GRAMMARS",
    "LEADING_SIBLINGS",
    "RULES",
    "SPAN_PARENTS",
    "Rules",
    "declaration_patterns",
    "definition_kind",
    "definition_patterns",
    "outer_span",
    "scope_labels",
    "simple_name",
]

#: File extension (lower case, with the dot) -> language name.
EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
}

#: Language name -> (grammar module, function returning the language pointer).
GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
}

# Values that make a variable, property or assignment a definition in JS/TS. Both the
# current (``function_expression``) and older (``function``) grammar names are listed;
# whichever the loaded grammar lacks is skipped.
_JS_FUNCTIONS = (
    "arrow_function",
    "function_expression",
    "function",
    "generator_function",
)
_JS_VALUES = (*_JS_FUNCTIONS, "class")

#: Node type -> the field holding the value that makes it a definition (see ``Rules``).
_VALUE_FIELD: dict[str, str] = {
    "variable_declarator": "value",
    "pair": "value",
    "field_definition": "value",
    "public_field_definition": "value",
    "assignment_expression": "right",
    "assignment": "right",
    "export_statement": "value",
}


@dataclass(frozen=True, slots=True)
class Rules:
    """What counts as a definition in one language.

    ``kinds`` are node types that are always definitions. ``holders`` are nodes that
    are definitions only when a value field holds a function or class, e.g.
    ``const add = (a, b) => a + b``: (node type, field, allowed value types).
    ``separator`` joins a qualified name's parts (``::`` for Rust paths).
    """

    kinds: tuple[str, ...]
    holders: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    separator: str = "."
    #: Query patterns (capture ``@decl``) for named declarations at module, class or
    #: type level: constants, variables, fields, enum members. A one-line citation of
    #: ``MAX_RETRIES = 3`` anchors to its declaration, so it is followed by name like
    #: any definition, and found ``changed`` rather than lost when its value changes.
    declarations: tuple[str, ...] = ()


_JS_KINDS = (
    "function_declaration",
    "generator_function_declaration",
    "class_declaration",
    "method_definition",
)
_JS_HOLDERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("variable_declarator", "value", _JS_VALUES),
    ("pair", "value", _JS_FUNCTIONS),
    ("field_definition", "value", _JS_FUNCTIONS),
    ("public_field_definition", "value", _JS_FUNCTIONS),
    ("assignment_expression", "right", _JS_VALUES),
    ("export_statement", "value", _JS_VALUES),  # anonymous `export default ...`
)
_TS_KINDS = (
    *_JS_KINDS,
    "abstract_class_declaration",
    "interface_declaration",
    "type_alias_declaration",
    "enum_declaration",
    "internal_module",  # namespace Foo { ... }
    "module",  # declare module "foo" { ... }
    "function_signature",  # overloads, declarations
    "method_signature",
    "abstract_method_signature",
)

_JS_DECLARATIONS = (
    "(program (lexical_declaration (variable_declarator name: (identifier)) @decl))",
    "(program (variable_declaration (variable_declarator name: (identifier)) @decl))",
    "(program (export_statement declaration: (lexical_declaration"
    " (variable_declarator name: (identifier)) @decl)))",
    "(program (export_statement declaration: (variable_declaration"
    " (variable_declarator name: (identifier)) @decl)))",
    "(class_body (field_definition) @decl)",
)
_TS_DECLARATIONS = (
    *_JS_DECLARATIONS,
    "(class_body (public_field_definition) @decl)",
    "(property_signature) @decl",
    "(enum_body (enum_assignment) @decl)",
    "(enum_body name: (property_identifier) @decl)",
)

RULES: dict[str, Rules] = {
    "python": Rules(
        kinds=("function_definition", "class_definition"),
        holders=(("assignment", "right", ("lambda",)),),
        declarations=(
            "(module (expression_statement (assignment left: (identifier)) @decl))",
            "(class_definition body: (block (expression_statement"
            " (assignment left: (identifier)) @decl)))",
        ),
    ),
    "javascript": Rules(kinds=_JS_KINDS, holders=_JS_HOLDERS, declarations=_JS_DECLARATIONS),
    "typescript": Rules(kinds=_TS_KINDS, holders=_JS_HOLDERS, declarations=_TS_DECLARATIONS),
    "tsx": Rules(kinds=_TS_KINDS, holders=_JS_HOLDERS, declarations=_TS_DECLARATIONS),
    "go": Rules(
        kinds=(
            "function_declaration",
            "method_declaration",
            "type_spec",
            "type_alias",
            "method_elem",  # interface methods (older grammars: method_spec)
            "method_spec",
        ),
        declarations=(
            "(source_file (const_declaration (const_spec) @decl))",
            "(source_file (var_declaration (var_spec) @decl))",
            "(source_file (var_declaration (var_spec_list (var_spec) @decl)))",
            "(field_declaration_list (field_declaration name: (field_identifier)) @decl)",
        ),
    ),
    "rust": Rules(
        kinds=(
            "function_item",
            "function_signature_item",
            "struct_item",
            "enum_item",
            "union_item",
            "trait_item",
            "impl_item",
            "mod_item",
            "type_item",
            "macro_definition",
        ),
        separator="::",
        declarations=(
            "(const_item) @decl",
            "(static_item) @decl",
            "(field_declaration_list (field_declaration) @decl)",
            "(enum_variant) @decl",
        ),
    ),
    "java": Rules(
        kinds=(
            "class_declaration",
            "interface_declaration",
            "enum_declaration",
            "record_declaration",
            "annotation_type_declaration",
            "method_declaration",
            "constructor_declaration",
            "compact_constructor_declaration",
        ),
        declarations=(
            "(field_declaration) @decl",
            "(constant_declaration) @decl",
            "(enum_constant) @decl",
        ),
    ),
}


def definition_patterns(rules: Rules, language: Language) -> list[str]:
    """Query patterns (one ``@def`` capture each) for the node types this grammar has."""

    def known(kind: str) -> bool:
        return bool(language.id_for_node_kind(kind, True))

    patterns = [f"({kind}) @def" for kind in rules.kinds if known(kind)]
    for holder, field, values in rules.holders:
        kinds = [value for value in values if known(value)]
        if not known(holder) or not language.field_id_for_name(field) or not kinds:
            continue
        # one pattern with the values as alternatives: tree-sitter analyses a pattern
        # with a field at a cost per pattern (a new process compiles TypeScript's
        # query in 7 ms so, 16 ms with a pattern per value)
        patterns.append(f"({holder} {field}: [{' '.join(f'({kind})' for kind in kinds)}]) @def")
    return patterns


_PATTERN_NODE = re.compile(r"\((\w+)")
_PATTERN_FIELD = re.compile(r"(\w+):")


def declaration_patterns(rules: Rules, language: Language) -> list[str]:
    """The declaration patterns (``@decl``) whose node types and fields this grammar
    has (one unknown name would make the whole query fail to compile)."""
    return [pattern for pattern in rules.declarations
            if all(language.id_for_node_kind(kind, True)
                   for kind in _PATTERN_NODE.findall(pattern))
            and all(language.field_id_for_name(field)
                    for field in _PATTERN_FIELD.findall(pattern))]


# ----------------------------------------------------------------------------- spans

#: Parents that belong to the definition they wrap: decorators, ``export``, ``declare``.
_WRAPPERS = frozenset({"decorated_definition", "export_statement", "ambient_declaration"})
#: Declarations that wrap one definition; they belong to it only when it is alone in them
#: (``const f = () => 1`` but not ``const a = 1, f = () => 1``; Go ``type ( A; B )``).
_SINGLE_WRAPPERS = frozenset({"lexical_declaration", "variable_declaration", "type_declaration"})
#: Statement wrappers of assignments and namespaces (``exports.f = ...;``).
_STATEMENT_OF = frozenset({"assignment_expression", "assignment", "internal_module"})
#: Siblings that precede and belong to a definition: TS member decorators, Rust attributes.
_LEADING = frozenset({"decorator", "attribute_item"})
#: Parents a definition's span can take in (above): the definitions around some code
#: inside one of these may start or end outside that code's own nodes.
SPAN_PARENTS = _WRAPPERS | _SINGLE_WRAPPERS | {"expression_statement"}
#: Nodes whose definition is the sibling after them.
LEADING_SIBLINGS = _LEADING


def outer_span(node: Node) -> tuple[int, int]:
    """The 0-based first and last rows of a definition including what belongs to it.

    Python decorators (``decorated_definition``), a leading ``export``/``declare``, the
    ``const`` of a lone declarator and Rust ``#[...]`` attributes are part of what an
    author reads as the definition, so a citation of them anchors to it.
    """
    outer = node
    parent = outer.parent
    while parent is not None:
        kind = parent.type
        if kind in _WRAPPERS:
            outer = parent
        elif kind in _SINGLE_WRAPPERS:
            named = [c for c in parent.named_children if c.type != "comment"]
            if len(named) != 1:
                break
            outer = parent
        elif kind == "expression_statement" and outer.type in _STATEMENT_OF:
            outer = parent
        else:
            break
        parent = outer.parent
    start = outer.start_point.row
    previous = outer.prev_named_sibling
    while previous is not None and previous.type in _LEADING:
        start = previous.start_point.row
        previous = previous.prev_named_sibling
    end_point = outer.end_point
    end = end_point.row
    if end_point.column == 0 and end > start:
        end -= 1  # the node ends with a newline: its last line is the one before
    return start, end


# ----------------------------------------------------------------------------- names

_SPACES = re.compile(r"\s+")
_INNER_SPACE = re.compile(r"(?<=\W) | (?=\W)")


def _compact(text: str) -> str:
    """Whitespace-insensitive spelling of a type or expression (``Foo<A, B>`` -> ``Foo<A,B>``).

    A space survives only between two word characters (``&mut T``, ``dyn Trait``), so a
    reformat does not rename anything.
    """
    if text.isidentifier():
        return text  # most names: nothing to compact (and two regular expressions saved)
    return _INNER_SPACE.sub("", _SPACES.sub(" ", text.strip()))


def _text(node: Node | None) -> str:
    if node is None or node.is_missing:
        return ""
    raw = node.text
    if raw is None:
        return ""
    text = raw.decode("utf-8", errors="replace")
    if node.type in ("string", "template_string", "string_literal"):
        text = text.strip("'\"`")
    return _compact(text)


def _field_text(node: Node, field: str) -> str:
    return _text(node.child_by_field_name(field))


def _go_receiver_type(node: Node) -> str:
    """The receiver's type name without pointer or type parameters: ``*Stack[T]`` -> ``Stack``."""
    receiver = node.child_by_field_name("receiver")
    stack = [receiver] if receiver is not None else []
    while stack:  # depth-first, left to right: the first type identifier is the type
        current = stack.pop()
        if current.type == "type_identifier":
            return _text(current)
        if current.type == "identifier" and current.parent is not None and (
            current.parent.type == "parameter_declaration"
        ):
            continue  # the receiver variable's name, not its type
        stack.extend(reversed(current.named_children))
    return ""


def _rust_impl_name(node: Node) -> str:
    """``impl Type`` or ``impl Trait for Type``; generic arguments are kept (they can
    distinguish ``impl From<u8> for X`` from ``impl From<u16> for X``)."""
    type_name = _field_text(node, "type")
    if not type_name:
        return ""
    trait = _field_text(node, "trait")
    return f"impl {trait} for {type_name}" if trait else f"impl {type_name}"


def _holder_name(node: Node) -> str:
    kind = node.type
    if kind == "variable_declarator":
        name = node.child_by_field_name("name")
        # destructuring (`const {a, b} = ...`) names no single definition
        return _text(name) if name is not None and name.type == "identifier" else ""
    if kind == "pair":
        return _field_text(node, "key")
    if kind == "field_definition":
        return _field_text(node, "property")
    if kind in ("assignment_expression", "assignment"):
        left = node.child_by_field_name("left")
        if left is None or left.type not in ("identifier", "member_expression", "attribute"):
            return ""
        return _text(left)
    if kind == "export_statement":
        value = node.child_by_field_name("value")
        named = _field_text(value, "name") if value is not None else ""
        return named or "default"
    return _field_text(node, "name")


def simple_name(node: Node, language: str) -> str:
    """A definition's own name, before qualification ("" when it has none)."""
    kind = node.type
    if kind in _VALUE_FIELD:
        return _holder_name(node)
    if kind == "impl_item":
        return _rust_impl_name(node)
    if kind == "property_identifier":  # a TypeScript enum member without a value
        return _text(node)
    if kind in ("field_declaration", "constant_declaration") and \
            node.child_by_field_name("name") is None:  # Java: the first declarator's name
        declarator = node.child_by_field_name("declarator")
        return _field_text(declarator, "name") if declarator is not None else ""
    if kind == "method_declaration" and language == "go":
        receiver = _go_receiver_type(node)
        name = _field_text(node, "name")
        return f"{receiver}.{name}" if receiver and name else name
    return _field_text(node, "name")


def definition_kind(node: Node) -> str:
    """The node type recorded in an anchor; for ``const f = () => ...`` the value's type."""
    field = _VALUE_FIELD.get(node.type)
    if field is not None:
        value = node.child_by_field_name(field)
        if value is not None:
            return value.type
    return node.type


#: Object literal containers that give the object's methods a name prefix.
_OBJECT_OWNERS: dict[str, Callable[[Node], str]] = {
    "variable_declarator": _holder_name,
    "pair": _holder_name,
    "assignment_expression": _holder_name,
}


def scope_labels(node: Node, stop_id: int | None) -> list[str]:
    """Names of object literals between a JS/TS method and its enclosing definition.

    ``const api = { get() {} }`` makes ``api.get``; nested objects add one part each.
    Walking stops at the enclosing definition (``stop_id``) or the root.
    """
    labels: list[str] = []
    current = node.parent
    while current is not None and current.id != stop_id:
        if current.type == "object":
            owner = current.parent
            if owner is None or owner.id == stop_id:
                break
            label_of = _OBJECT_OWNERS.get(owner.type)
            label = label_of(owner) if label_of is not None else ""
            if not label:
                break  # an object passed as an argument etc.: no stable name
            labels.append(label)
            current = owner
        current = current.parent
    labels.reverse()
    return labels
