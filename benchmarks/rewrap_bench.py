"""What a re-wrapped citation in a big definition costs (a script, not a timed test).

    python benchmarks/rewrap_bench.py            # a class of 1,888 lines, 3 runs
    python benchmarks/rewrap_bench.py --lines 4000 --runs 5

A Python class of about ``--lines`` lines (methods of a few lines each) is committed in
a fresh git repository, and a 4-line call in its body (no method's) is cited: its anchor
is the class itself. Then a formatter joins the call's arguments onto one line and a line
is added at the top, so the cited lines are neither in place nor found again by their
line hashes: the class is searched for a window whose whitespace-free text is the
citation's (``verify/alignment.py`` ``rewrapped``).

Timed, the median of the runs: the whole check of that one citation (``Verifier`` with
the anchor locator, a new locator and verifier each run, so the file is parsed again),
and ``rewrapped`` alone over the class, with the cited text read from the citation's
blob (what the verifier does) and without it (the fallback that hashes windows).
Issue 21 measured 21 s for one such citation before ``rewrapped`` searched the text.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from verified_memory.anchors.fingerprint import fingerprint_lines
from verified_memory.anchors.treesitter import anchor_for
from verified_memory.models import Citation
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.verify.alignment import rewrapped
from verified_memory.verify.anchored import AnchorLocator
from verified_memory.verify.files import FileText
from verified_memory.verify.ladder import Verifier

CALL = ("    register(\n"
        "        \"timeout\",\n"
        "        \"retries\",\n"
        "        \"backoff\")\n")
JOINED = "    register(\"timeout\", \"retries\", \"backoff\")\n"


def source_file(lines: int) -> str:
    """A class of about ``lines`` lines that ends with the cited call."""
    parts = ["class Client:\n"]
    n = 0
    while sum(p.count("\n") for p in parts) < lines - 4:
        parts.append(f"    def method_{n}(self, value):\n"
                     f"        total = value * {n}\n"
                     f"        return total + {n % 7}\n\n")
        n += 1
    parts.append(CALL)
    return "".join(parts)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def median_ms(fn: Callable[[], object], runs: int) -> tuple[float, object]:
    times, answer = [], None
    for _ in range(runs):
        started = time.perf_counter()
        answer = fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1888)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vmem-rewrap-") as tmp:
        repo = Path(tmp)
        git(repo, "init", "-q")
        for key, value in (("user.name", "bench"), ("user.email", "bench@example.com"),
                           ("commit.gpgsign", "false")):
            git(repo, "config", key, value)
        before = source_file(args.lines)
        (repo / "client.py").write_text(before)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "before")
        old_commit, blob = git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", "HEAD:client.py")
        lines = before.splitlines(keepends=True)
        end = len(lines)
        start = end - 3
        citation = Citation("client.py", start, end, old_commit, blob, fingerprint_lines(
            lines, start, end, anchor=anchor_for("client.py", before, start, end, key=blob)))
        after = "import logging\n" + before.replace(CALL, JOINED)
        (repo / "client.py").write_text(after)
        git(repo, "commit", "-qam", "after: formatted")
        head = git(repo, "rev-parse", "HEAD")

        with LocalGitSource(repo) as source:
            def check() -> object:
                found = Verifier(source, locator=AnchorLocator()).check([citation], head)[0]
                return f"{found.outcome.value} {found.location} ({found.detail})"

            whole_ms, verdict = median_ms(check, args.runs)
        new = FileText.from_bytes("new", after.encode())
        old = FileText.from_bytes(blob, before.encode())
        assert new is not None
        assert old is not None
        cited_text = old.hasher().text(start - 1, end - 1)
        definition = (2, len(after.splitlines()))
        with_text_ms, window = median_ms(
            lambda: rewrapped(citation, new, *definition, cited_text), args.runs)
        hashed_ms, hashed = median_ms(lambda: rewrapped(citation, new, *definition),
                                      args.runs)
    print(f"# One re-wrapped citation in a class of {len(lines):,} lines "
          f"(median of {args.runs})\n")
    print("| what | ms | answer |\n|---|---:|---|")
    print(f"| the whole check (parse included) | {whole_ms:.1f} | {verdict} |")
    print(f"| `rewrapped`, the cited text searched | {with_text_ms:.2f} | {window} |")
    print(f"| `rewrapped`, windows hashed (no cited text) | {hashed_ms:.2f} | {hashed} |")


if __name__ == "__main__":
    main()
