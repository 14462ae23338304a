"""Which threshold tells a duplicate memory from a new claim about the same code?

The labelled pairs in ``tests/data/novelty_pairs.jsonl`` are the same subject and fact
reworded, re-cased or restated (``same``), and different claims about the same code:
another number, a negation, the opposite, another aspect, swapped roles. Each pair says
whether the second memory cites the same code (``code: same``) or more (``more``: a
new claim by construction, whatever the text). The classifier is ``quality``'s: same
code, same numbers and negations, and ``text_similarity`` at or above the threshold.

For each threshold it counts the two kinds of error: merging two different claims (a
claim is lost: the worse one) and keeping a duplicate (stored twice, flagged as a
possible conflict). ``quality.DUPLICATE_SIMILARITY`` is the middle of the thresholds
that merge nothing wrongly and find the most duplicates. For contrast, the same sweep
with plain rapidfuzz scorers on the whole text.

    python benchmarks/novelty_threshold.py
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rapidfuzz import fuzz

from verified_memory import quality

PAIRS = Path(__file__).resolve().parent.parent / "tests" / "data" / "novelty_pairs.jsonl"
Pair = tuple[str, str, bool, bool]  # claim a, claim b, same code, labelled the same claim


def load() -> list[Pair]:
    out = []
    for line in PAIRS.read_text().splitlines():
        pair = json.loads(line)
        a = quality.normalize_claim(pair["a"]["subject"], pair["a"]["fact"])
        b = quality.normalize_claim(pair["b"]["subject"], pair["b"]["fact"])
        out.append((a, b, pair.get("code", "same") == "same", bool(pair["same"])))
    return out


def errors(pairs: list[Pair], scorer: Callable[[str, str], float],
           threshold: float) -> tuple[int, int]:
    """(different claims merged, duplicates kept) at ``threshold``."""
    merged = kept = 0
    for a, b, same_code, label in pairs:
        said = (same_code and quality.same_claim(a, b, threshold=0.0)
                and scorer(a, b) >= threshold)
        merged += said and not label
        kept += label and not said
    return merged, kept


def sweep(pairs: list[Pair], scorer: Callable[[str, str], float]) -> tuple[int, int, int]:
    """The thresholds (first, last) that merge nothing wrongly and keep the fewest
    duplicates, and how many duplicates they keep."""
    # 101: above any score, so nothing is merged (and no duplicate found)
    table = {t: errors(pairs, scorer, t) for t in range(40, 102)}
    clean = {t: kept for t, (merged, kept) in table.items() if merged == 0}
    fewest = min(clean.values())
    best = [t for t, kept in clean.items() if kept == fewest]
    return best[0], best[-1], fewest


def main() -> None:
    pairs = load()
    duplicates = sum(p[3] for p in pairs)
    print(f"# {len(pairs)} labelled pairs, {duplicates} of them the same claim\n")
    print("| scorer | thresholds merging no different claims | duplicates found | "
          "pairs right |")
    print("|---|---|---:|---:|")
    scorers: dict[str, Callable[[str, str], float]] = {
        "quality.text_similarity": quality.text_similarity,
        "rapidfuzz ratio": fuzz.ratio,
        "rapidfuzz token_sort_ratio": fuzz.token_sort_ratio,
        "rapidfuzz token_set_ratio": fuzz.token_set_ratio,
    }
    for name, scorer in scorers.items():
        first, last, kept = sweep(pairs, scorer)
        found = duplicates - kept
        span = "none" if first == 101 else f"{first}-{last}"
        print(f"| {name} | {span} | {found}/{duplicates} ({found / duplicates:.0%}) "
              f"| {len(pairs) - kept}/{len(pairs)} ({(len(pairs) - kept) / len(pairs):.1%}) |")
    merged, kept = errors(pairs, quality.text_similarity, quality.DUPLICATE_SIMILARITY)
    print(f"\nquality.DUPLICATE_SIMILARITY = {quality.DUPLICATE_SIMILARITY:g}: "
          f"{merged} different claims merged, {kept} duplicates kept "
          f"({len(pairs) - merged - kept}/{len(pairs)} pairs right)")


if __name__ == "__main__":
    main()
