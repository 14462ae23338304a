"""The review bot: which memories does a change touch, and do they still hold at its head?

``review()`` (``findings.py``) takes a ``Diff`` (``diff.py``: from a local
``base...head``, ``git.py``, or a GitHub pull request, ``github.py``), finds the memories
whose citations the change touches, verifies them, and reports a ``Finding`` for each;
``markdown.py`` writes the report for people. See ``findings.py`` for the semantics.
"""

from __future__ import annotations

from verified_memory.review.diff import Diff, FileDiff, HunkReader, parse_patch
from verified_memory.review.findings import (
    BY_PATH_LIMIT,
    CommentLine,
    Finding,
    FindingCitation,
    FindingKind,
    Links,
    ReviewReport,
    review,
    web_url,
)
from verified_memory.review.markdown import (
    brief_line,
    render_finding,
    render_markdown,
    summary_line,
)

__all__ = [
    "BY_PATH_LIMIT",
    "CommentLine",
    "Diff",
    "FileDiff",
    "Finding",
    "FindingCitation",
    "FindingKind",
    "HunkReader",
    "Links",
    "ReviewReport",
    "brief_line",
    "parse_patch",
    "render_finding",
    "render_markdown",
    "review",
    "summary_line",
    "web_url",
]
