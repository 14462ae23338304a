"""Several processes storing the same memories at once, through ``MemoryService.store``,
on any store a URL names (a SQLite file, a Postgres database): of each race, exactly one
process creates the memory and the others get it back as a duplicate, refreshed. The
same of memories that wait for approval (``pending``): the queue holds each once."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

from verified_memory.errors import VerifiedMemoryError
from verified_memory.models import EventKind, MemoryFilter, Status
from verified_memory.service import MemoryService
from verified_memory.sources.fake import DictSource
from verified_memory.store import open_store

__all__ = ["REPO", "at_once", "check_stored_once", "store_at_once"]

REPO = "acme/races"
#: One file per race, so that races do not meet.
RACES = 30

#: What each process did in each race: (the memory's id, whether it was a duplicate),
#: or the error it met.
Outcome = tuple[str, bool] | str


def _files() -> dict[str, str]:
    return {f"src/race{i}.py": f"def step_{i}(x):\n    return x + {i}\n" for i in range(RACES)}


def _memory(race: int, repo: str = REPO, category: str | None = None) -> dict[str, Any]:
    return {"repo": repo, "subject": f"step {race} adds {race}",
            "fact": f"step_{race} returns its argument plus {race}.", "category": category,
            "citations": [{"path": f"src/race{race}.py", "line_start": 1, "line_end": 2}]}


def _storer(url: str, category: str | None, worker: int, barrier: Any, results: Any) -> None:
    """Store each race's memory the moment the rival processes store it too."""
    outcomes: list[Outcome] = []
    try:
        service = MemoryService(open_store(url), DictSource({"c1": _files()}),
                                actor=f"worker-{worker}")
        try:
            # Warmed up first (imports, the first fingerprint), so the races start together.
            service.store(_memory(0, repo=f"acme/warm{worker}", category=category))
            for race in range(RACES):
                barrier.wait(timeout=60)
                try:
                    stored = service.store(_memory(race, category=category))
                    outcomes.append((stored.id, stored.duplicate))
                except VerifiedMemoryError as exc:  # reported to the parent
                    outcomes.append(f"error: {exc}")
        finally:
            service.close()
    finally:
        results.put((worker, outcomes))


def store_at_once(url: str, workers: int, *,
                  category: str | None = None) -> dict[int, list[Outcome]]:
    """Each of ``workers`` spawned processes stores every race's memory at ``url``, all
    at once (of ``category``: one that needs approval makes them pending); what each
    did, by worker."""
    return at_once(multiprocessing.get_context("spawn"), workers, _storer, url, category)


def at_once(ctx: Any, workers: int, target: Callable[..., None], *args: Any,
            timeout: float = 180) -> dict[int, Any]:
    """Run ``target(*args, worker, barrier, results)`` in ``workers`` processes of ``ctx``
    (a multiprocessing context), which wait at ``barrier`` to start together; what each
    put on ``results`` as ``(worker, outcome)``, by worker."""
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    processes = [ctx.Process(target=target, args=(*args, w, barrier, results))
                 for w in range(workers)]
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=timeout) for _ in processes)
    for process in processes:
        process.join(timeout=60)
    assert [p.exitcode for p in processes] == [0] * workers
    return outcomes


def check_stored_once(url: str, outcomes: dict[int, list[Outcome]], *,
                      status: Status = Status.ACTIVE) -> None:
    """Each race left one memory (in ``status``): one process created it, the others
    refreshed it."""
    workers = len(outcomes)
    store = open_store(url)
    try:
        for race in range(RACES):
            stored = [outcomes[w][race] for w in range(workers)]
            assert all(isinstance(s, tuple) for s in stored), stored
            memories = store.find(REPO, MemoryFilter(path=f"src/race{race}.py"), limit=None)
            assert len(memories) == 1, (race, stored)
            (memory,) = memories
            assert memory.status is status
            assert sorted(s[1] for s in stored if isinstance(s, tuple)) == [False] + [
                True] * (workers - 1)
            assert {s[0] for s in stored if isinstance(s, tuple)} == {memory.id}
            assert [e.kind for e in store.events(memory_id=memory.id)] == [
                EventKind.CREATED] + [EventKind.REFRESHED] * (workers - 1)
        assert store.count(REPO, status=None) == RACES
    finally:
        store.close()
