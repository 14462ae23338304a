"""What ``vmem init`` wires into each client, and where: the files of a project.

- claude-code: the MCP server in ``.mcp.json`` (``mcpServers``); SessionStart,
  UserPromptSubmit and Stop hooks in ``.claude/settings.json``; the rules in ``CLAUDE.md``.
- codex: ``[mcp_servers.verified-memory]`` in ``.codex/config.toml``; the same three hooks
  in ``.codex/hooks.json``; the rules in ``AGENTS.md``.
- cursor: ``.cursor/mcp.json`` (``mcpServers``); a sessionStart hook in
  ``.cursor/hooks.json``; the rules in ``.cursor/rules/verified-memory.mdc``.
- vscode: ``.vscode/mcp.json`` (``servers``, ``"type": "stdio"``); a SessionStart hook in
  ``.github/hooks/verified-memory.json``; the rules in ``.github/copilot-instructions.md``.

Cursor and VS Code may start the server outside the project, so their entries pass
``-C ${workspaceFolder}`` (both expand it); Claude Code and Codex start it in the project.
Claude Code's hook commands name ``$CLAUDE_PROJECT_DIR``; the other clients' hooks get
the project in their input (``cwd``, ``workspace_roots``), which ``vmem hook`` reads.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from verified_memory.setup.files import (
    is_ours,
    load_json,
    markdown_block,
    merge_hooks,
    merge_server,
    parse_text,
    toml_server,
)

__all__ = ["CLIENTS", "SERVER_NAME", "Part", "parts_for"]

SERVER_NAME = "verified-memory"
CLIENTS = ("claude-code", "codex", "cursor", "vscode")
Kind = Literal["json", "toml", "markdown"]
#: Seconds a client waits for a hook: the pass's 5 s, plus starting Python and the store.
SESSION_TIMEOUT = 15
PROMPT_TIMEOUT = 10


@dataclass(frozen=True, slots=True)
class Part:
    """One thing wired into one file of a client."""

    client: str
    what: str  # "MCP server", "session hooks", "memory rules"
    path: str  # relative to the project's root, with /
    kind: Kind
    update: Callable[[str | None, str], str]  # (text or None, where) -> new text
    present: Callable[[str | None], bool]  # is an entry of ours there at all?

    def same(self, a: str | None, b: str | None) -> bool:
        """The two texts mean the same (layout aside)."""
        parse = parse_text(self.kind)
        return bool(parse(a) == parse(b))


def _server_part(client: str, path: str, key: str, entry: dict[str, Any]) -> Part:
    def update(text: str | None, where: str) -> str:
        return merge_server(text, where, key, SERVER_NAME, entry)

    def present(text: str | None) -> bool:
        servers = load_json(text, path).get(key)
        return isinstance(servers, dict) and SERVER_NAME in servers

    return Part(client, "MCP server", path, "json", update, present)


def _hooks_part(client: str, path: str, hooks: dict[str, list[dict[str, Any]]], *,
                grouped: bool, top: dict[str, Any] | None = None) -> Part:
    def update(text: str | None, where: str) -> str:
        return merge_hooks(text, where, hooks, grouped=grouped, top=top)

    def present(text: str | None) -> bool:
        table = load_json(text, path).get("hooks")
        return isinstance(table, dict) and any(_commands_of_ours(list(table.values())))

    return Part(client, "session hooks", path, "json", update, present)


def _commands_of_ours(value: object) -> list[str]:
    if isinstance(value, dict):
        found = [value["command"]] if is_ours(value.get("command")) else []
        return found + _commands_of_ours(list(value.values()))
    if isinstance(value, list | tuple):
        return [c for item in value for c in _commands_of_ours(item)]
    return []


def _rules_part(client: str, path: str, rules: str, preamble: str = "") -> Part:
    def update(text: str | None, where: str) -> str:
        return markdown_block(text, rules, preamble=preamble)

    def present(text: str | None) -> bool:
        return parse_text("markdown")(text) is not None

    return Part(client, "memory rules", path, "markdown", update, present)


def _toml_part(client: str, path: str, command: str, args: Sequence[str]) -> Part:
    def update(text: str | None, where: str) -> str:
        return toml_server(text, where, SERVER_NAME, command, args)

    def present(text: str | None) -> bool:
        servers = parse_text("toml")(text).get("mcp_servers")
        return isinstance(servers, dict) and SERVER_NAME in servers

    return Part(client, "MCP server", path, "toml", update, present)


def _grouped(matcher: str | None, command: str, timeout: int) -> dict[str, Any]:
    group: dict[str, Any] = {"matcher": matcher} if matcher else {}
    group["hooks"] = [{"type": "command", "command": command, "timeout": timeout}]
    return group


def _three_hooks(run: Callable[[str], str],
                 start_matcher: str) -> dict[str, list[dict[str, Any]]]:
    """SessionStart, UserPromptSubmit and Stop in matcher groups (Claude Code, Codex);
    ``run(event)`` is the command for an event."""
    return {
        "SessionStart": [_grouped(start_matcher, run("session-start"), SESSION_TIMEOUT)],
        "UserPromptSubmit": [_grouped(None, run("prompt"), PROMPT_TIMEOUT)],
        "Stop": [_grouped(None, run("stop"), PROMPT_TIMEOUT)],
    }


def parts_for(client: str, command: str, rules: str) -> list[Part]:
    """What ``vmem init CLIENT`` wires, running vmem as ``command``; ``rules`` is the
    text of the memory rules."""
    vmem = shlex.quote(command)
    if client == "claude-code":
        return [
            _server_part(client, ".mcp.json", "mcpServers",
                         {"command": command, "args": ["mcp"]}),
            _hooks_part(client, ".claude/settings.json", _three_hooks(
                lambda event: f'{vmem} -C "$CLAUDE_PROJECT_DIR" hook {event} --client '
                              "claude-code", "startup|clear|compact"), grouped=True),
            _rules_part(client, "CLAUDE.md", rules),
        ]
    if client == "codex":
        return [
            _toml_part(client, ".codex/config.toml", command, ["mcp"]),
            _hooks_part(client, ".codex/hooks.json", _three_hooks(
                lambda event: f"{vmem} hook {event} --client codex", "startup|clear"),
                grouped=True),
            _rules_part(client, "AGENTS.md", rules),
        ]
    if client == "cursor":
        return [
            _server_part(client, ".cursor/mcp.json", "mcpServers",
                         {"command": command, "args": ["-C", "${workspaceFolder}", "mcp"]}),
            _hooks_part(client, ".cursor/hooks.json", {"sessionStart": [
                {"command": f"{vmem} hook session-start --client cursor"}]},
                grouped=False, top={"version": 1}),
            _rules_part(client, ".cursor/rules/verified-memory.mdc", rules, preamble=(
                "---\ndescription: How to use verified memory: verify before use, store "
                "durable conventions with citations, fix what is wrong\nalwaysApply: true\n"
                "---\n\n")),
        ]
    if client == "vscode":
        return [
            _server_part(client, ".vscode/mcp.json", "servers",
                         {"type": "stdio", "command": command,
                          "args": ["-C", "${workspaceFolder}", "mcp"]}),
            _hooks_part(client, ".github/hooks/verified-memory.json", {"SessionStart": [
                {"type": "command", "command": f"{vmem} hook session-start --client vscode",
                 "timeout": SESSION_TIMEOUT}]}, grouped=False),
            _rules_part(client, ".github/copilot-instructions.md", rules),
        ]
    raise ValueError(f"unknown client {client!r}")
