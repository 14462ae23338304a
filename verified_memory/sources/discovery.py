"""Where am I? The working copy around a directory, and the ``owner/name`` it comes from.

Entry points use this to pick defaults (docs/ARCHITECTURE.md): run inside a git working
copy, the local repository is the code source and its ``origin`` remote names the
repository that memories are filed under.

A remote URL may carry credentials (``https://user:token@host/...``). Only the last two
path segments ever leave ``parse_remote_url``; the URL itself is never returned, logged
or put into an error message.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from verified_memory.errors import ValidationError
from verified_memory.models import validate_repo
from verified_memory.sources.local_git import raise_if_unreadable, run_git

__all__ = [
    "checked_out_branch",
    "find_working_copy",
    "other_repo",
    "parse_remote_url",
    "remote_host",
    "remote_url",
    "repo_from_remote",
]

#: scp-like syntax: ``[user@]host:path`` (git reads a ':' before any '/' this way).
_SCP_LIKE = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^@/:]+):(?P<path>.*)$")


def find_working_copy(start: str | os.PathLike[str]) -> Path | None:
    """The top level of the git working copy containing ``start``, or None.

    None too for a bare repository or the inside of a ``.git`` directory: neither has
    files on disk to cite. A ``start`` that does not exist yet is looked up from its
    nearest existing parent. Raises ``SourceUnavailable`` when git is missing, or when
    this user may not read the ``.git`` found there (not the same as no working copy).
    """
    probe = Path(start).absolute()
    while not probe.is_dir():
        if probe.parent == probe:
            return None
        probe = probe.parent
    proc = run_git(probe, "rev-parse", "--show-toplevel")
    top = proc.stdout.rstrip(b"\r\n")
    if proc.returncode != 0:
        raise_if_unreadable(probe)
    if proc.returncode != 0 or not top:  # old gits print nothing in a bare repository
        return None
    return Path(os.fsdecode(top))


def checked_out_branch(working_copy: str | os.PathLike[str]) -> str | None:
    """The full name of the branch checked out (``refs/heads/feature/x``), or None on a
    detached HEAD: so that a check at ``HEAD`` can say which branch it looked at."""
    proc = run_git(Path(working_copy), "symbolic-ref", "-q", "HEAD")
    name = proc.stdout.decode("utf-8", "replace").strip()
    return name if proc.returncode == 0 and name.startswith("refs/heads/") else None


def repo_from_remote(working_copy: str | os.PathLike[str], remote: str = "origin") -> str | None:
    """``owner/name`` of a remote of ``working_copy`` (None without such a remote)."""
    url = remote_url(working_copy, remote)
    return parse_remote_url(url) if url is not None else None


def no_repo_named(working_copy: str | os.PathLike[str], remote: str = "origin") -> str:
    """Why ``repo_from_remote`` gave None, for a message: no such remote, or one whose
    URL names no hosted repository (a path or ``file://`` URL is shown; a URL with a
    scheme is not, as it may carry credentials)."""
    url = remote_url(working_copy, remote)
    if url is None:
        return f"{working_copy} has no {remote} remote"
    shown = f" ({url})" if "://" not in url or url.startswith("file://") else ""
    return f"the {remote} remote of {working_copy}{shown} names no hosted owner/name"


def other_repo(working_copy: str | os.PathLike[str], repo: str) -> str | None:
    """The repository ``working_copy`` holds when it is not ``repo``: its remotes name
    hosted repositories (``origin`` first), none of them ``repo`` (owner and name compared
    as GitHub does, ignoring case). None when one is ``repo``, or when no remote names a
    hosted repository (nothing tells the working copy is another's)."""
    proc = run_git(Path(working_copy), "remote", "-v")
    if proc.returncode != 0:
        return None
    named: list[tuple[bool, str]] = []
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        name, _, rest = line.partition("\t")
        found = parse_remote_url(rest.rsplit(" (", 1)[0])
        if found is not None:
            if found.lower() == repo.lower():
                return None
            named.append((name != "origin", found))
    return min(named)[1] if named else None


def remote_url(working_copy: str | os.PathLike[str], remote: str = "origin") -> str | None:
    """The URL of a remote of ``working_copy`` (None without such a remote).

    Uses ``git remote get-url``, so ``url.<base>.insteadOf`` rewrites are applied as git
    itself would apply them.
    """
    if not remote or remote.startswith("-") or any(ch.isspace() for ch in remote):
        return None
    proc = run_git(Path(working_copy), "remote", "get-url", remote)
    if proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", "replace").strip()


def remote_host(url: str) -> str | None:
    """The host of a git remote URL, lower-cased (never its credentials), or None for a
    local path or nonsense."""
    split = _split_remote_url(url)
    return split[0].lower() if split else None


def parse_remote_url(url: str) -> str | None:
    """``owner/name`` from a git remote URL, or None for a local path or nonsense.

    Understands ``https://host/owner/name(.git)(/)``, ``http://``, ``git://``,
    ``ssh://[user@]host[:port]/owner/name.git``, scp-like ``git@host:owner/name.git``,
    credentials in the URL (dropped), any host (GitHub Enterprise, GitLab), and deeper
    paths (``group/subgroup/name``: the last two segments are taken). ``file://`` URLs
    and plain paths name no hosted repository, so they give None.
    """
    split = _split_remote_url(url)
    if split is None:
        return None
    segments = [unquote(s) for s in split[1].replace("\\", "/").split("/") if s]
    if len(segments) < 2:
        return None
    owner, name = segments[-2], segments[-1].removesuffix(".git")
    try:
        return validate_repo(f"{owner}/{name}")
    except ValidationError:
        return None


def _split_remote_url(url: str) -> tuple[str, str] | None:
    """``(host, path)`` of a remote URL (URL or scp-like syntax); None for ``file://``,
    a local path or nonsense."""
    url = url.strip()
    if "://" in url:
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError:  # e.g. a malformed port; do not echo the URL (credentials)
            return None
        if parts.scheme.lower() == "file" or not host:
            return None
        return host, parts.path
    match = _SCP_LIKE.match(url)
    # A one-letter "host" is a Windows drive (C:\repo), i.e. a local path.
    if match is None or len(match["host"]) == 1:
        return None
    return match["host"], match["path"]
