"""``vmem``: the command line. Thin: parse, build library objects, call one method,
print, and turn our errors into one clear line and an exit code.

Exit codes: 0 success; 1 an error this tool reports (bad input, unknown id, conflict,
code or store unavailable); 2 a usage error (unknown option, missing argument).
"""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from verified_memory._version import __version__
from verified_memory.cli.admin import COMMANDS as ADMIN_COMMANDS
from verified_memory.cli.citations import citations
from verified_memory.cli.dashboard import dashboard
from verified_memory.cli.db import db
from verified_memory.cli.env import (
    Env,
    code_options,
    common,
    fail,
    progress,
    removed_if_failed,
    running,
    say,
    tell_not_checked,
)
from verified_memory.cli.git import git
from verified_memory.cli.hook import hook, hook_usage_error
from verified_memory.cli.init import init
from verified_memory.cli.inputs import (
    CitedFile,
    Directory,
    FileLines,
    Seconds,
    memory_input,
    parse_cite,
    settled_path,
)
from verified_memory.cli.quality import COMMANDS as QUALITY_COMMANDS
from verified_memory.cli.render import Output
from verified_memory.cli.review import review
from verified_memory.errors import VerifiedMemoryError
from verified_memory.models import Decision, Memory, Scope, Status, Stored, Verification

if TYPE_CHECKING:
    from verified_memory.service import VerificationReport

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--db", envvar="VMEM_DATABASE_URL", metavar="URL",
              help="Memory store: sqlite:///FILE, a file path, or postgresql://... "
                   "[env VMEM_DATABASE_URL; default: a SQLite file in your data directory]")
@click.option("-C", "directory", type=Directory(), default=".",
              help="Run as if started in DIR (the working copy code is read from); an "
                   "empty DIR is where vmem was started, as for git.")
@click.option("--time-limit", type=Seconds(),
              metavar="SECONDS",
              help="Most seconds a command may spend reading code; what is left unread is "
                   "reported as unverifiable. [env VMEM_CONTEXT_TIME_LIMIT (context, default "
                   "5) and VMEM_VERIFY_TIME_LIMIT (the rest, default 60)]")
@click.version_option(__version__, package_name="verified-memory")
@click.pass_context
def cli(ctx: click.Context, db: str | None, directory: Path, time_limit: float | None) -> None:
    """Verified memory for coding agents: facts about a codebase that cite its code,
    checked against the code as it is now before they are used."""
    if db is not None and not db.strip():  # `--db "$UNSET"`: never the default store
        raise click.BadParameter("is empty (an unset variable?): give a store URL, or leave "
                                 "--db out for the default store", param_hint="'--db'")
    ctx.obj = Env(db, directory.resolve(), time_limit=time_limit)


pass_env = click.make_pass_decorator(Env)
cli.add_command(citations)
cli.add_command(dashboard)
cli.add_command(db)
cli.add_command(git)
cli.add_command(review)
cli.add_command(hook)
cli.add_command(init)
for _command in (*QUALITY_COMMANDS, *ADMIN_COMMANDS):
    cli.add_command(_command)


def filter_options(f: F) -> F:
    """--category and --tag: narrow a listing (before its limit)."""
    f = click.option("--tag", help="Only memories with this tag.")(f)
    return click.option("--category",
                        help="Only memories of this category (e.g. convention).")(f)


def memory_options(f: F) -> F:
    for option in reversed([
        click.option("--subject", help="Brief topic (at most 200 characters)."),
        click.option("--fact", help="The convention or invariant learned."),
        click.option("--cite", "cites", multiple=True, metavar="PATH:START-END[@SHA]",
                     help="Code that supports the fact (repeatable)."),
        click.option("--reason", help="Why it matters: what it prevents."),
        click.option("--category", help="A category, e.g. convention, invariant."),
        click.option("--tag", "tags", multiple=True, help="A tag (repeatable)."),
        click.option("--created-by", help="Agent or person storing it."),
        click.option("--input", "input_file", metavar="FILE",
                     help="Read a JSON memory from FILE ('-' for stdin). Also read from "
                          "stdin when no --subject is given and stdin is a pipe."),
    ]):
        f = option(f)
    return f


