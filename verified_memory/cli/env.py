"""What every command needs: where memories are, where the code is, how to say things.

Shared by the commands in ``cli/__init__.py`` and ``cli/review.py`` (and nothing else
imports back from the CLI).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from verified_memory.cli.passes import Kind, bounded, not_checked_line
from verified_memory.cli.render import Output
from verified_memory.errors import SourceUnavailable, ValidationError

if TYPE_CHECKING:  # the service, and what it brings (the verifier, the grammars), are
    # imported by the commands that use them, not by every start of vmem
    from rich.console import Console

    from verified_memory.budget import Budget
    from verified_memory.config import Settings
    from verified_memory.models import Verification
    from verified_memory.service import MemoryService
    from verified_memory.sources.base import CodeSource

__all__ = [
    "Env", "code_options", "common", "fail", "progress", "removed_if_failed", "running", "say",
    "tell_not_checked",
]

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str) -> NoReturn:
    from verified_memory.prompt import sanitize

    one_line = " ".join(sanitize(message).split())  # a driver's message may span lines
    click.echo(f"vmem: error: {one_line}", err=True)
    sys.exit(1)


class Env:
    """What every command needs: where memories are, and where the code is."""

    def __init__(self, db: str | None, directory: Path, as_json: bool = False,
                 time_limit: float | None = None) -> None:
        self.db = db
        self.directory = directory
        self.out = Output(as_json)
        self._working_copy: Path | bool | None = False
        self.time_limit = time_limit  # --time-limit: overrides the settings' limits
        self.budget: Budget | None = None  # of the last pass ``running`` bounded

    def seconds(self, kind: Kind) -> float:
        """The time limit of a pass of this kind (see ``cli.passes``): ``--time-limit``,
        else the kind's variable, read only then (a bad value elsewhere stops nothing)."""
        from verified_memory.config import pass_time_limit

        return self.time_limit if self.time_limit is not None else pass_time_limit(kind)

    @property
    def working_copy(self) -> Path | None:
        if self._working_copy is False:
            from verified_memory.sources.discovery import find_working_copy

            self._working_copy = find_working_copy(self.directory)
        assert self._working_copy is not True
        return self._working_copy

    def repo(self, given: str | None) -> str:
        if given:
            return given
        from verified_memory.sources.discovery import no_repo_named, repo_from_remote

        wc = self.working_copy
        repo = repo_from_remote(wc) if wc else None
        if repo is None:
            where = (no_repo_named(wc) if wc
                     else f"{self.directory} is not inside a git working copy")
            raise ValidationError(f"no --repo given and {where}: pass --repo owner/name")
        return repo

    def ref(self, given: str, *, worktree: bool = False) -> str:
        """``HEAD`` as the branch checked out (``refs/heads/NAME``), so that what a check
        says names the branch; a detached HEAD, another ref or the worktree as given."""
        if given != "HEAD" or worktree or self.working_copy is None:
            return given
        from verified_memory.sources.discovery import checked_out_branch

        return checked_out_branch(self.working_copy) or given

    def no_commits(self, repo: str, *, worktree: bool = False) -> str | None:
        """Why no memory of ``repo`` can be shown, when its code is read from a working
        copy with no commit yet (``git init``, nothing committed): there is no code to
        cite, so there is nothing to verify and nothing to change. None otherwise (files
        on disk, with ``worktree``, can be read without a commit)."""
        from verified_memory.sources.discovery import other_repo
        from verified_memory.sources.local_git import run_git

        wc = self.working_copy
        if worktree or wc is None or other_repo(wc, repo) is not None:
            return None
        if run_git(wc, "rev-list", "-n", "1", "--all").stdout.strip():
            return None
        return (f"{wc} has no commits yet: there is no code to cite, so no memory of "
                f"{repo} is shown (commit the code first)")

    def missing_store(self) -> str | None:
        """The path of the SQLite store in use when that file does not exist (None when
        it does, or the store is not a SQLite file)."""
        from pathlib import Path

        from verified_memory.store import sqlite_path

        path = sqlite_path(self.db)
        return path if path is not None and not Path(path).expanduser().exists() else None

    def service(self, *, worktree: bool = False, source: CodeSource | None = None,
                create: bool = False) -> MemoryService:
        """A service on the chosen store, reading code through ``source`` when given
        (closed with the service), else the working copy or GitHub, per repository.
        ``create``: a SQLite store that does not exist is created (commands that store);
        otherwise it is an error naming the file, and nothing is created."""
        from verified_memory.cli.ci import require_store
        from verified_memory.config import Settings
        from verified_memory.quality import QualityPolicy
        from verified_memory.service import MemoryService
        from verified_memory.sources.base import SourcesByRepo
        from verified_memory.store import open_store

        require_store(self.db)  # in CI, never a throwaway store that checks nothing
        settings = Settings.from_env()
        factory = SourcesByRepo(lambda repo: self._source(repo, worktree, settings))
        return MemoryService(open_store(self.db, settings, create=create),
                             source if source is not None else factory,
                             actor=settings.actor, truth_ref=settings.truth_ref,
                             policy=QualityPolicy.from_env())

    def _source(self, repo: str, worktree: bool, settings: Settings) -> CodeSource:
        """The working copy when it holds ``repo`` (never another repository's code:
        verdicts on it would judge code a memory never cited), else GitHub."""
        from verified_memory.sources.discovery import other_repo

        wc = self.working_copy
        other = other_repo(wc, repo) if wc is not None else None
        if wc is not None and other is None:
            from verified_memory.sources.local_git import LocalGitSource
            from verified_memory.sources.worktree import WorktreeSource

            return WorktreeSource(wc) if worktree else LocalGitSource(wc)
        if settings.github_token:
            from verified_memory.sources.github import GitHubSource

            return GitHubSource.from_settings(repo, settings)
        here = f" ({wc} is a working copy of {other})" if other is not None else ""
        raise SourceUnavailable(
            f"cannot read the code of {repo}{here}: run inside its working copy, pass -C "
            "DIR, or set GITHUB_TOKEN to read it from GitHub")


