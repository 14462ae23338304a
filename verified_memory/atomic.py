"""Files written whole or not at all: a reader (git, a browser, a teammate) never sees
half of one, and a failure leaves the old file as it was and no stray temporary."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = ["nearest_existing", "replaced_atomically", "write_atomically"]


def nearest_existing(path: Path) -> Path:
    """The nearest of ``path``'s folders that exists: the one a write that creates
    ``path`` (and the folders on its way) must be allowed into."""
    where = path.parent
    while not where.exists() and where != where.parent:
        where = where.parent
    return where


def write_atomically(path: Path, text: str, *, mode: int = 0o666,
                     keep_mode: bool = False) -> None:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` whole or not at all
    (``replaced_atomically``); ``OSError`` naming ``path`` on failure."""
    with replaced_atomically(path, mode=mode, keep_mode=keep_mode) as fh:
        fh.write(text)


@contextmanager
def replaced_atomically(path: Path, *, mode: int = 0o666,
                        keep_mode: bool = False) -> Iterator[TextIO]:
    """A text file (UTF-8, newlines as written) to fill; it is written to a temporary
    file beside ``path``, renamed into place when the block ends, and removed if the
    block fails. ``mode`` goes through the umask as for any new file (``0o666``: what
    ``open`` gives; ``0o600``: its owner only); with ``keep_mode`` a file that exists
    keeps its own. An ``OSError`` names ``path``, not the temporary file, which the
    user never asked for."""
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        kept = path.stat().st_mode & 0o7777 if keep_mode and path.exists() else None
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as exc:
        raise _naming(exc, path) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            yield fh
        if kept is not None:
            os.chmod(partial, kept)
        os.replace(partial, path)
    except BaseException as exc:
        partial.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _naming(exc, path) from exc
        raise


def _naming(exc: OSError, path: Path) -> OSError:
    """``exc`` as if it had happened to ``path`` (its errno and message kept)."""
    return OSError(exc.errno, exc.strerror or str(exc), os.fspath(path))
