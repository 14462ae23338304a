"""Memory quality: what is worth keeping, and what to show first.

Storage is cheap; quality is what users of agent memory complain about (published audits
of a hosted memory found a fifth of one repository's memories duplicated, one fact
stored 14 times). The rules here are pure functions over memories; the service applies
them (``MemoryService.store``, ``approve``, ``feedback``, ``context``, ``search``):

- **Categories and trust** (seed 000): categories are first-class (``CATEGORIES``, with
  free-form ones allowed); a configurable set (default: business rules) encodes domain
  semantics the agent cannot verify from code, so it is stored ``pending`` and never
  injected until a person approves it.
- **Novelty** (seed 004): a new memory whose citations cover the same code as an active
  one (``code_overlap``) and says the same thing (``same_claim``: normalised text
  similarity, with numbers and negations that must agree) is a duplicate: the existing
  one is refreshed instead. One that cites the same code but says something else is a
  possible conflict: stored, and flagged.
- **Ranking** (seed 003): full-text relevance minus tag penalties (``TAG_PENALTIES``,
  weighted by ``BETA``); safe mode weighs them fully (``SAFE_BETA``) and leaves out
  ``POISON_PATH`` and ``PHANTOM_PATTERN`` entirely. Context prefers memories recently
  confirmed, often applied and validated (``standing``).
- **Decay**: a memory nobody used for ``expire_days`` expires (``expired_at``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from verified_memory.errors import ValidationError
from verified_memory.models import Memory, SearchHit, Status

__all__ = [
    "BETA",
    "CATEGORIES",
    "DUPLICATE_SIMILARITY",
    "SAFE_BETA",
    "SAFE_FILTERED",
    "TAG_PENALTIES",
    "CodeSet",
    "Novelty",
    "QualityPolicy",
    "classify",
    "code_overlap",
    "code_set",
    "expired_at",
    "normalize_category",
    "normalize_claim",
    "rank_search",
    "safe_filtered",
    "same_claim",
    "standing",
    "tag_penalty",
    "text_similarity",
]

#: The documented categories, with what each is for. Any other category is allowed.
CATEGORIES: Mapping[str, str] = {
    "convention": "how things are done here (naming, layering, required multi-file edits)",
    "invariant": "what must stay true (tests and other code rely on it)",
    "gotcha": "a trap that cost time before (a quirk of a library, a surprising default)",
    "decision": "why the code is the way it is (a choice and what it rules out)",
    "business_rule": "domain semantics the code encodes (needs a person's approval)",
    "pattern": "a shape that worked (a migration, a fix) to reuse",
}

#: Tag penalties of seed 003, and their weight in normal and in safe mode.
TAG_PENALTIES: Mapping[str, float] = {
    "COMPLETION_DRIVE": 0.2,  # possibly hasty or incomplete work
    "POISON_PATH": 0.5,  # a known bad pattern
    "PHANTOM_PATTERN": 0.3,  # a false pattern: avoid reuse
    "UNVERIFIED_CLAIM": 0.2,  # not proven to work
}
BETA = 0.5
SAFE_BETA = 1.0
SAFE_FILTERED = frozenset({"POISON_PATH", "PHANTOM_PATTERN"})

#: Two claims at least this similar (0-100, ``text_similarity``) are one claim, unless
#: their numbers or negations differ. Measured on tests/data/novelty_pairs.jsonl
#: (``benchmarks/novelty_threshold.py``): the middle of the range of thresholds that
#: merge no two different claims while finding the most duplicates. Wrongly merging
#: loses a claim; wrongly keeping both only stores a duplicate, flagged as a conflict.
DUPLICATE_SIMILARITY = 86.0
#: Citations cover the same code when at least this share of their cited lines agree
#: (Jaccard over the non-blank line hashes of every citation, per file).
SAME_CODE = 0.8

DEFAULT_EXPIRE_DAYS = 28
DEFAULT_SOFT_LIMIT = 1000
DEFAULT_APPROVAL = frozenset({"business_rule"})


# --------------------------------------------------------------------------- policy


@dataclass(frozen=True, slots=True)
class QualityPolicy:
    """The settings of the quality rules, for one service (``from_env`` reads them:
    ``VMEM_APPROVAL_CATEGORIES``, ``VMEM_SELF_APPROVAL``, ``VMEM_EXPIRE_DAYS``,
    ``VMEM_SOFT_LIMIT``)."""

    approval_categories: frozenset[str] = DEFAULT_APPROVAL
    self_approval: bool = False  # may whoever proposed a memory approve it too?
    expire_days: int = DEFAULT_EXPIRE_DAYS  # 0: never
    soft_limit: int = DEFAULT_SOFT_LIMIT  # active memories a repository should keep
    duplicate_similarity: float = DUPLICATE_SIMILARITY
    same_code: float = SAME_CODE

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> QualityPolicy:
        env = os.environ if env is None else env
        approval = env.get("VMEM_APPROVAL_CATEGORIES")
        return cls(
            approval_categories=(DEFAULT_APPROVAL if approval is None else frozenset(
                normalize_category(c) for c in approval.split(",") if c.strip())),
            self_approval=_flag(env.get("VMEM_SELF_APPROVAL"), "VMEM_SELF_APPROVAL"),
            expire_days=_whole(env.get("VMEM_EXPIRE_DAYS"), "VMEM_EXPIRE_DAYS",
                               DEFAULT_EXPIRE_DAYS),
            soft_limit=_whole(env.get("VMEM_SOFT_LIMIT"), "VMEM_SOFT_LIMIT",
                              DEFAULT_SOFT_LIMIT),
        )

    def needs_approval(self, category: str | None) -> bool:
        return category is not None and category in self.approval_categories


def _flag(value: str | None, name: str) -> bool:
    text = (value or "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return False
    if text in ("1", "true", "yes", "on"):
        return True
    raise ValidationError(f"{name} must be 1 or 0, got {value!r}")


def _whole(value: str | None, name: str, default: int) -> int:
    if value is None or not value.strip():
        return default
    if not value.strip().isdigit():
        raise ValidationError(f"{name} must be a whole number of 0 or more, got {value!r}")
    return int(value)


# --------------------------------------------------------------------------- categories

def normalize_category(category: str) -> str:
    """A category as stored: lower case, words joined by ``_``, and a documented
    category's plural or spelling variant folded into it (``Business Rules`` ->
    ``business_rule``). Any other category is kept (free-form)."""
    text = re.sub(r"[\s\-]+", "_", category.strip().lower()).strip("_")
    if not text:
        raise ValidationError("category must not be empty")
    if text in CATEGORIES:
        return text
    for candidate in (text.removesuffix("s"), text.removesuffix("es")):
        if candidate in CATEGORIES:
            return candidate
    return text


# --------------------------------------------------------------------------- novelty

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[a-z0-9_]+")
_NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "cannot", "without",
                        "dont", "doesnt", "isnt", "arent", "mustnt", "shouldnt", "wont",
                        "cant"})
#: Words that carry no claim: a duplicate may add, drop or swap them.
_FILLER = frozenset({
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "being", "of", "in", "on",
    "at", "to", "as", "by", "for", "with", "and", "or", "nor", "its", "it", "this", "that",
    "these", "those", "their", "there", "per", "each", "every", "all", "any", "some",
    "only", "also", "then", "than", "so",
})


def normalize_claim(subject: str, fact: str) -> str:
    """What a memory claims, for comparison: subject and fact, lower case, apostrophes
    dropped (``don't`` -> ``dont``), punctuation and runs of spaces as one space."""
    text = f"{subject} {fact}".lower().replace("'", "").replace("\u2019", "")
    return " ".join(_WORD.findall(text))


def text_similarity(a: str, b: str) -> float:
    """0-100: how alike two normalised claims read, filler words aside: the lower of
    rapidfuzz's ``ratio`` (word order counts: "GET is retried, POST not" is not "POST is
    retried, GET not") and ``token_sort_ratio`` (a clause moved is no change)."""
    from rapidfuzz import fuzz  # on first use: most commands compare no claims

    a, b = _content(a), _content(b)
    return float(min(fuzz.ratio(a, b), fuzz.token_sort_ratio(a, b)))


def _content(claim: str) -> str:
    return " ".join(w for w in claim.split() if w not in _FILLER)


def same_claim(a: str, b: str, threshold: float = DUPLICATE_SIMILARITY) -> bool:
    """Whether two normalised claims say the same thing: similar enough, with the same
    numbers and the same negations (``3`` vs ``5``, ``must`` vs ``must not`` differ
    however alike the rest reads)."""
    if set(_NUMBER.findall(a)) != set(_NUMBER.findall(b)):
        return False
    if (set(a.split()) & _NEGATIONS) != (set(b.split()) & _NEGATIONS):
        return False
    return text_similarity(a, b) >= threshold


CodeSet = frozenset[tuple[str, int]]


def code_set(memory: Memory) -> CodeSet:
    """The code a memory cites: (path, line hash) of every non-blank cited line."""
    return frozenset((c.path, h) for c in memory.citations for h in c.fingerprint.line_hashes
                     if h)


def code_overlap(a: CodeSet, b: CodeSet) -> float:
    """Jaccard similarity of two memories' cited lines (0: nothing shared, 1: the same)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


@dataclass(frozen=True, slots=True)
class Novelty:
    """What a new memory is next to the active ones citing its code."""

    duplicate_of: Memory | None = None  # says the same about the same code
    conflicts: tuple[Memory, ...] = ()  # cite the same code, say something else


def classify(new: Memory, existing: Iterable[Memory],
             policy: QualityPolicy | None = None) -> Novelty:
    """``new`` against active memories citing its code: the most similar duplicate, or
    the memories it may contradict (see the module docstring)."""
    policy = policy or QualityPolicy()
    mine, claim = code_set(new), normalize_claim(new.subject, new.fact)
    duplicate: tuple[float, Memory] | None = None
    conflicts: list[Memory] = []
    for other in existing:
        if other.id == new.id or other.status is not Status.ACTIVE:
            continue
        if code_overlap(mine, code_set(other)) < policy.same_code:
            continue
        theirs = normalize_claim(other.subject, other.fact)
        if same_claim(claim, theirs, policy.duplicate_similarity):
            score = text_similarity(claim, theirs)
            if duplicate is None or score > duplicate[0]:
                duplicate = (score, other)
        else:
            conflicts.append(other)
    if duplicate is not None:
        return Novelty(duplicate_of=duplicate[1])
    return Novelty(conflicts=tuple(conflicts))


# --------------------------------------------------------------------------- ranking


def tag_penalty(tags: Iterable[str]) -> float:
    """The sum of the penalties of a memory's cognitive tags (case-insensitive)."""
    return sum(TAG_PENALTIES.get(tag.strip().upper(), 0.0) for tag in tags)


def safe_filtered(memory: Memory | SearchHit) -> bool:
    """Whether safe mode leaves ``memory`` out (a ``SAFE_FILTERED`` tag)."""
    return any(tag.strip().upper() in SAFE_FILTERED for tag in memory.tags)


_Ranked = TypeVar("_Ranked", Memory, SearchHit)


def rank_search(found: Sequence[_Ranked], scores: Sequence[float], *,
                safe: bool = False) -> list[_Ranked]:
    """Search results by ``score - beta * tag penalty``: ``scores`` are each memory's
    text relevance (any scale, normalised here to 0-1 by the best). Safe mode weighs
    the penalties fully and leaves out known bad patterns. Stable for equal scores."""
    best = max(scores, default=0.0) or 1.0
    beta = SAFE_BETA if safe else BETA
    ranked = [(score / best - beta * tag_penalty(m.tags), i, m)
              for i, (m, score) in enumerate(zip(found, scores, strict=True))
              if not (safe and safe_filtered(m))]
    ranked.sort(key=lambda r: (-r[0], r[1]))
    return [m for _, _, m in ranked]


def standing(memory: Memory, now: datetime) -> float:
    """How much a memory has earned its place in a context, about 0-2: recently
    confirmed (refreshed this week counts most, a month ago about a third), often
    applied (up to 10 uses), validated, minus tag penalties."""
    age_days = max(0.0, (now - memory.refreshed_at).total_seconds() / 86_400)
    recency = math.exp(-age_days / 30)
    use = min(1.0, math.log1p(memory.applied_count) / math.log1p(10))
    return recency + 0.5 * use + (0.5 if memory.validated else 0.0) - BETA * tag_penalty(
        memory.tags)


# --------------------------------------------------------------------------- decay


def expired_at(memory: Memory, expire_days: int) -> datetime | None:
    """When an unused memory expires (None: never, with ``expire_days`` 0). Last use is
    ``used_at`` (stored, approved, refreshed by request, applied), else its creation:
    being verified alone does not keep a memory alive."""
    if expire_days <= 0:
        return None
    return (memory.used_at or memory.created_at) + timedelta(days=expire_days)
