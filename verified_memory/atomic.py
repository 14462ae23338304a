"""Files written whole or not at all: a reader (git, a browser, a teammate) never sees
half of one, and a failure leaves the old file as it was and no stray temporary."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, text: str, *, mode: int = 0o666) -> None:
    """Write ``text`` (UTF-8, newlines as given) to a temporary file beside ``path``,
    then rename it into place. ``mode`` goes through the umask as for any new file
    (``0o666``: what ``open`` gives; ``0o600``: its owner only); ``OSError`` on failure."""
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
