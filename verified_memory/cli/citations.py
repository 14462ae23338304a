"""``vmem citations check``: citations that are not (yet) memories, checked in bulk
(``MemoryService.check_citations``). JSON Lines in, one JSON line out per line in; a bad
line is an answer of its own (``{id, error}``), never the end of the run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from verified_memory.errors import ValidationError
from verified_memory.limits import (
    CHECK_LINE_MAX,
    TEXT_ENCODING,
    TEXT_ERRORS,
    bounded_lines,
    check_depth,
    refuse_undecoded,
    too_long,
)

if TYPE_CHECKING:
    from verified_memory.verify.bulk import Item

__all__ = ["citations", "parse_jsonl"]


@click.group()
def citations() -> None:
    """Work with citations that are not (yet) memories."""


@citations.command("check")
@click.option("--repo", "repo_path", required=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A git working copy or bare repository.")
@click.option("--ref", default="HEAD", show_default=True, help="Revision to check at.")
@click.option("--input", "input_file", default="-", show_default=True, metavar="FILE.jsonl",
              help="One citation a line: {id, path, line_start, line_end, sha}.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, metavar="N",
              help="Worker processes for large inputs (default: one per usable CPU; "
                   "at most one per 100 citations, so under 200 always one).")
@click.option("--json", "as_json", is_flag=True,
              help="JSON lines out (the default; accepted for symmetry).")
def check(repo_path: Path, ref: str, input_file: str, jobs: int | None,
          as_json: bool) -> None:
    """Check citations made at old commits against REF: one JSON line out per line in,
    {id, status, path, line_start, line_end, similarity} with the current place; a bad
    input line gets {id, error} and does not stop the run. On a terminal, stderr counts
    the citations checked while a long run goes on."""
    from verified_memory.cli.env import progress_bar
    from verified_memory.service import MemoryService
    from verified_memory.sources.local_git import LocalGitSource
    from verified_memory.store.memory import InMemoryStore
    from verified_memory.verify.bulk import usable_cpus

    # Nothing is stored: the service only lends its door to the one working copy.
    # A byte that is not UTF-8 is kept, to be the error of its line (``parse_jsonl``).
    with LocalGitSource(repo_path) as source, click.open_file(
            input_file, encoding=TEXT_ENCODING, errors=TEXT_ERRORS) as fh:
        service = MemoryService(InMemoryStore(), source)
        lines = bounded_lines(fh, CHECK_LINE_MAX)  # an endless line is an error, not a hang
        # On a terminal the answers scroll by: they are the progress. Sent to a file or
        # a pipe, a count on stderr says the run goes on.
        with progress_bar("citations checked", enabled=not sys.stdout.isatty()) as shown:
            results = service.check_citations(
                None, parse_jsonl(lines, max_line=CHECK_LINE_MAX), ref=ref,
                jobs=jobs or usable_cpus(), require_sha=True)
            unread: list[str] = []  # why each unverifiable citation was not checked
            done = 0
            for done, result in enumerate(results, 1):
                sys.stdout.write(json.dumps(result.to_dict()) + "\n")
                shown(done, None)
                if result.status == "unverifiable":
                    why = result.unreadable or (result.check.detail if result.check else None)
                    unread.append(f"{result.id} ({why or 'could not be read'})")
    if unread:  # the answers' format has no room for why: said once, on stderr
        click.echo(f"vmem: {len(unread)} of {done} citations could not be verified (no "
                   f"verdict): {unread[0]}" + (f" and {len(unread) - 1} more"
                                               if len(unread) > 1 else ""), err=True)


def parse_jsonl(lines: Iterable[str], *, max_line: int | None = None) -> Iterator[Item]:
    """(id, object) per non-empty line, or (id or line number, error message); a line
    longer than ``max_line`` characters is an error (``limits.bounded_lines``), and so is
    one holding a byte that is not UTF-8 (read with ``limits.TEXT_ERRORS``)."""
    for number, line in enumerate(lines, 1):
        if number == 1:  # a byte order mark (Windows editors, PowerShell) is no content
            line = line.removeprefix("\ufeff")
        if max_line is not None and too_long(line, max_line):
            yield f"line {number}", f"line {number} is longer than {max_line:,} characters"
            continue
        try:
            refuse_undecoded(line, number)
        except ValidationError as exc:
            yield f"line {number}", str(exc)
            continue
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            yield f"line {number}", f"line {number} is not valid JSON: {exc.msg}"
            continue
        except RecursionError:
            yield f"line {number}", f"line {number} is JSON nested too deeply"
            continue
        try:
            check_depth(data, f"line {number}")
        except ValidationError as exc:
            yield f"line {number}", str(exc)
            continue
        if not isinstance(data, dict):
            yield f"line {number}", f"line {number} is not a JSON object"
            continue
        # an id that is missing or null: the line names the answer
        yield (data["id"] if data.get("id") is not None else f"line {number}"), data
