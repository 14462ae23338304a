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

from verified_memory.sources.base import CodeSource, Rename, git_blob_sha
from verified_memory.sources.discovery import (
    find_working_copy,
    parse_remote_url,
    repo_from_remote,
)
from verified_memory.sources.fake import DictSource
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.sources.worktree import WorktreeSource

if TYPE_CHECKING:
    from verified_memory.sources.github import GitHubSource

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


def __getattr__(name: str) -> Any:
    if name == "GitHubSource":
        from verified_memory.sources.github import GitHubSource

        return GitHubSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
