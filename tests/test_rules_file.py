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
from verified_memory.rules_file import promote_rule, write_rule

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
