"""``vmem list``, ``log``, ``forget`` and ``where``: see every memory whatever its status,
read who did what to them, forget one (or a whole repository) on request, and say which
store is in use. Tables show 8-character ids (any unique prefix is taken back wherever an
id is) and fold their text to stay readable at 80 columns.
"""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from verified_memory.audit import describe, short_ids
from verified_memory.cli.env import Env, common, running, say
from verified_memory.cli.inputs import CitedFile, FileLines, settled_path
from verified_memory.cli.render import Output
from verified_memory.errors import ValidationError
from verified_memory.models import (
    EventKind,
    Memory,
    MemoryFilter,
    Status,
    TelemetryEvent,
    Tombstone,
    utcnow,
)
from verified_memory.prompt import sanitize

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text

__all__ = ["COMMANDS", "parse_since"]

pass_env = click.make_pass_decorator(Env)
_RELATIVE = re.compile(r"^(\d+)\s*([dhm])$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_since(text: str | None) -> datetime | None:
    """``--since``: an ISO date or time (``2026-03-01``, ``2026-03-01T09:30``; UTC unless
    it says otherwise), or an age: ``7d``, ``12h``, ``30m``."""
    if text is None:
        return None
    relative = _RELATIVE.match(text.strip())
    try:
        if relative:
            return utcnow() - timedelta(**{_UNITS[relative.group(2)]: int(relative.group(1))})
        when = datetime.fromisoformat(text.strip())
        # Stores compare times in UTC: one that leaves the calendar there is refused.
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except OverflowError:
        raise ValidationError(f"--since {text!r} is out of range") from None
    except ValueError:
        raise ValidationError(f"--since {text!r}: give a date (2026-03-01), a time "
                              "(2026-03-01T09:30) or an age (7d, 12h, 30m)") from None


def _table(title: str) -> Table:
    from rich.table import Table  # rich only when a table is printed: start-up stays light

    return Table(title=_plain(title), title_justify="left")


def _plain(text: str) -> Text:
    from rich.text import Text

    return Text(sanitize(text))


@click.command("list")
@common
@click.option("--status", type=click.Choice([*(s.value for s in Status), "all"]),
              default="all", show_default=True, help="Only memories in this status.")
@click.option("--category", help="Only memories of this category.")
@click.option("--tag", help="Only memories with this tag.")
@click.option("--path", type=CitedFile(lines=False), metavar="FILE",
              help="Only memories citing this file, named as `vmem search --path` names it "
                   "but without lines.")
@click.option("--created-by", metavar="NAME", help="Only memories stored by NAME.")
@click.option("--since", metavar="WHEN",
              help="Only memories created since WHEN: a date, a time, or an age (7d, 12h).")
@click.option("--forgotten", is_flag=True,
              help="List the tombstones of forgotten memories instead (id, who, when, why).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="How many, most recently refreshed first.")
@pass_env
def list_(env: Env, repo: str | None, as_json: bool, status: str, category: str | None,
          tag: str | None, path: FileLines | None, created_by: str | None, since: str | None,
          forgotten: bool, limit: int) -> None:
    """Every memory of the repository, whatever its status (invalid, superseded,
    expired, pending, active), most recently refreshed first. An audit view: nothing is
    verified or counted as retrieved.

    \b
    vmem list --status invalid
    vmem list --path src/api.py --since 7d
    vmem list --forgotten
    """
    env.out = Output(as_json)
    name = env.repo(repo)
    with running(env) as service:
        path = settled_path(path, service, name)
        if forgotten:
            _tombstones(env.out, service.tombstones(name, limit=limit), name)
            return
        where = MemoryFilter(status=None if status == "all" else Status(status),
                             category=category, tag=tag, path=path.path if path else None,
                             created_by=created_by,
                             since=parse_since(since))
        found = service.list_memories(name, where, limit=limit)
    if as_json:
        env.out.json([m.to_dict() for m in found])
        return
    _listing(env.out, found, f"{status if status != 'all' else 'all'} memories in {name}")


def _listing(out: Output, memories: list[Memory], title: str) -> None:
    if not memories:
        out.out.print(_plain(f"{title}: none"))
        return
    short = short_ids([m.id for m in memories])
    table = _table(title)
    table.add_column("id", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("subject", overflow="fold", ratio=3)
    table.add_column("cites", overflow="fold", ratio=2)
    table.add_column("created", overflow="fold", ratio=1)
    for m in memories:
        cites = str(m.citations[0].location) + (
            f" +{len(m.citations) - 1}" if len(m.citations) > 1 else "")
        table.add_row(_plain(short[m.id]), m.status.value, _plain(m.subject), _plain(cites),
                      _plain(f"{m.created_at:%Y-%m-%d} {m.created_by or ''}".strip()))
    out.out.print(table)


def _tombstones(out: Output, stones: list[Tombstone], repo: str) -> None:
    if out.as_json:
        out.json([t.to_dict() for t in stones])
        return
    if not stones:
        out.out.print(_plain(f"forgotten in {repo}: none"))
        return
    short = short_ids([t.id for t in stones])
    table = _table(f"forgotten in {repo}")
    table.add_column("id", no_wrap=True)
    table.add_column("was", no_wrap=True)
    table.add_column("forgotten", overflow="fold", ratio=1)
    table.add_column("by", overflow="fold", ratio=1)
    table.add_column("why", overflow="fold", ratio=3)
    for t in stones:
        table.add_row(_plain(short[t.id]), t.status.value, f"{t.forgotten_at:%Y-%m-%d %H:%M}",
                      _plain(t.forgotten_by or ""), _plain(t.reason))
    out.out.print(table)


@click.command("log")
@click.argument("memory_id", required=False)
@common
@click.option("--kind", "kinds", multiple=True, type=click.Choice([k.value for k in EventKind]),
              help="Only events of this kind (repeatable).")
@click.option("--reads", is_flag=True,
              help="Include reads (retrieved, checked), which are left out by default.")
@click.option("--since", metavar="WHEN",
              help="Only events since WHEN: a date, a time, or an age (7d, 12h).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="How many events, newest first.")
@click.option("--archived", is_flag=True,
              help="Include the events `vmem db compact` archived (a memory's log always "
                   "does).")
@pass_env
def log(env: Env, memory_id: str | None, repo: str | None, as_json: bool,
        kinds: tuple[str, ...], reads: bool, since: str | None, limit: int,
        archived: bool) -> None:
    """The audit trail of a memory (MEMORY_ID: any unique prefix; a forgotten memory's
    too, archived events included) or of the repository, newest first: when, who, what
    changed, at which ref, why. A repository's log reads the live events; when
    compaction archived some it would show, a line on stderr says so (--archived
    shows them).

    \b
    vmem log 132d0c13
    vmem log --kind invalidated --since 7d
    """
    env.out = Output(as_json)
    name = None if memory_id else env.repo(repo)
    which = [EventKind(k) for k in kinds] or None
    after = parse_since(since)
    cut = False
    with running(env) as service:
        events = service.audit(memory_id, repo=name, kinds=which, reads=reads, since=after,
                               limit=limit, archived=archived)
        if name is not None and not archived and not as_json:
            cut = service.audit_archived(events, repo=name, kinds=which, reads=reads,
                                         since=after, limit=limit)
    if as_json:
        env.out.json([{**e.to_dict(), **describe(e).to_dict()} for e in events])
        return
    _print_log(env, events, f"log of {memory_id}" if memory_id else f"log of {name}",
               by_memory=memory_id is None)
    if cut:  # after the table, where the eye ends
        say(f"vmem: older events of {name} were archived by `vmem db compact`; "
            "`vmem log --archived` shows them too")


def _print_log(env: Env, events: list[TelemetryEvent], title: str, *,
               by_memory: bool) -> None:
    if not events:
        env.out.out.print(_plain(f"{title}: no events"))
        return
    table = _table(title)
    table.add_column("when", no_wrap=True)
    table.add_column("who", overflow="fold", ratio=1)
    if by_memory:
        table.add_column("memory", no_wrap=True)
    table.add_column("what", overflow="fold", ratio=2)
    table.add_column("ref", overflow="fold", ratio=1)
    table.add_column("why", overflow="fold", ratio=2)
    short = short_ids(sorted({e.memory_id for e in events if e.memory_id}))
    for e in events:
        said = describe(e)
        row: list[str | Text] = [f"{e.at:%Y-%m-%d %H:%M}", _plain(e.actor or "")]
        if by_memory:
            row.append(_plain(short.get(e.memory_id or "", "")))
        row += [_plain(said.what), _plain(said.ref), _plain(said.why)]
        table.add_row(*row)
    env.out.out.print(table)


@click.command()
@click.argument("memory_id", required=False)
@click.option("--reason", required=True,
              help="Why it is forgotten (kept on the tombstone and in the audit trail).")
@click.option("--repo", metavar="OWNER/NAME",
              help="With --all: the repository to wipe; with an id: where it must be.")
@click.option("--all", "everything", is_flag=True,
              help="Forget every memory of --repo (any status).")
@click.option("--yes", is_flag=True, help="Do it without asking (needed for --all).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def forget(env: Env, memory_id: str | None, reason: str, repo: str | None,
           everything: bool, yes: bool, as_json: bool) -> None:
    """Forget a memory (any unique prefix of its id): its text and citations are deleted;
    a tombstone keeps its id, repository, who forgot it, when and why, and its audit
    trail stays. With --repo OWNER/NAME --all --yes, forget every memory of a
    repository. Traces in the store's file go at the next `vmem db compact --apply`.

    \b
    vmem forget 132d0c13 --reason "a secret pasted into the fact"
    vmem forget --repo acme/app --all --yes --reason "the project is gone"
    """
    env.out = Output(as_json)
    if everything == (memory_id is not None):
        raise click.UsageError("give a MEMORY_ID, or --repo OWNER/NAME --all")
    if everything and repo is None:
        raise click.UsageError("--all needs --repo OWNER/NAME (the repository to wipe)")
    with running(env) as service:
        if everything:
            assert repo is not None
            count = service.memories.count(repo, status=None)
            if not yes:
                question = (f"forget all {count} memories of {repo}? their text and "
                            "citations cannot be brought back")
                if not sys.stdin.isatty():
                    raise ValidationError(f"{question}; run again with --yes to do it")
                click.confirm(question, abort=True, err=True)
            stones = service.forget(repo=repo, reason=reason)
        else:
            stones = service.forget(memory_id, repo=repo, reason=reason)
    if as_json:
        env.out.json([t.to_dict() for t in stones])
        return
    if everything:
        env.out.out.print(_plain(f"forgot {len(stones)} memories of {repo}"))
    else:
        say(f"vmem: {stones[0].id} leaves a tombstone; `vmem log {stones[0].id[:8]}` "
            "keeps its trail")
        env.out.out.print(_plain(f"forgot {stones[0].id}"))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@pass_env
def where(env: Env, as_json: bool) -> None:
    """The memory store in use: what kind, where (credentials hidden), its schema
    version, size, and what it holds. A SQLite file that does not exist yet is named,
    not created."""
    env.out = Output(as_json)
    missing = env.missing_store()
    if missing is not None:
        if as_json:
            env.out.json({"kind": "sqlite", "location": missing, "exists": False})
        else:
            env.out.out.print(_plain(f"sqlite {missing} (does not exist yet: the first "
                                     "`vmem store` creates it)"))
        return
    with running(env) as service:
        info = service.info()
    if as_json:
        env.out.json({**info.to_dict(), "exists": True})
        return
    size = "size unknown" if info.size_bytes is None else _size(info.size_bytes)
    lines = [f"{info.kind} {info.location}",
             f"schema version {info.schema_version or 'unknown'}, {size}",
             f"{info.memories} memories in {info.repos} repositories, {info.forgotten} "
             f"forgotten; {info.events} events, {info.archived_events} archived"]
    for line in lines:
        env.out.out.print(_plain(line))


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


COMMANDS = (list_, log, forget, where)
