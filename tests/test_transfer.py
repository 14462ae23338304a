"""``vmem db export`` / ``import``: JSON Lines that move a store losslessly between SQLite,
Postgres and Supabase, telemetry included."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from verified_memory.errors import ValidationError
from verified_memory.models import (
    Anchor,
    Citation,
    EventKind,
    Fingerprint,
    Memory,
    Status,
    TelemetryEvent,
)
from verified_memory.store.base import MemoryStore
from verified_memory.store.memory import InMemoryStore
from verified_memory.store.sqlite import SQLiteStore
from verified_memory.store.transfer import FORMAT, VERSION, export_jsonl, import_jsonl

T0 = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=UTC)
REPOS = ("acme/api", "acme/web")


def _memories() -> list[Memory]:
    """Every field set, in every status, with and without anchors; a supersede chain."""
    def cite(path: str, start: int, anchored: bool) -> Citation:
        return Citation(
            path=path, line_start=start, line_end=start + 2, sha="a" * 40,
            blob_sha=None if not anchored else "b" * 40,
            fingerprint=Fingerprint(f"{start:016x}", (2**64 - 1, 0, start),
                                    Anchor("function_definition", "App.run", "c" * 16, 2, "python")
                                    if anchored else None),
        )

    out: list[Memory] = []
    for r, repo in enumerate(REPOS):
        for n, status in enumerate(Status):
            out.append(Memory(
                id=f"{repo}-{n}", repo=repo, subject=f"Ünïcode subject {n} ✓",
                fact=f"fact {n}\nwith a second line and \"quotes\"",
                citations=(cite(f"src/{n}.py", n + 1, True), cite("docs/a b.md", 5, False)),
                status=status, reason="because" if n else None, category="api",
                tags=("retry", f"t{n}"), created_by="agent-7",
                created_at=T0 + timedelta(minutes=n + r),
                refreshed_at=T0 + timedelta(hours=n, microseconds=n),
                verification_count=n, applied_count=2 * n, verified_commit="c" * 40,
                invalid_reason="code moved" if status is Status.INVALID else None,
            ))
    out[0] = Memory(**{**{f: getattr(out[0], f) for f in Memory.__slots__},
                       "status": Status.SUPERSEDED, "superseded_by": "acme/api-new"})
    out.append(Memory(id="acme/api-new", repo="acme/api", subject="the corrected fact",
                      fact="f", citations=(cite("src/new.py", 9, True),),
                      supersedes="acme/api-0", created_at=T0, refreshed_at=T0))
    return out


def _events() -> list[TelemetryEvent]:
    kinds = list(EventKind)
    return [
        TelemetryEvent(kinds[i % len(kinds)], REPOS[i % 2], f"{REPOS[i % 2]}-{i % 4}",
                       actor="agent" if i % 3 else None, at=T0 + timedelta(seconds=i),
                       detail={"i": i, "nested": {"outcome": ["valid", "moved"]}, "x": 0.5})
        for i in range(30)
    ]


def _fill(store: MemoryStore) -> MemoryStore:
    for memory in _memories():
        store.add(memory)
    store.log(_events())
    return store


def _export(store: MemoryStore, repos: list[str] | None = list(REPOS)) -> str:  # noqa: B006
    out = io.StringIO()
    export_jsonl(store, out, repos)
    return out.getvalue()


def _body(text: str) -> list[str]:
    """The lines after the header (which carries the export time)."""
    return text.splitlines()[1:]


def _snapshot(store: MemoryStore) -> tuple[list[Memory], list[tuple[object, ...]]]:
    memories = sorted((m for r in REPOS for m in store.recent(r, limit=None, status=None)),
                      key=lambda m: m.id)
    events = [(e.kind, e.repo, e.memory_id, e.actor, e.at, dict(e.detail))
              for e in store.events(limit=None)]
    return memories, events


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "source.db")
    yield store
    store.close()


# --------------------------------------------------------------------------- format


def test_the_file_is_one_typed_json_object_per_line(sqlite: SQLiteStore) -> None:
    _fill(sqlite)
    out = io.StringIO()
    counts = export_jsonl(sqlite, out, list(REPOS))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0]["type"] == "header"
    assert (lines[0]["format"], lines[0]["version"]) == (FORMAT, VERSION)
    assert lines[0]["counts"] == {"memories": len(_memories()), "events": len(_events()),
                                  "tombstones": 0}
    assert [line["type"] for line in lines[1:]].count("memory") == len(_memories())
    assert [line["type"] for line in lines[1:]].count("event") == len(_events())
    assert counts.to_dict() == {"memories": len(_memories()), "events": len(_events()),
                                "tombstones": 0, "skipped": 0, "skipped_events": 0,
                                "skipped_tombstones": 0, "erased": 0, "repos": list(REPOS)}
    memory = next(line for line in lines if line["type"] == "memory")
    assert memory["citations"][0]["line_hashes"][0] == "ffffffffffffffff"


def test_sqlite_to_memory_and_back_is_lossless(sqlite: SQLiteStore) -> None:
    _fill(sqlite)
    exported = _export(sqlite)
    target = InMemoryStore()
    counts = import_jsonl(target, io.StringIO(exported))
    assert (counts.memories, counts.events, counts.skipped) == (len(_memories()),
                                                                len(_events()), 0)
    assert _snapshot(target) == _snapshot(sqlite)  # event ids, surrogate keys, may differ


def test_only_the_repositories_asked_for_are_exported(sqlite: SQLiteStore) -> None:
    _fill(sqlite)
    lines = [json.loads(line) for line in _body(_export(sqlite, ["acme/web"]))]
    assert {line["repo"] for line in lines} == {"acme/web"}


def test_reimporting_skips_memories_already_there(sqlite: SQLiteStore) -> None:
    _fill(sqlite)
    exported = _export(sqlite)
    target = InMemoryStore()
    import_jsonl(target, io.StringIO(exported))
    again = import_jsonl(target, io.StringIO(exported))
    assert (again.memories, again.skipped) == (0, len(_memories()))
    assert (again.events, again.skipped_events) == (0, len(_events()))
    assert _snapshot(target) == _snapshot(sqlite)  # importing twice changed nothing


def test_a_rerun_completes_an_import_cut_short(sqlite: SQLiteStore) -> None:
    _fill(sqlite)
    exported = _export(sqlite)
    lines = exported.splitlines(keepends=True)
    events = [i for i, line in enumerate(lines) if '"type":"event"' in line]
    target = InMemoryStore()
    # As if killed after the memories and half of the events were written (a file of
    # the time before headers had counts: one that has them is refused whole, below).
    header = json.loads(lines[0])
    del header["counts"]
    import_jsonl(target, [json.dumps(header), *lines[1:events[len(events) // 2]]])
    rest = import_jsonl(target, io.StringIO(exported))
    assert rest.memories == 0
    assert rest.events == len(_events()) - len(events) // 2
    assert _snapshot(target) == _snapshot(sqlite)  # event ids, surrogate keys, may differ


def test_a_file_cut_short_at_the_end_of_a_line_is_refused_whole(sqlite: SQLiteStore) -> None:
    _fill(sqlite)
    lines = _export(sqlite).splitlines(keepends=True)
    target = InMemoryStore()
    for kept in (len(lines) - 1, len(lines) // 2, 2):
        with pytest.raises(ValidationError, match=r"does not hold what its header promises "
                                                  r"\(\d+ memories, \d+ events, 0 tombstones; "
                                                  r"it holds .*Nothing was imported"):
            import_jsonl(target, io.StringIO("".join(lines[:kept])))
        assert target.recent("acme/api", status=None) == []
        assert target.events(limit=None) == []
    # A line added to the file is refused as well: the counts are of what was exported.
    added = {**json.loads(lines[-1]), "key": "an event added by hand"}
    with pytest.raises(ValidationError, match="does not hold what its header promises"):
        import_jsonl(target, io.StringIO("".join([*lines, json.dumps(added) + "\n"])))


@pytest.mark.parametrize(("text", "words"), [
    ("", "empty"),
    (f'{{"type": "header", "format": "{FORMAT}", "version": 2, "counts": {{"memories": 1}}}}\n',
     "line 1: the header's counts must be whole numbers of events, memories, tombstones"),
    (f'{{"type": "header", "format": "{FORMAT}", "version": 2, "counts": '
     '{"memories": -1, "events": 0, "tombstones": 0}}\n', "line 1: the header's counts"),
    ('{"type": "memory"}\n', "not a verified-memory export"),
    ('{"type": "header", "format": "other"}\n', "not a verified-memory export"),
    (f'{{"type": "header", "format": "{FORMAT}", "version": 99}}\n', "newer"),
    (f'{{"type": "header", "format": "{FORMAT}", "version": 1}}\n{{oops\n', "line 2: not JSON"),
    (f'{{"type": "header", "format": "{FORMAT}", "version": 1}}\n\n[1]\n', "line 3"),
    (f'{{"type": "header", "format": "{FORMAT}", "version": 1}}\n{{"type": "x"}}\n',
     "unknown type 'x'"),
    (f'{{"type": "header", "format": "{FORMAT}", "version": 1}}\n{{"type": "memory"}}\n',
     "line 2: memory: id must be a non-empty string"),
])
def test_a_bad_file_is_refused_naming_the_line(text: str, words: str) -> None:
    target = InMemoryStore()
    with pytest.raises(ValidationError, match=words):
        import_jsonl(target, io.StringIO(text))
    assert target.events(limit=None) == []


def test_an_invalid_memory_anywhere_writes_nothing(sqlite: SQLiteStore) -> None:
    _fill(sqlite)
    lines = _export(sqlite).splitlines()
    last = max(i for i, line in enumerate(lines) if json.loads(line)["type"] == "memory")
    broken = json.loads(lines[last])
    broken["citations"] = []
    lines[last] = json.dumps(broken)
    target = InMemoryStore()
    with pytest.raises(ValidationError, match=f"line {last + 1}: memory: citations must be a "
                                              "list of 1 to 50"):
        import_jsonl(target, lines)
    assert target.recent("acme/api", status=None) == []


@pytest.mark.parametrize("when", ["9999-12-31T23:59:00-05:00", "0001-01-01T00:00:00+05:00"])
@pytest.mark.parametrize("field", ["created_at", "refreshed_at", "used_at"])
def test_a_time_no_store_can_hold_is_refused_naming_the_line(
        sqlite: SQLiteStore, tmp_path: Path, field: str, when: str) -> None:
    """A time that is out of range once in UTC (a hand-edited file): a one-line error,
    not an OverflowError from the store with the import half done."""
    _fill(sqlite)
    lines = _export(sqlite).splitlines()
    first = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "memory")
    broken = json.loads(lines[first])
    broken[field] = when
    lines[first] = json.dumps(broken)
    target = SQLiteStore(tmp_path / "target.db")
    try:
        with pytest.raises(ValidationError, match=f"line {first + 1}: memory: {field} "
                                                  "is out of range"):
            import_jsonl(target, lines)
        assert target.recent("acme/api", status=None) == []
    finally:
        target.close()


# --------------------------------------------------------------------------- across stores


@pytest.mark.postgres
def test_sqlite_to_postgres_to_supabase_to_sqlite_is_lossless(
    sqlite: SQLiteStore, tmp_path: Path
) -> None:
    from tests.pg import postgres_store, supabase_store

    _fill(sqlite)
    original = _export(sqlite)
    postgres = postgres_store(tmp_path)
    supabase = supabase_store(tmp_path)
    back = SQLiteStore(tmp_path / "back.db")
    try:
        import_jsonl(postgres, io.StringIO(original))
        assert _snapshot(postgres) == _snapshot(sqlite)
        from_postgres = _export(postgres, None)  # every repository, via repos()
        assert _body(from_postgres) == _body(original)

        import_jsonl(supabase, io.StringIO(from_postgres))
        from_supabase = _export(supabase, None)
        assert _body(from_supabase) == _body(original)

        import_jsonl(back, io.StringIO(from_supabase))
        assert _snapshot(back) == _snapshot(sqlite)
        assert _body(_export(back)) == _body(original)
    finally:
        for store in (postgres, supabase, back):
            store.close()
