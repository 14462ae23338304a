"""Store and verification benchmark (a script, not a test): prints a markdown table.

    python benchmarks/store_bench.py                 # 1k, 10k, 100k memories, SQLite
    python benchmarks/store_bench.py --sizes 1000    # quicker
    python benchmarks/store_bench.py --db postgresql://...   # the same on Postgres
    python benchmarks/store_bench.py --one-repo 100000   # one big repository (below)

For each size N the store is filled with N memories (3 citations each) citing real code
(this package's own source files, copied into a fresh git repository of 200 files),
spread over N / 1,000 repositories (1,000 active memories per repository: the seed's soft
limit; ``--per-repo`` changes it, e.g. to N for the single-repository worst case),
then timed: storing through the service (fingerprinting included), ``get_recent(50)``,
``search_by_path``, ``search``; and two verification passes: 10,000 citations whose
files did not change, and 1,000 citations whose lines moved (a header was inserted).

The audit reads (``audit_timings``, a table of their own) run over telemetry shaped like
a used store's: per memory a ``created`` event, 5 ``retrieved``, a ``verified_valid``;
a tenth of each repository invalidated. ``vmem list`` (50 of any status, and of one
status), ``vmem log`` of the repository and of one memory (its changes, newest first).

``--one-repo N`` is the single big repository instead: N memories in one repository,
the first citation of most of them (``HOT_SHARE``) in one hot file, as a project's
central module is. Timed there: the first store of a new service (as a ``vmem store``
process pays it), storing (p50, p90), ``get_recent(50)``,
``search_by_path`` on a random file and on the hot file (whole file, and lines of it),
``search`` top-20, ``context`` with a query, and passes over 10,000 and 100,000
unchanged citations (in process, verdicts at the main line's tip, decisions written).

Filling 100,000 memories takes minutes. ``--workdir DIR`` keeps the repository and the
store there, and a later run with the same DIR and size uses them as they are (then
filled by an earlier run, and changed by it: what it stored and verified). With
``--reads``, only the reads are timed (recent, by path, search, context), which change
nothing but telemetry: runs of two versions of the code alternate on one store that way
(a copy each when one version migrates the file further).

``--keep DIR`` saves the store as those passes find it; ``--passes-from DIR`` then times
only the passes, each run on a fresh copy (quicker, for comparing two versions).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import verified_memory
from verified_memory import LocalGitSource, Memory, MemoryService, open_store
from verified_memory.anchors.fingerprint import fingerprint_lines
from verified_memory.models import (
    Citation,
    EventKind,
    MemoryFilter,
    Status,
    TelemetryEvent,
    Transition,
    utcnow,
)
from verified_memory.store.base import MemoryStore

REPO = "bench/app0"  # the repository the read benchmarks query
FILES = 200
#: In the one-repository case, the share of memories whose first citation is in the
#: hot file (the issue measured a file cited 78,000 times among 100,000 memories).
HOT_SHARE = 0.78
#: The category and the tag one memory in 500 has (``fill``).
RARE = "rare"
WORDS = [
    "cache",
    "retry",
    "token",
    "session",
    "schema",
    "index",
    "route",
    "config",
    "parser",
    "timeout",
    "version",
    "queue",
    "worker",
    "migration",
    "tenant",
    "export",
    "import",
    "review",
    "anchor",
]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@localhost",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def make_repo(root: Path) -> tuple[Path, dict[str, list[str]]]:
    """200 files of real Python (this package's modules, cycled) in a new repository."""
    sources = sorted(
        p
        for p in Path(verified_memory.__file__).parent.rglob("*.py")
        if len(p.read_text().splitlines()) > 60
    )
    repo = root / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    files: dict[str, list[str]] = {}
    for i in range(FILES):
        src = sources[i % len(sources)]
        path = f"pkg/mod{i:03d}/{src.name}"
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        text = f"# module {i}\n" + src.read_text()
        target.write_text(text)
        files[path] = text.splitlines()
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "import")
    return repo, files


