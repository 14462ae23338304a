"""A real git repository in a temporary directory, for tests.

Every git call pins its own identity and ignores the user's and the system's git
configuration, so tests behave the same on any machine (with or without an autouse
fixture in conftest.py doing the same). The identity is also written into the
repository's own config, so code under test that commits there works too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["GitRepo"]

_CONFIG = (
    "-c", "user.name=test",
    "-c", "user.email=test@example.com",
    "-c", "init.defaultBranch=main",
    "-c", "commit.gpgsign=false",
    "-c", "tag.gpgsign=false",
    "-c", "core.autocrlf=false",
)


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="test",
        GIT_AUTHOR_EMAIL="test@example.com",
        GIT_COMMITTER_NAME="test",
        GIT_COMMITTER_EMAIL="test@example.com",
        GIT_TERMINAL_PROMPT="0",
    )
    return env


class GitRepo:
    """``git init`` in ``path``; write files, commit, and run any git command there."""

    def __init__(self, path: Path, *, bare: bool = False, object_format: str = "sha1") -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.run("init", "-q", f"--object-format={object_format}", *(["--bare"] if bare else []))
        for key, value in (
            ("user.name", "test"),
            ("user.email", "test@example.com"),
            ("commit.gpgsign", "false"),
            ("tag.gpgsign", "false"),
            ("core.autocrlf", "false"),
        ):
            self.run("config", key, value)

    def __repr__(self) -> str:
        return f"GitRepo({os.fspath(self.path)!r})"

    def run(self, *args: str) -> str:
        """Run ``git <args>`` in the repository; its stdout without the final newline."""
        proc = subprocess.run(
            ["git", *_CONFIG, "-C", os.fspath(self.path), *args],
            capture_output=True,
            env=git_env(),
            check=False,
        )
        if proc.returncode != 0:
            raise AssertionError(
                f"git {' '.join(args)} failed ({proc.returncode}): "
                f"{proc.stderr.decode(errors='replace')}"
            )
        return proc.stdout.decode("utf-8", "surrogateescape").removesuffix("\n")

    @classmethod
    def project(cls, path: Path, files: Mapping[str, str | bytes], *,
                origin: str | None = None) -> GitRepo:
        """The usual start of a test: ``files`` committed as "initial", and ``origin``
        (a URL, e.g. a GitHub one, which names the repository) as the remote."""
        repo = cls(path)
        for name, content in files.items():
            repo.write(name, content)
        repo.commit("initial")
        if origin is not None:
            repo.run("remote", "add", "origin", origin)
        return repo

    def write(self, path: str, content: str | bytes) -> Path:
        """Write a file (parents created); ``str`` is UTF-8 with its newlines as given."""
        target = self.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        return target

    def remove(self, path: str) -> None:
        """Delete a file or directory from disk (the next ``commit`` records it)."""
        target = self.path / path
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()

    def move(self, old: str, new: str) -> None:
        """Move a file on disk (the next ``commit`` records it as a rename)."""
        target = self.path / new
        target.parent.mkdir(parents=True, exist_ok=True)
        (self.path / old).rename(target)

    def commit(self, message: str = "commit", *, add_all: bool = True) -> str:
        """Stage everything (unless ``add_all`` is False) and commit; the new commit's sha."""
        if add_all:
            self.run("add", "-A")
        self.run("commit", "-q", "--allow-empty", "--no-verify", "-m", message)
        return self.head

    @property
    def head(self) -> str:
        return self.run("rev-parse", "HEAD")

    def blob(self, path: str, rev: str = "HEAD") -> str:
        """The blob sha git records for ``path`` at ``rev``."""
        return self.run("rev-parse", f"{rev}:{path}")
