"""Rules files a promotion writes into (``rules_file.write_rule``) as people keep them:
hand-edited, with CRLF line ends, not UTF-8, read-only, a link to another file, and a
write that fails half-way. Real files; the unprivileged runs use ``tests/unprivileged``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unprivileged import sandbox
from verified_memory.errors import ValidationError
from verified_memory.models import Decision, Memory, Verification
from verified_memory.rules_file import promote_rule, remove_rule, write_rule

REVISION = "c" * 40


def memory(n: int, fact: str = "fetch retries MAX_RETRIES times.") -> Memory:
    return Memory(id=f"{n}" * 8 + "-0000-4000-8000-000000000000", repo="acme/net",
                  subject=f"Rule {n}", fact=fact, citations=())


def start(m: Memory) -> str:
    return f"<!-- vmem:rule {m.id} -->"


def end(m: Memory) -> str:
    return f"<!-- /vmem:rule {m.id} -->"


def test_a_heading_inside_a_promoted_fact_does_not_end_the_section(tmp_path: Path) -> None:
    # Before: the next rule was put before the fact's "## Steps", inside the first
    # rule's block, and promoting the first again deleted it.
    rules = tmp_path / "AGENTS.md"
    rules.write_text("# Agents\n\nBe kind.\n")
    steps = memory(1, "Release in two steps.\n## Steps\n1. tag\n2. push")
    other = memory(2)
    write_rule(rules, steps, [], REVISION)
    write_rule(rules, other, [], REVISION)
    write_rule(rules, steps, [], REVISION)
    text = rules.read_text()
    for m in (steps, other):
        assert text.count(start(m)) == text.count(end(m)) == 1
    assert text.index(end(steps)) < text.index(start(other))  # one after the other
    assert text.startswith("# Agents\n\nBe kind.\n\n## Conventions from verified memory\n")


def test_a_marker_inside_a_fact_is_not_read_as_a_marker(tmp_path: Path) -> None:
    rules = tmp_path / "AGENTS.md"
    other = memory(2)
    write_rule(rules, other, [], REVISION)
    sly = memory(1, f"Quote it as\n{end(other)}\nand go on.")
    write_rule(rules, sly, [], REVISION)
    write_rule(rules, other, [], REVISION)
    text = rules.read_text()
    assert text.count(start(sly)) == text.count(end(sly)) == 1
    assert text.count(end(other)) == 1
    assert "and go on." in text


def test_a_rule_whose_end_marker_was_deleted_by_hand_is_refused_naming_the_line(
        tmp_path: Path) -> None:
    # Before: a second block was added, and the next promotion replaced everything from
    # the first start marker to the new end marker, the hand-written note included.
    rules = tmp_path / "AGENTS.md"
    m = memory(1)
    write_rule(rules, m, [], REVISION)
    edited = rules.read_text().replace(end(m), "Note from Bob: ask before merging.")
    rules.write_text(edited)
    with pytest.raises(ValidationError) as refused:
        write_rule(rules, m, [], REVISION)
    message = str(refused.value)
    assert str(rules) in message
    assert "line 3: the rule of memory" in message  # the start marker's line
    assert end(m) in message  # what to restore
    assert "nothing was written" in message
    assert rules.read_text() == edited


def test_a_crlf_file_keeps_its_line_ends(tmp_path: Path) -> None:
    # Before: the whole file was written back with LF line ends.
    rules = tmp_path / "AGENTS.md"
    original = b"# Agents\r\n\r\nBe kind.\r\n\r\n## Testing\r\n\r\nRun pytest.\r\n"
    rules.write_bytes(original)
    m = memory(1)
    write_rule(rules, m, [], REVISION)
    write_rule(rules, m, [], REVISION)
    data = rules.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n")  # no bare LF anywhere
    assert data.startswith(original)  # every line the rule is not on is as it was
    assert data.count(start(m).encode()) == 1


def test_a_rules_file_that_is_not_utf8_is_named_and_left_alone(tmp_path: Path) -> None:
    rules = tmp_path / "AGENTS.md"
    rules.write_bytes(b"# Agents\n\nCaf\xe9 au lait.\n")
    with pytest.raises(ValidationError) as refused:
        write_rule(rules, memory(1), [], REVISION)
    assert str(rules) in str(refused.value)
    assert "not UTF-8" in str(refused.value)
    assert rules.read_bytes() == b"# Agents\n\nCaf\xe9 au lait.\n"


def test_a_link_to_the_rules_file_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("# Agents\n")
    (tmp_path / "CLAUDE.md").symlink_to("AGENTS.md")
    write_rule(tmp_path / "CLAUDE.md", memory(1), [], REVISION)
    assert (tmp_path / "CLAUDE.md").is_symlink()
    assert start(memory(1)) in (tmp_path / "AGENTS.md").read_text()


def test_a_promoted_rule_can_be_taken_back_out_to_the_byte(tmp_path: Path) -> None:
    # What vmem promote does when the promotion cannot be recorded after the write.
    rules, fresh = tmp_path / "AGENTS.md", tmp_path / "rules" / "NEW.md"
    rules.write_bytes(b"# Agents\r\n\r\nBe kind.")  # CRLF, no final line end
    check = Verification(memory=memory(1), checks=(), decision=Decision.REFRESH,
                         revision=REVISION)
    for path in (rules, fresh):
        undo = promote_rule(path, check)
        assert start(memory(1)) in path.read_text()
        undo()
    assert rules.read_bytes() == b"# Agents\r\n\r\nBe kind."
    assert not fresh.exists()


def test_a_rule_taken_out_leaves_the_file_as_it_was_before_its_promotion(
        tmp_path: Path) -> None:
    # Before: nothing took a rule out; a person deleted the block by hand.
    rules = tmp_path / "AGENTS.md"
    original = b"# Agents\r\n\r\nBe kind.\r\n\r\n## Testing\r\n\r\nRun pytest.\r\n"
    rules.write_bytes(original)
    first, second = memory(1), memory(2)
    write_rule(rules, first, [], REVISION)
    write_rule(rules, second, [], REVISION)
    with_both = rules.read_bytes()
    undo = remove_rule(rules, first.id)
    assert undo is not None
    data = rules.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n")  # still CRLF
    assert start(first).encode() not in data
    assert start(second).encode() in data
    assert b"\r\n\r\n\r\n" not in data  # no gap where the rule was
    undo()
    assert rules.read_bytes() == with_both
    remove_rule(rules, first.id)
    remove_rule(rules, second.id)
    # The section the promotions added goes with its last rule.
    assert rules.read_bytes() == original


def test_a_section_with_more_than_rules_keeps_its_heading(tmp_path: Path) -> None:
    rules = tmp_path / "AGENTS.md"
    rules.write_text("# Agents\n\n## Testing\n\nRun pytest.\n\n## Style\n\nShort lines.\n")
    m = memory(1, "A rule.\n## Steps\nnone")  # a heading inside the rule is its text
    write_rule(rules, m, [], REVISION, section="Testing")
    remove_rule(rules, m.id)
    assert rules.read_text() == ("# Agents\n\n## Testing\n\nRun pytest.\n\n## Style\n\n"
                                 "Short lines.\n")
    write_rule(rules, m, [], REVISION, section="Empty")
    write_rule(rules, memory(2), [], REVISION)
    remove_rule(rules, m.id)
    text = rules.read_text()
    assert "## Empty" not in text
    assert text.endswith(f"Short lines.\n\n## Conventions from verified memory\n\n"
                         f"{start(memory(2))}\n### Rule 2\n\nfetch retries MAX_RETRIES "
                         f"times.\n\nCites  (verified at `{REVISION[:12]}`).\n"
                         f"{end(memory(2))}\n")


def test_taking_out_a_rule_the_file_does_not_hold_writes_nothing(tmp_path: Path) -> None:
    rules = tmp_path / "AGENTS.md"
    assert remove_rule(rules, memory(1).id) is None  # no file
    assert not rules.exists()
    rules.write_text("# Agents\n")
    rules.chmod(0o444)  # not even asked to be written
    assert remove_rule(rules, memory(1).id) is None
    assert rules.read_text() == "# Agents\n"


def test_a_rule_is_taken_out_through_a_link_and_unpaired_markers_are_refused(
        tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("# Agents\n")
    (tmp_path / "CLAUDE.md").symlink_to("AGENTS.md")
    m, other = memory(1), memory(2)
    write_rule(tmp_path / "CLAUDE.md", m, [], REVISION)
    remove_rule(tmp_path / "CLAUDE.md", m.id)
    assert (tmp_path / "CLAUDE.md").is_symlink()
    assert (tmp_path / "AGENTS.md").read_text() == "# Agents\n"
    write_rule(tmp_path / "AGENTS.md", m, [], REVISION)
    write_rule(tmp_path / "AGENTS.md", other, [], REVISION)
    edited = (tmp_path / "AGENTS.md").read_text().replace(end(other), "")
    (tmp_path / "AGENTS.md").write_text(edited)
    with pytest.raises(ValidationError, match=r"line \d+: the rule of memory 2{8}.*nothing was "
                                              "written"):
        remove_rule(tmp_path / "AGENTS.md", m.id)  # its own block pairs; the file does not
    assert (tmp_path / "AGENTS.md").read_text() == edited


_WRITE_UNDER_LIMIT = """\
import resource, signal, sys
from verified_memory.models import Decision, Memory, Verification
from verified_memory.rules_file import promote_rule, write_rule
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
m = Memory(id="1" * 8 + "-0000-4000-8000-000000000000", repo="acme/net", subject="Rule",
           fact="fetch retries MAX_RETRIES times. " * 20, citations=())
