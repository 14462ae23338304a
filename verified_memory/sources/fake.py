"""``DictSource``: an in-memory code source for tests, ours and our users'.

Like ``httpx.MockTransport``, it is public so that code built on verified-memory can be
tested without a git repository::

    source = DictSource({
        "c1": {"app.py": "def main():\\n    return 1\\n"},
        "c2": {"src/app.py": "def main():\\n    return 2\\n"},
    })                                   # HEAD -> "c2", the last commit given
    service = MemoryService(store=..., source=source)
    source.refs["HEAD"] = "c1"           # move HEAD, as a checkout would

History is linear in the order commits are given, unless ``add_commit`` says otherwise
(a commit's parent is the commit its branch pointed at). The main line is ``main``
when such a ref exists, else ``HEAD``: so a fake with only ``HEAD`` behaves like a
repository whose checkout is the main line's tip, and ``refs={"main": ..., "HEAD":
...}`` models a checkout elsewhere (a view).

Blob shas are real git blob shas, so a citation fingerprinted here matches one made
against a real repository holding the same bytes. ``blob_reads`` counts ``read_blob``
calls per sha, so a test can check the cost model (an unchanged file is never read).
Set ``fail_with`` to simulate an outage: every call then raises ``SourceUnavailable``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from types import MappingProxyType, TracebackType
from typing import Self

from verified_memory.errors import NotFound, SourceUnavailable, ValidationError
from verified_memory.sources.base import MainLine, Rename, Suffixes, git_blob_sha, narrowed

__all__ = ["DictSource"]

_MIN_PREFIX = 4  # git's shortest abbreviated object id


class DictSource:
    """Commits as dicts of path -> content (``bytes``, or ``str`` stored as UTF-8).

    ``commits`` maps commit ids to their files; ``refs`` maps names (``HEAD``, ``main``,
    tags) to commit ids and defaults to ``{"HEAD": <the last commit given>}``. Both stay
    editable: ``refs`` is a plain dict, and ``add_commit`` adds a commit later.
    ``resolve`` accepts a ref name, a commit id, or an unambiguous prefix (4+ chars)
    of a commit id.
    """

    pins_commits: bool = True

    def __init__(
        self,
        commits: Mapping[str, Mapping[str, bytes | str]],
        refs: Mapping[str, str] | None = None,
        *,
        fail_with: Exception | None = None,
    ) -> None:
        self._trees: dict[str, Mapping[str, str]] = {}
        self._blobs: dict[str, bytes] = {}
        self._parents: dict[str, tuple[str, ...]] = {}
        previous: tuple[str, ...] = ()
        for commit_id, files in commits.items():
            self._add(commit_id, files, previous)
            previous = (commit_id,)
        if refs is None:
            refs = {"HEAD": next(reversed(self._trees))} if self._trees else {}
        self.refs: dict[str, str] = dict(refs)
        for name, commit_id in self.refs.items():
            if commit_id not in self._trees:
                raise ValidationError(f"ref {name!r} points at unknown commit {commit_id!r}")
        self.fail_with = fail_with
        self.blob_reads: Counter[str] = Counter()
        self.closed = False

    def __repr__(self) -> str:
        return f"DictSource(commits={list(self._trees)!r}, refs={self.refs!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def commits(self) -> tuple[str, ...]:
        """Commit ids, in the order they were added."""
        return tuple(self._trees)

    def add_commit(
        self,
        commit_id: str,
        files: Mapping[str, bytes | str],
        *,
        refs: Iterable[str] = ("HEAD",),
        parents: Sequence[str] | None = None,
    ) -> str:
        """Add a commit and point ``refs`` at it (as committing on a branch would).

        Its parents default to the commit the first of ``refs`` pointed at (give two
        for a merge)."""
        if commit_id in self._trees:
            raise ValidationError(f"commit {commit_id!r} already exists")
        refs = list(refs)
        if parents is None:
            parents = [self.refs[refs[0]]] if refs and refs[0] in self.refs else []
        for parent in parents:
            if parent not in self._trees:
                raise ValidationError(f"parent {parent!r} of {commit_id!r} is unknown")
        self._add(commit_id, files, tuple(parents))
        for name in refs:
            self.refs[name] = commit_id
        return commit_id

    # ------------------------------------------------------------------ the Protocol

    def resolve(self, ref: str) -> str:
        self._check()
        if ref in self.refs:
            commit_id = self.refs[ref]
            if commit_id not in self._trees:
                raise NotFound(f"ref {ref!r} points at unknown commit {commit_id!r}")
            return commit_id
        if ref in self._trees:
            return ref
        if len(ref) >= _MIN_PREFIX:
            matches = [c for c in self._trees if c.startswith(ref)]
            if len(matches) == 1:
                return matches[0]
            if matches:
                raise NotFound(f"ref {ref!r} is ambiguous in DictSource")
        raise NotFound(f"ref {ref!r} does not exist in DictSource")

    def tree(self, revision: str) -> Mapping[str, str]:
        self._check()
        return self._trees[self.resolve(revision)]

    def read_blob(self, blob_sha: str) -> bytes:
        self._check()
        self.blob_reads[blob_sha] += 1
        try:
            return self._blobs[blob_sha]
        except KeyError:
            raise NotFound(f"blob {blob_sha!r} does not exist in DictSource") from None

    def renames(self, old_revision: str, new_revision: str, *,
                suffixes: Suffixes = None) -> Sequence[Rename]:
        """Exact renames (same blob sha at a path new in ``new``) and deletions (of the
        files of ``suffixes``, as ``narrowed`` says, when given).

        Unlike git there is no similarity search: an edited and moved file is reported
        as a deletion, which is what a test of the fallback path needs anyway.
        """
        self._check()
        old = self._trees[self.resolve(old_revision)]
        new = self._trees[self.resolve(new_revision)]
        added: dict[str, list[str]] = {}
        for path, sha in new.items():
            if path not in old:
                added.setdefault(sha, []).append(path)
        found: list[Rename] = []
        for path in sorted(old):
            if path in new:
                continue
            candidates = added.get(old[path])
            found.append(Rename(path, candidates.pop(0), 100) if candidates else Rename(path, None))
        return list(narrowed(found, suffixes))

    def main_line(self, branch: str | None = None) -> MainLine | None:
        """``branch`` (it must be a ref), else ``main`` when it is a ref, else ``HEAD``."""
        self._check()
        if branch is not None:
            if branch not in self.refs:
                raise NotFound(f"the main line {branch!r} is not a ref of DictSource")
            return MainLine(branch, branch, "configured")
        name = "main" if "main" in self.refs else "HEAD"
        return MainLine(name, name, "DictSource")

    def contained(self, commits: Collection[str], tip: str) -> frozenset[str]:
        self._check()
        seen: set[str] = set()
        todo = [self.resolve(tip)]
        while todo:
            commit = todo.pop()
            if commit not in seen:
                seen.add(commit)
                todo.extend(self._parents.get(commit, ()))
        return frozenset(c for c in commits if c in seen)

    def close(self) -> None:
        """Mark the source closed (``closed`` lets a test check that its owner closed it)."""
        self.closed = True

    # ------------------------------------------------------------------ helpers

    def _add(self, commit_id: str, files: Mapping[str, bytes | str],
             parents: tuple[str, ...]) -> None:
        self._parents[commit_id] = parents
        tree: dict[str, str] = {}
        for path, content in sorted(files.items()):
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            sha = git_blob_sha(data)
            self._blobs[sha] = data
            tree[path] = sha
        self._trees[commit_id] = MappingProxyType(tree)

    def _check(self) -> None:
        error = self.fail_with
        if error is None:
            return
        if isinstance(error, SourceUnavailable):
            raise error
        raise SourceUnavailable(f"simulated outage: {error}") from error
