"""Model behaviour that stores and the verifier rely on."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError, fields, replace
from datetime import UTC, datetime

import pytest

from verified_memory.errors import ValidationError
from verified_memory.models import (
    Anchor,
    Citation,
    Fingerprint,
    Location,
    Memory,
    Status,
    Transition,
    decode_line_hashes,
    encode_line_hashes,
    new_event_keys,
    replaced,
    slot_maker,
)

ANCHOR = Anchor("function_definition", "Session.request", "00000000000000ff", 2, "python")
ANCHOR_JSON = ('{"kind":"function_definition","name":"Session.request",'
               '"text_hash":"00000000000000ff","offset":2,"language":"python"}')
HASHES = (2**64 - 1, 0, 42)


def test_a_stored_fingerprint_equals_the_one_it_was_written_from() -> None:
    stored = Fingerprint.stored("abc", encode_line_hashes(HASHES), ANCHOR_JSON)
    built = Fingerprint("abc", HASHES, ANCHOR)

    assert stored == built
    assert hash(stored) == hash(built)
    assert stored.line_hashes == HASHES
    assert stored.anchor == ANCHOR
    assert repr(stored) == repr(built)


def test_a_stored_fingerprint_without_hashes_or_anchor() -> None:
    stored = Fingerprint.stored("abc", "", None)

    assert stored.line_hashes == ()
    assert stored.anchor is None
    assert stored == Fingerprint("abc")


def test_fingerprints_differ_by_any_part() -> None:
    base = Fingerprint("abc", HASHES, ANCHOR)

    assert base != Fingerprint("abd", HASHES, ANCHOR)
    assert base != Fingerprint("abc", HASHES[:2], ANCHOR)
    assert base != Fingerprint("abc", HASHES, None)
    assert base != "abc"


@pytest.mark.parametrize(
    ("hashes", "anchor", "what"),
    [
        ("zz", None, "line hashes"),
        ("", "{not json", "anchor"),
        ("", '["a list"]', "anchor"),
        ("", '{"kind": "x"}', "anchor"),
    ],
)
def test_a_malformed_stored_fingerprint_is_a_clear_error_on_use(
    hashes: str, anchor: str | None, what: str
) -> None:
    stored = Fingerprint.stored("abc", hashes, anchor)

    with pytest.raises(ValidationError, match=what):
        _ = stored.line_hashes if what == "line hashes" else stored.anchor


def test_line_hashes_decode_other_spellings() -> None:
    assert decode_line_hashes("ff  1") == (255, 1)
    assert decode_line_hashes(encode_line_hashes(HASHES)) == HASHES


def test_a_fingerprint_is_immutable_and_pickles() -> None:
    stored = Fingerprint.stored("abc", encode_line_hashes(HASHES), ANCHOR_JSON)

    with pytest.raises(FrozenInstanceError):
        stored.snippet_hash = "x"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del stored.snippet_hash
    assert pickle.loads(pickle.dumps(stored)) == stored


def test_a_transition_changes_only_what_it_names() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    citation = Citation("a.py", 1, 2, "c" * 40, "b" * 40, Fingerprint("abc", HASHES))
    memory = Memory(id="m", repo="o/r", subject="s", fact="f", citations=(citation,),
                    created_at=t0, refreshed_at=t0, verification_count=2, applied_count=1,
                    verified_commit="c" * 40)
    moved = citation.moved_to(Location("b.py", 5, 6), sha=None, blob_sha=None)

    assert Transition("m").apply_to(memory) == memory
    refreshed = Transition("m", refreshed_at=datetime(2026, 2, 1, tzinfo=UTC),
                           citations=(moved,), add_verifications=1,
                           add_applications=2).apply_to(memory)
    assert refreshed.citations == (moved,)
    assert (refreshed.verification_count, refreshed.applied_count) == (3, 3)
    assert refreshed.verified_commit == "c" * 40
    assert refreshed.status is Status.ACTIVE
    invalid = Transition("m", status=Status.INVALID, invalid_reason="gone").apply_to(memory)
    assert (invalid.status, invalid.invalid_reason) == (Status.INVALID, "gone")
    assert invalid.refreshed_at == t0


def test_replaced_copies_a_frozen_dataclass_as_replace_does() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    citation = Citation("a.py", 1, 2, "c" * 40, "b" * 40, Fingerprint("abc", HASHES))
    memory = Memory(id="m", repo="o/r", subject="s", fact="f", citations=(citation,),
                    created_at=t0, refreshed_at=t0, tags=("x",), applied_count=4)

    copy = replaced(memory, status=Status.INVALID, invalid_reason="gone")
    assert copy == replace(memory, status=Status.INVALID, invalid_reason="gone")
    assert (copy.status, copy.invalid_reason, copy.applied_count) == (Status.INVALID, "gone", 4)
    assert memory.status is Status.ACTIVE
    assert memory.invalid_reason is None
    assert replaced(memory) == memory
    assert replaced(memory) is not memory
    with pytest.raises(FrozenInstanceError):
        copy.fact = "changed"  # type: ignore[misc]


def test_slot_maker_makes_what_the_constructor_makes() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    citation = Citation("a.py", 1, 2, "c" * 40, "b" * 40, Fingerprint("abc", HASHES, ANCHOR))
    made_citation = slot_maker(Citation, [f.name for f in fields(Citation)])(
        "a.py", 1, 2, "c" * 40, "b" * 40, Fingerprint("abc", HASHES, ANCHOR))
    assert made_citation == citation
    memory = Memory(id="m", repo="o/r", subject="s", fact="f", citations=(citation,),
                    created_at=t0, refreshed_at=t0, tags=("x",), applied_count=4,
                    used_at=t0, promoted_to="AGENTS.md")
    make = slot_maker(Memory, [f.name for f in fields(Memory)])
    made = make(*(getattr(memory, f.name) for f in fields(Memory)))
    assert type(made) is Memory
    assert made == memory
    assert made.to_dict() == memory.to_dict()
    assert pickle.loads(pickle.dumps(made)) == memory
    with pytest.raises(FrozenInstanceError):
        made.fact = "changed"  # type: ignore[misc]
    # A stored fingerprint is made this way too, and stays immutable.
    stored = Fingerprint.stored("abc", encode_line_hashes(HASHES), ANCHOR_JSON)
    assert stored == Fingerprint("abc", HASHES, ANCHOR)
    with pytest.raises(FrozenInstanceError):
        stored.snippet_hash = "x"  # type: ignore[misc]


def test_slot_maker_needs_every_slot_once() -> None:
    with pytest.raises(TypeError, match="every slot"):
        slot_maker(Citation, ["path", "line_start"])
    with pytest.raises(TypeError, match="every slot"):
        slot_maker(Citation, [*(f.name for f in fields(Citation)), "path"])


def test_event_keys_made_together_are_new_event_keys() -> None:
    keys = new_event_keys(500)

    assert len(set(keys)) == 500
    assert all(len(key) == 32 and int(key, 16) >= 0 for key in keys)
    assert [key[:16] for key in keys] == sorted(key[:16] for key in keys)  # time first
    assert new_event_keys(0) == []
