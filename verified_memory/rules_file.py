"""Promoted memories as rules in a rules file (``AGENTS.md``, ``CLAUDE.md``, a
``.cursor/rules/*.mdc`` file): the last step of the lifecycle of seed 000, always taken
by a person (``vmem promote``).

A rule is a block between markers that carry the memory's id, under a section heading
(``## Conventions from verified memory`` unless told otherwise), so that promoting again
replaces the block in place and nothing else in the file is touched. The rule cites the
lines the memory was verified at, with the commit, so a reader can check it as an agent
would. Text is written with invisible characters shown (``prompt.sanitize``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from verified_memory.errors import ValidationError
from verified_memory.models import CitationCheck, Memory, place
from verified_memory.prompt import sanitize, sanitize_line

__all__ = ["DEFAULT_SECTION", "render_rule", "write_rule"]

DEFAULT_SECTION = "Conventions from verified memory"


def _markers(memory_id: str) -> tuple[str, str]:
    return f"<!-- vmem:rule {memory_id} -->", f"<!-- /vmem:rule {memory_id} -->"


def render_rule(memory: Memory, checks: Sequence[CitationCheck], revision: str) -> str:
    """The rule block of a memory whose citations were verified at ``revision``."""
    start, end = _markers(memory.id)
    places = [c.location or c.citation.location for c in checks]
    cites = ", ".join(f"`{place(p.path, p.line_start, p.line_end)}`" for p in places)
    lines = [start, f"### {sanitize_line(memory.subject)}", "", sanitize(memory.fact).strip()]
    if memory.reason:
        lines += ["", f"Why: {sanitize(memory.reason).strip()}"]
    lines += ["", f"Cites {cites} (verified at `{revision[:12]}`).", end]
    return "\n".join(lines)


def write_rule(path: str | os.PathLike[str], memory: Memory,
               checks: Sequence[CitationCheck], revision: str, *,
               section: str = DEFAULT_SECTION) -> str:
    """Write (or replace) the memory's rule in the file at ``path`` (created with the
    section when missing); the file's new text. Refuses a path that is a directory."""
    target = Path(path)
    if target.is_dir():
        raise ValidationError(f"{target} is a directory: name the rules file to write into")
    text = target.read_text(encoding="utf-8") if target.exists() else ""
    block = render_rule(memory, checks, revision)
    start, end = _markers(memory.id)
    found = re.search(re.escape(start) + r".*?" + re.escape(end), text, flags=re.S)
    if found:
        text = text[:found.start()] + block + text[found.end():]
    else:
        heading = f"## {sanitize_line(section)}"
        if heading not in text.splitlines():
            text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + heading + "\n"
        lines = text.splitlines()
        at = lines.index(heading) + 1
        # The end of the section: the next heading of the same or a higher level.
        while at < len(lines) and not re.match(r"#{1,2} ", lines[at]):
            at += 1
        before = "\n".join(lines[:at]).rstrip("\n")
        after = "\n".join(lines[at:])
        text = before + "\n\n" + block + "\n" + ("\n" + after if after else "")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return text
