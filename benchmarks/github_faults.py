"""What a verification pass costs when GitHub misbehaves (a script, not a timed test).

    python benchmarks/github_faults.py [--memories 10 42 1000]

A fake GitHub (``responses``, GitHub-shaped answers) serves a repository where every
cited file changed since the citations were made (so each memory needs its blob read),
and answers through each fault of ``tests.github_payloads.SCENARIOS``: 5xx at 10, 50 and
100 %, rate limits, timeouts, resets, a dead network, a revoked token, truncated trees.
For each number of memories and each fault it runs ``vmem verify``'s pass (60 s budget)
and ``vmem context``'s (5 s budget) and prints, as a markdown table, the requests sent,
the seconds the pass would take (on a simulated clock: every backoff, ``Retry-After``,
rate-limit wait and request timeout is counted, none is waited for), and how many
memories were left unverified. No false verdict is possible here by construction
(``tests/test_github_faults.py`` checks that); this script measures cost.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import responses  # noqa: E402

from tests.github_payloads import SCENARIOS, FakeClock, FakeGitHub, FaultyGitHub  # noqa: E402
from verified_memory.budget import time_budget  # noqa: E402
from verified_memory.models import Decision  # noqa: E402
from verified_memory.service import MemoryService  # noqa: E402
from verified_memory.sources.github import GitHubSource  # noqa: E402
from verified_memory.store.sqlite import SQLiteStore  # noqa: E402

REPO = "bench/faults"
TOKEN = "bench-token-not-secret"


def code(n: int, moved: bool) -> str:
    body = f"def handler_{n}(request):\n    return transform_{n}(request.get('k{n}'))\n"
    return ("# moved down\n\n" + body) if moved else body


def prepare(root: Path, memories: int) -> tuple[FakeGitHub, Path, list[str]]:
    fake = FakeGitHub(REPO)
    fake.commit({f"src/m{n % 200}/f{n}.py": code(n, False) for n in range(memories)})
    db = root / f"store-{memories}.db"
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake.install(rsps)
        source = GitHubSource(REPO, TOKEN, cache_dir=root / "prep-cache", sleep=lambda s: None)
        with MemoryService(SQLiteStore(db), source) as service:
            ids = [service.store({"repo": REPO, "subject": f"h{n}", "fact": "transforms",
                                  "citations": [{"path": f"src/m{n % 200}/f{n}.py",
                                                 "line_start": 1, "line_end": 2}]},
                                 ref="main").id for n in range(memories)]
    fake.commit({f"src/m{n % 200}/f{n}.py": code(n, True) for n in range(memories)})
    return fake, db, ids


def run(root: Path, fake: FakeGitHub, db: Path, ids: list[str], name: str,
        limit: float) -> tuple[int, float, int, float]:
    """(requests, simulated seconds, unverified memories, real seconds) of one pass."""
    clock = FakeClock()
    fault = SCENARIOS[name](clock)
    fake.truncate_over = 50 if name.startswith("truncated") else None
    work = Path(tempfile.mkdtemp(dir=root))
    shutil.copy(db, work / "m.db")
    started = time.perf_counter()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        faulty = FaultyGitHub(fake, clock, fault)
        faulty.install(rsps)
        source = GitHubSource(REPO, TOKEN, cache_dir=work / "cache", sleep=clock.sleep,
                              clock=clock.time)
        with MemoryService(SQLiteStore(work / "m.db"), source) as service, \
                time_budget(limit, clock=clock.monotonic):
            report = service.verify(ids, ref="main")
    unverified = report.count(Decision.UNVERIFIED)
    return faulty.sent, clock.now, unverified, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, nargs="+", default=[10, 42, 1000])
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="vmem-faults-"))
    try:
        worlds = {n: prepare(root, n) for n in args.memories}
        header = ["fault"]
        for n in args.memories:
            header += [f"verify {n:,}: requests", "s", "unverified",
                       f"context {n:,}: requests", "s", "unverified"]
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" + "---:|" * (len(header) - 1))
        slowest = 0.0
        for name in SCENARIOS:
            cells = [name]
            for n in args.memories:
                fake, db, ids = worlds[n]
                for limit in (60.0, 5.0):
                    sent, seconds, unverified, real = run(root, fake, db, ids, name, limit)
                    slowest = max(slowest, real)
                    cells += [f"{sent:,}", f"{seconds:.0f}", f"{unverified:,}"]
            print("| " + " | ".join(cells) + " |")
        print(f"\n(slowest pass in real time, fake GitHub in process: {slowest:.2f} s)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
