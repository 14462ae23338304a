"""A ``CodeSource`` over the files on disk of a working copy, edits and all.

An agent cites code it is looking at, which is often not committed yet. This source
serves exactly that: tracked files as they are on disk (modified or not) plus untracked
files that ``.gitignore`` does not exclude. There is one revision, ``"worktree"``, and
since it is not a commit, ``pins_commits`` is False: citations made here carry no
commit sha.

Freshness over caching: the working tree changes under a long-lived server, and an
agent may edit a file and verify a memory in the same second. So ``tree()`` returns a
live, lazy view: a lookup checks the file's ``lstat`` signature and hashes it again when
it changed (or changed so recently that the signature cannot be trusted, as git's
"racy clean" rule has it). The file list (``git ls-files``) is taken once and taken
again only when a full iteration needs it or a lookup finds a file created after it.
Hashed bytes are kept by blob sha, so ``read_blob`` after a lookup does not read the
file again.

Symbolic links are never followed, neither as the cited file nor on its way: each
directory of a path is opened in turn without following links (``O_NOFOLLOW``, relative
to the one before), so a link swapped in for a file or a directory, even after the
listing, can never make this source read a file outside the working copy.

A file that is there but cannot be read (no permission on it or on a directory on its
way, an I/O error) raises ``SourceUnavailable``, which makes the citation unverifiable:
it is never taken for a file that is gone.

Blob shas are those of the bytes on disk. Where git applies filters (``core.autocrlf``,
``.gitattributes`` eol or clean filters) they can differ from the committed blob of an
unmodified file; the ladder's step 2 (same lines, by hash) still recognises the code.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from verified_memory.errors import NotFound, SourceUnavailable
from verified_memory.sources.base import ClosingSource, MainLine, Rename, Suffixes, git_blob_sha
from verified_memory.sources.discovery import find_working_copy
from verified_memory.sources.local_git import (
    FULL_SHA,
    LocalGitSource,
    MemoryBlobCache,
    check_ref,
    check_repository,
    decode_path,
    parse_raw_diff,
    pathspecs,
    run_git,
)

__all__ = ["REVISION", "WorktreeSource", "WorktreeTree"]

#: The one revision a working tree has; ``resolve`` returns it for every ref.
REVISION = "worktree"

#: A file modified less than this long before we hashed it may be modified again
#: without its mtime changing (coarse timestamps), so its hash is not trusted later.
_RACY_NS = 2_000_000_000

_Signature = tuple[int, int, int, int]


def _signature(st: os.stat_result) -> _Signature:
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


@dataclass(frozen=True, slots=True)
class _Hashed:
    signature: _Signature
    sha: str
    trusted: bool  # False: hash again on next lookup even if the signature is the same


class WorktreeSource(ClosingSource):
    """Files on disk of the working copy that contains ``path`` (its top level is used).

    A bare repository, or a directory outside any working copy, raises ``NotFound``.
    ``read_blob`` also serves blobs from the repository's object database (a committed
    version of a file), through a ``LocalGitSource`` started only when needed.
    """

    pins_commits: bool = False

    def __init__(
        self, path: str | os.PathLike[str], *, cache_bytes: int = 256 * 1024 * 1024
    ) -> None:
        given = Path(path).absolute()
        check_repository(given)
        root = find_working_copy(given)
        if root is None:
            raise NotFound(f"{given} is a bare repository: it has no working tree")
        self.root = root
        self._lock = threading.RLock()
        self._blobs = MemoryBlobCache(cache_bytes)
        self._hashed: dict[str, _Hashed] = {}
        self._sha_paths: dict[str, str] = {}  # blob sha -> a path that had it
        self._listed: frozenset[str] | None = None
        self._listed_order: tuple[str, ...] = ()
        self._listed_at_ns = 0
        self._objects: LocalGitSource | None = None

    def __repr__(self) -> str:
        return f"WorktreeSource({os.fspath(self.root)!r})"

    def close(self) -> None:
        """Stop the object-database helper, if one was started. Safe to call twice."""
        with self._lock:
            if self._objects is not None:
                self._objects.close()
                self._objects = None

    # ------------------------------------------------------------------ the Protocol

    def resolve(self, ref: str) -> str:
        """Always ``"worktree"``: whatever ref is asked for, this source serves the disk.

        The ref is still checked for shape (no whitespace, no leading '-') so that a
        malformed one fails here as it would with any other source.
        """
        check_ref(ref, self.root)
        return REVISION

    def tree(self, revision: str) -> Mapping[str, str]:
        """A live view of the working tree: path -> blob sha of the bytes on disk now."""
        if revision != REVISION:
            raise NotFound(
                f"revision {revision!r} is not available from the working tree of "
                f"{self.root}; it has only {REVISION!r}"
            )
        return WorktreeTree(self)

    def read_blob(self, blob_sha: str) -> bytes:
        """Bytes hashed earlier (no new read), else the file again, else git's objects."""
        cached = self._blobs.get(blob_sha)
        if cached is not None:
            return cached
        path = self._sha_paths.get(blob_sha)
        if path is not None:
            data = self._read(path)
            if data is not None and git_blob_sha(data) == blob_sha:
                self._blobs.put(blob_sha, data)
                return data
        if not isinstance(blob_sha, str) or not FULL_SHA.fullmatch(blob_sha):
            raise NotFound(f"blob {blob_sha!r} does not exist in {self.root}")
        try:
            return self._git().read_blob(blob_sha)
        except NotFound:
            raise NotFound(
                f"blob {blob_sha} is neither in the working tree nor in the repository "
                f"at {self.root}"
            ) from None

    def renames(self, old_revision: str, new_revision: str, *,
                suffixes: Suffixes = None) -> Sequence[Rename]:
        """Renames and deletions from a commit to the files on disk (``git diff -M``;
        among the files of ``suffixes``, when given).

        ``old_revision`` is used when it names a commit here, else ``HEAD``. Files moved
        to a path git does not track yet show up as deletions only. A repository with
        no commits, or any failure, gives an empty list: the verifier then searches
        the tree instead.
        """
        bases = [old_revision] if old_revision != REVISION else []
        for base in [*bases, "HEAD"]:
            try:
                check_ref(base, self.root)
                proc = run_git(
                    self.root, "diff", "--no-color", "--no-ext-diff", "--raw", "--no-abbrev",
                    "-z", "--find-renames", "--diff-filter=DR", base, "--",
                    *pathspecs(suffixes),
                )
            except (NotFound, SourceUnavailable):
                continue
            if proc.returncode == 0:
                return parse_raw_diff(proc.stdout)[0]
        return []

    def main_line(self, branch: str | None = None) -> MainLine | None:
        """The repository's main line, as ``LocalGitSource`` finds it. (Files on disk
        are never its tip: a check here is always a view.)"""
        return self._git().main_line(branch)

    def contained(self, commits: Collection[str], tip: str) -> frozenset[str]:
        """Commits in ``tip``'s history (``tip`` a commit of this repository)."""
        return self._git().contained(commits, tip)

    # ------------------------------------------------------------------ helpers

    def _git(self) -> LocalGitSource:
        """The repository behind the files (its objects, refs and history), started
        on first use."""
        with self._lock:
            if self._objects is None:
                self._objects = LocalGitSource(self.root)
            return self._objects

    def listing(self, *, refresh: bool = False) -> tuple[str, ...]:
        """Tracked and untracked-but-not-ignored paths (``git ls-files -co``), as listed.

        Deleted tracked files are still in the list; lookups filter them out.
        """
        with self._lock:
            if self._listed is None or refresh:
                started = time.time_ns()
                proc = run_git(self.root, "ls-files", "-z", "-c", "-o", "--exclude-standard")
                if proc.returncode != 0:
                    raise SourceUnavailable(
                        f"git ls-files failed in {self.root}: "
                        + proc.stderr.decode("utf-8", "replace").strip()[:200]
                    )
                order = tuple(
                    dict.fromkeys(decode_path(p) for p in proc.stdout.split(b"\0") if p)
                )
                self._listed_order = order
                self._listed = frozenset(order)
                self._listed_at_ns = started
            return self._listed_order

    def stat(self, path: str) -> os.stat_result | None:
        """``lstat`` of a listed regular file (not a symlink, nor behind one), else None."""
        if not isinstance(path, str) or not _safe(path):
            return None
        self.listing()
        st = self._lstat(path)
        if st is None or not stat.S_ISREG(st.st_mode):
            return None
        with self._lock:
            assert self._listed is not None
            if path not in self._listed:
                if st.st_ctime_ns < self._listed_at_ns:
                    return None  # older than the list, so ignored on purpose
                self.listing(refresh=True)  # created after we listed: list again
                if path not in self._listed:
                    return None
        return st

    def blob_sha(self, path: str) -> str | None:
        """The blob sha of a listed regular file's bytes now, hashing only when needed."""
        st = self.stat(path)
        if st is None:
            return None
        signature = _signature(st)
        with self._lock:
            known = self._hashed.get(path)
        if known is not None and known.trusted and known.signature == signature:
            return known.sha
        started = time.time_ns()
        data = self._read(path)
        if data is None:
            return None
        sha = git_blob_sha(data)
        self._blobs.put(sha, data)
        trusted = st.st_mtime_ns < started - _RACY_NS
        with self._lock:
            self._hashed[path] = _Hashed(signature, sha, trusted)
            self._sha_paths[sha] = path
        return sha

    def entry_kind(self, revision: str, path: str) -> str | None:
        """What ``path`` is on disk when it is not a file this source reads: 'a symbolic
        link', 'a directory'; None otherwise (a path through a link too: which of its
        directories is the link, ``sources.base.no_file`` asks)."""
        if revision != REVISION or not isinstance(path, str) or not _safe(path):
            return None
        parent = self._parent_fd(path)
        if parent is None:
            return None
        try:
            st = os.stat(path.rsplit("/", 1)[-1], dir_fd=parent, follow_symlinks=False)
        except OSError:
            return None
        finally:
            os.close(parent)
        if stat.S_ISLNK(st.st_mode):
            return "a symbolic link"
        return "a directory" if stat.S_ISDIR(st.st_mode) else None

    def _parent_fd(self, path: str) -> int | None:
        """The directory holding ``path``, opened one component at a time from the root
        without following a symbolic link; None when a component is not a directory.
        A directory that exists but cannot be opened raises ``SourceUnavailable``."""
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            self._unless_absent(exc, path)
            return None
        for part in path.split("/")[:-1]:
            try:
                inner = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:  # ELOOP / ENOTDIR: a link, a file, or nothing
                os.close(fd)
                self._unless_absent(exc, path)
                return None
            os.close(fd)
            fd = inner
        return fd

    def _lstat(self, path: str) -> os.stat_result | None:
        """``lstat`` of ``path`` inside the working copy, never through a symbolic link."""
        if not _DIR_FD:
            return os.lstat(self.root / path) if self._inside(path) else None
        parent = self._parent_fd(path)
        if parent is None:
            return None
        try:
            return os.stat(path.rsplit("/", 1)[-1], dir_fd=parent, follow_symlinks=False)
        except ValueError:
            return None
        except OSError as exc:
            self._unless_absent(exc, path)
            return None
        finally:
            os.close(parent)

    def _inside(self, path: str) -> bool:
        """Where ``dir_fd`` is missing: whether the directories of ``path`` resolve inside
        the working copy (racy, but the best such a platform allows)."""
        try:
            parent = (self.root / path).parent.resolve(strict=True)
            return parent == self.root.resolve() or self.root.resolve() in parent.parents
        except (OSError, RuntimeError):
            return False

    def _read(self, path: str) -> bytes | None:
        """The file's bytes, refusing to follow a symlink swapped in since ``lstat``, at
        the file or on its way; a special file swapped in is not read either (None, as
        for a file gone). A file that is there but cannot be read (no permission, an
        I/O error) raises ``SourceUnavailable``: it is not gone, and no verdict."""
        flags = (os.O_RDONLY | _NOFOLLOW | getattr(os, "O_BINARY", 0)
                 | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            if _DIR_FD:
                parent = self._parent_fd(path)
                if parent is None:
                    return None
                try:
                    fd = os.open(path.rsplit("/", 1)[-1], flags, dir_fd=parent)
                finally:
                    os.close(parent)
            elif self._inside(path):
                fd = os.open(self.root / path, flags)
            else:
                return None
        except OSError as exc:
            self._unless_absent(exc, path)
            return None
        try:
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    return None
                return handle.read()
        except OSError as exc:
            self._unless_absent(exc, path)
            return None

    def _unless_absent(self, exc: OSError, path: str) -> None:
        """Return when ``exc`` says ``path`` is not there as a file this source reads
        (gone, a link, a special file, a file where a directory should be); raise
        ``SourceUnavailable`` when it is there but unreadable, which is no verdict."""
        if exc.errno in _ABSENT:
            return
        raise SourceUnavailable(
            f"cannot read {path} in the working tree {self.root}: "
            f"{exc.strerror or exc}") from None


class WorktreeTree(Mapping[str, str]):
    """The working tree as path -> blob sha; a value is computed when first looked up.

    ``in`` and ``len`` only ``lstat`` files; ``[]`` and ``get`` hash one file (at most
    once while it is unchanged); iterating lists the tree again and yields the paths
    that are regular files now.
    """

    def __init__(self, source: WorktreeSource) -> None:
        self._source = source

    def __getitem__(self, path: str) -> str:
        sha = self._source.blob_sha(path)
        if sha is None:
            raise KeyError(path)
        return sha

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self._source.stat(path) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._present())

    def __len__(self) -> int:
        return len(self._present())

    def _present(self) -> list[str]:
        listed = self._source.listing(refresh=True)
        return [p for p in listed if self._source.stat(p) is not None]

    def __repr__(self) -> str:
        return f"WorktreeTree({os.fspath(self._source.root)!r})"


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: Errors that mean "no file this source reads is there": gone, not a directory, a
#: symbolic link refused by O_NOFOLLOW (ELOOP; EMLINK and EFTYPE on the BSDs), a
#: socket or device (ENXIO). Anything else (EACCES, EIO, ...) is a failed read.
_ABSENT = frozenset(code for code in (
    errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EMLINK, errno.ENXIO,
    getattr(errno, "EFTYPE", None)) if code is not None)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
#: Whether directories can be walked by descriptor (POSIX); else paths are resolved.
_DIR_FD = bool(_NOFOLLOW) and os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd


def _safe(path: str) -> bool:
    """A relative path that stays inside the working copy (ls-files never lists others)."""
    if not path or path.startswith(("/", "\\")) or "\x00" in path:
        return False
    return ".." not in path.replace("\\", "/").split("/")