def citable(lines: list[str], rng: random.Random) -> tuple[int, int]:
    while True:
        start = rng.randrange(1, len(lines) - 5)
        end = start + rng.randrange(0, 5)
        if any(line.strip() for line in lines[start - 1 : end]):
            return start, end


def fill(
    store: MemoryStore,
    n: int,
    files: dict[str, list[str]],
    commit: str,
    blobs: dict[str, str],
    rng: random.Random,
    per_repo: int = 1000,
    hot: str | None = None,
) -> list[str]:
    """N memories with precomputed fingerprints, added through the store; their ids.
    With ``hot``, the first citation of ``HOT_SHARE`` of them is in that file.

    Only the ids are kept: holding 100,000 memories (400,000 objects) in the harness
    would make every garbage collection during the timed calls walk them all."""
    repos = max(1, n // per_repo)
    paths = list(files)
    out = []
    for i in range(n):
        citations = []
        cited = rng.sample(paths, 3)
        if hot is not None and rng.random() < HOT_SHARE and hot not in cited:
            cited[0] = hot
        for path in cited:
            start, end = citable(files[path], rng)
            citations.append(
                Citation(
                    path,
                    start,
                    end,
                    commit,
                    blobs[path],
                    fingerprint_lines(files[path], start, end),
                )
            )
        memory = Memory(
            id=str(uuid.uuid4()),
            repo=f"bench/app{i % repos}",
            subject=f"{rng.choice(WORDS)} {rng.choice(WORDS)} convention {i}",
            fact=" ".join(rng.choices(WORDS, k=25)),
            citations=tuple(citations),
            # A category and a tag few memories have (one in 500 each), for the reads
            # that filter by them; drawn without the generator, so the rest is as it was.
            category=RARE if i % 500 == 0 else None,
            tags=(rng.choice(WORDS),) + ((RARE,) if i % 500 == 250 else ()),
        )
        store.add(memory)
        out.append(memory.id)
    return out


def p50(fn: Callable[[], object], runs: int = 200) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def audit_timings(store: MemoryStore, service: MemoryService, memories: list[str],
                  rng: random.Random) -> dict[str, float]:
    """``vmem list`` and ``vmem log`` over a store whose telemetry looks used (see the
    module docstring); p50 in milliseconds. Writes the telemetry first (not timed)."""
    repos = {memory_id: f"bench/app{i % max(1, len(memories) // 1000)}"
             for i, memory_id in enumerate(memories)}
    start = utcnow()
    batch: list[TelemetryEvent] = []
    for n, (memory_id, repo) in enumerate(repos.items()):
        at = start - timedelta(seconds=n)
        batch.append(TelemetryEvent(EventKind.CREATED, repo, memory_id, "bench", at))
        batch += [TelemetryEvent(EventKind.RETRIEVED, repo, memory_id, "bench", at,
                                 {"via": "recent"}) for _ in range(5)]
        batch.append(TelemetryEvent(EventKind.VERIFIED_VALID, repo, memory_id, "bench", at))
        if len(batch) >= 7000:
            store.log(batch)
            batch = []
    store.log(batch)
    invalid = [m for m in memories if repos[m] == REPO][::10]
    store.apply([Transition(m, status=Status.INVALID, invalid_reason="bench")
                 for m in invalid])
    one = rng.choice(invalid)
    return {
        "list_ms": p50(lambda: service.list_memories(REPO, limit=50)),
        "list_invalid_ms": p50(lambda: service.list_memories(
            REPO, MemoryFilter(status=Status.INVALID), limit=50)),
        "log_repo_ms": p50(lambda: service.audit(repo=REPO, limit=50)),
        "log_memory_ms": p50(lambda: service.audit(one, limit=50)),
        "log_memory_prefix_ms": p50(lambda: service.audit(one[:8], limit=50)),
    }


@contextmanager
def timer() -> Iterator[list[float]]:
    box: list[float] = []
    t = time.perf_counter()
    yield box
    box.append((time.perf_counter() - t) * 1000)


def run(size: int, db: str | None, workdir: Path, per_repo: int) -> dict[str, float]:
    rng = random.Random(size)
    repo, files = make_repo(workdir / f"n{size}")
    source = LocalGitSource(repo)
    commit = source.resolve("HEAD")
    blobs = dict(source.tree(commit))
    store = open_store(db or f"sqlite:///{workdir / f'n{size}.db'}")
    service = MemoryService(store, source, actor="bench")
    t = time.perf_counter()
    memories = fill(store, size, files, commit, blobs, rng, per_repo)
    fill_s = time.perf_counter() - t
    repo_ids = set(memories[:: max(1, size // per_repo)])  # those of REPO (bench/app0)
    if (db or "").startswith(("postgresql://", "postgres://")):
        import psycopg  # fresh tables have no statistics: plan the queries on real ones

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("ANALYZE")
    result: dict[str, float] = {"fill_s": fill_s}

    paths = list(files)
    stores = []
    for _ in range(200):
        path = rng.choice(paths)
        start, end = citable(files[path], rng)
        t = time.perf_counter()
        service.store(
            {
                "repo": REPO,
                "subject": "stored in the benchmark",
                "fact": "a fact",
                "citations": [{"path": path, "line_start": start, "line_end": end}],
            }
        )
        stores.append((time.perf_counter() - t) * 1000)
    result["store_ms"] = statistics.median(stores)
    # Storing again what a memory of the repository says: novelty finds it and refreshes
    # it instead (the duplicate path of quality.py).
    dupes = []
    for memory_id in rng.sample(sorted(repo_ids), 50):
        old = store.get(memory_id)
        again = {"repo": old.repo, "subject": old.subject, "fact": old.fact,
                 "citations": [{"path": c.path, "line_start": c.line_start,
                                "line_end": c.line_end} for c in old.citations]}
        t = time.perf_counter()
        stored = service.store(again)
        dupes.append((time.perf_counter() - t) * 1000)
        assert stored.duplicate, memory_id
    result["duplicate_ms"] = statistics.median(dupes)
    result["recent_ms"] = p50(lambda: service.get_recent(REPO, 50))
    result["recent_store_ms"] = p50(lambda: store.recent(REPO, limit=50))
    result["by_path_ms"] = p50(lambda: service.search_by_path(REPO, rng.choice(paths), (10, 40)))
    result["search_ms"] = p50(lambda: service.search(REPO, f"{rng.choice(WORDS)} convention"))
    result.update(audit_timings(store, service, memories, rng))

    # 10,000 unchanged citations: 3,334 memories x 3 (files untouched since).
    unchanged = memories[: min(len(memories), 3334)]
    with timer() as took:
        report = service.verify(unchanged)
    result["verify_unchanged_citations"] = sum(len(v.checks) for v in report.verifications)
    result["verify_unchanged_ms"] = took[0]

    # 1,000 citations whose lines moved: a header inserted at the top of every file.
    for path, lines in files.items():
        (repo / path).write_text("\n".join(["# moved", "# down", "", *lines]) + "\n")
    git(repo, "commit", "-qam", "insert a header everywhere")
    moved = memories[-min(len(memories), 334) :]
    with timer() as took:
        report = service.verify(moved)
    relocated = sum(
        1 for v in report.verifications for c in v.checks if c.outcome.value == "relocated"
    )
    result["verify_moved_citations"] = sum(len(v.checks) for v in report.verifications)
    result["verify_moved_relocated"] = relocated
    result["verify_moved_ms"] = took[0]
    service.close()
    return result


def p50_p90(fn: Callable[[], object], runs: int = 200) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), statistics.quantiles(times, n=10)[-1]


def kept_repo(root: Path) -> tuple[Path, dict[str, list[str]]]:
    """``make_repo``'s repository, made by an earlier run (``--workdir``), or a new one."""
    repo = root / "repo"
    if not (repo / ".git").is_dir():
        return make_repo(root)
    files = {path: (repo / path).read_text().splitlines()
             for path in git(repo, "ls-files").splitlines()}
    return repo, files


def run_one_repository(size: int, db: str | None, workdir: Path,
                       reads_only: bool = False, runs: int = 200,
                       keep: Path | None = None) -> dict[str, float]:
    """The single big repository (see the module docstring): every timing in one dict.
    ``keep``: a new directory where the store (SQLite), its repository and the
    memories' ids are saved as the passes find them."""
    rng = random.Random(size)
    repo, files = kept_repo(workdir / f"one{size}")
    source = LocalGitSource(repo)
    commit = source.resolve("HEAD")
    blobs = dict(source.tree(commit))
    paths = sorted(files)
    hot = paths[0]
    filled = workdir / f"one{size}.ids"  # the ids, once the store is filled
    store = open_store(db or f"sqlite:///{workdir / f'one{size}.db'}")
    service = MemoryService(store, source, actor="bench")
    result: dict[str, float] = {"fill_s": 0.0}
    if db is None and filled.exists():
        memories = filled.read_text().split()
    else:
        t = time.perf_counter()
        memories = fill(store, size, files, commit, blobs, rng, per_repo=size, hot=hot)
        result["fill_s"] = time.perf_counter() - t
        filled.write_text("\n".join(memories))
    if (db or "").startswith(("postgresql://", "postgres://")):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("ANALYZE")
    result["hot_citations"] = len(store.by_path(REPO, hot, limit=None))
    if reads_only:
        result.update(one_repository_reads(service, files, paths, rng, runs))
        service.close()
        return result

    def store_one(through: MemoryService = service) -> None:
        path = rng.choice(paths)
        start, end = citable(files[path], rng)
        through.store({"repo": REPO, "subject": f"stored in the benchmark {rng.random()}",
                       "fact": f"a fact {rng.random()}",
                       "citations": [{"path": path, "line_start": start, "line_end": end}]})

    # The first store of a service (a `vmem store` process) also finds the soft limit's
    # candidates to retire; the service keeps them ten minutes. Not closed: it would
    # close the store the rest uses.
    with timer() as took:
        store_one(MemoryService(store, source, actor="bench"))
    result["first_store_ms"] = took[0]
    result["store_ms"], result["store_p90_ms"] = p50_p90(store_one)
    result.update(one_repository_reads(service, files, paths, rng, runs))

    if keep is not None:  # the store as the passes find it, for --passes-from
        keep.mkdir(parents=True)
        store.backup(keep / "store.db")
        shutil.copytree(repo, keep / "repo")
        (keep / "memories.json").write_text(json.dumps(memories))
    result.update(unchanged_passes(service, memories))
    service.close()
    return result


def unchanged_passes(service: MemoryService, memories: list[str]) -> dict[str, float]:
    """Passes over unchanged citations: 3,334 and 33,334 memories of 3 (files untouched)."""
    result: dict[str, float] = {}
    for label, count in (("10k", 3334), ("100k", 33334)):
        chosen = memories[:min(len(memories), count)]
        with timer() as took:
            report = service.verify(chosen)
        result[f"verify_{label}_citations"] = sum(len(v.checks) for v in report.verifications)
        result[f"verify_{label}_ms"] = took[0]
        del report
    return result


def one_repository_reads(service: MemoryService, files: dict[str, list[str]],
                         paths: list[str], rng: random.Random,
                         runs: int = 200) -> dict[str, float]:
    """The reads of the one-repository case (``paths[0]`` is the hot file); p50s of
    ``runs`` calls (a quarter as many of ``context``)."""
    hot = paths[0]
    result = {"recent_ms": p50(lambda: service.get_recent(REPO, 50), runs),
              "by_path_ms": p50(lambda: service.search_by_path(REPO, rng.choice(paths[1:])),
                                runs),
              "by_path_hot_ms": p50(lambda: service.search_by_path(REPO, hot), runs)}

    def hot_lines() -> None:
        start, end = citable(files[hot], rng)
        service.search_by_path(REPO, hot, (start, end + 10))

    result["by_path_hot_lines_ms"] = p50(hot_lines, runs)
    result["search_ms"] = p50(
        lambda: service.search(REPO, f"{rng.choice(WORDS)} convention", 20), runs)
    result["context_query_ms"] = p50(
        lambda: service.context(REPO, query=f"{rng.choice(WORDS)} convention", limit=20,
                                dry_run=True), runs=max(1, runs // 4))
    # The slow corners: a question few memories answer walked every citation of the file
    # (on the crowded file, most of the repository's memories: a tenth as many runs).
    past_end = len(files[hot]) + 5
    for key, ask in (
            ("by_path_hot_rare_category_ms",
             lambda: service.search_by_path(REPO, hot, category=RARE)),
            ("by_path_hot_rare_tag_ms", lambda: service.search_by_path(REPO, hot, tag=RARE)),
            ("by_path_hot_common_tag_ms",
             lambda: service.search_by_path(REPO, hot, tag=WORDS[0])),
            ("by_path_hot_no_category_ms",
             lambda: service.search_by_path(REPO, hot, category="no-such-category")),
            ("by_path_hot_no_tag_ms",
             lambda: service.search_by_path(REPO, hot, tag="no-such-tag")),
            ("by_path_hot_past_end_ms",
             lambda: service.search_by_path(REPO, hot, (past_end, past_end + 4))),
            ("by_path_no_category_ms",
             lambda: service.search_by_path(REPO, rng.choice(paths[1:]),
                                            category="no-such-category"))):
        result[key] = p50(ask, runs=max(1, runs // 10))
    return result
def passes_from(kept: Path, workdir: Path) -> dict[str, float]:
    """``unchanged_passes`` over a fresh copy of a store ``--keep`` saved."""
    shutil.copy(kept / "store.db", workdir / "store.db")
    # On disk before the clock starts: else the pass's first checkpoint (an fsync of the
    # file) waits for the whole copy to be written out, as no pass of a real store does.
    with (workdir / "store.db").open("rb+") as copy:
        os.fsync(copy.fileno())
    store = open_store(f"sqlite:///{workdir / 'store.db'}")
    with MemoryService(store, LocalGitSource(kept / "repo"), actor="bench") as service:
        return unchanged_passes(service, json.loads((kept / "memories.json").read_text()))


def print_one_repository(size: int, r: dict[str, float], backend: str) -> None:
    print(f"One repository, {size:,} memories ({backend}; the hot file cited by "
          f"{int(r['hot_citations']):,} of them; filled in {r['fill_s']:.0f} s):\n")
    print("| what | p50 |")
    print("|---|---|")
    rows = [] if "store_ms" not in r else [
        ("store, fingerprinting included (p90)",
         f"{r['store_ms']:.2f} ms ({r['store_p90_ms']:.2f} ms)"),
        ("the first store of a new service (one run)", f"{r['first_store_ms']:.2f} ms")]
    rows += [
        ("get_recent(50) through the service", f"{r['recent_ms']:.2f} ms"),
        ("search_by_path, a random file", f"{r['by_path_ms']:.2f} ms"),
        ("search_by_path, the hot file", f"{r['by_path_hot_ms']:.2f} ms"),
        ("search_by_path, lines of the hot file", f"{r['by_path_hot_lines_ms']:.2f} ms"),
        ("search, top 20", f"{r['search_ms']:.2f} ms"),
        ("context with a query (20 memories verified, a dry run)",
         f"{r['context_query_ms']:.2f} ms"),
        ("search_by_path, the hot file, a category one memory in 500 has",
         f"{r['by_path_hot_rare_category_ms']:.2f} ms"),
        ("search_by_path, the hot file, a tag one memory in 500 has",
         f"{r['by_path_hot_rare_tag_ms']:.2f} ms"),
        ("search_by_path, the hot file, a tag one memory in 19 has",
         f"{r['by_path_hot_common_tag_ms']:.2f} ms"),
        ("search_by_path, the hot file, a category no memory has",
         f"{r['by_path_hot_no_category_ms']:.2f} ms"),
        ("search_by_path, the hot file, a tag no memory has",
         f"{r['by_path_hot_no_tag_ms']:.2f} ms"),
        ("search_by_path, lines past the hot file's end",
         f"{r['by_path_hot_past_end_ms']:.2f} ms"),
        ("search_by_path, a random file, a category no memory has",
         f"{r['by_path_no_category_ms']:.2f} ms"),
    ]
    for label in ("10k", "100k") if "verify_10k_ms" in r else ():
        rows.append((f"verify {int(r[f'verify_{label}_citations']):,} unchanged citations",
                     f"{r[f'verify_{label}_ms']:,.0f} ms"))
    for what, value in rows:
        print(f"| {what} | {value} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--db", help="store URL (default: a new SQLite file per size)")
    parser.add_argument(
        "--per-repo", type=int, default=1000, help="memories per repository (default 1,000)"
    )
    parser.add_argument("--one-repo", type=int, metavar="N",
                        help="instead: N memories in one repository, with a hot file")
    parser.add_argument("--workdir", type=Path, metavar="DIR",
                        help="with --one-repo: keep the repository and the store in DIR, "
                        "and use them as they are when an earlier run left them there")
    parser.add_argument("--reads", action="store_true",
                        help="with --one-repo: time only the reads (they change nothing "
                        "but telemetry)")
    parser.add_argument("--json", action="store_true",
                        help="with --one-repo: print the timings as JSON")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="with --one-repo (SQLite): save the store as the passes find "
                             "it, with its repository, in the new directory DIR")
    parser.add_argument("--passes-from", type=Path, metavar="DIR",
                        help="instead: only the unchanged passes, on a fresh copy of the "
                             "store --keep saved in DIR")
    args = parser.parse_args()
    if (args.reads or args.json or args.keep) and not args.one_repo:
        parser.error("--reads, --json and --keep go with --one-repo")
    if args.workdir and not (args.one_repo or args.passes_from):
        parser.error("--workdir goes with --one-repo or --passes-from")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="vmem-bench-"))
    backend = "Postgres" if args.db and args.db.startswith("postgres") else "SQLite"
    if args.passes_from:
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            result = passes_from(args.passes_from, workdir)
        finally:
            if args.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)
        for label in ("10k", "100k"):
            print(f"verify {int(result[f'verify_{label}_citations']):,} unchanged "
                  f"citations: {result[f'verify_{label}_ms']:,.0f} ms")
        return
    if args.one_repo:
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            result = run_one_repository(args.one_repo, args.db, workdir, args.reads,
                                        keep=args.keep)
        finally:
            if args.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)
        if args.json:
            print(json.dumps(result, indent=1))
        else:
            print_one_repository(args.one_repo, result, backend)
        return
    rows = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            print(f"... {size} memories", file=sys.stderr)
            rows.append((size, run(size, args.db, workdir, args.per_repo)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"| memories ({backend}) | store (p50) | get_recent(50) (p50; store only) "
        "| search_by_path (p50) | search (p50) | verify unchanged | verify moved "
        "| store a duplicate (p50) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for size, r in rows:
        print(
            f"| {size:,} | {r['store_ms']:.2f} ms | {r['recent_ms']:.2f} ms "
            f"({r['recent_store_ms']:.2f} ms) | {r['by_path_ms']:.2f} ms "
            f"| {r['search_ms']:.2f} ms "
            f"| {int(r['verify_unchanged_citations']):,} citations in "
            f"{r['verify_unchanged_ms']:.0f} ms "
            f"| {int(r['verify_moved_relocated']):,}/{int(r['verify_moved_citations']):,} "
            f"relocated in {r['verify_moved_ms']:.0f} ms | {r['duplicate_ms']:.2f} ms |"
        )
    print()
    print(f"| memories ({backend}) | list (p50) | list --status invalid (p50) "
          "| log of the repository (p50) | log of a memory (p50; by a short id) |")
    print("|---|---|---|---|---|")
    for size, r in rows:
        print(f"| {size:,} | {r['list_ms']:.2f} ms | {r['list_invalid_ms']:.2f} ms "
              f"| {r['log_repo_ms']:.2f} ms | {r['log_memory_ms']:.2f} ms "
              f"({r['log_memory_prefix_ms']:.2f} ms) |")


if __name__ == "__main__":
    main()
