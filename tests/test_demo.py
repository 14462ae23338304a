"""`vmem demo` shows the whole loop: a moved memory follows its code, an edited one is
invalidated and left out of the context."""

from __future__ import annotations

from verified_memory.demo import run_demo


def test_demo_relocates_one_memory_and_invalidates_the_edited_one() -> None:
    lines: list[str] = []
    run_demo(echo=lines.append)
    text = "\n".join(lines)
    verdicts = [line for line in lines if line.startswith("   ")]
    assert len(verdicts) == 3
    assert any("'Citation outcomes': holds (relocated" in v for v in verdicts)
    assert any("'Whitespace is not a change': invalidated (changed" in v for v in verdicts)
    assert any("'Verdicts beat unreadable citations': holds (valid" in v for v in verdicts)
    context = text.split("5. the verified context", 1)[1]
    assert "Citation outcomes" in context
    assert "Whitespace is not a change" not in context
