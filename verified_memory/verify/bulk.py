"""Check many citations that are not (yet) memories: ``vmem citations check``.

Each input is ``{"id", "path", "line_start", "line_end", "sha"}`` where ``sha`` is the
commit the citation was made at. The original code is read there (so the citation is
fingerprinted exactly as a memory would have been), then the ladder runs at ``ref``.
One bad input yields an error for its id and does not stop the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from verified_memory.errors import NotFound, SourceUnavailable, ValidationError
from verified_memory.models import parse_citation
from verified_memory.sources.base import CodeSource
from verified_memory.verify.citing import fingerprint_citation
from verified_memory.verify.files import FileCache
from verified_memory.verify.ladder import Locator, Verifier

__all__ = ["check_citations", "parse_jsonl"]


def parse_jsonl(lines: Iterable[str]) -> Iterator[tuple[Any, Mapping[str, Any] | str]]:
    """(id, object) per non-empty line, or (id or line number, error message)."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            yield f"line {number}", f"line {number} is not valid JSON: {exc.msg}"
            continue
        if not isinstance(data, dict):
            yield f"line {number}", f"line {number} is not a JSON object"
            continue
        yield data.get("id", f"line {number}"), data


def check_citations(source: CodeSource, items: Iterable[tuple[Any, Mapping[str, Any] | str]],
                    ref: str = "HEAD", locator: Locator | None = None
                    ) -> Iterator[dict[str, Any]]:
    """One result per input, in input order (an ``error`` key for the bad ones)."""
    if locator is None:
        from verified_memory.verify.anchored import AnchorLocator

        locator = AnchorLocator()
    revision = source.resolve(ref)
    tree = source.tree(revision)
    verifier = Verifier(source, locator=locator)
    files: FileCache = verifier.files
    for item_id, data in items:
        if isinstance(data, str):
            yield {"id": item_id, "error": data}
            continue
        try:
            if not data.get("sha"):
                raise ValidationError("sha (the commit the citation was made at) is required")
            cite = parse_citation(data, "citation")
            citation = fingerprint_citation(source, files, ref, cite, "citation")
        except (ValidationError, NotFound) as exc:
            yield {"id": item_id, "error": str(exc).removeprefix("citation: ")}
            continue
        except SourceUnavailable as exc:
            yield {"id": item_id, "status": "unverifiable", "path": data.get("path"),
                   "line_start": None, "line_end": None, "similarity": None,
                   "detail": str(exc)}
            continue
        check = verifier.check_one(citation, revision, tree)
        place = check.location
        yield {
            "id": item_id,
            "status": check.outcome.value,
            "path": place.path if place else citation.path,
            "line_start": place.line_start if place else None,
            "line_end": place.line_end if place else None,
            "similarity": check.similarity,
            **({"ambiguous": True} if check.ambiguous else {}),
        }
