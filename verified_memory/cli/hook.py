"""``vmem hook EVENT``: what a coding agent's client runs at session start, when a prompt
is submitted, and when the agent stops (``verified_memory.hooks`` decides what to say).

The client's JSON arrives on stdin; the answer, shaped for ``--client``, goes to stdout,
or nothing when there is nothing to say. Reading code is one pass under the context time
limit (5 s). A hook must never block the user's prompt or the agent: a usage error here
exits 1 (a non-blocking hook error), never 2, which Claude Code and Codex read as "block".
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

import click
from click.core import ParameterSource

from verified_memory.errors import ValidationError

__all__ = ["hook", "hook_usage_error"]


class _HookUsageError(click.UsageError):
    """Exits 1, a non-blocking hook error (see the module docstring), and says so in one
    line: clients show a hook's stderr as its error, where click's usage block of three
    lines would bury the one that matters."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"vmem: error: {self.format_message().rstrip('.')}; see vmem hook --help",
                   file=file, err=file is None)


def hook_usage_error(exc: click.UsageError) -> click.UsageError:
    """``exc`` as the hook's usage errors are: exit 1, one line (an option given before
    ``hook``, such as ``-C`` or ``--time-limit``, is parsed by the group, not here)."""
    return _HookUsageError(exc.format_message(), exc.ctx)


class _NeverBlocks(click.Command):
    """A command whose usage errors exit 1, not click's 2 (see the module docstring)."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            raise hook_usage_error(exc) from exc


@click.command("hook", cls=_NeverBlocks)
@click.argument("event", type=click.Choice(["session-start", "prompt", "stop"]))
@click.option("--client", type=click.Choice(["claude-code", "codex", "cursor", "vscode"]),
              default="claude-code", show_default=True,
              help="Whose hook this is: what its input looks like and what it expects back.")
@click.option("--repo", metavar="OWNER/NAME",
              help="Repository (default: the origin remote of the working copy).")
@click.option("--budget", type=click.IntRange(300, 1_000_000), metavar="TOKENS",
              help="Most tokens the memories may take [default: adapts to how many "
                   "memories the repository has: 500 to 3,000 at session start, 300 to "
                   "1,100 for a prompt].")
@click.option("--limit", type=click.IntRange(1, 200),
              help="Most memories to verify [default: adapts, 10 to 50 at session start, "
                   "5 to 10 for a prompt].")
@click.option("--hydration", type=click.Choice(["summary", "full", "files"]),
              help="How much of each memory [default: summary at session start, full for "
                   "a prompt].")
@click.pass_context
def hook(ctx: click.Context, event: str, client: str, repo: str | None, budget: int | None,
         limit: int | None, hydration: str | None) -> None:
    """Answer a client's session hook, its JSON input read from stdin.

    \b
    session-start  the repository's verified memories (SessionStart)
    prompt         the verified memories relevant to the prompt (UserPromptSubmit)
    stop           a reminder to store what was learned, when files changed since the
                   last memory was stored (Stop)

    Clients: claude-code and codex have all three; cursor and vscode have session-start.
    `vmem init CLIENT` wires them. Memories are verified before they are shown, by the
    ref rule (a verdict only at the main line's tip; stderr says which).

    \b
    echo '{"prompt": "raise the retry budget"}' | vmem hook prompt --client claude-code
    """
    from verified_memory import hooks
    from verified_memory.cli.env import Env, running, say, tell_not_checked
    from verified_memory.limits import IMPORT_LINE_MAX, load_json, read_bounded

    chosen = cast(hooks.Client, client)
    when = cast(hooks.Event, event)
    if when not in hooks.SUPPORTED[chosen]:
        raise ValidationError(f"{client} has no {event} hook that can carry what vmem says "
                              f"(its hooks here: {', '.join(sorted(hooks.SUPPORTED[chosen]))})")
    text = "" if sys.stdin.isatty() else read_bounded(sys.stdin, IMPORT_LINE_MAX,
                                                      "the hook's input on stdin")
    given = hooks.HookInput.parse(load_json(text, "the hook's input on stdin")
                                  if text.strip() else None)
    env: Env = ctx.find_root().obj
    root = ctx.find_root()
    if given.cwd is not None and root.get_parameter_source("directory") is ParameterSource.DEFAULT:
        env = Env(env.db, Path(given.cwd).resolve(), time_limit=env.time_limit)
    if when == "stop":
        reminder = hooks.stop_reminder(given)
        if reminder is not None:
            env.out.json(hooks.output(chosen, when, reminder))
        return
    name = env.repo(repo)
    if env.missing_store() is not None:
        return  # nothing stored yet: nothing to say (and no store created)
    unborn = env.no_commits(name)
    if unborn is not None:
        say(f"vmem: {unborn}")  # as for no memories: nothing injected, nothing changed
        return
    ref = env.ref("HEAD")
    with running(env, kind="context") as service:
        if when == "session-start":
            context = hooks.session_context(service, name, ref=ref, budget=budget,
                                            limit=limit, hydration=hydration or "summary")
        else:
            found = hooks.prompt_context(service, name, given.prompt or "", ref=ref,
                                         budget=budget, limit=limit,
                                         hydration=hydration or "full")
            if found is None:
                return  # nothing relevant: say nothing, verify nothing
            context = found
    if context.scope is not None:
        say(f"vmem: {context.scope.why}")
    env.out.json(hooks.output(chosen, when, context.markdown))
    tell_not_checked(env, context.left_out, len(context.memories) + len(context.left_out))
