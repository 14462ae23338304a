"""store_bench's one-repository case keeps its store for later runs (``--workdir``),
can time only the reads (``--reads``), and can save its store to re-run the passes
(``--keep``, ``--passes-from``); the figures themselves are the benchmark's, not
asserted here."""

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


def test_a_kept_workdir_is_filled_once_and_read_again(tmp_path: Path) -> None:
    first = run_one_repository(60, None, tmp_path, reads_only=True, runs=3)
    ids = (tmp_path / "one60.ids").read_text().split()
    assert len(ids) == 60
    assert first["fill_s"] > 0
    reads = {"recent_ms", "by_path_ms", "by_path_hot_ms", "by_path_hot_lines_ms",
             "search_ms", "context_query_ms", "by_path_hot_no_category_ms",
             "by_path_hot_no_tag_ms", "by_path_hot_past_end_ms", "by_path_no_category_ms",
             "by_path_hot_rare_category_ms", "by_path_hot_rare_tag_ms",
             "by_path_hot_common_tag_ms"}
    assert reads <= set(first)
    assert "store_ms" not in first  # only the reads
    assert "verify_10k_ms" not in first

    again = run_one_repository(60, None, tmp_path, reads_only=True, runs=3)
    assert again["fill_s"] == 0  # not filled again: the same store, the same memories
    assert again["hot_citations"] == first["hot_citations"] > 0
    assert (tmp_path / "one60.ids").read_text().split() == ids
    assert reads <= set(again)
