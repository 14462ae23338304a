"""``vmem demo``: the whole loop on verified-memory's own code, in a throwaway repository.

It copies a few of this package's source files into a new git repository, stores
memories citing them, commits a refactor (code moved) and an edit (code changed),
verifies, and prints the context an agent would get: the moved memory follows its
code, the edited one is invalidated and left out.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import verified_memory
from verified_memory.models import Decision, NewMemory

__all__ = ["run_demo"]

_FILES = ("models.py", "verify/decision.py", "anchors/normalize.py")
_REPO = "demo/verified-memory"


def _block(lines: list[str], header: str) -> tuple[int, int]:
    """The 1-indexed line range of the indented block that starts with ``header``."""
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    end = start
    for i in range(start + 1, len(lines)):
        if lines[i].strip() and not lines[i].startswith((" ", "\t")):
            break
        if lines[i].strip():
            end = i
    return start + 1, end + 1


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=vmem demo", "-c", "user.email=demo@localhost",
         "-c", "commit.gpgsign=false", *args],
        check=True, capture_output=True, text=True).stdout.strip()


def run_demo(db: str | None = None, keep: bool = False,
             echo: Callable[[str], None] = print) -> None:
    from verified_memory.service import MemoryService
    from verified_memory.sources.local_git import LocalGitSource
    from verified_memory.store import open_store

    package = Path(verified_memory.__file__).parent
    workdir = Path(tempfile.mkdtemp(prefix="vmem-demo-"))
    repo = workdir / "repo"
    try:
        for name in _FILES:
            target = repo / "verified_memory" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(package / name, target)
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", "import verified-memory's own code")
        echo(f"1. a git repository with verified-memory's own code: {repo}")

        models = (repo / "verified_memory/models.py").read_text().splitlines()
        decision = (repo / "verified_memory/verify/decision.py").read_text().splitlines()
        normalize = (repo / "verified_memory/anchors/normalize.py").read_text().splitlines()
        facts = [
            ("Citation outcomes", "A citation check ends in one of five outcomes; only "
             "valid and relocated mean the code still holds.",
             "verified_memory/models.py", _block(models, "class Outcome(")),
            ("Verdicts beat unreadable citations", "A memory with a changed or missing "
             "citation is invalidated even if another citation could not be read.",
             "verified_memory/verify/decision.py", _block(decision, "def decide(")),
            ("Whitespace is not a change", "Lines are compared with all whitespace "
             "removed, so re-indenting code does not invalidate memories.",
             "verified_memory/anchors/normalize.py", _block(normalize, "def normalize_line(")),
        ]
        store = open_store(db or f"sqlite:///{workdir / 'memory.db'}")
        with MemoryService(store, LocalGitSource(repo), actor="vmem-demo") as service:
            ids = {}
            for subject, fact, path, (start, end) in facts:
                memory = service.store(NewMemory.build(
                    _REPO, subject, fact, [{"path": path, "line_start": start,
                                            "line_end": end}], created_by="vmem-demo"))
                ids[subject] = memory.id
                echo(f"2. stored {memory.id[:8]} {subject!r} citing {path}:{start}-{end}")

            header = ["# Licensed under the MIT licence.", "# (a header added by a refactor)", ""]
            (repo / "verified_memory/models.py").write_text(
                "\n".join(header + models) + "\n")
            # Edit the cited function: its last line now only strips line ends.
            edited = list(normalize)
            edited[facts[2][3][1] - 1] = "    return line.strip()"
            (repo / "verified_memory/anchors/normalize.py").write_text("\n".join(edited) + "\n")
            _git(repo, "commit", "-qam", "add a licence header; only strip line ends")
            echo("3. committed a change: a header above the Outcome enum (code moves down "
                 "3 lines), and an edit of normalize_line (code changes)")

            report = service.verify(repo=_REPO)
            echo("4. verified every memory at the new HEAD:")
            for v in report.verifications:
                outcome = ", ".join(f"{c.outcome.value} -> {c.location or c.citation.path}"
                                    for c in v.checks)
                verdict = {Decision.REFRESH: "holds", Decision.INVALIDATE: "invalidated",
                           Decision.UNVERIFIED: "unverified",
                           Decision.EXPIRE: "expired"}[v.decision]
                echo(f"   {v.memory.id[:8]} {v.memory.subject!r}: {verdict} ({outcome})")
            context = service.context(_REPO)
            echo("5. the verified context an agent gets (only memories that hold):\n")
            echo(context.markdown)
            stats = service.stats(_REPO)
            echo(f"6. telemetry: {dict(sorted(stats.events.items()))}")
    finally:
        if keep:
            echo(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
