"""Explain one citation: the cited code, the verifier's answer (step and detail), the code there.

    .venv/bin/python -m benchmarks.relocation.explain REPO SHA PATH START END [--ref HEAD]

For the misclassifications a run writes with ``--failures`` (repositories kept with
``--keep``): the same check as ``check_citations``, but through ``Verifier.check_one`` so
the ladder step and its reason are shown.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from verified_memory.anchors.normalize import decode_text, split_lines
from verified_memory.models import CitationRef
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.verify.anchored import AnchorLocator
from verified_memory.verify.citing import fingerprint_citation
from verified_memory.verify.ladder import Verifier


def show(source: LocalGitSource, revision: str, path: str, start: int, end: int,
         context: int = 2) -> str:
    blob = source.tree(revision).get(path)
    if blob is None:
        return f"    ({path} does not exist at {revision[:10]})"
    lines = split_lines(decode_text(source.read_blob(blob)) or "")
    out = []
    for n in range(max(1, start - context), min(len(lines), end + context) + 1):
        mark = ">" if start <= n <= end else " "
        out.append(f"  {mark}{n:5d}  {lines[n - 1]}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("repo")
    parser.add_argument("sha")
    parser.add_argument("path")
    parser.add_argument("start", type=int)
    parser.add_argument("end", type=int)
    parser.add_argument("--ref", default="HEAD")
    args = parser.parse_args(argv)
    with LocalGitSource(args.repo) as source:
        verifier = Verifier(source, locator=AnchorLocator())
        cite = CitationRef(args.path, args.start, args.end, args.sha)
        citation = fingerprint_citation(source, verifier.files, args.ref, cite)
        revision = source.resolve(args.ref)
        check = verifier.check_one(citation, revision, source.tree(revision))
        print(f"cited at {args.sha[:10]}: {args.path}:{args.start}-{args.end}"
              f" (anchor {citation.fingerprint.anchor})")
        print(show(source, args.sha, args.path, args.start, args.end))
        print(f"\nverifier: {check.outcome.value} at {check.location} (step {check.step}: "
              f"{check.detail}; similarity {check.similarity}; ambiguous {check.ambiguous})")
        if check.location is not None:
            loc = check.location
            print(show(source, revision, loc.path, loc.line_start, loc.line_end))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