@contextmanager
def running(env: Env, *, worktree: bool = False, source: CodeSource | None = None,
            kind: Kind = "verify", create: bool = False) -> Iterator[MemoryService]:
    """A service for one command, whose reads of code are one pass of ``kind``'s time
    limit (``cli.passes``); closed at the end. Only a command that stores passes
    ``create``: the others never create a store."""
    service = env.service(worktree=worktree, source=source, create=create)
    try:
        with bounded(env.out, env.seconds(kind)) as budget:
            env.budget = budget
            yield service
    finally:
        service.close()


@contextmanager
def removed_if_failed(url: str | None) -> Iterator[None]:
    """A command that stores into a SQLite store that does not exist yet (an import,
    a first memory): when it fails (a file or a citation refused, a ref unknown,
    Ctrl-C), the store it created is removed with its -wal and -shm files, so that
    nothing stored leaves no empty store behind either."""
    from verified_memory.store import sqlite_path

    path = sqlite_path(url)
    new = Path(path).expanduser() if path is not None else None
    if new is not None and new.exists():
        new = None
    try:
        yield
    except BaseException:
        for name in (new, Path(f"{new}-wal"), Path(f"{new}-shm")) if new else ():
            name.unlink(missing_ok=True)
        raise


def tell_not_checked(env: Env, verifications: Sequence[Verification],
                     total: int | None = None) -> None:
    """After a pass: one line on stderr on what could not be verified, and why."""
    line = not_checked_line(verifications, env.budget, total)
    if line is not None:
        env.out.err.print(line, markup=False, highlight=False)


def common(f: F) -> F:
    """--repo and --json, shared by the commands that act on one repository."""
    f = click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")(f)
    return click.option("--repo", metavar="OWNER/NAME",
                        help="Repository (default: the origin remote of the working copy).")(f)


def code_options(f: F) -> F:
    f = click.option("--worktree", is_flag=True,
                     help="Read files on disk, including uncommitted changes, instead of REF.")(f)
    return click.option("--ref", default="HEAD", show_default=True,
                        help="Commit, branch or tag to check the code at.")(f)


def say(line: str) -> None:
    """A line for people about what a command will do, on stderr (stdout is the result)."""
    click.echo(line, err=True)


@contextmanager
def progress(env: Env) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr, shown only when the pass takes more than a moment."""
    with progress_bar("verifying", env.out.err) as update:
        yield update


#: Work shorter than this shows no progress bar at all.
PROGRESS_AFTER = 0.3


@contextmanager
def progress_bar(what: str, console: Console | None = None, *, enabled: bool = True
                 ) -> Iterator[Callable[[int, int | None], None]]:
    """``update(done, total)`` draws a bar on ``console`` (stderr by default) once the work
    has taken ``PROGRESS_AFTER`` seconds, and only on a terminal (a pipe or a file gets
    nothing); ``total`` None: a count of what is done (an input read as it comes).
    What the command writes to stdout meanwhile goes to stdout, never into the bar's
    console (rich would send it there)."""
    if not enabled or (console is None and not sys.stderr.isatty()):
        yield lambda done, total: None  # nothing to draw: rich is not even imported
        return
    from rich.console import Console as RichConsole
    from rich.progress import Progress

    err = console or RichConsole(stderr=True)
    started = time.monotonic()
    bar = Progress(console=err, transient=True, disable=not err.is_terminal,
                   redirect_stdout=False, redirect_stderr=False)
    task: list[Any] = []

    def update(done: int, total: int | None) -> None:
        if not task:
            if time.monotonic() - started < PROGRESS_AFTER:
                return
            bar.start()
            task.append(bar.add_task(what, total=total))
        bar.update(task[0], completed=done, total=total,
                   description=what if total is not None else f"{what}: {done:,}")

    try:
        yield update
    finally:
        bar.stop()
