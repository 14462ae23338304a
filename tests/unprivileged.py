"""Run a command as someone the file permissions bind, for permission tests.

Root reads and writes whatever the modes say, so a test that makes a file unreadable
with ``chmod`` proves nothing when it runs as root (as it does on our machines). Here:

- as root, the sandbox's files are handed to ``nobody`` and commands run as ``nobody``
  through ``setpriv`` (the modes then bind: ``chmod 000`` is refused even to the owner);
- as anyone else, the files are the test's own and commands run as they are: ``chmod``
  alone denies access.

Either way a new sandbox first proves that a file of mode 000 is refused to the
commands it runs, and fails the test loudly if it is not (a user whose capabilities
override file modes, no ``setpriv`` as root): a permission test must never pass
without having met a permission error.

The sandbox is a fresh directory under the system's temporary directory, as pytest's
``tmp_path`` is inside a directory only its owner may enter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["Sandbox", "sandbox"]

#: The package's checkout: the unprivileged python imports it from here.
ROOT = Path(__file__).resolve().parent.parent
_PROBE = ("import sys, verified_memory\n"
          "try:\n    open(sys.argv[1]).close()\nexcept PermissionError:\n"
          "    print('refused')\nelse:\n    print('read')\n")


class Sandbox:
    """A directory whose files commands run by ``run`` reach only as the modes allow."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.as_root = os.geteuid() == 0
        self.home = path / "home"
        self.home.mkdir()

    def env(self, **extra: str) -> dict[str, str]:
        """The environment commands run in: home in the sandbox, our checkout first on
        the import path, no user or system git configuration."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GIT_", "VMEM_", "XDG_")) and k not in (
                   "GITHUB_TOKEN", "SUPABASE_URL", "SUPABASE_KEY", "PYTHONPATH")}
        env.update(HOME=os.fspath(self.home), PYTHONPATH=os.fspath(ROOT),
                   XDG_DATA_HOME=os.fspath(self.home / "data"),
                   XDG_CACHE_HOME=os.fspath(self.home / "cache"),
                   GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1",
                   GIT_AUTHOR_NAME="test", GIT_AUTHOR_EMAIL="test@example.com",
                   GIT_COMMITTER_NAME="test", GIT_COMMITTER_EMAIL="test@example.com")
        env.update(extra)
        return env

    def hand_over(self) -> None:
        """Give every file made so far to the unprivileged user (as root; a no-op
        otherwise, where the files are already the test's own). Call it after making
        the files and before taking permissions away."""
        if not self.as_root:
            return
        uid, gid = _nobody()
        for folder, dirs, files in os.walk(self.path):
            for name in [folder, *(os.path.join(folder, n) for n in (*dirs, *files))]:
                os.lchown(name, uid, gid)

    def run(self, args: Sequence[str], *, cwd: Path | None = None, input: str | None = None,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``args`` as the unprivileged user (output as text, never raises on exit)."""
        prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] \
            if self.as_root else []
        return subprocess.run([*prefix, *args], cwd=cwd or self.path, input=input,
                              capture_output=True, text=True, check=False, timeout=120,
                              env=dict(env) if env is not None else self.env())

    def python(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        """``python ARGS`` as the unprivileged user."""
        return self.run([sys.executable, *args], **kwargs)  # type: ignore[arg-type]

    def vmem(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        """``vmem ARGS`` (``python -m verified_memory``) as the unprivileged user."""
        return self.python("-m", "verified_memory", *args, **kwargs)

    def prove_refused(self) -> None:
        """Fail unless a file of mode 000 is refused to the commands ``run`` runs."""
        probe = self.path / "probe"
        probe.write_text("secret\n")
        self.hand_over()
        probe.chmod(0)
        try:
            found = self.python("-c", _PROBE, os.fspath(probe))
        finally:
            probe.unlink()
        if found.stdout.strip() != "refused":
            raise AssertionError(
                "permissions are not enforced for the commands this test runs (as root, "
                f"setpriv to nobody; else the user itself): {found.stdout}{found.stderr}")

    def cleanup(self) -> None:
        """Give every permission back, then remove the sandbox."""
        self.path.chmod(0o700)
        for folder, dirs, files in os.walk(self.path):
            for name in dirs:
                os.chmod(os.path.join(folder, name), 0o700)
            for name in files:
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    os.chmod(path, 0o600)
        shutil.rmtree(self.path)


def _nobody() -> tuple[int, int]:
    import grp
    import pwd

    return pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid


@contextmanager
def sandbox() -> Iterator[Sandbox]:
    """A new ``Sandbox``, proven to bind its commands, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="vmem-perm-"))
    path.chmod(0o755)
    box = Sandbox(path)
    try:
        box.prove_refused()
        yield box
    finally:
        box.cleanup()
