"""`vmem init`: each client's real file layout, merged into without clobbering; the dry
run's diff; `--check`; a file that cannot be edited stops the run with nothing written;
and what is written works (the hook commands run, the MCP entry starts a server)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import mcp
import pytest
from mcp import StdioServerParameters

from tests.gitrepo import GitRepo
from verified_memory import LocalGitSource, MemoryService
from verified_memory.cli import main
from verified_memory.prompt import prompt_file
from verified_memory.setup import check, plan
from verified_memory.setup.files import BLOCK_BEGIN, BLOCK_END
from verified_memory.store.sqlite import SQLiteStore

NET = "MAX_RETRIES = 3\nTIMEOUT = 10\n"
RULES = prompt_file("memory_rules")
BIN = str(Path(sys.executable).parent)

# Files as the clients write them (the layouts of their documentation), with someone
# else's servers, hooks and settings in them.
CLAUDE_SETTINGS = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "permissions": {"allow": ["Bash(npm run lint)", "Bash(npm run test:*)"],
                    "deny": ["Read(./.env)"]},
    "env": {"NODE_ENV": "development"},
    "hooks": {
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [
            {"type": "command", "command": "npx prettier --write \"$CLAUDE_FILE_PATHS\""}]}],
        "SessionStart": [{"matcher": "startup", "hooks": [
            {"type": "command", "command": "echo hello"},
            # the README's earlier wiring: replaced, not doubled
            {"type": "command", "command": "vmem -C \"$CLAUDE_PROJECT_DIR\" context --hook "
                                           "claude-code --hydration summary --budget 1500"}]}],
    },
}
CLAUDE_MCP = {"mcpServers": {
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
    "verified-memory": {"command": "old-vmem", "args": ["mcp"],
                        "env": {"VMEM_DATABASE_URL": "${VMEM_DATABASE_URL}"}},
}}
CODEX_CONFIG = """\
# Codex, project settings (a trusted project)
model = "gpt-5-codex"
approval_policy = "on-request"

[mcp_servers.context7]
command = "npx"
args = ["-y", "@upstash/context7-mcp"]

[mcp_servers.verified-memory]
command = "old-vmem"  # a path that moved
startup_timeout_sec = 20

[mcp_servers.verified-memory.env]
VMEM_DATABASE_URL = "postgresql://db.internal/memories"
"""
CODEX_HOOKS = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
    {"type": "command", "command": "python3 .codex/hooks/guard.py", "timeout": 5}]}]}}
CURSOR_MCP = {"mcpServers": {"context7": {"url": "https://mcp.context7.com/mcp"},
                             "postgres": {"command": "npx", "args": ["-y", "pg-mcp"],
                                          "env": {"DATABASE_URL": "${env:DATABASE_URL}"}}}}
CURSOR_HOOKS = {"version": 1, "hooks": {"afterFileEdit": [{"command": "./hooks/format.sh"}]}}
VSCODE_MCP = {"inputs": [{"type": "promptString", "id": "api-key", "description": "API key",
                          "password": True}],
              "servers": {"fetch": {"type": "stdio", "command": "uvx",
                                    "args": ["mcp-server-fetch"]}}}
VSCODE_JSONC = """{
  // servers for this workspace
  "servers": {
    "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"]},
  }
}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    repo = GitRepo.project(tmp_path / "app", {"app/net.py": NET},
                           origin="https://github.com/acme/app.git")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'memory.db'}")
    return repo


def write_json(root: Path, relative: str, data: Any, indent: int = 2) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent) + "\n")


def read_json(root: Path, relative: str) -> Any:
    return json.loads((root / relative).read_text())


