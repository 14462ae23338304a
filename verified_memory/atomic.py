"""Files written whole or not at all: a reader (git, a browser, a teammate) never sees
half of one, and a failure leaves the old file as it was and no stray temporary."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = ["naming", "replaced_atomically", "write_atomically"]


def write_atomically(path: Path, text: str, *, mode: int = 0o666) -> None:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` whole or not at all
    (``replaced_atomically``); ``OSError`` naming ``path`` on failure."""
    with replaced_atomically(path, mode=mode) as fh:
        fh.write(text)


@contextmanager
def replaced_atomically(path: Path, *, mode: int = 0o666) -> Iterator[TextIO]:
    """A text file (UTF-8, newlines as written) to fill; it is written to a temporary
    file beside ``path``, renamed into place when the block ends, and removed if the
    block fails. ``mode`` goes through the umask as for any new file (``0o666``: what
    ``open`` gives; ``0o600``: its owner only). An ``OSError`` names ``path``, not the
    temporary file, which the user never asked for."""
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as exc:
        raise naming(exc, path) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            yield fh
        os.replace(partial, path)
    except BaseException as exc:
        partial.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise naming(exc, path) from exc
        raise


def naming(exc: OSError, path: Path) -> OSError:
    """``exc`` as if it had happened to ``path`` (its errno and message kept)."""
    return OSError(exc.errno, exc.strerror or str(exc), os.fspath(path))
