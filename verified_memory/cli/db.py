"""``vmem db``: migrate a store, and move memories between stores as JSONL."""

from __future__ import annotations

import json
import sys

import click

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
    """Manage the memory store: migrations, export and import.

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

    store = open_store(_url(ctx))
    try:
        with click.open_file(output, "w", encoding="utf-8", atomic=output != "-") as out:
            counts = export_jsonl(store, out, list(repos) or None)
    finally:
        store.close()
    click.echo(f"exported {counts.memories} memories and {counts.events} events", err=True)


@db.command("import")
@click.argument("input_file", metavar="FILE", default="-")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
@click.pass_context
def import_(ctx: click.Context, input_file: str, as_json: bool) -> None:
    """Read a `vmem db export` file ('-' for stdin). The file is checked whole before
    anything is written; memories and events already present are skipped, so re-running
    an interrupted import completes it."""
    from verified_memory.limits import IMPORT_LINE_MAX, bounded_lines
    from verified_memory.store import open_store
    from verified_memory.store.transfer import import_jsonl

    store = open_store(_url(ctx))
    try:
        with click.open_file(input_file, encoding="utf-8") as fh:
            counts = import_jsonl(store, bounded_lines(fh, IMPORT_LINE_MAX))
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(counts.to_dict()))
    else:
        click.echo(f"imported {counts.memories} memories and {counts.events} events "
                   f"({counts.skipped} memories and {counts.skipped_events} events already "
                   "present)")
