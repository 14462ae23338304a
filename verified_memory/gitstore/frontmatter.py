"""YAML front matter, the small strict subset ``vmem git export`` writes and reads back.

PyYAML is not a dependency, and a memory file needs little of YAML: a block mapping of
``key: value`` lines, where a value is a plain scalar, a double-quoted string, ``null``,
``true``/``false``, a whole number, or a JSON array or object (JSON is YAML's flow
style); and a key whose value is a block sequence of such mappings (``citations``).
What is written is valid YAML, so any YAML tool reads it; what is read is exactly this
subset, and anything else is refused with the line that broke it.

Strings are written plain only when YAML would read them back as the same string (no
leading digit, no indicator, no ``: `` or `` #``, not a word YAML reads as a boolean or
null); everything else is a JSON string, whose escapes are YAML's too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from verified_memory.errors import ValidationError
from verified_memory.limits import check_depth

__all__ = ["DELIMITER", "dump", "load", "split"]

DELIMITER = "---"
_KEY = re.compile(r"^([a-z_][a-z0-9_]*):(?: (.*))?$")
_PLAIN = re.compile(r"^[A-Za-z_./][A-Za-z0-9_./@+,()' -]*(?<! )$")
# Words YAML 1.1 (PyYAML) or 1.2 reads as something other than a string.
_RESERVED = frozenset({"null", "~", "true", "false", "yes", "no", "on", "off", "y", "n"})
_INT = re.compile(r"^-?[0-9]+$")
# JSON leaves these unescaped, YAML 1.1 reads them as line breaks inside a quoted string.
_BREAKS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"}


def _string(text: str) -> str:
    if _PLAIN.match(text) and text.lower() not in _RESERVED and not text.startswith("."):
        return text
    quoted = json.dumps(text, ensure_ascii=False)
    for char, escape in _BREAKS.items():
        quoted = quoted.replace(char, escape)
    return quoted


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    for char, escape in _BREAKS.items():
        text = text.replace(char, escape)
    return text


def dump(fields: Mapping[str, Any]) -> str:
    """``fields`` as front matter between ``---`` lines (a list of mappings as a block
    sequence; every other list or mapping in JSON's flow style)."""
    lines = [DELIMITER]
    for key, value in fields.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{key}:")
            for item in value:
                for i, (name, inner) in enumerate(item.items()):
                    lines.append(f"{'  - ' if i == 0 else '    '}{name}: {_scalar(inner)}")
        else:
            lines.append(f"{key}: {_scalar(value)}")
    lines.append(DELIMITER)
    return "\n".join(lines) + "\n"


def split(text: str, where: str) -> tuple[list[str], str]:
    """The front matter's lines and the body after it (``ValidationError`` naming
    ``where`` when the file does not start with ``---`` or never closes it)."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != DELIMITER:
        raise ValidationError(f"{where}: a memory file starts with a '---' line "
                              "(YAML front matter)")
    for number, line in enumerate(lines[1:], start=1):
        if line.rstrip("\r") == DELIMITER:
            return [x.rstrip("\r") for x in lines[1:number]], "\n".join(lines[number + 1:])
    raise ValidationError(f"{where}: the front matter is never closed by a '---' line")


def load(lines: Sequence[str], where: str) -> dict[str, Any]:
    """Front matter lines (``split``) read back into a mapping; ``ValidationError``
    naming ``where`` and the line for anything outside the subset."""
    fields: dict[str, Any] = {}
    items: list[dict[str, Any]] | None = None  # the block sequence being read
    for number, line in enumerate(lines, start=2):  # line 1 is the opening '---'
        at = f"{where}: line {number}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith("  - ") or line.startswith("    "):
            if items is None:
                raise ValidationError(f"{at}: an indented line outside a list")
            key, value = _entry(line[4:], at)
            if line.startswith("  - "):
                items.append({})
            elif not items:
                raise ValidationError(f"{at}: a list item starts with '  - '")
            if key in items[-1]:
                raise ValidationError(f"{at}: {key} given twice")
            items[-1][key] = value
            continue
        if line[0].isspace():
            raise ValidationError(f"{at}: unexpected indentation (list items are "
                                  "'  - key: value', then '    key: value')")
        key, value = _entry(line, at, block=True)
        if key in fields:
            raise ValidationError(f"{at}: {key} given twice")
        if value is _BLOCK:
            items = []
            fields[key] = items
        else:
            items = None
            fields[key] = value
    return fields


_BLOCK = object()  # ``key:`` alone: a block sequence follows


def _entry(line: str, at: str, *, block: bool = False) -> tuple[str, Any]:
    match = _KEY.match(line)
    if match is None:
        raise ValidationError(f"{at}: expected 'key: value', got {line[:80]!r}")
    key, raw = match.group(1), match.group(2)
    if raw is None or not raw.strip():
        if block:
            return key, _BLOCK
        raise ValidationError(f"{at}: {key} has no value (write null for none)")
    return key, _value(raw.strip(), f"{at}: {key}")


def _value(raw: str, at: str) -> Any:
    if raw[0] in "\"[{":
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{at}: not a quoted string or JSON value ({exc.msg}); "
                                  "quote text with double quotes") from None
        except RecursionError:
            raise ValidationError(f"{at}: nested too deeply") from None
        check_depth(value, at)
        return value
    if raw in ("null", "~"):
        return None
    if raw.lower() in _RESERVED:
        if raw in ("true", "false"):
            return raw == "true"
        raise ValidationError(f"{at}: {raw!r} is ambiguous in YAML; quote it")
    if _INT.match(raw):
        return int(raw)
    if raw[0] in "-?:,]}#&*!|>'%@`" or ": " in raw or " #" in raw or raw.endswith(":"):
        raise ValidationError(f"{at}: {raw[:60]!r} is not a plain YAML string; put it in "
                              "double quotes")
    return raw
