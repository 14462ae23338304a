"""``BoundedCache``: bounded by count or by weight, least recently used out first."""

from __future__ import annotations

import pytest

from verified_memory.cache import BoundedCache


def test_at_most_max_items_least_recently_used_out_first() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recently used
    cache.put("c", 3)
    assert ("a" in cache, "b" in cache, "c" in cache) == (True, False, True)
    assert len(cache) == 2


def test_the_first_value_kept_under_a_key_wins() -> None:
    cache: BoundedCache[str, str] = BoundedCache(4)
    assert cache.put("k", "first") == "first"
    assert cache.put("k", "second") == "first"
    assert cache.get("k") == "first"


def test_bounded_by_weight_and_a_too_heavy_entry_is_not_kept() -> None:
    cache: BoundedCache[str, bytes] = BoundedCache(max_weight=10, weigh=len)
    cache.put("a", b"12345")
    cache.put("b", b"1234")
    cache.put("c", b"123")  # 12 > 10: "a" goes
    assert ("a" in cache, "b" in cache, "c" in cache) == (False, True, True)
    assert cache.put("huge", b"x" * 11) == b"x" * 11
    assert "huge" not in cache
    assert cache.get("missing") is None


def test_pop_forgets_an_entry_and_its_weight() -> None:
    cache: BoundedCache[str, bytes] = BoundedCache(max_weight=10, weigh=len)
    cache.put("a", b"123456")
    assert cache.pop("a") == b"123456"
    assert cache.pop("a") is None
    assert "a" not in cache
    cache.put("b", b"1234567890")  # fits only because "a"'s weight went with it
    assert cache.get("b") == b"1234567890"


def test_a_cache_needs_a_bound() -> None:
    with pytest.raises(ValueError, match="max_items or max_weight"):
        BoundedCache()
    with pytest.raises(ValueError, match="go together"):
        BoundedCache(max_weight=3)


def test_get_or_compute_keeps_none_and_computes_once() -> None:
    cache: BoundedCache[str, int | None] = BoundedCache(4)
    calls: list[str] = []

    def compute() -> None:
        calls.append("x")

    assert cache.get_or_compute("k", compute) is None
    assert cache.get_or_compute("k", compute) is None
    assert calls == ["x"]  # a kept None is kept, not computed again
    cache.clear()
    assert len(cache) == 0