@cli.command()
@common
@memory_options
@click.option("--ref", default="HEAD", show_default=True,
              help="Commit the citations are fingerprinted at (unless a citation has its own sha).")
@click.option("--worktree", is_flag=True, help="Fingerprint the files on disk (uncommitted).")
@pass_env
def store(env: Env, /, repo: str | None, as_json: bool, ref: str, worktree: bool,
          input_file: str | None, cites: tuple[str, ...], **flags: Any) -> None:
    """Store a memory: a subject, a fact and citations to the code that supports it.

    \b
    vmem store --subject "API version" --fact "..." --cite src/api.py:10-14
    echo '{"repo": "o/r", "subject": ..., "citations": [...]}' | vmem store
    """
    env.out = Output(as_json)
    new = memory_input(input_file, repo, lambda: env.repo(None), flags, cites)
    # a memory refused for its citations writes nothing: nor the store it would create
    with removed_if_failed(env.db), running(env, worktree=worktree, create=True) as service:
        stored = service.store(new, ref=ref)
    _tell_stored(env, stored)


def _tell_stored(env: Env, stored: Stored) -> None:
    """What storing did: stored (maybe pending, maybe conflicting), or a duplicate."""
    memory = stored.memory
    for warning in stored.warnings:
        say(f"vmem: warning: {warning}")
    if stored.conflicts:
        say(f"vmem: possible conflict: {', '.join(stored.conflicts)} cite the same code and "
            "say something else; supersede or invalidate what no longer holds")
    if env.out.as_json:
        env.out.json(stored.to_dict())
        return
    if stored.duplicate:
        message = (f"not stored twice: {memory.id} already says this about the same code "
                   "(refreshed instead)")
    else:
        count = len(memory.citations)
        message = f"stored {memory.id} ({count} citation{'s' if count != 1 else ''})"
        if memory.status is Status.PENDING:
            message += (f"; pending: category {memory.category} needs approval "
                        "(vmem approve ID, by someone else)")
    env.out.out.print(message, markup=False)


@cli.command()
@click.argument("old_id")
@common
@memory_options
@click.option("--ref", default="HEAD", show_default=True, help="Commit to fingerprint at.")
@pass_env
def supersede(env: Env, /, old_id: str, repo: str | None, as_json: bool, ref: str,
              input_file: str | None, cites: tuple[str, ...], **flags: Any) -> None:
    """Replace an active memory with a corrected one (atomically)."""
    env.out = Output(as_json)
    with running(env) as service:
        old = service.memories.get(service.resolve(old_id))
        new = memory_input(input_file, repo, lambda: old.repo, flags, cites)
        memory = service.supersede(old_id, new, ref=ref)
    if memory.status is Status.PENDING:
        env.out.done(memory, f"stored {memory.id}, pending approval: it supersedes "
                             f"{memory.supersedes} once approved, which stays active until then")
    else:
        env.out.done(memory, f"stored {memory.id}, superseding {memory.supersedes}")


@cli.command()
@common
@filter_options
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="How many memories.")
@pass_env
def recent(env: Env, repo: str | None, as_json: bool, category: str | None, tag: str | None,
           limit: int) -> None:
    """Active memories, most recently refreshed first (not verified: see `context`)."""
    env.out = Output(as_json)
    name = env.repo(repo)
    with running(env) as service:
        env.out.memories(service.get_recent(name, limit=limit, category=category, tag=tag),
                         title=f"recent in {name}")


