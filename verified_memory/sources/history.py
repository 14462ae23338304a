"""What a local repository's history says for the ref rule: which branch is the main
line, and which commits its tip contains.

A memory is a claim about the main line (docs/ARCHITECTURE.md, the ref rule). In a
clone the main line is ``origin``'s default branch, which ``refs/remotes/origin/HEAD``
names; its tip here is the remote-tracking ref (what was last fetched or pushed), not
the local branch, which may hold commits nobody else has yet, or lag behind. A
repository without that symbolic ref (created locally, or fetched without it) falls
back to ``main``, then ``master``. ``git config vmem.truthRef BRANCH`` (or the
``branch`` a caller passes, e.g. from ``VMEM_TRUTH_REF``) overrides the guess.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from verified_memory.errors import NotFound, SourceUnavailable
from verified_memory.sources.base import MainLine
from verified_memory.sources.local_git import FULL_SHA, check_ref, git_message, run_git

__all__ = ["CONFIG_KEY", "contained_commits", "find_main_line"]

#: The git configuration key that names a repository's main line.
CONFIG_KEY = "vmem.truthRef"
_REMOTE = "refs/remotes/origin/"
_GUESSES = ("main", "master")


def find_main_line(path: Path, branch: str | None = None) -> MainLine | None:
    """The main line of the repository at ``path`` (see the module docstring).

    A configured branch that exists nowhere raises ``NotFound``: a typo there must not
    silently make every check a view."""
    how = "configured"
    if branch is None:
        branch = _configured(path)
        how = f"git config {CONFIG_KEY}"
    if branch is not None:
        check_ref(branch, path)
        names = [f"{_REMOTE}{branch}", f"refs/heads/{branch}"]
        found = _refs(path, names)
        for name in names:
            if name in found:
                return MainLine(branch, name, how)
        proc = run_git(path, "rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}")
        if proc.returncode == 0:  # a ref spelled out in full, e.g. origin/develop
            return MainLine(branch, branch, how)
        raise NotFound(f"the main line {branch!r} ({how}) does not exist in {path}")
    names = [f"{_REMOTE}HEAD", *(f"{_REMOTE}{b}" for b in _GUESSES),
             *(f"refs/heads/{b}" for b in _GUESSES)]
    found = _refs(path, names)
    target = found.get(f"{_REMOTE}HEAD")
    if target and target.startswith(_REMOTE) and target in found:
        return MainLine(target.removeprefix(_REMOTE), target, "origin/HEAD")
    if target and target.startswith(_REMOTE):
        # A dangling origin/HEAD: its target was never fetched.
        name = target.removeprefix(_REMOTE)
        if f"refs/heads/{name}" in found:
            return MainLine(name, f"refs/heads/{name}", "origin/HEAD (local branch)")
    for name in names[1:]:
        if name in found:
            short = name.removeprefix(_REMOTE).removeprefix("refs/heads/")
            return MainLine(short, name, f"no origin/HEAD: {short} exists")
    return None


def contained_commits(path: Path, commits: Collection[str], tip: str,
                      known: Callable[[list[str]], set[str]]) -> frozenset[str]:
    """Those of ``commits`` that ``tip``'s history contains (``tip`` included).

    One ``git rev-list --stdin`` lists what the commits add beyond ``tip``; whatever it
    does not list is contained. ``known`` filters the commits to those the repository
    has (git rev-list refuses an unknown one), through the source's cat-file process."""
    wanted = sorted({c for c in commits if isinstance(c, str) and FULL_SHA.fullmatch(c)})
    present = known(wanted) if wanted else set()
    if not present:
        return frozenset()
    request = "".join(f"{c}\n" for c in sorted(present)) + f"^{tip}\n"
    proc = run_git(path, "rev-list", "--stdin", input=request.encode("ascii"))
    if proc.returncode != 0:
        raise SourceUnavailable(f"git rev-list failed in {path}: {git_message(proc)}")
    beyond = set(proc.stdout.decode("ascii", "replace").split())
    return frozenset(present - beyond)


def _configured(path: Path) -> str | None:
    proc = run_git(path, "config", "--get", CONFIG_KEY)
    value = proc.stdout.decode("utf-8", "replace").strip() if proc.returncode == 0 else ""
    return value or None


def _refs(path: Path, names: list[str]) -> dict[str, str]:
    """Which of ``names`` exist exactly: name -> the ref it points at symbolically
    (empty for a plain ref). One ``git for-each-ref``."""
    proc = run_git(path, "for-each-ref", "--format=%(refname)%00%(symref)", *names)
    if proc.returncode != 0:
        raise SourceUnavailable(f"git for-each-ref failed in {path}: {git_message(proc)}")
    wanted = set(names)
    out: dict[str, str] = {}
    for line in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
        name, _, symref = line.partition("\x00")
        if name in wanted:
            out[name] = symref
    return out
