"""Which file of a repository this user may not read, when git could not read it.

Git does not tell a permission problem apart: an object whose file this user may not
read is ``missing`` to ``git cat-file``, and a ``.git`` whose ``objects`` directory is
unreadable is "not a git repository". Both would read as a verdict on the code (a blob
that does not exist, a directory that is no working copy). These helpers, asked only
after git failed, look at the files themselves and name the one that could not be read
and why, so the fault is reported as the code being unreadable (``SourceUnavailable``),
never as code that is not there.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["unreadable_git_dir", "unreadable_object"]


def _refused(path: Path, *, listing: bool) -> str | None:
    """``cannot read PATH: <why>`` when opening (or, for a directory, listing) ``path``
    fails for another reason than its absence; None when it reads or is not there."""
    try:
        if listing:
            os.listdir(path)
        else:
            os.close(os.open(path, os.O_RDONLY))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return None


def unreadable_object(objects: Path, sha: str) -> str | None:
    """Why the object ``sha`` of the object directory ``objects`` may be unreadable to
    this user: the directories on its way, its loose file, or a pack that may hold it;
    None when nothing there is refused (then git truly lacks it)."""
    for folder in (objects, objects / sha[:2], objects / "pack"):
        if (why := _refused(folder, listing=True)) is not None:
            return why
    packs = objects / "pack"
    files = [objects / sha[:2] / sha[2:]]
    if packs.is_dir():
        files += sorted(packs / name for name in os.listdir(packs) if name.endswith(".pack"))
    for file in files:
        if (why := _refused(file, listing=False)) is not None:
            return why
    return None


def unreadable_git_dir(start: Path) -> str | None:
    """Why git may have found no repository at or above ``start``: the nearest ``.git``
    directory, or what git must read in it (``objects``, ``refs``, ``HEAD``), is refused
    to this user. None when there is no ``.git`` or it reads."""
    for folder in (start, *start.parents):
        git_dir = folder / ".git"
        try:
            if not git_dir.is_dir():
                continue
        except OSError as exc:  # ``folder`` cannot be searched
            return f"cannot read {folder}: {exc.strerror or exc}"
        for path, listing in ((git_dir, True), (git_dir / "objects", True),
                              (git_dir / "refs", True), (git_dir / "HEAD", False)):
            if (why := _refused(path, listing=listing)) is not None:
                return why
        return None
    return None
