"""``--commit``: what changed in the memory folder as one commit, its subject prefixed
``[memory]`` (seed 000: memory changes batched, and easy to tell from code changes).

Only the folder's paths are committed (``git commit -- FOLDER``): whatever else is
staged in the working copy stays staged and out of the memory commit.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from verified_memory.errors import StoreError, ValidationError

__all__ = ["PREFIX", "commit_folder", "working_copy_root"]

PREFIX = "[memory]"


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", os.fspath(cwd), *args], capture_output=True,
                              text=True, check=False)
    except OSError as exc:
        raise StoreError(f"cannot run git: {exc.strerror or exc}") from exc


def working_copy_root(folder: Path) -> Path:
    """The top of the git working copy ``folder`` is in (it need not exist yet: asked
    before an export writes it, so that a ``--commit`` that cannot be made is refused
    before anything is written)."""
    folder = folder.resolve()
    existing = folder
    while not existing.is_dir() and existing != existing.parent:
        existing = existing.parent
    top = _git(existing, "rev-parse", "--show-toplevel")
    if top.returncode != 0 or not top.stdout.strip():
        raise ValidationError(f"{folder} is not inside a git working copy: cannot --commit")
    return Path(top.stdout.strip())


def commit_folder(folder: Path, message: str) -> str | None:
    """Stage and commit every change under ``folder`` (added, changed, deleted files) in
    one commit; its sha, or None when nothing changed. ``message`` must start with
    ``[memory]``."""
    if not message.startswith(PREFIX):
        raise ValidationError(f"a memory commit's subject starts with {PREFIX}")
    root = working_copy_root(folder)
    path = folder.resolve().relative_to(root).as_posix()
    done = _git(root, "add", "-A", "--", path)
    if done.returncode != 0:
        raise StoreError(f"git add failed: {' '.join(done.stderr.split())}")
    if _git(root, "diff", "--cached", "--quiet", "--", path).returncode == 0:
        return None
    done = _git(root, "commit", "-q", "--no-verify", "-m", message, "--", path)
    if done.returncode != 0:
        raise StoreError(f"git commit failed: {' '.join(done.stderr.split())}")
    return _git(root, "rev-parse", "HEAD").stdout.strip()
