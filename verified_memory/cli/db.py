"""``vmem db``: migrate a store, move memories between stores as JSONL, compact it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from verified_memory.atomic import replaced_atomically

if TYPE_CHECKING:
    from verified_memory.store.compact import CompactionPlan

__all__ = ["db"]


def _url(ctx: click.Context) -> str | None:
    """The store the command names; in CI one must be named (``cli.ci``)."""
    from verified_memory.cli.ci import require_store

    env = ctx.find_root().obj
    url: str | None = getattr(env, "db", None)
    require_store(url)
    return url


@click.group()
def db() -> None:
    """Manage the memory store: migrations, export and import, compaction.

    \b
    Move a store: vmem --db sqlite:///a.db db export | vmem --db postgresql://... db import -
    """


@db.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.pass_context
def migrate(ctx: click.Context, as_json: bool) -> None:
    """Bring the store's schema up to date (harmless to re-run). For Supabase, pass the
    project's direct postgresql:// connection string as --db."""
    from verified_memory.config import Settings, is_postgres_url

    url = _url(ctx) or Settings.from_env().database_url
    if is_postgres_url(url):
        from verified_memory.store.migrate import migrate as apply_sql

        applied = apply_sql(url)
    else:  # SQLite migrates itself when opened
        from verified_memory.store import open_store

        open_store(url).close()
        applied = []
    if as_json:
        click.echo(json.dumps({"applied": applied}))
    else:
        click.echo(f"applied {', '.join(applied)}" if applied else "the schema is up to date")


@db.command()
def sql() -> None:
    """Print every Postgres migration as one script (for the Supabase SQL editor)."""
    from verified_memory.store.migrate import render_sql

    sys.stdout.write(render_sql())


@db.command("export")
@click.option("--repo", "repos", multiple=True, metavar="OWNER/NAME",
              help="Only these repositories (repeatable; default: all).")
@click.option("--output", "-o", default="-", show_default=True, metavar="FILE",
              help="Where to write the JSONL ('-' for stdout).")
@click.pass_context
def export(ctx: click.Context, repos: tuple[str, ...], output: str) -> None:
    """Write memories (any status, with citations) and telemetry as JSONL, losslessly."""
    from verified_memory.store import open_store
    from verified_memory.store.transfer import export_jsonl

    store = open_store(_url(ctx), create=False)
    try:
        _tell_unknown(repos, store.repos())
        if output == "-":
            counts = export_jsonl(store, sys.stdout, list(repos) or None)
        else:
            with replaced_atomically(Path(output)) as out:
                counts = export_jsonl(store, out, list(repos) or None)
    finally:
        store.close()
    click.echo(f"exported {counts.memories} memories, {counts.events} events and "
               f"{counts.tombstones} tombstones", err=True)


def _tell_unknown(wanted: tuple[str, ...], held: list[str]) -> None:
    """One line on stderr naming the repositories asked for that the store has no
    memories of (a typo exports nothing, which is no error)."""
    unknown = [repo for repo in dict.fromkeys(wanted) if repo not in held]
    if unknown:
        has = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        click.echo(f"vmem: the store has no memories of {', '.join(unknown)} "
                   f"({f'it has memories of {has}' if held else 'it has none'})", err=True)


@db.command("import")
@click.argument("input_file", metavar="FILE", default="-")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.pass_context
def import_(ctx: click.Context, input_file: str, as_json: bool) -> None:
    """Read a `vmem db export` file ('-' for stdin), all or nothing: the whole file is
    checked (each memory as strictly as `vmem store` checks one) before the store is
    opened, then written in one transaction. What the store holds is skipped (memory
    ids it has or forgot, events by their key, tombstones), so a re-run adds nothing."""
    from verified_memory.cli.env import removed_if_failed
    from verified_memory.limits import IMPORT_LINE_MAX, TEXT_ENCODING, TEXT_ERRORS, bounded_lines
    from verified_memory.store import open_store
    from verified_memory.store.transfer import load_export, read_export

    with click.open_file(input_file, encoding=TEXT_ENCODING, errors=TEXT_ERRORS) as fh:
        export = read_export(bounded_lines(fh, IMPORT_LINE_MAX))
    url = _url(ctx)
    with removed_if_failed(url):  # nothing was imported: leave no empty store behind
        store = open_store(url)
        try:
            counts = load_export(store, export)
        finally:
            store.close()
    if as_json:
        click.echo(json.dumps(counts.to_dict()))
    else:
        click.echo(f"imported {counts.memories} memories, {counts.events} events and "
                   f"{counts.tombstones} tombstones; skipped what the store holds: "
                   f"{counts.skipped} memories, {counts.skipped_events} events, "
                   f"{counts.skipped_tombstones} tombstones"
                   + (f"; forgot {counts.erased} memories the file's tombstones name"
                      if counts.erased else ""))


