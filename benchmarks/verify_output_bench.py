"""What ``vmem verify`` spends on its output (a script, not a timed test).

    python benchmarks/verify_output_bench.py             # 10,002 citations, 3 runs each
    python benchmarks/verify_output_bench.py --memories 1000 --runs 5

One repository of 3,334 memories (3 citations each) citing real code (the corpus of
``store_bench.py``), none of whose files changed: ``vmem verify`` at the main line's
tip, in process, with its default output, with ``--all`` (every citation listed) and
with ``--json``, alternating, stdout to a file. For each: the median wall time of the
command, of its pass (the report's own ``duration_ms``), and of its output (the time
spent in ``Output``'s methods that print citations or JSON, and in building the JSON).
The target (issue 21): output under 10 % of the pass.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from store_bench import REPO, fill, make_repo

from verified_memory import LocalGitSource, VerificationReport, open_store
from verified_memory.cli import main as vmem
from verified_memory.cli.render import Output

MODES = {"default": [], "--all": ["--all"], "--json": ["--json"]}
#: What prints a pass's citations, in this code or before issue 21 (``checks_table``).
PRINTERS = ((Output, "checks"), (Output, "checks_table"), (Output, "json"),
            (VerificationReport, "to_dict"))
spent_printing: list[float] = []


def timed(method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            spent_printing.append((time.perf_counter() - started) * 1000)
    return wrapper


for _owner, _name in PRINTERS:
    if hasattr(_owner, _name):
        setattr(_owner, _name, timed(getattr(_owner, _name)))


def run(repo: Path, db: str, extra: list[str]) -> tuple[float, float, float] | None:
    """(wall, pass, output) ms of one ``vmem verify``; None when the option does not
    exist."""
    spent_printing.clear()
    capture = Path(tempfile.mkstemp(prefix="vmem-out-")[1])
    try:
        with open(capture, "w") as out, open(os.devnull, "w") as null, \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(null):
            started = time.perf_counter()
            try:
                vmem(["-C", str(repo), "--db", db, "verify", "--repo", REPO, *extra])
            except SystemExit as exit_info:
                if exit_info.code:
                    return None  # e.g. --all before it existed
            wall = (time.perf_counter() - started) * 1000
        text = capture.read_text()
    finally:
        capture.unlink()
    printing = sum(spent_printing)
    if "--json" in extra:
        return wall, float(json.loads(text)["duration_ms"]), printing
    found = re.search(r"checked in (\d+) ms", text)
    assert found, text[-500:]
    return wall, float(found.group(1)), printing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=3334)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="vmem-output-bench-"))
    try:
        repo, files = make_repo(workdir)
        source = LocalGitSource(repo)
        commit = source.resolve("HEAD")
        db = f"sqlite:///{workdir / 'out.db'}"
        with open_store(db) as store:
            fill(store, args.memories, files, commit, dict(source.tree(commit)),
                 random.Random(21), per_repo=args.memories)
        source.close()
        run(repo, db, ["--json"])  # the first verdict places the memories: not timed
        times: dict[str, list[tuple[float, float, float]]] = {mode: [] for mode in MODES}
        for _ in range(args.runs):
            for mode, extra in MODES.items():
                result = run(repo, db, extra)
                if result is not None:
                    times[mode].append(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"`vmem verify`, {args.memories * 3:,} unchanged citations, median of "
          f"{args.runs} alternating runs:\n")
    print("| output | command (ms) | its pass (ms) | printing (ms) | printing / pass |")
    print("|---|---:|---:|---:|---:|")
    for mode, found in times.items():
        if not found:
            print(f"| {mode} | n/a | | | |")
            continue
        wall, spent, printing = (statistics.median(t[i] for t in found) for i in range(3))
        print(f"| {mode} | {wall:,.0f} | {spent:,.0f} | {printing:,.0f} "
              f"| {printing / spent:.0%} |")


if __name__ == "__main__":
    sys.exit(main())
