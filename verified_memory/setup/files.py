"""Edits to clients' configuration files that keep everything that is not ours.

Each function takes a file's text (None when the file does not exist) and returns the
new text: our entry added or brought up to date, the rest as it was. JSON keeps its key
order and indentation; TOML and markdown are edited as text, line by line, so comments
survive. A file we cannot edit safely (JSON with comments, a TOML table written in a
form we do not edit) is a ``ValidationError`` saying what to add by hand; nothing is
written then.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from verified_memory.errors import ValidationError
from verified_memory.limits import check_depth

__all__ = [
    "BLOCK_BEGIN",
    "BLOCK_END",
    "is_ours",
    "load_json",
    "markdown_block",
    "merge_hooks",
    "merge_server",
    "parse_text",
    "toml_server",
]

BLOCK_BEGIN = ("<!-- verified-memory:begin (written by `vmem init`; `vmem init` replaces "
               "what is between these lines) -->")
BLOCK_END = "<!-- verified-memory:end -->"
_BLOCK = re.compile(r"<!-- verified-memory:begin\b[^\n]*-->\n.*?<!-- verified-memory:end -->\n?",
                    flags=re.S)
#: A hook command of ours: `vmem ... hook EVENT` (or the older `vmem context --hook`),
#: whatever path or wrapper runs vmem.
_OURS = re.compile(r"(?:^|[\s/\\\"'])(?:vmem|verified_memory)\b.*"
                   r"\b(?:hook\s+(?:session-start|prompt|stop)|context\s.*--hook)\b")


def is_ours(command: object) -> bool:
    return isinstance(command, str) and _OURS.search(command) is not None


# --------------------------------------------------------------------------- JSON


def load_json(text: str | None, where: str) -> dict[str, Any]:
    """A JSON object file's content ({} when it does not exist or is empty)."""
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
        check_depth(data, where)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"{where} is not plain JSON ({exc.msg} at line {exc.lineno} column {exc.colno}; "
            "comments and trailing commas are not kept by a rewrite): fix it, or add the "
            "entry `vmem init --dry-run` shows by hand") from None
    except RecursionError:
        raise ValidationError(f"{where} is JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise ValidationError(f"{where} holds {_kind(data)}, not a JSON object")
    return data


def _kind(value: object) -> str:
    """What a JSON value is, in JSON's words (Python's would say 'a NoneType')."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true or false"
    kinds = ((dict, "an object"), (list, "an array"), (str, "a string"))
    return next((word for cls, word in kinds if isinstance(value, cls)), "a number")


def _indent(text: str | None) -> int | str:
    """The indentation a JSON file uses (2 spaces for a new one)."""
    for line in (text or "").splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return 2


def _dump(data: Mapping[str, Any], like: str | None) -> str:
    return json.dumps(data, indent=_indent(like), ensure_ascii=False) + "\n"


def _table(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise ValidationError(f"{where}: {key} is {_kind(value)}, not an object")
    return value


def merge_server(text: str | None, where: str, key: str, name: str,
                 entry: Mapping[str, Any]) -> str:
    """The MCP server ``name`` under ``key`` (``mcpServers``, VS Code's ``servers``):
    its fields set to ``entry``'s, fields of its own (``env``...) and other servers kept.
    An entry with a ``url`` (the server over HTTP, as the user chose) is left as it is:
    ``entry``'s command beside it would make one entry of two transports."""
    data = load_json(text, where)
    servers = _table(data, key, where)
    current = servers.get(name)
    if isinstance(current, dict) and "url" in current:
        return text or ""
    merged = dict(current) if isinstance(current, dict) else {}
    merged.update(entry)
    servers[name] = merged
    return _dump(data, text)


def merge_hooks(text: str | None, where: str, hooks: Mapping[str, Sequence[Mapping[str, Any]]],
                *, grouped: bool, top: Mapping[str, Any] | None = None) -> str:
    """Our hooks set under ``"hooks"``: each event's entries of ours replaced by
    ``hooks[event]``, everyone else's kept in place.

    ``grouped``: Claude Code and Codex nest commands in matcher groups
    (``{"matcher": ..., "hooks": [{"command": ...}]}``); Cursor and VS Code list the
    commands themselves. ``top``: keys the file must have (Cursor's ``version``)."""
    data = load_json(text, where)
    for field, value in (top or {}).items():
        data.setdefault(field, value)
    table = _table(data, "hooks", where)
    for event, ours in hooks.items():
        entries = table.get(event, [])
        if not isinstance(entries, list):
            raise ValidationError(f"{where}: hooks.{event} is {_kind(entries)}, not an array")
        if grouped:
            kept = [g for g in (_without_ours(e) for e in entries) if g is not None]
        else:
            kept = [e for e in entries if not (isinstance(e, dict) and is_ours(e.get("command")))]
        table[event] = [*kept, *ours]
    return _dump(data, text)


def _without_ours(group: Any) -> Any:
    """A matcher group without our commands; None when nothing else was in it."""
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return group
    others = [h for h in group["hooks"] if not (isinstance(h, dict) and is_ours(h.get("command")))]
    if len(others) == len(group["hooks"]):
        return group
    return {**group, "hooks": others} if others else None


# --------------------------------------------------------------------------- TOML


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def toml_server(text: str | None, where: str, name: str, command: str,
                args: Sequence[str]) -> str:
    """``[mcp_servers.NAME]`` with ``command`` and ``args`` set, as text: the table's
    other keys, its subtables and the rest of the file (comments too) kept. A table with
    a ``url`` (the server over HTTP) is left as it is, as ``merge_server`` leaves one.

    The edit is made line by line, then checked: the file must parse to what it did
    with only our two keys set. A line inside a multi-line string that reads like a
    header or one of our keys would otherwise be edited as one."""
    text = text or ""
    try:
        before = _toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"{where} is not valid TOML: {exc}") from None
    servers = before.get("mcp_servers")
    current = servers.get(name) if isinstance(servers, dict) else None
    if isinstance(current, dict) and "url" in current:
        return text
    by_hand = f"set its command to {command!r} and args to {list(args)!r} by hand"
    lines = text.splitlines(keepends=True)
    key = re.escape(name)  # bare, a basic string or a literal string
    header = re.compile(rf"^\s*\[\s*mcp_servers\s*\.\s*(?:{key}|\"{key}\"|'{key}')"
                        r"\s*\]\s*(?:#.*)?$")
    set_lines = [f"command = {_toml_string(command)}\n",
                 f"args = [{', '.join(_toml_string(a) for a in args)}]\n"]
    at = next((i for i, line in enumerate(lines)
               if header.match(line) and _opens_table(lines, i, name)), None)
    if at is None:
        if current is not None:
            raise ValidationError(
                f"{where} defines mcp_servers.{name} in a form vmem init does not edit (an "
                f"inline table or dotted keys): {by_hand}")
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        gap = ["\n"] if lines and lines[-1].strip() else []
        lines += [*gap, f"[mcp_servers.{name}]\n", *set_lines]
    else:
        if not lines[at].endswith("\n"):  # the header is the file's last line
            lines[at] += "\n"
        end = next((i for i in range(at + 1, len(lines)) if lines[i].lstrip().startswith("[")),
                   len(lines))
        body = [line for line in lines[at + 1:end]
                if not re.match(r"^\s*(?:command|args)\s*=", line)]
        lines[at + 1:end] = [*set_lines, *body]
    result = "".join(lines)
    ours = {**(current if isinstance(current, dict) else {}),
            "command": command, "args": list(args)}
    expected = {**before, "mcp_servers": {**(servers if isinstance(servers, dict) else {}),
                                          name: ours}}
    try:
        after = _toml(result)
    except tomllib.TOMLDecodeError:
        after = None
    if after != expected:
        raise ValidationError(
            f"{where}: vmem init cannot set [mcp_servers.{name}] there without changing "
            "other lines (a value spread over several lines, or a multi-line string with "
            f"a line that reads like a table header or a command or args key): {by_hand}")
    return result


def _toml(text: str) -> dict[str, Any]:
    """TOML parsed for comparing, floats kept as written (NaN is never equal to itself)."""
    return tomllib.loads(text, parse_float=str)


#: A key no configuration has, put after a header to see where it lands.
_PROBE = "__vmem_init_probe__"


def _opens_table(lines: Sequence[str], at: int, name: str) -> bool:
    """Whether line ``at`` opens ``[mcp_servers.NAME]``, not a line inside a multi-line
    string that reads like it: a key put after it then lands in that table."""
    line = lines[at] if lines[at].endswith("\n") else lines[at] + "\n"
    try:
        probed = _toml("".join([*lines[:at], line, f"{_PROBE} = 1\n", *lines[at + 1:]]))
    except tomllib.TOMLDecodeError:
        return False
    servers = probed.get("mcp_servers")
    table = servers.get(name) if isinstance(servers, dict) else None
    return isinstance(table, dict) and _PROBE in table


# --------------------------------------------------------------------------- markdown


def markdown_block(text: str | None, body: str, *, preamble: str = "") -> str:
    """Our block of ``body`` in a markdown file: replaced where it is, else appended
    (a new file starts with ``preamble``, e.g. front matter)."""
    block = f"{BLOCK_BEGIN}\n{body.rstrip()}\n{BLOCK_END}\n"
    if text is None:
        return preamble + block
    if _BLOCK.search(text):
        return _BLOCK.sub(lambda _: block, text, count=1)
    if not text.strip():
        return text + block
    separator = "\n" if text.endswith("\n") else "\n\n"
    return text + separator + block if not text.endswith("\n\n") else text + block


def parse_text(kind: str) -> Callable[[str | None], Any]:
    """How to compare two versions of a file of this kind for meaning, not layout:
    JSON and TOML parsed, markdown as our block."""

    def as_json(text: str | None) -> Any:
        return load_json(text, "the file")

    def as_toml(text: str | None) -> Any:
        try:
            return tomllib.loads(text or "")
        except tomllib.TOMLDecodeError as exc:
            raise ValidationError(f"not valid TOML: {exc}") from None

    def as_markdown(text: str | None) -> Any:
        found = _BLOCK.search(text or "")
        return found.group(0).rstrip("\n") if found else None

    return {"json": as_json, "toml": as_toml, "markdown": as_markdown}[kind]
