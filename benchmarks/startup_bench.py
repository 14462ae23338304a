"""How long a ``vmem`` process takes to start and answer (a script, not a timed test).

    python benchmarks/startup_bench.py           # 11 runs of each, the median
    python benchmarks/startup_bench.py --runs 21

Each command runs as a new process (``python -m verified_memory``, this checkout's
package first on the path) from an empty directory: ``--version`` (start-up alone),
``--help``, and ``recent --json`` on an empty SQLite store created beforehand (start-up,
opening the store, one query, JSON out); a bare ``python -c pass`` for the interpreter's
own share. An agent's hook starts a process per prompt, so this is paid every time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def median_ms(command: list[str], runs: int, env: dict[str, str], cwd: str) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, check=False)
        times.append((time.perf_counter() - started) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-500:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    vmem = [sys.executable, "-m", "verified_memory"]
    with tempfile.TemporaryDirectory(prefix="vmem-start-") as work:
        db = f"sqlite:///{Path(work) / 'memory.db'}"
        recent = [*vmem, "--db", db, "recent", "--repo", "octo/demo", "--json"]
        subprocess.run(recent, env=env, cwd=work, capture_output=True, check=True)  # creates it
        cases = {
            "python -c pass (the interpreter alone)": [sys.executable, "-c", "pass"],
            "vmem --version": [*vmem, "--version"],
            "vmem --help": [*vmem, "--help"],
            "vmem recent --json (an empty SQLite store)": recent,
        }
        print(f"# vmem process start, median of {args.runs} runs\n")
        print("| command | ms |\n|---|---:|")
        for label, command in cases.items():
            print(f"| {label} | {median_ms(command, args.runs, env, work):.0f} |")


if __name__ == "__main__":
    main()