@cli.command()
@click.argument("memory_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def show(env: Env, memory_id: str, as_json: bool) -> None:
    """Show one memory with its citations, and where it stands on the main line."""
    env.out = Output(as_json)
    with running(env) as service:
        memory = service.get(memory_id)
        standing = service.standing(memory)
        conflicts = [m.id for m in service.conflicts(memory)]
    env.out.memory(memory, standing=standing, conflicts=conflicts)


@cli.command()
@click.argument("query", required=False, default="")
@common
@click.option("--path", type=CitedFile(lines=True), metavar="FILE[:START-END]",
              help="Memories citing this file (and these lines), newest created first, "
                   "instead of a text query. A file of the whole name in the working copy "
                   "is taken as it is (src/x:5), and so is one memories cite (a file "
                   "deleted since), else a trailing :START or :START-END is a line range; "
                   "no @COMMIT (memories are found by the file they cite, at any commit).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@filter_options
@click.option("--safe", is_flag=True,
              help="Safe mode: leave out memories tagged POISON_PATH or PHANTOM_PATTERN "
                   "(with --path too), and weigh tag penalties fully in a text search's "
                   "ranking.")
@pass_env
def search(env: Env, query: str, repo: str | None, as_json: bool, path: FileLines | None,
           limit: int, category: str | None, tag: str | None, safe: bool) -> None:
    """Search memories by text (subject, fact, tags) or by the file they cite. Text
    results are ranked by full-text score minus tag penalties (COMPLETION_DRIVE,
    POISON_PATH, PHANTOM_PATTERN, UNVERIFIED_CLAIM)."""
    env.out = Output(as_json)
    name = env.repo(repo)
    if not query and not path:
        raise click.UsageError("give a QUERY or --path")
    if query and path:
        raise click.UsageError("give a QUERY or --path, not both")
    with running(env) as service:
        path = settled_path(path, service, name)
        if path:
            found = service.search_by_path(name, path.path, path.lines, limit=limit,
                                           category=category, tag=tag, safe=safe)
            env.out.memories(found, title=f"matches in {name}", when="created")
        else:
            found = service.search(name, query, limit=limit, safe=safe, category=category,
                                   tag=tag)
            env.out.memories(found, title=f"matches in {name}")


@cli.command()
@click.argument("ids", nargs=-1)
@common
@code_options
@click.option("--dry-run", is_flag=True, help="Report only: refresh or invalidate nothing.")
@click.option("--include-invalid", is_flag=True,
              help="Also re-check invalid memories; at the main line's tip, those whose "
                   "citations hold again become active (revived).")
@click.option("--include-expired", is_flag=True,
              help="Also re-check expired memories (unused too long); at the tip, those "
                   "that hold become active again.")
@click.option("--all", "list_all", is_flag=True,
              help="List every citation checked (default: the count of each outcome, then "
                   "the citations that moved, changed, are missing or could not be read; "
                   "--json always has them all).")
@pass_env
def verify(env: Env, ids: tuple[str, ...], repo: str | None, as_json: bool, ref: str,
           worktree: bool, dry_run: bool, include_invalid: bool,
           include_expired: bool, list_all: bool) -> None:
    """Check memories' citations against the code at REF (every active memory of the
    repository, or the IDS given).

    At the tip of the main line (the default branch) this is a verdict: memories that
    hold are refreshed, the others invalidated. Anywhere else (another branch, a tag,
    --worktree, --dry-run) it is a view that changes nothing stored; the first line
    says which, and why. Printed: how many citations had each outcome, the citations
    that did not simply hold (--all: every one), and what the pass changed."""
    env.out = Output(as_json)
    apply = False if dry_run else None
    ref = env.ref(ref, worktree=worktree)
    with running(env, worktree=worktree) as service:
        name = None if ids else env.repo(repo)
        if name is not None:
            say(f"vmem: {service.scope(name, ref=ref, apply=apply).why}")
        with progress(env) as shown:
            report, refused = service.verify_or_view(
                ids or None, repo=name, ref=ref, apply=apply, include_invalid=include_invalid,
                include_expired=include_expired, on_progress=shown)
    # A store that refused the verdicts: the pass is shown as the view it is, then the
    # command fails on the store.
    _show_verify(env, report, name, as_json, list_all, include_invalid)
    if refused is not None:
        raise refused


def _show_verify(env: Env, report: VerificationReport, name: str | None, as_json: bool,
                 list_all: bool, include_invalid: bool) -> None:
    if as_json:
        env.out.json(report.to_dict())
        tell_not_checked(env, report.verifications)
        return
    if name is None:  # the repositories were known only once the memories were read
        for scope in report.scopes.values():
            say(f"vmem: {scope.why}")
    rows = [(v.memory.id, _decision_cell(v), c) for v in report.verifications for c in v.checks]
    if rows:
        env.out.checks(rows, everything=list_all)
    env.out.out.print(_verify_summary(report), markup=False)
    tell_not_checked(env, report.verifications)
    _tell_stale_rules(report.stale_rules)
    skipped = [v.memory.id for v in report.verifications
               if v.memory.status is Status.INVALID and v.passed and not include_invalid]
    if skipped:
        say(f"vmem: {len(skipped)} invalid memor{'y holds' if len(skipped) == 1 else 'ies hold'}"
             " here; run with --include-invalid at the main line's tip to revive: "
             + ", ".join(skipped))


def _tell_stale_rules(memories: Sequence[Memory]) -> None:
    """One line per rules file whose promoted rules these invalidated memories no
    longer back: people take the rules out (a verification never edits the file)."""
    by_file: dict[str, list[str]] = {}
    for memory in memories:
        by_file.setdefault(memory.stale_rule or "", []).append(memory.id[:8])
    for rules_file, ids in by_file.items():
        one = len(ids) == 1
        say(f"vmem: {len(ids)} invalidated memor{'y was' if one else 'ies were'} promoted "
            f"into {rules_file}: {'its rule there is' if one else 'their rules there are'} "
            f"stale now; take {'it' if one else 'them'} out with `vmem promote ID --remove`: "
            + ", ".join(ids))


def _verify_summary(report: VerificationReport) -> str:
    """One line: what the pass found, and what it changed (nothing, in a view)."""
    text = (f"{len(report.verifications)} memories checked in {report.duration_ms:.0f} ms: "
            f"{report.count(Decision.REFRESH)} hold, {report.count(Decision.INVALIDATE)} do "
            f"not hold, {report.count(Decision.UNVERIFIED)} could not be verified")
    if not report.applies:
        return text + "; nothing stored changed (a view)"
    text += f"; {report.changed('invalidated')} invalidated"
    if report.changed("revived"):
        text += f", {report.changed('revived')} revived"
    branch = report.unmerged - report.not_in_clone
    if branch:
        text += f"; {branch} not judged (stored on a branch not merged yet)"
    if report.not_in_clone:
        text += (f"; {report.not_in_clone} not judged (their commit is not in this clone, "
                 "or GitHub could not compare it: a shallow clone? git fetch --unshallow)")
    if report.behind:
        text += (f"; {report.behind} not judged (judged at a later commit of the main line "
                 "already)")
    return text


@cli.command()
@common
@code_options
@click.option("--limit", type=click.IntRange(1, 10_000), default=20,
              show_default=True, help="Most recent memories to try.")
@click.option("--query", help="Put the memories most relevant to these words first.")
@click.option("--hydration", type=click.Choice(["summary", "full", "files"]), default="full",
              show_default=True,
              help="summary: id, subject, citations; full: plus fact and reason; files: plus "
                   "the cited code as it is now.")
@click.option("--budget", type=click.IntRange(300, 1_000_000), default=2000, show_default=True,
              help="Most tokens the context may take (estimated as characters / 4).")
@click.option("--hook", type=click.Choice(["claude-code"]),
              help="Print what this agent's session-start hook expects (JSON for Claude "
                   "Code's SessionStart hook).")
@click.option("--dry-run", is_flag=True,
              help="Check without refreshing or invalidating anything, even at the main "
                   "line's tip.")
@filter_options
@click.option("--safe", is_flag=True,
              help="With --query: weigh tag penalties fully, leave out POISON_PATH and "
                   "PHANTOM_PATTERN memories.")
@pass_env
def context(env: Env, repo: str | None, as_json: bool, ref: str, worktree: bool,
            limit: int, query: str | None, hydration: str, budget: int,
            hook: str | None, dry_run: bool, category: str | None, tag: str | None,
            safe: bool) -> None:
    """Verify the most recent memories and print those that hold, as markdown for a
    prompt (memories that fail are left out; see `verify`).

    At the tip of the main line the check is a verdict (memories that broke are
    invalidated); on another branch, a tag, --worktree or --dry-run it is a view that
    only decides what is printed. stderr says which."""
    env.out = Output(as_json)
    name = env.repo(repo)
    unborn = env.no_commits(name, worktree=worktree)
    if unborn is not None:
        say(f"vmem: {unborn}")  # nothing verified, nothing stored changes
        if as_json:
            env.out.json({"repo": name, "revision": None, "scope": None, "memories": [],
                          "markdown": "", "left_out": []})
        return
    ref = env.ref(ref, worktree=worktree)
    with running(env, worktree=worktree, kind="context") as service:
        ctx = service.context(name, ref=ref, limit=limit, query=query, hydration=hydration,
                              budget=budget, dry_run=dry_run, safe=safe, category=category,
                              tag=tag)
    if ctx.scope is not None:
        say(f"vmem: {ctx.scope.why}")
    if hook == "claude-code":
        env.out.json({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                             "additionalContext": ctx.markdown}})
    elif as_json:
        env.out.json(ctx.to_dict())
    else:
        sys.stdout.write(ctx.markdown)
    tell_not_checked(env, ctx.left_out, len(ctx.memories) + len(ctx.left_out))


@cli.command()
@click.argument("memory_id")
@click.option("--reason", required=True, help="Why the memory no longer holds.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def invalidate(env: Env, memory_id: str, reason: str, as_json: bool) -> None:
    """Mark an active memory invalid."""
    env.out = Output(as_json)
    with running(env) as service:
        memory = service.invalidate(memory_id, reason)
    env.out.done(memory, f"invalidated {memory.id}")


@cli.command()
@click.argument("memory_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def refresh(env: Env, memory_id: str, as_json: bool) -> None:
    """Mark an active memory as still useful (after checking it)."""
    env.out = Output(as_json)
    with running(env) as service:
        memory = service.refresh(memory_id)
    env.out.done(memory, f"refreshed {memory.id}")


@cli.command()
@click.argument("memory_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def applied(env: Env, memory_id: str, as_json: bool) -> None:
    """Record that a memory was used in a task (telemetry)."""
    env.out = Output(as_json)
    with running(env) as service:
        memory = service.log_applied(memory_id)
    env.out.done(memory, f"recorded: {memory.id} applied {memory.applied_count}x")


@cli.command()
@click.argument("memory_id")
@click.option("--cite", "cites", multiple=True, required=True, metavar="PATH:START-END[@SHA]",
              help="The code that supports the fact now (repeatable; replaces every "
                   "citation).")
@click.option("--ref", default="HEAD", show_default=True,
              help="Commit the new citations are fingerprinted at.")
@click.option("--reason", help="Why the citations moved (kept in the audit trail).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def recite(env: Env, memory_id: str, cites: tuple[str, ...], ref: str, reason: str | None,
           as_json: bool) -> None:
    """Point a memory at new lines, in one atomic step; an invalid memory whose fact
    still holds becomes active again.

    \b
    vmem recite 132d0c13-... --cite src/net/retry.py:40-52
    """
    env.out = Output(as_json)
    citations = [parse_cite(c, f"--cite {c}") for c in cites]
    with running(env) as service:
        memory = service.recite(memory_id, citations, ref=ref, reason=reason)
        standing = service.standing(memory)
    count = len(memory.citations)
    env.out.done(memory, f"re-cited {memory.id} ({count} citation{'s' if count != 1 else ''}, "
                         f"{memory.status.value}); {standing}")


@cli.command()
@click.argument("memory_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def history(env: Env, memory_id: str, as_json: bool) -> None:
    """The supersede chain through a memory, oldest first."""
    env.out = Output(as_json)
    with running(env) as service:
        env.out.memories(service.history(memory_id), title="history")


@cli.command()
@common
@pass_env
def stats(env: Env, repo: str | None, as_json: bool) -> None:
    """Counts by status and telemetry event, and the invalidation rate."""
    env.out = Output(as_json)
    name = env.repo(repo)
    with running(env) as service:
        stats = service.stats(name)
        warning = service.soft_limit_warning(name)
    if warning:
        say(f"vmem: warning: {warning}")
    env.out.stats(stats)


@cli.command()
@click.option("--db", "demo_db", metavar="URL",
              help="Store to use (default: a new SQLite file in a temporary directory).")
@click.option("--keep", is_flag=True, help="Keep the demo repository and database.")
def demo(demo_db: str | None, keep: bool) -> None:
    """Store memories citing verified-memory's own code, change the code, verify, and
    print the verified context: the whole loop in a throwaway repository."""
    from verified_memory.demo import run_demo

    run_demo(db=demo_db, keep=keep, echo=click.echo)


@cli.command("mcp")
@click.option("--http", "http", is_flag=True,
              help="Serve streamable HTTP on 127.0.0.1 (path /mcp) instead of stdio.")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True,
              help="Port for --http.")
@click.option("--repo", metavar="OWNER/NAME",
              help="Repository for tool calls that name none (default: the origin remote "
                   "of the working copy).")
@click.option("--worktree", is_flag=True,
              help="Verify against the files on disk, uncommitted changes included.")
@click.option("--allow-forget", is_flag=True, envvar="VMEM_MCP_ALLOW_FORGET",
              help="Serve memory_forget too (deletes a memory's text and citations, keeping "
                   "a tombstone): for whoever runs the server to allow. "
                   "[env VMEM_MCP_ALLOW_FORGET=1]")
@pass_env
def mcp_command(env: Env, http: bool, port: int, repo: str | None, worktree: bool,
                allow_forget: bool) -> None:
    """Serve the memory tools and prompts to agents over the Model Context Protocol:
    stdio (what Claude Code, Cursor and most clients launch), or --http.

    \b
    claude mcp add verified-memory -- vmem mcp
    vmem mcp --http --port 8765     # then http://127.0.0.1:8765/mcp
    """
    from verified_memory.mcp_server import build_server, check_port, serve

    server = build_server(lambda: env.service(worktree=worktree, create=True),
                          default_repo=lambda: env.repo(repo), time_limit=env.seconds("context"),
                          allow_forget=allow_forget)
    if http:
        check_port(port)  # a busy port is one line and exit 1, not a server's log
        click.echo(f"vmem: serving MCP on http://127.0.0.1:{port}/mcp", err=True)
    serve(server, http=http, port=port)


#: Scopes of a verdict pass in which a memory was not judged (``vmem verify``'s table).
_NOT_JUDGED = frozenset({Scope.UNMERGED, Scope.BEHIND})
#: Scopes in which nothing stored changes: the decision is only what is used there.
_VIEWS = frozenset({Scope.VIEW, Scope.DRY_RUN})


def _decision_cell(v: Verification) -> str:
    """``vmem verify``'s decision column: a memory a verdict pass did not judge says why
    (``unmerged``, ``behind``), not what a verdict would do; in a view or a dry run the
    decision says it is one (nothing stored takes it)."""
    if v.scope in _NOT_JUDGED:
        return v.scope.value
    return f"view:{v.decision.value}" if v.scope in _VIEWS else v.decision.value


def _command_named(argv: list[str] | None) -> str | None:
    """The command ``argv`` names (the first word after the group's options), if any."""
    valued = {name for option in cli.params if isinstance(option, click.Option)
              and not option.is_flag for name in option.opts}  # --db URL, -C DIR, ...
    args = iter(sys.argv[1:] if argv is None else argv)
    for arg in args:
        if arg in valued:
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


def main(argv: list[str] | None = None) -> None:
    """Entry point: our errors become one line on stderr and exit code 1."""
    # The Postgres pool logs each connection it drops or cannot make; the failure
    # reaches the user once, as our one line.
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
    # Started with stdin or stdout closed (`<&-`, `>&-`), Python has None there: read
    # nothing; write nowhere (to /dev/null: an answer as long as an export is not kept).
    if sys.stdin is None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (the process's)
    try:
        code = cli.main(args=argv, prog_name="vmem", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("vmem: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if isinstance(exc, click.UsageError) and _command_named(argv) == "hook":
            exc = hook_usage_error(exc)  # an option before `hook` must not block either
        exc.show()
        sys.exit(exc.exit_code)
    except VerifiedMemoryError as exc:
        fail(str(exc))
    except OSError as exc:  # a file named on the command line: missing, unreadable, ...
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        fail(f"the input is not UTF-8 text ({exc.reason} at byte {exc.start})")
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(code if isinstance(code, int) else 0)