def vmem(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def block(text: str) -> str:
    return text.split(BLOCK_BEGIN + "\n", 1)[1].split("\n" + BLOCK_END, 1)[0]


# --------------------------------------------------------------------------- clients


def test_claude_code_merges_into_its_files(project: GitRepo,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = project.path
    write_json(root, ".claude/settings.json", CLAUDE_SETTINGS, indent=4)
    write_json(root, ".mcp.json", CLAUDE_MCP)
    (root / "CLAUDE.md").write_text("# App\n\nUse pnpm, never npm.\n")
    code, out, err = vmem(capsys, "init", "claude-code")
    assert code == 0, err
    assert out.splitlines() == [
        "updated   .mcp.json (claude-code MCP server)",
        "updated   .claude/settings.json (claude-code session hooks)",
        "updated   CLAUDE.md (claude-code memory rules)",
    ]
    servers = read_json(root, ".mcp.json")["mcpServers"]
    assert servers["github"] == CLAUDE_MCP["mcpServers"]["github"]
    assert servers["verified-memory"] == {"command": "vmem", "args": ["mcp"],
                                          "env": {"VMEM_DATABASE_URL": "${VMEM_DATABASE_URL}"}}
    settings_text = (root / ".claude/settings.json").read_text()
    assert settings_text.startswith('{\n    "$schema"')  # its 4-space indentation kept
    settings = json.loads(settings_text)
    for key in ("$schema", "permissions", "env"):
        assert settings[key] == CLAUDE_SETTINGS[key]
    hooks = settings["hooks"]
    assert hooks["PostToolUse"] == CLAUDE_SETTINGS["hooks"]["PostToolUse"]  # type: ignore[index]
    theirs, ours = hooks["SessionStart"]
    assert theirs == {"matcher": "startup", "hooks": [{"type": "command",
                                                       "command": "echo hello"}]}
    assert ours["matcher"] == "startup|clear|compact"
    assert ours["hooks"] == [{"type": "command", "timeout": 15, "command":
                              'vmem -C "$CLAUDE_PROJECT_DIR" hook session-start '
                              "--client claude-code"}]
    assert [g["hooks"][0]["command"].split()[4] for g in
            (hooks["UserPromptSubmit"][0], hooks["Stop"][0])] == ["prompt", "stop"]
    claude_md = (root / "CLAUDE.md").read_text()
    assert claude_md.startswith("# App\n\nUse pnpm, never npm.\n\n" + BLOCK_BEGIN)
    assert block(claude_md) == RULES.rstrip()
    before = snapshot(root)
    code, out, _ = vmem(capsys, "init", "claude-code")  # again: nothing moves
    assert code == 0
    assert all(line.startswith("unchanged") for line in out.splitlines())
    assert snapshot(root) == before


def test_codex_config_toml_keeps_comments_and_its_own_keys(
        project: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    root = project.path
    (root / ".codex").mkdir()
    (root / ".codex/config.toml").write_text(CODEX_CONFIG)
    write_json(root, ".codex/hooks.json", CODEX_HOOKS)
    (root / "AGENTS.md").write_text("# Agents\n\nRun `make check` before you finish.")
    code, _, err = vmem(capsys, "init", "codex")
    assert code == 0, err
    text = (root / ".codex/config.toml").read_text()
    assert text.startswith("# Codex, project settings (a trusted project)\n")
    config = tomllib.loads(text)
    assert config["model"] == "gpt-5-codex"
    assert config["mcp_servers"]["context7"] == {"command": "npx",
                                                 "args": ["-y", "@upstash/context7-mcp"]}
    assert config["mcp_servers"]["verified-memory"] == {
        "command": "vmem", "args": ["mcp"], "startup_timeout_sec": 20,
        "env": {"VMEM_DATABASE_URL": "postgresql://db.internal/memories"}}
    hooks = read_json(root, ".codex/hooks.json")["hooks"]
    assert hooks["PreToolUse"] == CODEX_HOOKS["hooks"]["PreToolUse"]
    assert hooks["SessionStart"][0]["hooks"][0]["command"] == \
        "vmem hook session-start --client codex"
    assert set(hooks) == {"PreToolUse", "SessionStart", "UserPromptSubmit", "Stop"}
    agents = (root / "AGENTS.md").read_text()
    assert agents.startswith("# Agents\n\nRun `make check` before you finish.\n\n" + BLOCK_BEGIN)
    # A new config.toml, and one that writes the table inline: refused, nothing written.
    (root / ".codex/config.toml").unlink()
    assert vmem(capsys, "init", "codex")[0] == 0
    assert tomllib.loads((root / ".codex/config.toml").read_text()) == {
        "mcp_servers": {"verified-memory": {"command": "vmem", "args": ["mcp"]}}}
    (root / ".codex/config.toml").write_text(
        'mcp_servers = { verified-memory = { command = "vmem" } }\n')
    (root / "AGENTS.md").unlink()
    before = snapshot(root)
    code, out, err = vmem(capsys, "init", "codex")
    assert (code, out) == (1, "")
    assert err.startswith("vmem: error: .codex/config.toml defines mcp_servers.verified-memory "
                          "in a form vmem init does not edit")
    assert snapshot(root) == before  # not even AGENTS.md, which could have been written


def test_cursor_files(project: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    root = project.path
    write_json(root, ".cursor/mcp.json", CURSOR_MCP)
    write_json(root, ".cursor/hooks.json", CURSOR_HOOKS)
    (root / ".cursor/rules").mkdir()
    (root / ".cursor/rules/style.mdc").write_text("---\nalwaysApply: true\n---\nTabs.\n")
    code, _, err = vmem(capsys, "init", "cursor")
    assert code == 0, err
    servers = read_json(root, ".cursor/mcp.json")["mcpServers"]
    assert {k: servers[k] for k in CURSOR_MCP["mcpServers"]} == CURSOR_MCP["mcpServers"]
    assert servers["verified-memory"] == {"command": "vmem",
                                          "args": ["-C", "${workspaceFolder}", "mcp"]}
    assert read_json(root, ".cursor/hooks.json") == {"version": 1, "hooks": {
        "afterFileEdit": [{"command": "./hooks/format.sh"}],
        "sessionStart": [{"command": "vmem hook session-start --client cursor"}]}}
    rule = (root / ".cursor/rules/verified-memory.mdc").read_text()
    assert rule.startswith("---\ndescription: ")
    assert "\nalwaysApply: true\n---\n\n" + BLOCK_BEGIN in rule
    assert (root / ".cursor/rules/style.mdc").read_text() == "---\nalwaysApply: true\n---\nTabs.\n"


def test_vscode_files_and_jsonc_is_refused_whole(project: GitRepo,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = project.path
    write_json(root, ".vscode/mcp.json", VSCODE_MCP)
    (root / ".github").mkdir()
    (root / ".github/copilot-instructions.md").write_text("Prefer small functions.\n")
    code, _, err = vmem(capsys, "init", "vscode")
    assert code == 0, err
    config = read_json(root, ".vscode/mcp.json")
    assert config["inputs"] == VSCODE_MCP["inputs"]
    assert config["servers"]["fetch"] == VSCODE_MCP["servers"]["fetch"]  # type: ignore[index]
    assert config["servers"]["verified-memory"] == {
        "type": "stdio", "command": "vmem", "args": ["-C", "${workspaceFolder}", "mcp"]}
    assert read_json(root, ".github/hooks/verified-memory.json") == {"hooks": {
        "SessionStart": [{"type": "command", "timeout": 15,
                          "command": "vmem hook session-start --client vscode"}]}}
    instructions = (root / ".github/copilot-instructions.md").read_text()
    assert instructions.startswith("Prefer small functions.\n\n" + BLOCK_BEGIN)
    # VS Code's mcp.json may hold comments: a rewrite would lose them, so it is refused,
    # and the run writes nothing, not even the other client's files.
    (root / ".vscode/mcp.json").write_text(VSCODE_JSONC)
    before = snapshot(root)
    code, out, err = vmem(capsys, "init", "cursor", "vscode")
    assert (code, out) == (1, "")
    (line,) = err.splitlines()
    assert line.startswith("vmem: error: .vscode/mcp.json is not plain JSON (Expecting "
                           "property name enclosed in double quotes at line 2 column 3;")
    assert snapshot(root) == before


def test_line_ends_and_a_byte_order_mark_are_kept(project: GitRepo,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Files written on Windows: CRLF line ends, maybe a UTF-8 byte order mark. Before,
    the rules files and config.toml came back with every line end changed to LF (the
    whole file rewritten), and a JSON or TOML file with a mark was refused ("Unexpected
    UTF-8 BOM (decode using utf-8-sig)", "Invalid statement")."""
    root = project.path
    bom = "\ufeff"
    claude_md = "# App\r\n\r\nUse pnpm, never npm.\r\n"
    agents_md = bom + "# Agents\r\n\r\nRun `make check`.\r\n"
    config = bom + CODEX_CONFIG.replace("\n", "\r\n")
    mcp_json = bom + json.dumps(CLAUDE_MCP, indent=2).replace("\n", "\r\n") + "\r\n"
    files = {"CLAUDE.md": claude_md, "AGENTS.md": agents_md, ".codex/config.toml": config,
             ".mcp.json": mcp_json}
    (root / ".codex").mkdir()
    for name, text in files.items():
        (root / name).write_bytes(text.encode())
    code, _, err = vmem(capsys, "init", "claude-code", "codex")
    assert code == 0, err
    for name, text in files.items():
        after = (root / name).read_bytes().decode()
        assert after.startswith(bom) == text.startswith(bom), name
        assert after.count("\n") == after.count("\r\n"), name  # every line end CRLF
    for name in ("CLAUDE.md", "AGENTS.md"):
        after = (root / name).read_bytes().decode()
        assert after.startswith(files[name]), name  # their text, byte for byte
        assert block(after.replace("\r\n", "\n")) == RULES.rstrip()
    toml_after = (root / ".codex/config.toml").read_bytes().decode()
    assert toml_after.startswith(config.split("[mcp_servers.verified-memory]")[0])
    assert tomllib.loads(toml_after.removeprefix(bom))["mcp_servers"]["verified-memory"][
        "command"] == "vmem"
    servers = json.loads((root / ".mcp.json").read_bytes().decode().removeprefix(bom))
    assert servers["mcpServers"]["github"] == CLAUDE_MCP["mcpServers"]["github"]
    before = snapshot(root)
    code, out, _ = vmem(capsys, "init", "claude-code", "codex")  # again: nothing moves
    assert code == 0
    assert all(line.startswith("unchanged") for line in out.splitlines()), out
    assert snapshot(root) == before
    code, out, err = vmem(capsys, "init", "--check", "claude-code", "codex")
    assert code == 0, out + err


def test_a_link_to_a_file_of_the_project_is_edited_through(
        project: GitRepo, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """One rules file for two clients (CLAUDE.md -> AGENTS.md) was refused ("is not a
    regular file"). Now the file it points to is edited, once for both, and the link
    stays a link (a link to a file not there yet creates it); a link out of the
    project, into .git or round in a loop is still refused, with nothing written."""
    root = project.path
    (root / "AGENTS.md").write_text("# Agents\n\nRun `make check`.\n")
    (root / "CLAUDE.md").symlink_to("AGENTS.md")
    code, out, err = vmem(capsys, "init", "claude-code", "codex", "--dry-run")
    assert code == 0, err
    patched = subprocess.run(["git", "apply", "--check", "-"], input=out, text=True,
                             cwd=root, capture_output=True, check=False)
    assert patched.returncode == 0, patched.stderr
    code, out, err = vmem(capsys, "init", "claude-code", "codex")
    assert code == 0, err
    assert "updated   AGENTS.md (claude-code memory rules, codex memory rules)" in out
    assert "CLAUDE.md" not in out
    assert os.readlink(root / "CLAUDE.md") == "AGENTS.md"
    agents = (root / "AGENTS.md").read_text()
    assert agents.startswith("# Agents\n\nRun `make check`.\n\n" + BLOCK_BEGIN)
    assert agents.count(BLOCK_BEGIN) == 1
    before = snapshot(root)
    code, out, _ = vmem(capsys, "init", "claude-code", "codex")
    assert all(line.startswith("unchanged") for line in out.splitlines()), out
    assert snapshot(root) == before
    code, out, err = vmem(capsys, "init", "--check", "claude-code", "codex")
    assert code == 0, out + err
    assert "claude-code: 3 of 3 wired" in out
    (root / "CLAUDE.md").unlink()
    (root / "CLAUDE.md").symlink_to("docs/RULES.md")
    code, out, err = vmem(capsys, "init", "claude-code")
    assert code == 0, err
    assert "created   docs/RULES.md (claude-code memory rules)" in out
    assert block((root / "CLAUDE.md").read_text()) == RULES.rstrip()
    assert os.readlink(root / "CLAUDE.md") == "docs/RULES.md"
    outside = tmp_path / "notes.md"
    outside.write_text("mine\n")
    for target, why in [(outside, "leads out of the working copy"),
                        (root / ".git" / "config", "leads into .git"),
                        (root / "CLAUDE.md", "loops")]:
        git_config = (root / ".git" / "config").read_bytes()
        (root / "CLAUDE.md").unlink()
        (root / "CLAUDE.md").symlink_to(target)
        before = snapshot(root)
        code, out, err = vmem(capsys, "init", "claude-code")
        assert (code, out) == (1, ""), target
        assert err == (f"vmem: error: CLAUDE.md is a symbolic link that {why}: vmem init "
                       "edits the files of this working copy only\n")
        assert snapshot(root) == before
        assert outside.read_text() == "mine\n"
        assert (root / ".git" / "config").read_bytes() == git_config
        code, out, _ = vmem(capsys, "init", "--check", "claude-code")
        assert code == 1
        assert f"unreadable memory rules   CLAUDE.md: CLAUDE.md is a symbolic link that {why}" \
            in out


@pytest.mark.parametrize(("relative", "text", "said"), [
    (".mcp.json", "[]\n", ".mcp.json holds an array, not a JSON object"),
    (".mcp.json", '{"mcpServers": null}\n', ".mcp.json: mcpServers is null, not an object"),
    (".mcp.json", '{"mcpServers": ["x"]}\n', ".mcp.json: mcpServers is an array, not an object"),
    (".claude/settings.json", '{"hooks": {"Stop": {"command": "x"}}}\n',
     ".claude/settings.json: hooks.Stop is an object, not an array"),
])
def test_a_json_value_of_the_wrong_kind_is_named_as_json_names_it(
        project: GitRepo, capsys: pytest.CaptureFixture[str], relative: str, text: str,
        said: str) -> None:
    """Python's names for JSON's kinds ('a NoneType', 'a JSON list') said what was wrong
    in words the file does not use; hooks.Stop 'is not a list' did not say what it was."""
    (project.path / relative).parent.mkdir(exist_ok=True)
    (project.path / relative).write_text(text)
    before = snapshot(project.path)
    code, out, err = vmem(capsys, "init", "claude-code")
    assert (code, out) == (1, "")
    assert err == f"vmem: error: {said}\n"
    assert snapshot(project.path) == before


def test_a_folder_link_is_followed_only_inside_the_project(
        project: GitRepo, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A link on the way to a file (.claude -> elsewhere) was followed wherever it led,
    out of the project too (a cloned project's .claude -> ~/.claude would have wired
    every project of the user). Now it is held to what a linked file is: inside the
    working copy and outside .git. A link to a folder not there yet (which failed with
    'File exists' after the files before it were written) has the folder made."""
    root = project.path
    (root / ".claude").symlink_to("config/claude")
    code, out, err = vmem(capsys, "init", "claude-code")
    assert code == 0, err
    assert "created   config/claude/settings.json (claude-code session hooks)" in out
    assert (root / ".claude").is_symlink()
    assert "hook session-start" in (root / "config/claude/settings.json").read_text()
    elsewhere = tmp_path / "dotfiles"
    elsewhere.mkdir()
    (root / ".claude").unlink()
    (root / ".claude").symlink_to(elsewhere)
    before = snapshot(root)
    code, out, err = vmem(capsys, "init", "claude-code")
    assert (code, out) == (1, "")
    assert err == ("vmem: error: .claude/settings.json: .claude is a symbolic link that leads "
                   "out of the working copy: vmem init edits the files of this working copy "
                   "only\n")
    assert snapshot(root) == before
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize(("clients", "in_the_way", "first"), [
    (["claude-code", "cursor"], ".cursor", ".cursor/mcp.json"),
    (["vscode"], ".github/hooks", ".github/hooks/verified-memory.json"),
])
def test_a_file_where_a_folder_must_go_stops_the_run_before_anything_is_written(
        project: GitRepo, capsys: pytest.CaptureFixture[str], clients: list[str],
        in_the_way: str, first: str) -> None:
    """A file named like a client's folder (.cursor, .github/hooks) was found only when
    its folder was made: the files before it were written (claude-code wired, cursor
    not) and the error said '/abs/path/.cursor: File exists'."""
    root = project.path
    (root / in_the_way).parent.mkdir(exist_ok=True)
    (root / in_the_way).write_text("mine\n")
    before = snapshot(root)
    code, out, err = vmem(capsys, "init", *clients)
    assert (code, out) == (1, "")
    assert err == f"vmem: error: {first} cannot be written: {in_the_way} is not a folder\n"
    assert snapshot(root) == before
    assert sorted(p.name for p in root.iterdir()) == sorted([".git", "app", in_the_way.split(
        "/")[0]])
    code, out, _ = vmem(capsys, "init", "--check", *clients)
    assert code == 1
    assert f"{first}: {first} cannot be written: {in_the_way} is not a folder" in out


def test_a_server_entry_over_http_is_left_as_the_user_chose(
        project: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's other way, `claude mcp add --transport http verified-memory URL`,
    writes an entry with a url. vmem init added command and args beside it: one entry of
    two transports (and VS Code's "type": "http" became "stdio" with the url left over),
    which --check called wired. Now such an entry is left as it is."""
    root = project.path
    http = {"type": "http", "url": "http://127.0.0.1:8765/mcp"}
    write_json(root, ".mcp.json", {"mcpServers": {"verified-memory": http}})
    write_json(root, ".vscode/mcp.json", {"servers": {"verified-memory": http}})
    (root / ".codex").mkdir()
    (root / ".codex/config.toml").write_text(
        '[mcp_servers.verified-memory]\nurl = "http://127.0.0.1:8765/mcp"\n')
    before = {name: (root / name).read_text()
              for name in (".mcp.json", ".vscode/mcp.json", ".codex/config.toml")}
    code, out, err = vmem(capsys, "init", "claude-code", "vscode", "codex")
    assert code == 0, err
    assert "unchanged .mcp.json (claude-code MCP server)" in out
    assert "unchanged .vscode/mcp.json (vscode MCP server)" in out
    assert "unchanged .codex/config.toml (codex MCP server)" in out
    assert {name: (root / name).read_text() for name in before} == before
    assert (root / ".claude/settings.json").is_file()  # the rest is wired as ever
    code, out, err = vmem(capsys, "init", "--check", "claude-code", "vscode", "codex")
    assert code == 0, out + err


@pytest.mark.parametrize("header", ["[mcp_servers.verified-memory]",
                                    '[mcp_servers."verified-memory"]  # ours',
                                    "[ mcp_servers . 'verified-memory' ]"])
def test_codex_table_header_in_each_form_toml_spells_it(
        project: GitRepo, capsys: pytest.CaptureFixture[str], header: str) -> None:
    """A literal-string key ('verified-memory') was refused as 'an inline table or dotted
    keys', which it is not; now it is edited in place like the other forms."""
    (project.path / ".codex").mkdir()
    config = project.path / ".codex/config.toml"
    config.write_text(f'{header}\ncommand = "old-vmem"\nstartup_timeout_sec = 20\n')
    code, _, err = vmem(capsys, "init", "codex")
    assert code == 0, err
    assert config.read_text() == (f'{header}\ncommand = "vmem"\nargs = ["mcp"]\n'
                                  "startup_timeout_sec = 20\n")


def test_codex_header_lines_inside_a_multi_line_string_are_text(
        project: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """A line in a multi-line string that reads like our header was taken for it: init
    stopped with a Python KeyError ("could not set ... safely ('mcp_servers')"). One
    that reads like our command key, inside our table's string, was dropped from the
    string without a word. Now the first is text (the table is added after it) and the
    second is refused in words, nothing written."""
    (project.path / ".codex").mkdir()
    config = project.path / ".codex/config.toml"
    text = 'x = """\n[mcp_servers.verified-memory]\n"""\n'
    config.write_text(text)
    code, _, err = vmem(capsys, "init", "codex")
    assert code == 0, err
    assert config.read_text() == (text + '\n[mcp_servers.verified-memory]\ncommand = "vmem"\n'
                                  'args = ["mcp"]\n')
    config.write_text('[mcp_servers.verified-memory]\nnote = """\ncommand = "keep me"\n"""\n')
    before = snapshot(project.path)
    code, out, err = vmem(capsys, "init", "codex")
    assert (code, out) == (1, "")
    assert err == ("vmem: error: .codex/config.toml: vmem init cannot set "
                   "[mcp_servers.verified-memory] there without changing other lines (a "
                   "value spread over several lines, or a multi-line string with a line that "
                   "reads like a table header or a command or args key): set its command to "
                   "'vmem' and args to ['mcp'] by hand\n")
    assert snapshot(project.path) == before


# --------------------------------------------------------------------------- dry run, check


def test_dry_run_prints_the_diff_and_writes_nothing(project: GitRepo,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    root = project.path
    write_json(root, ".mcp.json", {"mcpServers": {"github": {"url": "https://x/mcp"}}})
    before = snapshot(root)
    code, out, err = vmem(capsys, "init", "claude-code", "--dry-run")
    assert code == 0, err
    assert snapshot(root) == before
    assert "--- a/.mcp.json\n+++ b/.mcp.json\n" in out
    assert '+    "verified-memory": {\n' in out
    assert "--- /dev/null\n+++ b/.claude/settings.json\n" in out
    assert "--- /dev/null\n+++ b/CLAUDE.md\n" in out
    patched = subprocess.run(["git", "apply", "--check", "-"], input=out, text=True,
                             cwd=root, capture_output=True, check=False)
    assert patched.returncode == 0, patched.stderr  # a real patch of these files
    vmem(capsys, "init", "claude-code")
    code, out, err = vmem(capsys, "init", "claude-code", "--dry-run")
    assert (code, out) == (0, "")
    assert "nothing to change" in err
    data = json.loads(vmem(capsys, "init", "claude-code", "--dry-run", "--json")[1])
    assert [(c["path"], c["status"], c["diff"]) for c in data] == [
        (".mcp.json", "unchanged", ""), (".claude/settings.json", "unchanged", ""),
        ("CLAUDE.md", "unchanged", "")]


def test_check_says_what_is_wired(project: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    root = project.path
    code, out, err = vmem(capsys, "init", "--check")
    assert code == 1
    assert "claude-code: not set up (vmem init claude-code)" in out
    assert "nothing is wired here" in err
    vmem(capsys, "init", "claude-code", "cursor")
    code, out, err = vmem(capsys, "init", "--check")
    assert code == 0, out + err
    assert "claude-code: 3 of 3 wired" in out
    assert "cursor: 3 of 3 wired" in out
    assert "codex: not set up" in out
    assert vmem(capsys, "init", "--check", "codex")[0] == 1  # named: it must be wired
    claude_md = root / "CLAUDE.md"
    claude_md.write_text(claude_md.read_text().replace("Verify before use", "Trust"))
    settings = read_json(root, ".claude/settings.json")
    del settings["hooks"]["Stop"]
    write_json(root, ".claude/settings.json", settings, indent=8)  # layout is no change
    code, out, err = vmem(capsys, "init", "--check", "--json")
    assert code == 1
    status = {(p["client"], p["what"]): p["status"] for p in json.loads(out)["parts"]}
    assert status[("claude-code", "memory rules")] == "outdated"
    assert status[("claude-code", "session hooks")] == "outdated"
    assert status[("claude-code", "MCP server")] == "wired"
    assert status[("codex", "MCP server")] == "missing"
    (root / ".cursor/mcp.json").write_text("{broken")
    wiring = {(w.client, w.what): w for w in check(root, ["cursor"])}
    assert wiring[("cursor", "MCP server")].status == "unreadable"
    assert "not plain JSON" in wiring[("cursor", "MCP server")].detail
    vmem(capsys, "init", "claude-code")
    assert "claude-code: 3 of 3 wired" in vmem(capsys, "init", "--check", "claude-code")[1]


def test_bad_invocations(project: GitRepo, capsys: pytest.CaptureFixture[str],
                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = vmem(capsys, "init")
    assert code == 2
    assert "name the client(s) to wire: claude-code, codex, cursor, vscode" in err
    code, _, err = vmem(capsys, "init", "emacs")
    assert code == 2
    assert "'emacs' is not one of" in err
    assert vmem(capsys, "init", "cursor", "--check", "--dry-run")[0] == 2
    (project.path / "CLAUDE.md").mkdir()
    code, _, err = vmem(capsys, "init", "claude-code")
    assert code == 1
    assert "CLAUDE.md is not a regular file" in err
    monkeypatch.chdir(tmp_path)
    code, _, err = vmem(capsys, "init", "cursor")
    assert code == 1
    assert "is not inside a git working copy" in err


def test_command_option_and_notes(project: GitRepo,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    project.run("remote", "remove", "origin")
    code, _, err = vmem(capsys, "init", "codex", "--command", "/opt/my tools/vmem")
    assert code == 0, err
    assert "'/opt/my tools/vmem' is not on this PATH" in err
    assert "no origin remote" in err
    assert "Codex reads .codex/ in trusted projects" in err
    config = tomllib.loads((project.path / ".codex/config.toml").read_text())
    assert config["mcp_servers"]["verified-memory"]["command"] == "/opt/my tools/vmem"
    hooks = read_json(project.path, ".codex/hooks.json")["hooks"]
    assert hooks["Stop"][0]["hooks"][0]["command"] == \
        "'/opt/my tools/vmem' hook stop --client codex"


def test_plan_chains_parts_sharing_a_file(project: GitRepo) -> None:
    changes = plan(project.path, ["codex", "codex"])
    assert [c.path for c in changes] == [".codex/config.toml", ".codex/hooks.json", "AGENTS.md"]
    assert all(c.old is None for c in changes)


# --------------------------------------------------------------------------- it works


def test_the_hooks_init_writes_run(project: GitRepo, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The commands as Claude Code and Codex run them: a shell, the hook's JSON on stdin."""
    root = project.path
    with MemoryService(SQLiteStore(tmp_path / "memory.db"), LocalGitSource(root)) as service:
        stored = service.store({"repo": "acme/app", "subject": "Retry budget", "fact":
                                "Calls retry MAX_RETRIES times.", "citations": [
                                    {"path": "app/net.py", "line_start": 1}]})
    vmem(capsys, "init", "claude-code", "codex")
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
               CLAUDE_PROJECT_DIR=str(root))
    claude = read_json(root, ".claude/settings.json")["hooks"]
    codex = read_json(root, ".codex/hooks.json")["hooks"]
    runs = [(claude["SessionStart"][-1], {"hook_event_name": "SessionStart", "source":
                                          "startup"}, "SessionStart"),
            (claude["UserPromptSubmit"][0], {"prompt": "lower the retry budget"},
             "UserPromptSubmit"),
            (codex["SessionStart"][0], {"cwd": str(root), "source": "startup"}, "SessionStart")]
    for group, payload, event in runs:
        command = group["hooks"][0]["command"]
        done = subprocess.run(["bash", "-c", command], input=json.dumps(payload), text=True,
                              env=env, cwd=tmp_path, capture_output=True, check=False,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)["hookSpecificOutput"]
        assert answer["hookEventName"] == event
        assert stored.id in answer["additionalContext"], command


def test_the_cursor_server_entry_starts_a_server(project: GitRepo,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Cursor's entry, with ${workspaceFolder} expanded as Cursor does, started from
    elsewhere: it serves this repository's tools."""
    vmem(capsys, "init", "cursor")
    entry = read_json(project.path, ".cursor/mcp.json")["mcpServers"]["verified-memory"]
    args = [a.replace("${workspaceFolder}", str(project.path)) for a in entry["args"]]
    assert entry["command"] == "vmem"
    env = {k: v for k, v in os.environ.items() if k.startswith(("GIT_", "HOME", "XDG_"))}
    env.update(VMEM_DATABASE_URL=os.environ["VMEM_DATABASE_URL"],
               PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    params = StdioServerParameters(command=str(Path(BIN) / "vmem"), args=args, cwd="/",
                                   env=env)

    async def scenario() -> Any:
        async with mcp.Client(params) as client:
            return await client.call_tool("memory_stats", {})

    result = asyncio.run(scenario())
    assert not result.is_error
    assert result.structured_content["repo"] == "acme/app"


def test_rules_block_replaced_in_place(project: GitRepo,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = project.path
    (root / "AGENTS.md").write_text(f"intro\n\n{BLOCK_BEGIN}\nold rules\n{BLOCK_END}\n\noutro\n")
    vmem(capsys, "init", "codex")
    text = (root / "AGENTS.md").read_text()
    assert text.startswith(f"intro\n\n{BLOCK_BEGIN}\n# Memory rules\n")
    assert text.endswith(f"{BLOCK_END}\n\noutro\n")
    assert "old rules" not in text
    assert text.count(BLOCK_BEGIN) == 1


def test_stdin_is_not_needed(project: GitRepo, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert vmem(capsys, "init", "vscode")[0] == 0
