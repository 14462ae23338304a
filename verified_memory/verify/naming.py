"""Names of definitions as the anchored locator compares them: their words, their last
part, whether they are qualified, private or public, and whether they name a function.
"""

from __future__ import annotations

import functools
import re

from verified_memory.models import Anchor

__all__ = ["FUNCTION_KINDS", "ROLE_KINDS", "generic_blind", "last_word", "names_a_role",
           "public", "qualified", "simple", "words"]

_WORD = re.compile(r"\w+")
#: A generic argument list with none inside it (``<'a>``, ``<T, U>``).
_GENERIC_ARGUMENTS = re.compile(r"<[^<>]*>")


#: Anchor kinds that are functions (a holder's kind is its value's: ``arrow_function``).
FUNCTION_KINDS = frozenset({
    "function_definition", "function_declaration", "generator_function_declaration",
    "method_definition", "method_declaration", "constructor_declaration",
    "compact_constructor_declaration", "function_item", "function_signature_item",
    "function_signature", "method_signature", "abstract_method_signature", "method_elem",
    "method_spec", "arrow_function", "function_expression", "function", "generator_function",
    "lambda", "macro_definition",
})


@functools.lru_cache(maxsize=4096)
def words(name: str) -> tuple[str, ...]:
    """The words of a qualified name (``impl Display for Point::fmt`` has five)."""
    return tuple(dict.fromkeys(_WORD.findall(name)))


@functools.lru_cache(maxsize=4096)
def last_word(name: str) -> str:
    """The last word of a qualified name's simple name ("" if it has none); asked for
    every candidate file of every citation, of a handful of names."""
    found = _WORD.findall(simple(name))
    return found[-1] if found else ""


def simple(name: str) -> str:
    """The last part of a qualified name: ``Session.request`` -> ``request``,
    ``impl Trait for Type::fn`` -> ``fn``."""
    return name.rsplit("::", 1)[-1].rsplit(".", 1)[-1]


def public(name: str) -> str:
    """A qualified name as it reads whether its parts are private or not: without the
    leading underscores of each part (Python's convention)."""
    return ".".join(part.lstrip("_") for part in name.split("."))


@functools.lru_cache(maxsize=4096)
def generic_blind(name: str) -> str:
    """A Rust impl's qualified name without the generic arguments of the type it is
    for: ``impl Match<'a>::invert`` and ``impl Match<T>::invert`` name one method,
    whose impl's parameters were renamed. The trait's arguments stay: ``impl From<u8>
    for X`` and ``impl From<u16> for X`` are two impls (which is why anchors keep
    them). Other names are returned as they are."""
    if not name.startswith("impl ") or "<" not in name:
        return name
    trait, sep, target = name.removeprefix("impl ").rpartition(" for ")
    while "<" in target:
        stripped = _GENERIC_ARGUMENTS.sub("", target)
        if stripped == target:
            break  # an unbalanced ``<`` (``impl Fn() -> u8``): nothing more to drop
        target = stripped
    return f"impl {trait}{sep}{target}"


def qualified(name: str) -> bool:
    """Whether a name has a qualifier (``Class.method``, ``impl Type::fn``)."""
    return "." in name or "::" in name


#: Kinds whose plain names name a role as often as one thing: functions (``main``,
#: ``New``, ``__getattr__``) and Rust modules (``mod tests`` is in nearly every file).
ROLE_KINDS = FUNCTION_KINDS | {"mod_item"}


def names_a_role(anchor: Anchor) -> bool:
    """Whether the anchor's name, unqualified, is no evidence of which definition it is
    (``ROLE_KINDS``): a namesake new in another file must then also keep most of the old
    definition's lines to be the cited one moved."""
    return anchor.kind in ROLE_KINDS and not qualified(anchor.name)
