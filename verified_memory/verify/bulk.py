"""Check many citations that are not (yet) memories: ``vmem citations check``.

Each input is ``{"id", "path", "line_start", "line_end", "sha"}`` where ``sha`` is the
commit the citation was made at. The original code is read there (so the citation is
fingerprinted exactly as a memory would have been), then the ladder runs at ``ref``.
One bad input yields an error for its id and does not stop the run.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from verified_memory.errors import NotFound, SourceUnavailable, ValidationError
from verified_memory.models import Location, parse_citation
from verified_memory.sources.base import CodeSource
from verified_memory.verify.citing import fingerprint_citation
from verified_memory.verify.files import FileCache
from verified_memory.verify.ladder import Locator, Verifier

__all__ = ["check_citations", "parse_jsonl"]

#: Refs (commit shas, mostly) resolved once per run and remembered.
_REFS_CACHE = 1024


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
    """One result per input, in input order: ``{id, status, path, line_start, line_end,
    similarity}`` with the code's current place, or ``{id, error}`` for a bad input.

    ``ref`` is resolved before anything is read, so an unknown ref raises ``NotFound``
    here, once, even for an empty input, rather than failing every line.

    The default locator derives each citation's anchor only when the ladder needs it:
    a citation whose file did not change, or whose lines are found again by their
    hashes alone, costs no parse."""
    if locator is None:
        from verified_memory.verify.anchored import AnchorLocator

        locator = AnchorLocator(derive_anchors=True)
    revision = source.resolve(ref)
    tree = source.tree(revision)
    return _check(source, items, ref, revision, tree, Verifier(source, locator=locator))


def _check(source: CodeSource, items: Iterable[tuple[Any, Mapping[str, Any] | str]],
           ref: str, revision: str, tree: Mapping[str, str],
           verifier: Verifier) -> Iterator[dict[str, Any]]:
    files: FileCache = verifier.files  # one cache: the old and the new code read once
    # a ref names one commit for the whole run (and a full sha forever): resolve it once
    resolve = functools.lru_cache(maxsize=_REFS_CACHE)(source.resolve)
    with_anchor = verifier.locator is None or not verifier.locator.derive_anchors
    for item_id, data in items:
        if isinstance(data, str):
            yield {"id": item_id, "error": data}
            continue
        try:
            if not data.get("sha"):
                raise ValidationError("sha (the commit the citation was made at) is required")
            cite = parse_citation(data, "citation")
            citation = fingerprint_citation(source, files, ref, cite, "citation",
                                            with_anchor=with_anchor, resolve=resolve)
        except (ValidationError, NotFound) as exc:
            yield {"id": item_id, "error": str(exc).removeprefix("citation: ")}
            continue
        except SourceUnavailable:  # no verdict: the code could not be read
            yield _result(item_id, "unverifiable", data.get("path"), None, None)
            continue
        check = verifier.check_one(citation, revision, tree)
        yield _result(item_id, check.outcome.value, check.location.path if check.location
                      else citation.path, check.location, check.similarity)


def _result(item_id: Any, status: str, path: Any, place: Location | None,
            similarity: float | None) -> dict[str, Any]:
    """The output line: exactly these keys, in this order; the place is the current one
    (None when the code is missing or could not be read)."""
    return {
        "id": item_id,
        "status": status,
        "path": path,
        "line_start": place.line_start if place else None,
        "line_end": place.line_end if place else None,
        "similarity": similarity,
    }
