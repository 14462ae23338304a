"""store_bench's one-repository case keeps its store for later runs (``--workdir``)
and can time only the reads (``--reads``); the figures themselves are the benchmark's,
not asserted here."""

from __future__ import annotations

from pathlib import Path

from benchmarks.store_bench import run_one_repository


def test_a_kept_workdir_is_filled_once_and_read_again(tmp_path: Path) -> None:
    first = run_one_repository(60, None, tmp_path, reads_only=True, runs=3)
    ids = (tmp_path / "one60.ids").read_text().split()
    assert len(ids) == 60
    assert first["fill_s"] > 0
    reads = {"recent_ms", "by_path_ms", "by_path_hot_ms", "by_path_hot_lines_ms",
             "search_ms", "context_query_ms"}
    assert reads <= set(first)
    assert "store_ms" not in first  # only the reads
    assert "verify_10k_ms" not in first

    again = run_one_repository(60, None, tmp_path, reads_only=True, runs=3)
    assert again["fill_s"] == 0  # not filled again: the same store, the same memories
    assert again["hot_citations"] == first["hot_citations"] > 0
    assert (tmp_path / "one60.ids").read_text().split() == ids
    assert reads <= set(again)
