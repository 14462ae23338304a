"""Fingerprint a citation at a revision: read the cited lines and record their hashes.

Shared by storing a memory and by the bulk citation check, so a citation is refused for
the same reasons everywhere: a missing file, lines past its end, blank lines only, a
binary, non-UTF-8 or oversized file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from verified_memory.anchors import treesitter
from verified_memory.anchors.fingerprint import fingerprint_lines, has_code
from verified_memory.errors import ValidationError
from verified_memory.models import Citation, CitationRef
from verified_memory.sources.base import CodeSource, no_file
from verified_memory.verify.files import FileCache, FileText

__all__ = ["fingerprint_citation", "refingerprinted"]


def fingerprint_citation(source: CodeSource, files: FileCache, ref: str, cite: CitationRef,
                         where: str = "citation", *, with_anchor: bool = True,
                         resolve: Callable[[str], str] | None = None) -> Citation:
    """The citation as stored: pinned to the commit ``cite.sha`` (or ``ref``) names.

    Raises ``NotFound`` for an unknown ref and ``ValidationError`` when the citation
    points at nothing; ``where`` prefixes the message (e.g. ``citations[2]``).

    ``with_anchor=False`` leaves out the tree-sitter anchor (a parse of the file), for a
    locator that derives it when needed (``AnchorLocator(derive_anchors=True)``).
    ``resolve`` replaces ``source.resolve`` (the bulk check resolves each ref once)."""
    named = cite.sha or ref
    revision = (resolve or source.resolve)(named)
    at = named + (f" ({revision[:12]})" if revision != named else "")
    blob = source.tree(revision).get(cite.path)
    if blob is None:
        raise ValidationError(f"{where}: {no_file(source, revision, cite.path, at)}")
    file = files.get(blob)
    if file is None:
        raise ValidationError(f"{where}: {cite.path} {files.not_text(blob) or 'is not text'}"
                              "; only UTF-8 text can be cited")
    if cite.line_end > len(file.lines):
        raise ValidationError(
            f"{where}: lines {cite.line_start}-{cite.line_end} are past the end of "
            f"{cite.path}, which has {len(file.lines)} lines at {at}")
    anchor = treesitter.anchor_for(cite.path, file.text, cite.line_start, cite.line_end,
                                   key=blob, hashes=file.hashes) if with_anchor else None
    # the cited lines' hashes: the file's own if made, else only theirs (a file that did
    # not change since is never hashed whole)
    fingerprint = fingerprint_lines(file.lines, cite.line_start, cite.line_end, anchor=anchor,
                                    hashes=file.hashes_made())
    if not has_code(fingerprint):
        raise ValidationError(f"{where}: {cite.location} holds only blank lines")
    return Citation(cite.path, cite.line_start, cite.line_end,
                    sha=revision if source.pins_commits else None, blob_sha=blob,
                    fingerprint=fingerprint)


def refingerprinted(citation: Citation, file: FileText) -> Citation:
    """``citation`` with the fingerprint of the lines it names in ``file`` (the blob it
    is pinned to), made as when it was stored: an anchor if it had one."""
    start, end = citation.line_start, citation.line_end
    anchor = treesitter.anchor_for(citation.path, file.text, start, end, key=file.blob_sha,
                                   hashes=file.hashes) if citation.fingerprint.anchor else None
    return replace(citation, fingerprint=fingerprint_lines(file.lines, start, end,
                                                           anchor=anchor, hashes=file.hashes))
