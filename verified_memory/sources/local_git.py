"""A ``CodeSource`` over a local git repository: a working copy or a bare repository.

Cost model (docs/ARCHITECTURE.md): one long-lived ``git cat-file --batch`` process answers every
ref resolution and blob read of a source, so a thousand blob reads cost a thousand pipe
round trips, not a thousand process starts. ``git ls-tree`` runs once per commit and
``git diff-tree`` once per pair of commits. All three answers are cached, because
commits and blobs are immutable: a cached answer can never go stale.

Errors: git's own failures never reach a caller raw. A path that is not a repository,
an unknown ref or an unknown blob raise ``NotFound``; git missing from ``PATH``, a
cat-file process that died, a pipe that broke or a reply that makes no sense raise
``SourceUnavailable`` (the verifier turns that into ``unverifiable``, not a verdict).

This module also holds the small git helpers that ``worktree`` and ``discovery`` share
(``git_env``, ``run_git``, ``MemoryBlobCache``), so that every git process this package starts
runs in the same scrubbed environment.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import weakref
from collections import deque
from collections.abc import (
    Callable,
    Collection,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import IO, TypeVar

from verified_memory.cache import BoundedCache
from verified_memory.errors import NotFound, SourceUnavailable
from verified_memory.sources.base import ClosingSource, MainLine, Rename, Suffixes
from verified_memory.sources.permissions import unreadable_git_dir, unreadable_object

try:
    import fcntl
except ImportError:  # not on POSIX: pipes keep their size
    fcntl = None  # type: ignore[assignment]

__all__ = ["LocalGitSource", "MemoryBlobCache", "git_env", "raise_if_unreadable", "run_git"]

#: Variables that tell git which repository to use. A git hook (or any parent git
#: process) sets some of them, and they would silently override ``-C <path>``.
_REPO_LOCATING_VARS = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX",
})

#: Variables that change how git reads a pathspec (literally, as globs, ignoring case).
_PATHSPEC_VARS = frozenset({"GIT_LITERAL_PATHSPECS", "GIT_GLOB_PATHSPECS",
                            "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS"})

_T = TypeVar("_T")

#: A full object id (sha1 or sha256 repositories). Only these are cache keys: a short
#: sha or a ref name can come to mean something else, an object id cannot.
FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

_DEFAULT_TIMEOUT = 120.0  # seconds; local git is fast, a hang (dead NFS mount) is not
_DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
#: Object names asked for at once by ``read_blobs``: 41 bytes each, well under the
#: 64 KiB a pipe holds, so writing them never waits for git to read.
_BATCH = 512
_MAX_CACHED_TREES = 16  # a long-lived server sees HEAD move; keep the recent ones only
_MAX_TREE_OBJECTS = 4096  # directories read to look a path up, a few hundred bytes each
#: Paths of one commit whose lookup had to ask git for a tree object (none asked ahead)
#: before it is listed whole.
_WALKS_BEFORE_LISTING = 64
#: What a tree entry's mode says a path is when it is no regular file (``100644``, ``100755``).
_ENTRY_KINDS = {b"40000": "a directory", b"120000": "a symbolic link", b"160000": "a submodule"}
#: (old commit, new commit, the endings of the files compared): one rename diff.
_DiffKey = tuple[str, str, Suffixes]
#: Rename diffs started ahead of need (``prefetch_renames``) and not collected yet, at
#: most: each is a git process, and a bulk check may cite hundreds of commits.
_PENDING_DIFFS = 4


def git_env() -> dict[str, str]:
    """The environment for every git process we start.

    No prompts, no pagers, no optional index locks (we must not fight the user's own
    git for ``index.lock``), messages in English (we match a few of them), and no
    replace objects: with ``refs/replace`` honoured, a blob sha would no longer name
    the bytes it hashes, and step 1 of the ladder relies on exactly that. Nor does the
    caller's environment say how pathspecs read (``GIT_LITERAL_PATHSPECS``...): a
    rename diff's ``:(icase)*.py`` would match no file.
    """
    env = {k: v for k, v in os.environ.items()
           if k not in _REPO_LOCATING_VARS and k not in _PATHSPEC_VARS}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        GIT_OPTIONAL_LOCKS="0",
        GIT_NO_REPLACE_OBJECTS="1",
        LC_ALL="C",
        LANGUAGE="C",
    )
    return env


def git_command(path: Path, *args: str) -> list[str]:
    """``git -C <path> ...`` with repository-configured hooks we never want disabled.

    ``core.fsmonitor`` names a program that git runs on status-like commands; a
    repository we were merely pointed at should not get to run code through us.
    """
    return ["git", "-c", "core.fsmonitor=false", "-C", os.fspath(path), *args]


def run_git(
    path: Path, *args: str, timeout: float = _DEFAULT_TIMEOUT, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run one git command to completion (``input`` on its stdin, else nothing); the
    caller judges the exit code.

    Only the failure to run git at all is turned into an error here (``SourceUnavailable``:
    git is missing, or hung), because what a non-zero exit means depends on the command.
    """
    try:
        return subprocess.run(
            git_command(path, *args),
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,
            capture_output=True,
            env=git_env(),
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise SourceUnavailable("git is not installed (or not on PATH)") from exc
    except subprocess.TimeoutExpired as exc:
        raise SourceUnavailable(f"git {args[0]} in {path} took longer than {timeout:g}s") from exc
    except OSError as exc:
        raise SourceUnavailable(f"could not run git in {path}: {exc}") from exc


def git_message(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The last line git wrote to stderr, without its ``fatal:`` prefix (for messages)."""
    lines = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return f"git exited with status {proc.returncode}"
    last = lines[-1]
    for prefix in ("fatal: ", "error: "):
        last = last.removeprefix(prefix)
    return last


def check_repository(path: Path) -> None:
    """Raise ``NotFound`` (one line, naming the path) unless ``path`` is in a repository."""
    if not path.is_dir():
        raise NotFound(f"{path} is not a git repository (no such directory)")
    proc = run_git(path, "rev-parse", "--git-dir")
    if proc.returncode == 0:
        return
    message = git_message(proc)
    if "dubious ownership" in message:
        # git refuses, for safety, to read a repository owned by someone else.
        raise SourceUnavailable(
            f"git refuses to read {path}: it is owned by another user "
            f"(see 'git config --global --add safe.directory')"
        )
    raise_if_unreadable(path)
    raise NotFound(f"{path} is not a git repository")


def raise_if_unreadable(path: Path) -> None:
    """After git found no repository at ``path``: raise ``SourceUnavailable`` when that
    is because this user may not read its ``.git`` (git says "not a git repository"
    alike), naming what could not be read."""
    why = unreadable_git_dir(path)
    if why is not None:
        raise SourceUnavailable(f"git cannot read the repository at {path}: {why}")


def decode_path(raw: bytes) -> str:
    """A path as git printed it (``-z``: unquoted bytes), as ``os.fsdecode`` would."""
    return raw.decode("utf-8", "surrogateescape")


def check_ref(ref: object, where: Path | str) -> str:
    """Reject what can never be a ref before it reaches a git command line or pipe.

    Whitespace would split the cat-file request line, and a leading '-' would be read
    as an option by the commands that take a revision argument.
    """
    if not isinstance(ref, str) or not ref:
        raise NotFound(f"ref {ref!r} does not exist in {where}: a ref must be a non-empty string")
    if ref.startswith("-") or any(ch.isspace() or ch == "\x00" for ch in ref):
        raise NotFound(
            f"ref {ref!r} does not exist in {where}: "
            "a ref cannot start with '-' or contain whitespace"
        )
    return ref


class MemoryBlobCache(BoundedCache[str, bytes]):
    """Blob sha -> bytes, at most ``max_bytes`` of them, least recently used first out.

    Blobs are immutable, so an entry never goes stale; the bound only keeps a
    long-lived server's memory in check. A blob larger than the whole budget is
    not kept. Thread-safe.
    """

    def __init__(self, max_bytes: int = _DEFAULT_CACHE_BYTES) -> None:
        super().__init__(max_weight=max_bytes, weigh=len)
        self.max_bytes = max_bytes


@dataclass(frozen=True, slots=True)
class _Object:
    sha: str
    type: str
    body: bytes


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a cat-file process politely (EOF on stdin), then firmly; close its pipes. Its
    replies are closed first: objects asked for ahead and never read would keep git
    blocked on a full pipe, unable to see the EOF (a write to a closed pipe ends it)."""
    if proc.stdout is not None:
        proc.stdout.close()
    if proc.stdin is not None:
        with contextlib.suppress(OSError):  # already gone: nothing left to flush
            proc.stdin.close()
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


#: The pipe git writes its replies into, asked to hold this much (Linux allows up to
#: /proc/sys/fs/pipe-max-size, 1 MiB by default): blobs asked ahead wait there.
_PIPE_BYTES = 1024 * 1024


def _widen_pipe(pipe: IO[bytes] | None) -> None:
    """Make the pipe hold ``_PIPE_BYTES`` where the system lets us (Linux); elsewhere
    it holds what it holds, and git waits for the reader sooner."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if pipe is None or set_size is None:
        return
    with contextlib.suppress(OSError):
        fcntl.fcntl(pipe.fileno(), set_size, _PIPE_BYTES)


#: Forks this process descends from (counted in each child): a cat-file started before
#: a fork is the parent's. Asked at every read, so no ``os.getpid()`` (a system call).
_forks = 0


def _count_fork() -> None:
    global _forks
    _forks += 1


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_count_fork)


class _CatFile:
    """The one ``git cat-file --batch`` process of a source, started on first use.

    Not locked itself: the owning source holds its lock around every ``query``. When
    the process dies or a reply is garbled, it is discarded (so the next query starts
    a fresh one) and ``SourceUnavailable`` is raised.

    Objects can be asked for ahead of need (``ask_ahead``): git reads them while the
    verifier works on what it has, and writes them into the pipe (made as large as the
    system allows), where they wait until they are wanted (``take_ahead``) or the next
    query reads past them; each reply read so is handed to ``on_ahead``.
    """

    def __init__(self, path: Path,
                 on_ahead: Callable[[str, _Object | str], None] | None = None) -> None:
        self.path = path
        self.proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes]], _CatFile] | None = None
        self._forks = -1  # ``_forks`` when ``proc`` was started
        self.on_ahead = on_ahead
        self._ahead: deque[str] = deque()  # asked ahead, replies not read yet, in order
        self._waiting: set[str] = set()  # the same names, to look up

    def _start(self) -> subprocess.Popen[bytes]:
        try:
            proc = subprocess.Popen(
                git_command(self.path, "cat-file", "--batch"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,  # never read: a full stderr pipe would hang git
                env=git_env(),
            )
        except FileNotFoundError as exc:
            raise SourceUnavailable("git is not installed (or not on PATH)") from exc
        except OSError as exc:
            raise SourceUnavailable(f"could not start git cat-file in {self.path}: {exc}") from exc
        # Stop the process even if the owner is garbage-collected without close().
        self._finalizer = weakref.finalize(self, _stop, proc)
        self.proc, self._forks = proc, _forks
        _widen_pipe(proc.stdout)
        return proc

    def _own(self) -> subprocess.Popen[bytes]:
        """This process's cat-file: a forked worker (``verify/bulk.py``) that reads through
        a source it inherited starts its own, and leaves its parent's pipe to the parent
        (two processes on one pipe would read each other's replies)."""
        self._leave_parents()
        return self.proc or self._start()

    def _leave_parents(self) -> None:
        """In a forked process, forget the parent's cat-file and what it was asked."""
        if self.proc is not None and self._forks != _forks:
            if self._finalizer is not None:
                self._finalizer.detach()  # the parent's process: not ours to stop
            self.proc = self._finalizer = None
            self._forget_ahead()  # the parent's replies: never read here

    def waiting(self, name: str) -> bool:
        """Whether ``name`` was asked for ahead and its reply is not read yet."""
        self._leave_parents()
        return name in self._waiting

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # runs at most once
        self._finalizer = None
        self.proc = None
        self._forget_ahead()

    def _forget_ahead(self) -> None:
        self._ahead.clear()
        self._waiting.clear()

    def ask_ahead(self, names: Sequence[str]) -> None:
        """Ask for these objects now and read the replies later (``take_ahead``, or
        the next query). At most ``_BATCH`` names wait at once, so writing a request
        never waits for git (the oldest are read first when more are asked)."""
        self._leave_parents()
        names = [n for n in dict.fromkeys(names) if n not in self._waiting][:_BATCH]
        if not names:
            return
        if len(self._ahead) + len(names) > _BATCH:
            self.take_ahead(self._ahead[len(self._ahead) + len(names) - _BATCH - 1])
        self._exchange(lambda stdin: self._write(stdin, names))
        self._ahead.extend(names)
        self._waiting.update(names)

    def take(self, name: str) -> bool:
        """Read the replies asked ahead up to ``name``'s, if it was asked ahead (each
        handed to ``on_ahead``); whether it was."""
        if not self.waiting(name):
            return False
        self.take_ahead(until=name)
        return True

    def take_ahead(self, until: str | None = None) -> None:
        """Read the replies asked ahead, in order, up to ``until`` (all: None), each
        handed to ``on_ahead``."""
        self._leave_parents()
        while self._ahead:
            name = self._ahead[0]
            reply = self._exchange(lambda _: self._read_reply())
            self._ahead.popleft()
            self._waiting.discard(name)
            if self.on_ahead is not None:
                self.on_ahead(name, reply)
            if name == until:
                return

    def _read_reply(self) -> _Object | str:
        assert self.proc is not None
        stdout = self.proc.stdout
        assert stdout is not None
        return self._parse(stdout.readline(), stdout)

    @staticmethod
    def _write(stdin: IO[bytes], names: Sequence[str]) -> None:
        stdin.write(b"".join(name.encode("utf-8", "surrogateescape") + b"\n"
                             for name in names))
        stdin.flush()

    def _exchange(self, step: Callable[[IO[bytes]], _T]) -> _T:
        """One step of talking to git; a dead process or a garbled reply discards it
        (the next query starts a fresh one) and raises ``SourceUnavailable``."""
        proc = self._own()
        assert proc.stdin is not None
        try:
            return step(proc.stdin)
        except (OSError, ValueError) as exc:
            self.close()
            raise SourceUnavailable(
                f"git cat-file in {self.path} stopped answering: {exc}"
            ) from exc

    def query(self, name: str) -> _Object | str:
        """Ask for one object; an ``_Object``, or git's word for why not ('missing')."""
        return self.query_many((name,))[0]

    def query_many(self, names: Sequence[str]) -> list[_Object | str]:
        """The reply to each name, in order, the requests written together (their bytes
        must fit in the pipe's buffer: see ``_BATCH``); the replies asked ahead are
        read first. A dead process or a garbled reply discards the process (the next
        query starts a fresh one) and raises ``SourceUnavailable``."""
        self.take_ahead()

        def exchange(stdin: IO[bytes]) -> list[_Object | str]:
            self._write(stdin, names)
            return [self._read_reply() for _ in names]

        return self._exchange(exchange)

    def _parse(self, header: bytes, stdout: IO[bytes]) -> _Object | str:
        if not header.endswith(b"\n"):
            raise ValueError("the process ended" if not header else "truncated reply")
        fields = header[:-1].split(b" ")
        if len(fields) == 2 or (len(fields) > 1 and fields[-1] in (b"missing", b"ambiguous")):
            return fields[-1].decode("ascii", "replace")
        if len(fields) != 3:
            raise ValueError(f"unexpected reply {header[:200]!r}")
        sha, kind, size_text = fields
        size = int(size_text)
        body = stdout.read(size + 1)
        if len(body) != size + 1 or body[-1:] != b"\n":
            raise ValueError(f"short read: {len(body)} of {size + 1} bytes")
        return _Object(sha.decode("ascii"), kind.decode("ascii"), body[:-1])


class LocalGitSource(ClosingSource):
    """Code from a local repository (working copy or bare), read through git itself.

    Use as a context manager, or call ``close()``, to stop the cat-file process (it is
    also stopped when the source is garbage-collected). Safe to share between threads:
    one lock serialises the pipe, and the caches are filled idempotently.

    ``resolve`` is never cached: a branch moves. Everything keyed by an object id is.
    """

    pins_commits: bool = True

    def __init__(
        self, path: str | os.PathLike[str], *, cache_bytes: int = _DEFAULT_CACHE_BYTES
    ) -> None:
        self.path = Path(path).absolute()
        check_repository(self.path)
        self._lock = threading.Lock()  # guards the cat-file pipe (and blob read-once)
        self._catfile = _CatFile(self.path, on_ahead=self._arrived)
        self._blobs = MemoryBlobCache(cache_bytes)
        self._trees: BoundedCache[str, Mapping[str, str]] = BoundedCache(_MAX_CACHED_TREES)
        self._views: BoundedCache[str, _Tree] = BoundedCache(_MAX_CACHED_TREES)  # per commit
        self._commits: set[str] = set()  # full shas known to name commits here
        # tree objects read to look paths up (``_walk``): name -> (mode, sha)
        self._tree_objects: BoundedCache[str, dict[bytes, tuple[bytes, str]]] = BoundedCache(
            _MAX_TREE_OBJECTS)
        self._tree_reads = 0  # tree objects read one by one (not asked ahead)
        # (old, new, endings) -> renames and deletions, and the paths whose blob changed
        self._renames: dict[_DiffKey, tuple[tuple[Rename, ...], Mapping[str, str]]] = {}
        # diffs started by ``prefetch_renames``, collected by ``renames`` (or stopped
        # by ``close``, or when the source is garbage-collected)
        self._pending: dict[_DiffKey, subprocess.Popen[bytes]] = {}
        weakref.finalize(self, _stop_all, self._pending)
        self._cache_lock = threading.Lock()  # guards _renames, _pending, _main_lines, _contained
        self._main_lines: dict[str | None, MainLine | None] = {}
        self._contained: dict[tuple[str, str], bool] = {}  # (commit, tip) -> contained

    def __repr__(self) -> str:
        return f"LocalGitSource({os.fspath(self.path)!r})"

    def reopen(self) -> LocalGitSource:
        """A twin over the same repository with its own cat-file process and caches (for
        a worker process: the pipe of this one must stay with its owner)."""
        return LocalGitSource(self.path, cache_bytes=self._blobs.max_bytes)

    def close(self) -> None:
        """Stop the cat-file process. Safe to call twice; a later call starts a new one."""
        with self._lock:
            self._catfile.close()
        with self._cache_lock:
            _stop_all(self._pending)

    # ------------------------------------------------------------------ the Protocol

    def resolve(self, ref: str) -> str:
        """The commit ``ref`` names now (branch, tag, ``HEAD``, short or full sha, ``HEAD~2``).

        Tags are peeled to their commit. An unknown or ambiguous ref raises ``NotFound``.
        A full sha that named a commit here once is taken as it is, without asking git
        (it names that commit for ever; a branch moves, so a name is always resolved):
        a query would first read every reply asked for ahead, waiting for git to make
        them all (a bulk check resolves the commit of each group's citations).
        """
        if ref in self._commits:
            return ref
        check_ref(ref, self.path)
        with self._lock:
            reply = self._catfile.query(f"{ref}^{{commit}}")
        if isinstance(reply, str):
            why = "is ambiguous" if reply == "ambiguous" else "does not exist"
            raise NotFound(f"ref {ref!r} {why} in {self.path}{self._missing_hint(ref)}")
        if reply.sha == ref:
            self._commits.add(ref)
        return reply.sha

    def _missing_hint(self, ref: str) -> str:
        """Why a ref may be unknown here, asked only when one fails: a repository with
        no commit yet (``git init``, nothing committed) has no branch at all; a shallow
        clone (CI checks out one commit) lacks the history before its cut. A ref that
        names another kind of object (a file's blob sha given for its commit's) exists,
        but not as a commit: that is said instead."""
        kind = run_git(self.path, "cat-file", "-t", ref)
        if kind.returncode == 0 and kind.stdout.strip() in (b"blob", b"tree"):
            return (f" as a commit: it names a {kind.stdout.strip().decode()}, not a commit "
                    "(a citation's sha is the commit it was made at, not its blob_sha)")
        if not run_git(self.path, "rev-list", "-n", "1", "--all").stdout.strip():
            return ": the repository has no commits yet (commit the code to cite first)"
        if not re.fullmatch(r"[0-9a-fA-F]{7,64}", ref):
            return ""
        proc = run_git(self.path, "rev-parse", "--is-shallow-repository")
        if proc.returncode != 0 or proc.stdout.strip() != b"true":
            return ""
        return (": this is a shallow clone, which lacks older commits (git fetch "
                "--unshallow, or fetch-depth: 0 in actions/checkout)")

    def read_blob(self, blob_sha: str) -> bytes:
        """The bytes of a blob, read through the shared pipe at most once (then cached)."""
        if not isinstance(blob_sha, str) or not FULL_SHA.fullmatch(blob_sha):
            raise NotFound(f"blob {blob_sha!r} does not exist in {self.path}: not a full object id")
        with self._lock:  # held across check-read-store so two threads read a blob once
            cached = self._blobs.get(blob_sha)
            if cached is not None:
                return cached
            if self._catfile.take(blob_sha):  # asked for ahead (``read_blobs``)
                cached = self._blobs.get(blob_sha)
                if cached is not None:
                    return cached
            reply = self._catfile.query(blob_sha)
            if isinstance(reply, str):
                raise self._absent(blob_sha)
            if reply.type != "blob":
                raise NotFound(f"object {blob_sha} in {self.path} is a {reply.type}, not a blob")
            self._blobs.put(blob_sha, reply.body)
            return reply.body

    def _absent(self, blob_sha: str) -> NotFound | SourceUnavailable:
        """A blob git called missing: ``NotFound``, unless a file that may hold it is
        one this user cannot read (git says "missing" alike): then the code could not be
        read, which is no verdict (``SourceUnavailable``, naming the file and why)."""
        why = unreadable_object(self._objects(), blob_sha)
        if why is not None:
            return SourceUnavailable(f"git cannot read blob {blob_sha} in {self.path}: {why}")
        return NotFound(f"blob {blob_sha} does not exist in {self.path}")

    def _objects(self) -> Path:
        """The repository's object directory (asked of git: ``.git`` may be a file, or
        the repository bare)."""
        proc = run_git(self.path, "rev-parse", "--git-path", "objects")
        return self.path / os.fsdecode(proc.stdout.rstrip(b"\r\n"))

    def read_blobs(self, blob_shas: Iterable[str]) -> None:
        """Ask ``git cat-file`` for these blobs now, all the requests written together,
        and return: git reads them while the caller works, and ``read_blob`` takes
        each from the pipe when it is wanted (the ones before it on the way), rather
        than a round trip each.

        A warm-up only: a blob git does not have, or that is not a blob, is skipped here
        and left for ``read_blob`` to report. At most ``_BATCH`` are asked ahead at
        once (the first of them), so git is never left blocked on a full pipe."""
        asked = list(dict.fromkeys(blob_shas))  # before the lock: a tree lookup takes it
        with self._lock:
            self._catfile.ask_ahead([sha for sha in asked
                                     if isinstance(sha, str) and FULL_SHA.fullmatch(sha)
                                     and sha not in self._blobs])

    def _arrived(self, name: str, reply: _Object | str) -> None:
        """A reply asked ahead, read: kept when it is the blob or tree asked for."""
        if isinstance(reply, str):
            return
        if reply.type == "blob" and reply.sha == name:
            self._blobs.put(name, reply.body)
        elif reply.type == "tree":
            self._keep_tree(name, reply)

    def tree(self, revision: str) -> Mapping[str, str]:
        """Every regular file at ``revision``: path -> blob sha (read-only).

        Symlinks (mode 120000) and submodules (160000) are left out: neither has lines
        of code in this repository that a citation could point at.

        The files are listed (``git ls-tree -r``, cached per commit) only when the
        mapping is iterated; a path looked up before that is found through the tree
        objects on its way, read through the cat-file pipe (each once). Most commits
        a pass meets are asked about a few paths (the cited files at their commits):
        no process is started for them.
        """
        return self._view(self._commit(revision))

    def _view(self, commit: str) -> _Tree:
        return self._views.get_or_compute(commit, lambda: _Tree(self, commit))

    def _commit(self, revision: str) -> str:
        """``resolve``, without a call for a full sha known already (asked at every
        path looked up)."""
        return revision if revision in self._commits else self.resolve(revision)

    def entry_kind(self, revision: str, path: str) -> str | None:
        """What ``path`` is at ``revision`` when the tree leaves it out: 'a symbolic
        link', 'a submodule', 'a directory'; None when it is a file or nothing. Found
        down the tree objects on its way, as a path is looked up (a cited file that is
        gone is asked about with each of its directories: neither the commit's listing
        nor a scan of it, which cost a second a pass on a repository of 10,000 files)."""
        entry = self._entry(self._commit(revision), path.rstrip("/"))
        if entry is None or entry[0].startswith(b"100"):
            return None  # nothing there, or a regular file
        return _ENTRY_KINDS.get(entry[0], "not a regular file")

    def renames(self, old_revision: str, new_revision: str, *,
                suffixes: Suffixes = None) -> Sequence[Rename]:
        """Renames (with git's similarity, 0-100) and deletions from ``old`` to ``new``;
        with ``suffixes``, among those files only (a pathspec: git compares far fewer
        files, where a restructure adds and deletes hundreds of others).

        Uses ``git diff-tree -M``, the plumbing twin of ``git diff --name-status -M``,
        because plumbing ignores user configuration (``color.ui``, ``diff.relative``)
        that could change the output we parse. A diff ``prefetch_renames`` started is
        collected rather than run again.
        """
        return self._tree_diff(old_revision, new_revision, suffixes)[0]

    def changed_paths(self, old_revision: str, new_revision: str, *,
                      suffixes: Suffixes = None) -> Sequence[str] | None:
        """Paths at ``new_revision`` whose blob differs from ``old_revision`` (added,
        modified or renamed files; of ``suffixes`` only, when given), in the order the
        tree lists them (git's order is that of their bytes): from the same diff as
        ``renames``, which names their blobs too, so neither commit's tree is listed
        for it."""
        new = self._commit(new_revision)
        changed = self._tree_diff(old_revision, new, suffixes)[1]
        self._view(new).learn(changed)
        return sorted(changed, key=lambda path: path.encode("utf-8", "surrogateescape"))

    def _tree_diff(self, old_revision: str, new_revision: str, suffixes: Suffixes
                   ) -> tuple[tuple[Rename, ...], Mapping[str, str]]:
        """(renames and deletions, the paths whose blob changed) from ``old`` to ``new``
        among the files of ``suffixes``: one ``git diff-tree``, kept per pair."""
        key = (self._commit(old_revision), self._commit(new_revision), suffixes)
        with self._cache_lock:
            cached = self._renames.get(key)
            started = self._pending.pop(key, None)
        if cached is not None:
            return cached
        if started is not None:
            proc = _collect(started, self.path)
        else:
            proc = run_git(self.path, *_diff_tree(*key))
        if proc.returncode != 0:
            raise SourceUnavailable(
                f"git diff-tree {key[0][:12]} {key[1][:12]} failed in {self.path}: "
                f"{git_message(proc)}"
            )
        renames, changed = parse_raw_diff(proc.stdout)
        with self._cache_lock:
            return self._renames.setdefault(key, (tuple(renames), MappingProxyType(changed)))

    def prefetch_renames(self, pairs: Iterable[tuple[str, str]], *,
                         suffixes: Suffixes = None) -> None:
        """Start ``git diff-tree`` for these (old, new) pairs of full commit shas in the
        background (among the files of ``suffixes``), up to ``_PENDING_DIFFS`` at a time,
        so that git looks for renames on another core while the verifier reads and
        parses; ``renames`` collects the answer. A warm-up only: a pair that is not two
        full shas, or a git that cannot start, is left for ``renames`` to meet."""
        with self._cache_lock:
            for key in dict.fromkeys((*pair, suffixes) for pair in pairs):
                if len(self._pending) >= _PENDING_DIFFS:
                    return
                if key in self._renames or key in self._pending or not all(
                        isinstance(sha, str) and FULL_SHA.fullmatch(sha) for sha in key[:2]):
                    continue
                try:
                    self._pending[key] = subprocess.Popen(
                        git_command(self.path, *_diff_tree(*key)),
                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, env=git_env())
                except OSError:
                    return

    def main_line(self, branch: str | None = None) -> MainLine | None:
        """``origin``'s default branch as last fetched (``sources/history.py``), or
        ``branch``; found once per source (the tip is resolved at every use)."""
        from verified_memory.sources.history import find_main_line

        if branch not in self._main_lines:
            self._main_lines[branch] = find_main_line(self.path, branch)
        return self._main_lines[branch]

    def contained(self, commits: Collection[str], tip: str) -> frozenset[str]:
        """Those of ``commits`` in ``tip``'s history: one ``git rev-list`` for those not
        asked before (answers are kept: a commit's ancestry never changes)."""
        from verified_memory.sources.history import contained_commits

        tip = self.resolve(tip)
        asked = {c for c in commits if (c, tip) not in self._contained}
        if asked:
            inside = contained_commits(self.path, asked, tip, self._commits_present)
            for commit in asked:
                self._contained[(commit, tip)] = commit in inside
        return frozenset(c for c in commits if self._contained.get((c, tip)))

    def lacks(self, commits: Collection[str]) -> frozenset[str]:
        """Those of ``commits`` (full shas) this repository does not have (a shallow
        clone's cut): one cat-file exchange."""
        wanted = sorted({c for c in commits if isinstance(c, str) and FULL_SHA.fullmatch(c)})
        return frozenset(wanted) - self._commits_present(wanted) if wanted else frozenset()

    def lacking(self, commits: str, main: str) -> str:
        return (f"this clone lacks its commit {commits} (a shallow clone?), so whether "
                f"{main} contains it cannot be told (git fetch --unshallow)")

    # ------------------------------------------------------------------ helpers

    def _commits_present(self, commits: list[str]) -> set[str]:
        """Which of these full shas name commits here (one cat-file exchange)."""
        present: set[str] = set()
        for start in range(0, len(commits), _BATCH):
            chunk = commits[start:start + _BATCH]
            with self._lock:
                replies = self._catfile.query_many([f"{c}^{{commit}}" for c in chunk])
            present.update(c for c, reply in zip(chunk, replies, strict=True)
                           if not isinstance(reply, str) and reply.sha == c)
        return present

    def _listing(self, commit: str) -> Mapping[str, str]:
        """Every regular file of a commit (one ``git ls-tree -r``, kept per commit)."""
        cached = self._trees.get(commit)
        if cached is not None:
            return cached
        return self._trees.put(commit, MappingProxyType(self._ls_tree(commit)))

    def _walk(self, commit: str, path: str) -> str | None:
        """The blob sha of the regular file ``path`` at ``commit``, or None, found down
        the tree objects from the commit's root."""
        entry = self._entry(commit, path)
        return entry[1] if entry is not None and entry[0].startswith(b"100") else None

    def _entry(self, commit: str, path: str) -> tuple[bytes, str] | None:
        """``path``'s tree entry at ``commit`` (mode, sha), or None when nothing is
        there: a link, a submodule or a file on the way is no directory to go down."""
        *folders, name = path.encode("utf-8", "surrogateescape").split(b"/")
        asked = _folder_name(commit, path)
        if asked is not None:  # the folder, asked for by name ahead of need?
            with self._lock:
                self._catfile.take(asked)
            entries = self._tree_objects.get(asked)
            if entries is not None:
                return entries.get(name)
        entries = self._tree_entries(f"{commit}^{{tree}}")
        for folder in folders:
            mode, sha = entries.get(folder, (b"", ""))
            if mode != b"40000":
                return None
            entries = self._tree_entries(sha)
        return entries.get(name)

    def _tree_entries(self, name: str) -> dict[bytes, tuple[bytes, str]]:
        """A tree object's entries, name -> (mode, sha), read once. ``name`` is a
        resolved commit's root or a tree its trees name, so one git cannot read is a
        broken or partial repository: ``SourceUnavailable``, never a path that is not
        there (as ``git ls-tree`` fails on it)."""
        cached = self._tree_objects.get(name)
        if cached is not None:
            return cached
        with self._lock:
            if self._catfile.take(name):  # asked for ahead (``prefetch_paths``)
                cached = self._tree_objects.get(name)
                if cached is not None:
                    return cached
            reply = self._catfile.query(name)
            self._tree_reads += 1
        if isinstance(reply, str) or reply.type != "tree":
            why = unreadable_object(self._objects(), name) if FULL_SHA.fullmatch(name) else None
            raise SourceUnavailable(f"git cannot read the tree {name} in {self.path}"
                                    + (f": {why}" if why else ""))
        return self._keep_tree(name, reply)

    def _keep_tree(self, name: str, reply: _Object) -> dict[bytes, tuple[bytes, str]]:
        # an object id is 20 bytes in a sha1 repository, 32 in a sha256 one
        entries = parse_tree_object(reply.body, len(reply.sha) // 2)
        if name != reply.sha:  # a commit's root (``<commit>^{tree}``): under both names
            self._tree_objects.put(reply.sha, entries)
        return self._tree_objects.put(name, entries)

    def prefetch_paths(self, wanted: Iterable[tuple[str, str]]) -> None:
        """Ask for the folder of each of these (commit, path) pairs (full commit shas)
        by name, ``<commit>:<folder>``, all together: git walks down to each in one
        exchange, rather than a round trip for each level of tree objects (a bulk
        check looks up its cited files at a handful of commits, each several folders
        deep: a dozen in a Java project). ``_entry`` takes the folder from there. A
        warm-up only: what cannot be read is left for the lookup to meet."""
        names = [_folder_name(commit, path) for commit, path in wanted
                 if isinstance(commit, str) and FULL_SHA.fullmatch(commit)
                 and isinstance(path, str)]
        with self._lock, contextlib.suppress(SourceUnavailable):
            self._catfile.ask_ahead([name for name in names if name is not None
                                     and self._tree_objects.get(name) is None])

    def _ls_tree(self, commit: str) -> dict[str, str]:
        proc = run_git(self.path, "ls-tree", "-r", "-z", "--full-tree", commit)
        if proc.returncode != 0:
            # The commit resolved a moment ago, so this is a broken or partial repository.
            raise SourceUnavailable(
                f"git ls-tree {commit[:12]} failed in {self.path}: {git_message(proc)}"
            )
        return parse_ls_tree(proc.stdout)


def _folder_name(commit: str, path: str) -> str | None:
    """The name cat-file knows ``path``'s folder at ``commit`` by: ``<commit>:<folder>``
    (``<commit>^{tree}`` at the root), or None for a path git would read otherwise
    than the walk down the tree objects does (``.`` and ``..`` are relative to the
    working directory there), or that cannot be written on one line."""
    folder, _, _ = path.rpartition("/")
    if not folder:
        return f"{commit}^{{tree}}"
    if "\n" in path or any(part in ("", ".", "..") for part in folder.split("/")):
        return None
    return f"{commit}:{folder}"


class _Tree(Mapping[str, str]):
    """A commit's regular files, path -> blob sha (``LocalGitSource.tree``): each path
    looked up is found in a diff that named it (``learn``) or down the tree objects,
    until the commit is iterated, listed by another question or asked about more than
    ``_WALKS_BEFORE_LISTING`` paths whose walk had to ask git (one ``ls-tree`` then
    costs less than the walks to come); from then on every lookup is a look in that
    listing."""

    __slots__ = ("_asked", "_commit", "_files", "_learnt", "_source", "_walked")

    def __init__(self, source: LocalGitSource, commit: str) -> None:
        self._source, self._commit = source, commit
        self._files: Mapping[str, str] | None = source._trees.get(commit)
        self._walked: dict[str, str | None] = {}  # path -> blob, found without a listing
        self._learnt: dict[str, str] = {}  # path -> blob, named by a diff to this commit
        self._asked = 0  # walks that asked git for a tree object

    def learn(self, files: Mapping[str, str]) -> None:
        """Paths and blobs a diff to this commit named (its regular files)."""
        self._learnt.update(files)

    def get(self, path: str, default: str | None = None) -> str | None:  # type: ignore[override]
        if self._files is not None:
            found = self._files.get(path)
        else:  # a search asks for thousands of the paths a diff named: those first
            found = self._learnt.get(path) if isinstance(path, str) else None
            if found is None:
                found = self._find(path)
        return default if found is None else found

    def _find(self, path: object) -> str | None:
        """``path``'s blob while the commit is not listed here: walked once, or read in
        a listing made meanwhile, or made now."""
        if not isinstance(path, str):
            return None
        if path in self._walked:
            return self._walked[path]
        self._files = self._source._trees.get(self._commit)
        if self._files is None and self._asked >= _WALKS_BEFORE_LISTING:
            self._files = self._source._listing(self._commit)
        if self._files is not None:
            return self._files.get(path)
        asked = self._source._tree_reads
        found = self._walked[path] = self._source._walk(self._commit, path)
        self._asked += self._source._tree_reads > asked
        return found

    def __getitem__(self, path: str) -> str:
        blob = self.get(path)
        if blob is None:
            raise KeyError(path)
        return blob

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.get(path) is not None

    def _listing(self) -> Mapping[str, str]:
        if self._files is None:
            self._files = self._source._listing(self._commit)
        return self._files

    def __iter__(self) -> Iterator[str]:
        return iter(self._listing())

    def __len__(self) -> int:
        return len(self._listing())

    def keys(self) -> KeysView[str]:
        return self._listing().keys()

    def items(self) -> ItemsView[str, str]:
        return self._listing().items()

    def values(self) -> ValuesView[str]:
        return self._listing().values()


def parse_tree_object(body: bytes, id_size: int = 20) -> dict[bytes, tuple[bytes, str]]:
    """A raw tree object (``<mode> <name>\\0<id>`` per entry, the id ``id_size`` bytes:
    20 for sha1, 32 for sha256) -> name -> (mode, hex sha)."""
    entries: dict[bytes, tuple[bytes, str]] = {}
    at, end = 0, len(body)
    while at < end:
        space = body.index(b" ", at)
        nul = body.index(b"\0", space)
        entries[body[space + 1:nul]] = (body[at:space], body[nul + 1:nul + 1 + id_size].hex())
        at = nul + 1 + id_size
    return entries


def _diff_tree(old: str, new: str, suffixes: Suffixes) -> tuple[str, ...]:
    """The arguments of the rename diff between two commits, among the files of
    ``suffixes``."""
    return ("diff-tree", "-r", "-z", "--raw", "--no-abbrev", "--find-renames", old, new, "--",
            *pathspecs(suffixes))


def pathspecs(suffixes: Suffixes) -> tuple[str, ...]:
    """Git pathspecs of the files whose names end with one of ``suffixes`` (any case;
    ``*`` crosses folders), or none (every file)."""
    return () if suffixes is None else tuple(f":(icase)*{suffix}" for suffix in suffixes)


def _collect(proc: subprocess.Popen[bytes], path: Path,
             timeout: float = _DEFAULT_TIMEOUT) -> subprocess.CompletedProcess[bytes]:
    """A git process started in the background, run to its end (as ``run_git`` would
    have run it)."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        raise SourceUnavailable(f"git diff-tree in {path} took longer than {timeout:g}s") \
            from exc
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _stop_all(pending: dict[_DiffKey, subprocess.Popen[bytes]]) -> None:
    """Stop the background diffs nobody collected (their answers are not needed)."""
    while pending:
        _, proc = pending.popitem()
        with contextlib.suppress(OSError):
            proc.kill()
        proc.communicate()


def parse_ls_tree(output: bytes) -> dict[str, str]:
    """``git ls-tree -r -z`` output -> path -> blob sha, regular files only (what else
    a path is, ``entry_kind`` reads from the tree objects)."""
    files: dict[str, str] = {}
    for entry in output.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, sha = meta.split(b" ")
        # 100644 and 100755 (git canonicalises historic modes such as 100664 to these);
        # 120000 is a symlink, 160000 a submodule commit, 040000 never appears with -r.
        if kind == b"blob" and mode.startswith(b"100"):
            files[decode_path(raw_path)] = sha.decode("ascii")
    return files


def parse_raw_diff(output: bytes) -> tuple[list[Rename], dict[str, str]]:
    """``git diff-tree -r -z --raw -M`` (or ``git diff``) output -> (renames, with git's
    similarity, and deletions, in git's order; the regular files whose content is new
    there, with their blob: added, renamed, or whose blob changed or that were no
    regular file before).

    Each record is ``:<mode> <mode> <sha> <sha> <status>`` then one path, or two for
    renames and copies (``R<score>`` / ``C<score>``). Copies leave the old path in place,
    so they are no rename."""
    tokens = output.split(b"\0")
    renames: list[Rename] = []
    changed: dict[str, str] = {}
    i = 0
    while i < len(tokens) and tokens[i]:
        old_mode, new_mode, old_sha, new_sha, status = tokens[i][1:].decode("ascii").split(" ")
        regular = new_mode.startswith("100")  # not a link or a submodule now
        if status[:1] in ("R", "C"):
            old, new = decode_path(tokens[i + 1]), decode_path(tokens[i + 2])
            i += 3
            if status[0] == "R":
                score = int(status[1:]) if status[1:].isdigit() else 100
                renames.append(Rename(old, new, score))
            if regular:
                changed[new] = new_sha
            continue
        path = decode_path(tokens[i + 1])
        i += 2
        if status == "D":
            renames.append(Rename(path, None))
        elif regular and (old_sha != new_sha or not old_mode.startswith("100")):
            changed[path] = new_sha  # not a change of mode alone
    return renames, changed
