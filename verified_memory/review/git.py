"""The diff a review looks at, from a local repository: ``base...head`` as GitHub does it.

Semantics (the same as a GitHub pull request): the change under review is what
``head`` adds since its **merge base** with ``base``, i.e. ``git diff base...head``. When
``base`` is an ancestor of ``head`` (a branch cut from it and not yet behind), the merge
base is ``base`` itself. When ``base`` has moved on since the branch was cut, its new
commits are not the branch's change: the review diffs from the merge base and says so in
a note. Two cases are refused, each with one clear line: ``base`` and ``head`` share no
history (no merge base), and ``head`` is already contained in ``base`` (``head`` is an
ancestor of it: nothing to review; usually ``--base`` and ``--head`` swapped).

The hunks come from one ``git diff-tree -p -M --unified=0`` call (plumbing: user
configuration such as ``diff.noprefix`` or colour cannot change what we parse). With no
context lines, every hunk line is a changed line: ``-`` lines are the base lines the
change removes, and the ``@@ -a,0`` of a pure insertion names the base line it follows.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from verified_memory.errors import NotFound, SourceUnavailable, ValidationError, VerifiedMemoryError
from verified_memory.review.diff import Diff, FileDiff, HunkReader
from verified_memory.sources.discovery import remote_host, remote_url, repo_from_remote
from verified_memory.sources.local_git import LocalGitSource, check_ref, git_message, run_git

__all__ = [
    "DEFAULT_BASES",
    "clone_holding",
    "default_base",
    "local_diff",
    "merge_base",
    "parse_diff",
    "remote_web_url",
]

#: Tried in order when no base is given.
DEFAULT_BASES = ("origin/HEAD", "main", "master")

_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _resolve(path: Path, ref: str, flag: str) -> str:
    check_ref(ref, path)
    proc = run_git(path, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    sha = proc.stdout.decode("ascii", "replace").strip()
    if proc.returncode != 0 or not sha:
        raise NotFound(f"{flag} {ref!r} does not exist in {path}")
    return sha


def local_diff(path: str | os.PathLike[str], base: str, head: str = "HEAD") -> Diff:
    """The change ``head`` makes since its merge base with ``base`` (see the module)."""
    repo = Path(path)
    base_commit = _resolve(repo, base, "--base")
    head_commit = _resolve(repo, head, "--head")
    notes = _uncommitted(repo, head, head_commit)
    if base_commit == head_commit:
        return Diff(base, head, base_commit, head_commit, (),
                    (f"{base} and {head} are the same commit: nothing changed", *notes))
    proc = run_git(repo, "merge-base", base_commit, head_commit)
    merge_base = proc.stdout.decode("ascii", "replace").strip()
    if proc.returncode == 1 and not merge_base:
        raise ValidationError(f"--base {base} is not an ancestor of --head {head}, and they "
                              "share no history: there is no change to review")
    if proc.returncode != 0:
        raise SourceUnavailable(f"git merge-base failed in {repo}: {git_message(proc)}")
    if merge_base == head_commit:
        raise ValidationError(f"--head {head} is already part of --base {base} (an ancestor "
                              "of it): nothing to review; are --base and --head swapped?")
    if merge_base != base_commit:
        notes.append(f"{base} is not an ancestor of {head} (it moved on since the branch "
                     f"was cut): reviewing the changes since their merge base "
                     f"{merge_base[:12]}, as GitHub does")
    proc = run_git(repo, "diff-tree", "-r", "-p", "-M", "--unified=0", "--no-color",
                   "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/",
                   merge_base, head_commit, "--")
    if proc.returncode != 0:
        raise SourceUnavailable(f"git diff-tree {merge_base[:12]} {head_commit[:12]} failed "
                                f"in {repo}: {git_message(proc)}")
    files = parse_diff(proc.stdout.decode("utf-8", "surrogateescape"))
    return Diff(base, head, merge_base, head_commit, tuple(files), tuple(notes))


def _uncommitted(repo: Path, head: str, head_commit: str) -> list[str]:
    """A note when ``head`` is the commit checked out and tracked files have edits not
    committed: a review diffs commits, so "touches no cited code" would say nothing of
    them. ``--no-optional-locks``: a review never takes the index lock from the user's
    own git commands. Nothing to say in a bare repository, or when git cannot tell."""
    checked_out = run_git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if checked_out.stdout.decode("ascii", "replace").strip() != head_commit:
        return []
    proc = run_git(repo, "--no-optional-locks", "status", "--porcelain", "-z",
                   "--untracked-files=no")
    if proc.returncode != 0:
        return []
    # -z: "XY path\0" per file, then a rename's or copy's source path as an entry of
    # its own, to skip.
    entries = iter(proc.stdout.split(b"\0"))
    changed = 0
    for entry in entries:
        if entry:
            changed += 1
            if entry[:1] in (b"R", b"C"):
                next(entries, None)
    if not changed:
        return []
    return [f"the working copy has uncommitted changes to {changed} file"
            f"{'' if changed == 1 else 's'}, which this review does not read (it diffs "
            f"commits, up to {head}): commit them to review them"]


# --------------------------------------------------------------------------- parsing


class _File:
    def __init__(self, header: str) -> None:
        self.old, self.new = _header_paths(header)
        self.status = "modified"
        self.binary = False
        self.hunks = HunkReader()

    def done(self) -> FileDiff | None:
        old = None if self.status == "added" else self.old
        new = None if self.status == "removed" else self.new
        if old is None and new is None:
            return None
        return self.hunks.result(path=new, old_path=old, status=self.status,
                                 whole=self.binary)


def parse_diff(text: str) -> list[FileDiff]:
    """Files and hunks of ``git diff -p`` output (any context size, renames included)."""
    files: list[FileDiff] = []
    current: _File | None = None
    for line in text.split("\n"):
        if current is not None and current.hunks.in_hunk:
            current.hunks.feed(line)
            continue
        if line.startswith("diff --git "):
            if current is not None and (done := current.done()) is not None:
                files.append(done)
            current = _File(line[len("diff --git "):])
            continue
        if current is None:
            continue
        if line.startswith("@@"):
            current.hunks.feed(line)
        elif line.startswith("new file mode"):
            current.status = "added"
        elif line.startswith("deleted file mode"):
            current.status = "removed"
        elif line.startswith("rename from "):
            current.old, current.status = _unquote(line[len("rename from "):]), "renamed"
        elif line.startswith("rename to "):
            current.new, current.status = _unquote(line[len("rename to "):]), "renamed"
        elif line.startswith("--- "):
            current.old = _side_path(line[4:], "a/") or current.old
        elif line.startswith("+++ "):
            current.new = _side_path(line[4:], "b/") or current.new
        elif line.startswith("Binary files ") or line.startswith("GIT binary patch"):
            current.binary = True
    if current is not None and (done := current.done()) is not None:
        files.append(done)
    return files


def _unquote(text: str) -> str:
    """A path as git prints it: as is, or C-quoted (``"a\\tb\\303\\251"``)."""
    if not (text.startswith('"') and text.endswith('"') and len(text) >= 2):
        return text
    out = bytearray()
    body, i = text[1:-1], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and len(body) >= i + 4:
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out += ch.encode("utf-8", "surrogateescape")
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _side_path(text: str, prefix: str) -> str | None:
    """The path of a ``---`` / ``+++`` line (None for ``/dev/null``). Git ends the line
    with a tab when the name has a space in it."""
    text = _unquote(text.removesuffix("\t"))
    if text == "/dev/null":
        return None
    return text.removeprefix(prefix)


def _header_paths(rest: str) -> tuple[str | None, str | None]:
    """Both paths of ``diff --git a/X b/Y``. Without quoting this is ambiguous when a
    path holds " b/"; the header is only relied on when X and Y are equal (no rename),
    and renames, ``---`` and ``+++`` lines override it."""
    if rest.startswith('"'):
        end = rest.find('" ', 1)
        while end != -1 and rest[end - 1] == "\\":
            end = rest.find('" ', end + 1)
        if end == -1:
            return None, None
        old, new = _unquote(rest[: end + 1]), rest[end + 2 :]
        new = _unquote(new)
        return old.removeprefix("a/"), new.removeprefix("b/")
    if rest.endswith('"'):
        start = rest.rfind(' "b/')
        return rest[:start].removeprefix("a/"), _unquote(rest[start + 1 :]).removeprefix("b/")
    half = (len(rest) - 5) // 2
    if half > 0 and rest[half + 2 : half + 5] == " b/":
        return rest[2 : half + 2], rest[half + 5 :]
    return None, None


# --------------------------------------------------------------------------- links


def remote_web_url(path: str | os.PathLike[str], remote: str = "origin",
                   env: dict[str, str] | None = None) -> str | None:
    """The web host of a working copy's remote when it is a GitHub host (github.com, or
    the ``GITHUB_SERVER_URL`` of the GitHub Actions run), for links to cited lines;
    None otherwise. Only the host is taken from the URL (it may carry credentials)."""
    env = dict(os.environ) if env is None else env
    url = remote_url(path, remote)
    host = remote_host(url) if url is not None else None
    if not host:
        return None
    server = (env.get("GITHUB_SERVER_URL") or "").rstrip("/")
    if server and urlsplit(server).hostname == host:
        return server
    if host in ("github.com", "www.github.com"):
        return "https://github.com"
    return None


# --------------------------------------------------------------------------- working copies


def default_base(path: Path) -> str:
    """The branch a change in this working copy goes into, when none is named."""
    for ref in DEFAULT_BASES:
        if run_git(path, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode == 0:
            return ref
    raise ValidationError(f"no --base given, and none of {', '.join(DEFAULT_BASES)} exists in "
                          f"{path}: pass --base REF")


def merge_base(path: Path, base: str, head: str) -> str | None:
    """The merge base of two commits of this repository (None: none, or git failed)."""
    proc = run_git(path, "merge-base", base, head)
    sha = proc.stdout.decode("ascii", "replace").strip()
    return sha if proc.returncode == 0 and sha else None


def clone_holding(path: Path, repo: str, commits: set[str]) -> LocalGitSource | None:
    """The working copy at ``path`` as a source, when it is a clone of ``repo`` holding
    every commit needed (in GitHub Actions: a checkout with fetch-depth 0); reading code
    there costs no requests. None otherwise (a shallow clone, another repository)."""
    if repo_from_remote(path) != repo:
        return None
    source = LocalGitSource(path)
    try:
        for commit in commits:
            source.resolve(commit)
    except VerifiedMemoryError:  # a commit it lacks, or git failing
        source.close()
        return None
    return source
