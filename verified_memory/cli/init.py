"""``vmem init CLIENT...``: wire verified memory into coding agents' clients (the work is
``verified_memory.setup``; this parses, prints and picks the exit code)."""

from __future__ import annotations

import shutil
import sys
from typing import TYPE_CHECKING

import click

from verified_memory.errors import ValidationError

if TYPE_CHECKING:
    from verified_memory.cli.env import Env
    from verified_memory.setup import Change, Wiring

__all__ = ["init"]

CLIENT_CHOICES = ("claude-code", "codex", "cursor", "vscode")
_HINTS = {
    "claude-code": "restart Claude Code in this project, and approve the project's MCP "
                   "server when it asks",
    "codex": "Codex reads .codex/ in trusted projects: trust this one, then start a new "
             "session",
    "cursor": "reload Cursor's window, then enable verified-memory under MCP if it is off",
    "vscode": "open .vscode/mcp.json and start the server; hooks need VS Code's agent "
              "hooks (Preview)",
}


@click.command("init")
@click.argument("clients", nargs=-1, type=click.Choice(CLIENT_CHOICES), metavar="CLIENT...")
@click.option("--dry-run", is_flag=True, help="Print what would change, as a diff; write "
                                              "nothing.")
@click.option("--check", "check_only", is_flag=True,
              help="Say what is wired, client by client (every client when none is named); "
                   "write nothing. Exit 1 when something is missing or outdated.")
@click.option("--command", default="vmem", show_default=True, metavar="PROGRAM",
              help="How clients start vmem: a name on their PATH, or a full path (e.g. the "
                   "vmem of a virtualenv).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.pass_context
def init(ctx: click.Context, clients: tuple[str, ...], dry_run: bool, check_only: bool,
         command: str, as_json: bool) -> None:
    """Wire verified memory into a coding agent's client, in this project: the MCP server,
    the session hooks the client has, and the memory rules in its rules file. Existing
    files are merged into, not replaced: other servers, hooks and text are kept.

    \b
    vmem init claude-code           # .mcp.json, .claude/settings.json hooks, CLAUDE.md
    vmem init codex                 # .codex/config.toml, .codex/hooks.json, AGENTS.md
    vmem init cursor vscode         # .cursor/..., .vscode/mcp.json, .github/...
    vmem init claude-code --dry-run # the diff, nothing written
    vmem init --check               # what is wired
    """
    from verified_memory import setup
    from verified_memory.cli.render import Output

    env: Env = ctx.find_root().obj
    env.out = Output(as_json)
    if dry_run and check_only:
        raise click.UsageError("--dry-run and --check do not go together")
    if not command.strip():
        raise click.UsageError("--command must name a program")
    root = env.working_copy
    if root is None:
        raise ValidationError(f"{env.directory} is not inside a git working copy: run vmem "
                              "init in your project (or pass -C DIR)")
    if check_only:
        _check(env, setup.check(root, clients or setup.CLIENTS, command=command),
               named=bool(clients))
        return
    if not clients:
        raise click.UsageError(f"name the client(s) to wire: {', '.join(CLIENT_CHOICES)}")
    changes = setup.plan(root, clients, command=command)
    if dry_run:
        _show(env, changes, written=False)
        return
    setup.write(root, changes)
    _show(env, changes, written=True)
    _notes(env, clients, command)


def _status(change: Change) -> str:
    return "created" if change.old is None else "updated" if change.changed else "unchanged"


def _show(env: Env, changes: list[Change], *, written: bool) -> None:
    if env.out.as_json:
        env.out.json([{"path": c.path, "status": _status(c),
                       "parts": [f"{p.client}: {p.what}" for p in c.parts],
                       **({} if written else {"diff": c.diff()})} for c in changes])
        return
    if not written:
        diffs = [c.diff() for c in changes if c.changed]
        sys.stdout.write("".join(diffs))
        if not diffs:
            click.echo("vmem: nothing to change: everything is wired", err=True)
        return
    for change in changes:
        what = ", ".join(dict.fromkeys(f"{p.client} {p.what}" for p in change.parts))
        click.echo(f"{_status(change):9} {change.path} ({what})")


def _notes(env: Env, clients: tuple[str, ...], command: str) -> None:
    from verified_memory.sources.discovery import no_repo_named, repo_from_remote

    if shutil.which(command) is None:
        click.echo(f"vmem: note: {command!r} is not on this PATH; clients start it by that "
                   "name: put vmem on their PATH, or re-run with --command /path/to/vmem",
                   err=True)
    if env.working_copy is not None and repo_from_remote(env.working_copy) is None:
        click.echo(f"vmem: note: {no_repo_named(env.working_copy)}, so the server and hooks "
                   "cannot tell the repository: point origin at the hosted repository (git "
                   "remote add origin URL, or git remote set-url origin URL)", err=True)
    for client in dict.fromkeys(clients):
        click.echo(f"vmem: {client}: {_HINTS[client]}", err=True)


def _check(env: Env, wiring: list[Wiring], *, named: bool) -> None:
    by_client: dict[str, list[Wiring]] = {}
    for w in wiring:
        by_client.setdefault(w.client, []).append(w)
    considered = {c: ws for c, ws in by_client.items()
                  if named or any(w.status != "missing" for w in ws)}
    ok = bool(considered) and all(w.status == "wired" for ws in considered.values()
                                  for w in ws)
    if env.out.as_json:
        env.out.json({"ok": ok, "parts": [w.to_dict() for w in wiring]})
    else:
        for client, ws in by_client.items():
            wired = sum(1 for w in ws if w.status == "wired")
            if client not in considered:
                click.echo(f"{client}: not set up (vmem init {client})")
                continue
            click.echo(f"{client}: {wired} of {len(ws)} wired")
            for w in ws:
                detail = f": {w.detail}" if w.detail else ""
                click.echo(f"  {w.status:10} {w.what:14} {w.path}{detail}")
        if not considered:
            click.echo("vmem: nothing is wired here: run vmem init CLIENT", err=True)
        elif not ok:
            click.echo("vmem: some parts are missing or outdated: run vmem init "
                       + " ".join(c for c, ws in considered.items()
                                  if any(w.status != "wired" for w in ws)), err=True)
    if not ok:
        sys.exit(1)
