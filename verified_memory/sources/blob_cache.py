"""On-disk caches for remote code sources: blobs by sha, and small JSON documents.

Why on disk: a verification pass against GitHub costs one request per changed cited
file, and the same blobs come back pass after pass (and across processes: the CLI, the
MCP server, a CI job). A git blob sha names its bytes forever, so a blob cached under
its sha can never go stale; the cache only ever saves requests.

Invariants:

- Every write is atomic (a temporary file in the same directory, then ``os.replace``),
  so a reader sees a whole entry or none, even with several processes sharing the
  directory.
- A blob is checked against its sha when read back (``git_blob_sha``), a JSON document
  against the digest written with it: a damaged or foreign file is dropped (one log
  line) and reported as a miss, never returned, so it is asked for again and rewritten.
  A damaged cache is never a verdict, and never keeps a pass from reading the code.
- The cache is best effort: a full disk or a read-only directory makes it a no-op
  (logged once per directory that refused a write), never an error. It is an
  optimisation, not a source of truth.
- Files are created 0600 inside a 0700 directory: blobs of private repositories are
  other people's code.

Default location: ``platformdirs.user_cache_dir("verified-memory")``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from verified_memory.atomic import nearest_existing
from verified_memory.sources.base import git_blob_sha

__all__ = ["DiskBlobCache", "JsonCache", "atomic_write", "default_cache_dir"]

log = logging.getLogger(__name__)

APP_NAME = "verified-memory"

#: A full git object id (sha1 or sha256). Only these name immutable content.
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SAFE_KEY = re.compile(r"[0-9A-Za-z_.-]{1,100}")


def default_cache_dir() -> Path:
    """The user's cache directory for verified-memory (platform conventions)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME))


#: Directories that refused a cache write, each reported once per process: a pass
#: writes an entry per blob and listing, and one line tells what a hundred would.
_REFUSED: set[Path] = set()


def _not_cached(path: Path, exc: OSError) -> None:
    """A write of ``path`` failed: the read goes on uncached; said once for the nearest
    existing directory, the one that refused it."""
    where = nearest_existing(path)
    if where not in _REFUSED:
        _REFUSED.add(where)
        log.warning("disk cache %s is not writable (%s); reading on without caching",
                    where, exc.strerror or exc)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one.

    No fsync: every reader validates what it reads (sha or JSON), so a file torn by a
    crash is a cache miss, and skipping fsync keeps a pass that writes 20 blobs fast.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class DiskBlobCache:
    """Blob bytes keyed by git blob sha, fanned out like git's object directory.

    Shared by every repository and host: identical bytes have identical shas, so a
    fork or a mirror reuses what the original already fetched.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir() / "blobs"

    def __repr__(self) -> str:
        return f"DiskBlobCache({os.fspath(self.root)!r})"

    def _path(self, sha: str) -> Path | None:
        if not _FULL_SHA.fullmatch(sha):
            return None  # never turn arbitrary text into a file name
        return self.root / sha[:2] / sha[2:]

    def get(self, sha: str) -> bytes | None:
        """The cached bytes of ``sha``, or None (absent, unreadable or damaged)."""
        path = self._path(sha)
        if path is None:
            return None
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if len(sha) == 40 and git_blob_sha(data) != sha:
            log.warning("dropping damaged cached blob %s", sha)
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        return data

    def put(self, sha: str, data: bytes) -> None:
        """Keep ``data`` under ``sha`` (ignored when the bytes do not hash to ``sha``)."""
        path = self._path(sha)
        if path is None:
            return
        if len(sha) == 40 and git_blob_sha(data) != sha:
            log.warning("not caching blob %s: its bytes hash differently", sha)
            return
        if path.exists():
            return
        try:
            atomic_write(path, data)
        except OSError as exc:
            _not_cached(path, exc)

    def __contains__(self, sha: object) -> bool:
        path = self._path(sha) if isinstance(sha, str) else None
        return path is not None and path.is_file()


class JsonCache:
    """Small JSON documents by (namespace, key), with a per-namespace size bound.

    Used for what a remote source may remember between processes: the ETag and commit
    of a ref (revalidated on every use), a commit's file listing and a tree's listing
    (immutable, keyed by object id). Namespaces holding immutable entries are bounded
    by count, least recently used first out, so a busy branch does not fill the disk.

    A file is a header line, ``{"key": ..., "sha256": ...}``, then the value as JSON;
    the digest is the value's bytes', so a file edited or damaged by hand (valid JSON
    or not) is told from one this class wrote without parsing the value.
    """

    #: Prune a namespace at most once per this many writes to it (pruning lists it).
    PRUNE_EVERY = 32

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._writes: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"JsonCache({os.fspath(self.root)!r})"

    def _path(self, namespace: str, key: str) -> Path:
        if not _SAFE_KEY.fullmatch(namespace):
            raise ValueError(f"bad cache namespace {namespace!r}")
        name = key if _SAFE_KEY.fullmatch(key) and not key.startswith(".") else (
            hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]
        )
        return self.root / namespace / f"{name}.json"

    def get(self, namespace: str, key: str) -> Any | None:
        """The document stored under ``key``, or None: absent, unreadable, written by an
        older version (no digest), or damaged (dropped, with one log line)."""
        path = self._path(namespace, key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        head, _, body = raw.partition(b"\n")
        try:
            header = json.loads(head)
        except (ValueError, RecursionError):
            return self._damaged(path, "not a cache entry")
        if isinstance(header, dict) and "value" in header and "sha256" not in header:
            return None  # an older version's entry: asked again, and rewritten
        if not isinstance(header, dict) or header.get("key") != key:
            return self._damaged(path, "not the entry of its key")
        if header.get("sha256") != hashlib.sha256(body).hexdigest():
            return self._damaged(path, "its contents do not match their digest")
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):  # a digest over bad JSON: forged by hand
            return self._damaged(path, "not JSON")
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: pruned last
        return value

    @staticmethod
    def _damaged(path: Path, why: str) -> None:
        log.warning("cache entry %s is damaged (%s): dropped, it is asked for again",
                    path, why)
        with contextlib.suppress(OSError):
            path.unlink()

    def put(self, namespace: str, key: str, value: Any, *, keep: int | None = None) -> None:
        """Store ``value``; with ``keep``, bound the namespace to that many documents."""
        path = self._path(namespace, key)
        body = json.dumps(value, separators=(",", ":")).encode()
        header = {"key": key, "sha256": hashlib.sha256(body).hexdigest()}
        data = json.dumps(header, separators=(",", ":")).encode() + b"\n" + body
        try:
            atomic_write(path, data)
        except OSError as exc:
            _not_cached(path, exc)
            return
        if keep is not None:
            count = self._writes.get(namespace, 0)
            self._writes[namespace] = count + 1
            if count % self.PRUNE_EVERY == 0:
                self.prune(namespace, keep)

    def prune(self, namespace: str, keep: int) -> int:
        """Delete all but the ``keep`` most recently used documents; return how many went."""
        folder = self.root / namespace
        try:
            entries = [(e.stat().st_mtime, e.path) for e in os.scandir(folder)
                       if e.name.endswith(".json")]
        except OSError:
            return 0
        if len(entries) <= keep:
            return 0
        entries.sort()
        removed = 0
        for _, path in entries[: len(entries) - keep]:
            with contextlib.suppress(OSError):
                os.unlink(path)
                removed += 1
        return removed