try:
    write_rule(sys.argv[1], m, [], "c" * 40)
except OSError as exc:
    print(exc.filename, exc.strerror)
"""


def test_a_write_that_fails_half_way_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    # Before: the file was truncated and then written: a full disk (here a file size
    # limit) left the first 64 bytes of the new text and nothing of the old.
    rules = tmp_path / "AGENTS.md"
    rules.write_text("# Agents\n\nBe kind.\n")
    done = subprocess.run([sys.executable, "-c", _WRITE_UNDER_LIMIT, str(rules)],
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert rules.read_text() == "# Agents\n\nBe kind.\n"
    assert done.stdout.strip() == f"{rules} File too large"
    assert [p.name for p in tmp_path.iterdir()] == ["AGENTS.md"]  # no temporary left


_WRITE = """\
import sys
from verified_memory.models import Decision, Memory, Verification
from verified_memory.rules_file import promote_rule, write_rule
m = Memory(id="1" * 8 + "-0000-4000-8000-000000000000", repo="acme/net", subject="Rule",
           fact="fact", citations=())
try:
    write_rule(sys.argv[1], m, [], "c" * 40)
except OSError as exc:
    print(exc.filename, exc.strerror)
"""


def test_a_read_only_rules_file_is_not_replaced() -> None:
    # A rename over the file would replace it whatever its mode: the file's own
    # permission is asked first.
    with sandbox() as box:
        rules = box.path / "AGENTS.md"
        rules.write_text("# Agents\n")
        box.hand_over()
        rules.chmod(0o444)
        done = box.python("-c", _WRITE, os.fspath(rules))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().startswith(f"{rules} Permission denied")
        assert rules.read_text() == "# Agents\n"
