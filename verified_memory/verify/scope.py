"""The ref rule: whether a verification pass may change what is stored.

A memory is a claim about the repository's main line (its default branch). A pass at
the main line's tip, or an explicit apply at a commit on the main line (after a merge),
reaches **verdicts**: memories that hold are refreshed, memories that broke are
invalidated, invalid memories that hold again are revived. Anywhere else (another
branch, an old tag, a detached HEAD, the worktree, a dry run) a pass is a **view**: it
decides what is injected there and changes nothing stored. A read failure is never a
verdict, and neither is a checkout: a main line that cannot be read or told makes the
pass a view, never a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verified_memory.errors import (
    CredentialsRejected,
    NotFound,
    SourceUnavailable,
    ValidationError,
)
from verified_memory.models import Scope
from verified_memory.sources.base import CodeSource, MainLine

__all__ = ["TRUTH_REF_ENV", "PassScope", "pass_scope", "short_ref"]

#: The environment variable that names the main line for every repository.
TRUTH_REF_ENV = "VMEM_TRUTH_REF"


@dataclass(frozen=True, slots=True)
class PassScope:
    """Where one pass over one repository checks the code, and what it may change."""

    kind: Scope
    ref: str  # as asked: HEAD, a branch, a tag, a sha
    revision: str  # the commit it names (or "worktree"; or the ref, when unreadable)
    cause: str  # why the pass is a verdict or a view, for people
    main: MainLine | None = None
    main_commit: str | None = None  # the main line's tip

    @property
    def why(self) -> str:
        """One line: the cause and what follows from it."""
        if self.kind is Scope.VERDICT:
            return f"{self.cause}: verdicts are applied"
        if self.kind is Scope.DRY_RUN:
            return f"{self.cause}: nothing stored changes"
        return f"{self.cause}: a view, nothing stored changes"

    @property
    def judges(self) -> bool:
        return self.kind.judges

    @property
    def at_tip(self) -> bool:
        return self.main_commit is not None and self.revision == self.main_commit

    @property
    def verdict_ref(self) -> str:
        """The name a verdict records (the main line's, else the ref asked)."""
        return self.main.name if self.main is not None else short_ref(self.ref)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.kind.value,
            "ref": self.ref,
            "revision": self.revision,
            "main_line": self.main.name if self.main else None,
            "main_commit": self.main_commit,
            "applies_verdicts": self.judges,
            "why": self.why,
        }


def pass_scope(source: CodeSource, ref: str, *, apply: bool | None = None,
               branch: str | None = None) -> PassScope:
    """The scope of a pass at ``ref``. ``apply``: None applies verdicts only at the main
    line's tip; False is a dry run; True applies them at ``ref`` too, which must then
    be on the main line (an explicit apply after a merge). ``branch`` names the main
    line (configured), else the source finds the default branch.

    Raises ``NotFound`` for an unknown ``ref``, ``ValidationError`` for an explicit
    apply off the main line, and ``CredentialsRejected`` (an error, not an answer that
    could read as checked); a source that cannot be read otherwise gives a view. So does
    a main line that cannot be told or read, even for an explicit apply: whether ``ref``
    is on it cannot be checked, and the ref rule wins."""
    try:
        revision = source.resolve(ref)
    except CredentialsRejected:
        raise
    except SourceUnavailable as exc:
        return PassScope(Scope.VIEW, ref, ref, f"could not read {ref} ({exc})")
    label = _label(ref, revision)
    if apply is False:
        return PassScope(Scope.DRY_RUN, ref, revision, f"dry run at {label}")
    if not source.pins_commits:
        if apply:
            raise ValidationError("verdicts cannot be applied to the worktree: uncommitted "
                                  "files are not the main line")
        return PassScope(Scope.VIEW, ref, revision, "the worktree (files on disk, "
                         "uncommitted changes included) is not the main line")
    try:
        main = source.main_line(branch)
        # Asked at the main line by its name: one resolution (a request, on GitHub).
        tip = (None if main is None else revision if ref in (main.ref, main.name, *main.aliases)
               else source.resolve(main.ref))
    except CredentialsRejected:
        raise
    except (NotFound, SourceUnavailable) as exc:
        # Even an explicit apply: whether ``ref`` is on the main line cannot be checked.
        return PassScope(Scope.VIEW, ref, revision, _unapplied(
            apply, label, f"the main line could not be told ({exc})"))
    if main is None or tip is None:
        return PassScope(Scope.VIEW, ref, revision, _unapplied(
            apply, label, "cannot tell which branch is this repository's main line (set "
                          f"{TRUTH_REF_ENV} or `git config vmem.truthRef BRANCH`)"))
    if revision == tip:
        return PassScope(Scope.VERDICT, ref, revision, f"{label} is the tip of {main.name}",
                         main, tip)
    if apply:
        if revision not in source.contained([revision], tip):
            raise ValidationError(
                f"cannot apply verdicts at {label}: it is not on {main.name} (tip "
                f"{tip[:12]}); verdicts are applied on the main line only")
        return PassScope(Scope.VERDICT, ref, revision,
                         f"explicit apply at {label}, on {main.name}", main, tip)
    # Local main behind or ahead of the remote's: name the remote branch, which is the tip.
    named = short_ref(main.ref) if short_ref(ref) == main.name else main.name
    return PassScope(Scope.VIEW, ref, revision,
                     f"{label} is not the tip of {named} ({tip[:12]})", main, tip)


def _unapplied(apply: bool | None, label: str, cause: str) -> str:
    """Why a pass is a view when the main line is unknown; an explicit apply is named,
    so that whoever asked for verdicts reads why none were applied."""
    return f"not applied at {label}: {cause}" if apply else cause


def _label(ref: str, revision: str) -> str:
    """``feature/x (1a2b3c4d5e6f)`` for people: a ref's short name and its commit."""
    short = revision[:12]
    return short if ref in (revision, short) else f"{short_ref(ref)} ({short})"


def short_ref(ref: str) -> str:
    """``refs/heads/feature/x`` -> ``feature/x`` (likewise tags and remote branches)."""
    for prefix in ("refs/heads/", "refs/tags/", "refs/remotes/"):
        if ref.startswith(prefix):
            return ref.removeprefix(prefix)
    return ref
