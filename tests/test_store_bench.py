"""The store benchmark's one-repository case can save its store and re-run the passes."""

from __future__ import annotations

from pathlib import Path

from benchmarks.store_bench import passes_from, run_one_repository
from verified_memory.models import EventKind
from verified_memory.store.sqlite import SQLiteStore


def test_kept_store_reruns_the_passes_on_a_fresh_copy(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    (tmp_path / "run").mkdir()
    full = run_one_repository(40, None, tmp_path / "run", keep=kept)
    (tmp_path / "again").mkdir()

    again = passes_from(kept, tmp_path / "again")
    twice = passes_from(kept, tmp_path / "again")

    # Every memory of this small store, 3 citations each, in both passes of each run.
    assert full["verify_100k_citations"] == again["verify_100k_citations"] == 120
    assert twice["verify_10k_citations"] == 120
    with SQLiteStore(kept / "store.db", create=False) as store:
        assert store.events(kinds=[EventKind.VERIFIED_VALID]) == []  # saved before them
        assert len(store.recent("bench/app0", limit=None)) > 40  # the benchmark's stores
