"""Where the code that citations point at comes from (see ``base.CodeSource``).

- ``LocalGitSource``: a local repository (working copy or bare), through one long-lived
  ``git cat-file --batch`` process.
- ``WorktreeSource``: the files on disk of a working copy, uncommitted edits included.
- ``GitHubSource``: a repository on GitHub (the ``github`` extra). Imported on first
  use, so that ``import verified_memory`` never depends on an optional extra.
- ``DictSource``: in memory, for tests (ours and yours).
- ``find_working_copy`` / ``repo_from_remote``: pick the defaults when run inside a
  working copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verified_memory.sources.base import CodeSource, Rename, git_blob_sha
    from verified_memory.sources.discovery import (
        find_working_copy,
        parse_remote_url,
        repo_from_remote,
    )
    from verified_memory.sources.fake import DictSource
    from verified_memory.sources.github import GitHubSource
    from verified_memory.sources.local_git import LocalGitSource
    from verified_memory.sources.worktree import WorktreeSource

__all__ = [
    "CodeSource",
    "DictSource",
    "GitHubSource",
    "LocalGitSource",
    "Rename",
    "WorktreeSource",
    "find_working_copy",
    "git_blob_sha",
    "parse_remote_url",
    "repo_from_remote",
]

#: The module of each name, imported on first use: a command that reads memories only
#: (or ``sources.base``, which every layer imports) does not start git helpers'
#: modules, and GitHubSource needs the ``github`` extra only when it is used.
_HOMES = {
    **dict.fromkeys(("CodeSource", "Rename", "git_blob_sha"), "base"),
    **dict.fromkeys(("find_working_copy", "parse_remote_url", "repo_from_remote"),
                    "discovery"),
    "DictSource": "fake",
    "GitHubSource": "github",
    "LocalGitSource": "local_git",
    "WorktreeSource": "worktree",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{home}"), name)
