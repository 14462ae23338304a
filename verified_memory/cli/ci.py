"""Safety in continuous integration: never check nothing and pass.

Outside CI, a ``vmem`` with no store named uses the default SQLite file in the user's
data directory. In GitHub Actions (``GITHUB_ACTIONS=true``) that file is new and empty on
every run: a missing or misnamed secret would make ``vmem review`` review against no
memories and pass green having checked nothing. So there, a store must be named (``--db``,
``VMEM_DATABASE_URL``, or ``SUPABASE_URL`` with ``SUPABASE_KEY``), else:

- a pull request from a fork (which GitHub runs without the repository's secrets) gets a
  ``::warning::`` annotation and exit code 78, ``NEUTRAL_EXIT``: nothing was checked,
  and the run must not read as a pass;
- anything else is an error (exit 1): the secret is missing or misnamed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any, NoReturn

import click

from verified_memory.errors import ValidationError

__all__ = ["NEUTRAL_EXIT", "fork_of_pull_request", "in_github_actions", "require_store"]

#: Exit code of a run that checked nothing, on purpose (a fork's pull request without the
#: store's secret): sysexits' EX_CONFIG, the code GitHub Actions once read as "neutral".
NEUTRAL_EXIT = 78
_PULL_REQUEST_EVENTS = frozenset({"pull_request", "pull_request_review",
                                  "pull_request_review_comment"})


def in_github_actions(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get("GITHUB_ACTIONS", "").strip().lower() == "true"


def fork_of_pull_request(environ: Mapping[str, str] | None = None) -> str | None:
    """The head repository (``owner/name``) when this Actions run is for a pull request
    from a fork, read from the event payload GitHub writes (``GITHUB_EVENT_PATH``);
    None for anything else, or when the payload cannot be read."""
    environ = os.environ if environ is None else environ
    if environ.get("GITHUB_EVENT_NAME") not in _PULL_REQUEST_EVENTS:
        return None
    path = environ.get("GITHUB_EVENT_PATH")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            payload: Any = json.load(fh)
        pull = payload["pull_request"]
        head, base = pull["head"].get("repo"), pull["base"]["repo"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if head is None:  # the fork was deleted since the pull request was opened
        return "a deleted fork"
    name = head.get("full_name")
    if head.get("fork") or (name and name != base.get("full_name")):
        return str(name or "a fork")
    return None


def require_store(db: str | None, environ: Mapping[str, str] | None = None) -> None:
    """In GitHub Actions, stop unless a store is named (see the module docstring).
    ``db``: the ``--db`` option or ``VMEM_DATABASE_URL``, as the command got it."""
    environ = os.environ if environ is None else environ
    if not in_github_actions(environ) or (db or "").strip():
        return
    url, key = environ.get("SUPABASE_URL", "").strip(), environ.get("SUPABASE_KEY", "").strip()
    if url and key:
        return
    fork = fork_of_pull_request(environ)
    if fork is not None:
        _neutral(f"no memory store in this run: pull requests from forks ({fork}) get no "
                 "secrets, so no memory was checked (neither a pass nor a failure)")
    half = ("SUPABASE_URL is set but SUPABASE_KEY is empty" if url else
            "SUPABASE_KEY is set but SUPABASE_URL is empty" if key else
            "none of VMEM_DATABASE_URL, SUPABASE_URL and SUPABASE_KEY is set")
    raise ValidationError(
        f"running in GitHub Actions without a memory store ({half}): pass the store's secret "
        "in the workflow's env (VMEM_DATABASE_URL: ${{ secrets.VMEM_DATABASE_URL }}) or name "
        "one with --db; a throwaway store would pass having checked nothing")


def _neutral(message: str) -> NoReturn:
    """A ``::warning::`` annotation (and the same line for people), then exit 78."""
    click.echo(f"::warning title=verified-memory::{_escape(message)}")
    click.echo(f"vmem: {message}", err=True)
    sys.exit(NEUTRAL_EXIT)


def _escape(text: str) -> str:
    """Workflow-command data escaping (``%``, carriage return, newline)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
