"""``vmem dashboard``: the dashboard served on 127.0.0.1, written to one file (``--out``),
or its numbers as JSON (``--json``). It reads the store only: no code, no telemetry."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING

import click

from verified_memory.atomic import write_atomically
from verified_memory.cli.env import Env, say
from verified_memory.cli.render import Output
from verified_memory.errors import VerifiedMemoryError

if TYPE_CHECKING:
    from verified_memory.service import MemoryService

__all__ = ["dashboard"]

pass_env = click.make_pass_decorator(Env)


@click.command("dashboard")
@click.option("--out", metavar="FILE",
              help="Write the page to FILE ('-': stdout) and exit: one self-contained file "
                   "that opens offline (e.g. a CI artifact).")
@click.option("--port", type=click.IntRange(0, 65535), default=8766, show_default=True,
              help="Port on 127.0.0.1 to serve on (0: any free port).")
@click.option("--repo", "repos", multiple=True, metavar="OWNER/NAME",
              help="Only this repository (repeatable; default: every repository with "
                   "memories in the store).")
@click.option("--days", type=click.IntRange(1, 3660), default=90, show_default=True,
              help="Days of telemetry (UTC, up to today) the charts and counts cover.")
@click.option("--limit", type=click.IntRange(0, 1000), default=10, show_default=True,
              help="Memories shown in each list (never applied, failing, pending, "
                   "expiring); each says how many there are in all.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the dashboard's numbers as JSON and exit.")
@pass_env
def dashboard(env: Env, out: str | None, port: int, repos: tuple[str, ...], days: int,
              limit: int, as_json: bool) -> None:
    """Invalidation rates, outcomes and memory health per repository, as a page: served
    on 127.0.0.1 until interrupted, or written to one file with --out. Every number is in
    a table too, so it reads with JavaScript off.

    \b
    vmem dashboard                    # then open http://127.0.0.1:8766/
    vmem dashboard --out report.html  # one file, no network needed to open it
    vmem dashboard --json --days 30
    """
    from verified_memory.dashboard import build, render_page
    from verified_memory.models import validate_repo

    chosen = [validate_repo(r, "--repo") for r in repos] or None
    service = env.service()
    try:
        if as_json:
            Output(True).json(build(service, repos=chosen, days=days,
                                    list_limit=limit)[0].to_dict())
            return
        if out is not None:
            page = render_page(*build(service, repos=chosen, days=days, list_limit=limit))
            if out == "-":
                click.echo(page, nl=False)
            else:
                _write(Path(out), page)
                say(f"vmem: wrote the dashboard to {out}")
            return
        _serve(service, port, chosen, days, limit)
    finally:
        service.close()


def _serve(service: MemoryService, port: int, repos: list[str] | None, days: int,
           limit: int) -> None:
    from verified_memory.dashboard import pages
    from verified_memory.dashboard.server import start

    server = start(port, pages(service, repos=repos, days=days, list_limit=limit))
    # SIGINT stops it however it was started: a script's background job inherits SIGINT
    # ignored, and Python leaves it so (no KeyboardInterrupt): `kill -INT` would not stop
    # it, nor would a test's, whose run then waited out its limit.
    was = signal.signal(signal.SIGINT, signal.default_int_handler)
    say(f"vmem: serving the dashboard on {server.url} (Ctrl-C stops it)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        say("vmem: dashboard stopped")
    finally:
        server.server_close()
        if was is not None:  # None: a handler not set from Python, not ours to restore
            signal.signal(signal.SIGINT, was)


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a reader never sees half a page),
    readable by its owner only, like the store it quotes."""
    try:
        write_atomically(path, text, mode=0o600)
    except OSError as exc:
        raise VerifiedMemoryError(f"cannot write {path}: {exc.strerror or exc}") from exc
