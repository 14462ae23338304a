"""Relocation on the shapes real histories take (issue 13).

Each test builds a repository the way a real project's history looks (a ``src/``
layout adopted while the files were edited, modules made private, a package renamed, a
module split into a package, blank lines at a citation's edges, one-line constants and
fields, code examples in documentation), cites code at the first commit as a memory
would, and checks at HEAD; the bulk check (anchors derived) must answer the same
(``History.check``). Nothing here reads a fetched mirror: the real-history benchmark
(``benchmarks/real_history``) is where these shapes were found.
"""

from __future__ import annotations

from verified_memory.anchors.fingerprint import fingerprint_lines
from verified_memory.anchors.normalize import split_lines
from verified_memory.models import Anchor, Citation
from verified_memory.verify.alignment import rewrapped
from verified_memory.verify.files import FileText

# ------------------------------------------------------------------ re-wrapped windows


def _file(text: str) -> FileText:
    file = FileText.from_bytes("0" * 40, text.encode())
    assert file is not None
    return file


def _citation(lines: list[str], start: int, end: int, offset: int) -> Citation:
    anchor = Anchor("class_definition", "Big", "0" * 16, offset, "python")
    return Citation("big.py", start, end, None, None,
                    fingerprint_lines(lines, start, end, anchor=anchor))


def test_a_rewrapped_window_in_a_long_definition_is_found_by_its_text() -> None:
    """A call cited in a 4,000-line class, exploded one argument per line by a
    formatter (with the trailing comma it adds): found by searching the cited text in
    the class's text, and, when the old text cannot be read, by hashing growing windows;
    both find the same lines, the copy nearest the cited offset of two."""
    methods = [f"    def m{i}(self):\n        return self.value + {i}\n" for i in range(2000)]
    call = "        return configure(alpha, beta, gamma, delta)\n"
    exploded = ("        return configure(\n            alpha,\n            beta,\n"
                "            gamma,\n            delta,\n        )\n")
    old_text = "class Big:\n" + "".join(methods[:1500]) + "    def target(self):\n" + call \
        + "".join(methods[1500:])
    new_text = "class Big:\n" + "".join(methods[:10]) + "    def early(self):\n" + exploded \
        + "".join(methods[10:1600]) + "    def target(self):\n" + exploded \
        + "".join(methods[1600:])
    old_lines = split_lines(old_text)
    cited_line = old_lines.index(call.rstrip("\n")) + 1
    citation = _citation(old_lines, cited_line, cited_line, cited_line - 1)
    new = _file(new_text)
    new_lines = split_lines(new_text)
    copies = [i + 1 for i, line in enumerate(new_lines) if line == "        return configure("]
    assert len(copies) == 2
    expected = (copies[1], copies[1] + 5)  # the second copy: 3,200 lines nearer the offset
    old = _file(old_text)
    text = old.hasher().text(cited_line - 1, cited_line - 1)
    assert rewrapped(citation, new, 1, len(new_lines), text) == expected
    assert rewrapped(citation, new, 1, len(new_lines)) == expected
    assert rewrapped(citation, new, 1, copies[1] - 1, text) == (copies[0], copies[0] + 5)


def test_a_rewrapped_window_must_end_where_the_cited_text_ends() -> None:
    """The cited text may occur inside a longer line (``f(a, b)`` in ``g(f(a, b))``) or
    run into the next line: only a window of whole lines with exactly that text counts."""
    old_lines = ["def f():", "    return total(a, b)", ""]
    citation = _citation(old_lines, 2, 2, 1)
    text = _file("\n".join(old_lines)).hasher().text(1, 1)
    inside = _file("def f():\n    return total(a, b) + 1\n    x = 2\n")
    assert rewrapped(citation, inside, 1, 3, text) is None
    assert rewrapped(citation, inside, 1, 3) is None
    split = _file("def f():\n    y = 1\n    return total(\n        a, b)\n")
    assert rewrapped(citation, split, 1, 4, text) == (3, 4)
    assert rewrapped(citation, split, 1, 4) == (3, 4)