@db.command()
@click.option("--older-than", "days", type=click.IntRange(0, 36_500), default=180,
              show_default=True, metavar="DAYS",
              help="Archive the events older than this many days.")
@click.option("--apply", is_flag=True,
              help="Do it (without it: a dry run that says what would be done).")
@click.option("--backup", "backup_file", type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="Where the backup goes [default: next to a SQLite "
                                   "file; vmem-backup-TIME.jsonl here for Postgres].")
@click.option("--no-backup", is_flag=True,
              help="Skip the backup (a database with backups of its own).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.pass_context
def compact(ctx: click.Context, days: int, apply: bool, backup_file: Path | None,
            no_backup: bool, as_json: bool) -> None:
    """Compact the store: back up first, prune what forgotten memories left (citation
    rows, words in the full-text index), archive old telemetry (still counted), vacuum.
    A dry run unless --apply.

    \b
    vmem db compact                      # what it would do
    vmem db compact --older-than 90 --apply
    """
    from verified_memory.models import utcnow
    from verified_memory.store import open_store
    from verified_memory.store.compact import compact as run
    from verified_memory.store.compact import plan
    from verified_memory.store.sqlite import SQLiteStore
    from verified_memory.store.transfer import export_jsonl

    if no_backup and backup_file is not None:
        raise click.UsageError("--backup and --no-backup contradict each other")
    store = open_store(_url(ctx), create=False)
    try:
        stamp = f"{utcnow():%Y%m%dT%H%M%SZ}"
        if no_backup:
            target = None
        elif backup_file is not None:
            target = backup_file
        elif isinstance(store, SQLiteStore):
            target = Path(f"{store.path}.backup-{stamp}")
        else:
            target = Path(f"vmem-backup-{stamp}.jsonl")
        planned = plan(store, days, target)
        if not apply:
            _tell_plan(planned, as_json)
            return

        def back_up(path: Path) -> None:
            if isinstance(store, SQLiteStore):
                store.backup(path)
                return
            with replaced_atomically(path) as out:
                export_jsonl(store, out)

        result = run(store, planned, back_up)
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(result.to_dict()))
        return
    if planned.backup:
        click.echo(f"backed up to {planned.backup}")
    click.echo(f"pruned {result.pruned} citation rows; archived {result.archived} events "
               f"older than {days} days; vacuumed: {_size(planned.size_bytes)} -> "
               f"{_size(result.size_bytes)}")


def _tell_plan(planned: CompactionPlan, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({**planned.to_dict(), "applied": False}))
        return
    backup = (f"back up to {planned.backup}" if planned.backup else "no backup (--no-backup)")
    what = ("SQLite's online backup API" if planned.kind == "sqlite"
            else "an export of every repository")
    steps = [
        f"store: {planned.kind} {planned.location} ({_size(planned.size_bytes)})",
        f"1. {backup}" + (f" ({what})" if planned.backup else ""),
        f"2. prune {planned.orphaned_citations} citation rows left without their memory"
        + (", and the words of forgotten memories in the full-text index"
           if planned.kind == "sqlite" else ""),
        f"3. archive {planned.events_to_archive} events older than "
        f"{planned.older_than_days} days (before {planned.before:%Y-%m-%d %H:%M} UTC): still "
        "counted",
        "4. vacuum",
        "dry run: nothing changed; run again with --apply to do it",
    ]
    for line in steps:
        click.echo(line)


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    return f"{n / 1024 / 1024:.1f} MiB" if n >= 1024 * 1024 else f"{n / 1024:.1f} KiB"
