"""MemoryService end to end: a real git repository and a real SQLite file."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo
from verified_memory import (
    Conflict,
    Decision,
    EventKind,
    MemoryService,
    NotFound,
    Outcome,
    SourceUnavailable,
    Status,
    ValidationError,
)
from verified_memory.anchors.fingerprint import fingerprint_lines
from verified_memory.models import (
    Citation,
    CitationCheck,
    Location,
    MemoryFilter,
    Transition,
    utcnow,
)
from verified_memory.sources.base import git_blob_sha
from verified_memory.sources.fake import DictSource
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.sources.worktree import WorktreeSource
from verified_memory.store.memory import InMemoryStore
from verified_memory.store.sqlite import SQLiteStore
from verified_memory.verify.files import FileCache
from verified_memory.verify.ladder import Verifier
from verified_memory.verify.passes import VerificationPass, _advance
from verified_memory.verify.scope import pass_scope

REPO = "acme/app"
CONFIG = """\
API_VERSION = "2024-06"
TIMEOUT = 30


def client_headers():
    return {"X-Api-Version": API_VERSION}
"""
ROUTES = """\
package routes

const apiVersion = "2024-06"

func Register() {
\tmux.Handle("/v1", handler)
}
"""


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.write("src/config.py", CONFIG)
    repo.write("server/routes.go", ROUTES)
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary")
    repo.write("latin1.txt", "caf\xe9\n".encode("latin-1"))
    repo.commit("initial")
    return repo


@pytest.fixture
def service(repo: GitRepo, tmp_path: Path) -> Iterator[MemoryService]:
    with MemoryService(SQLiteStore(tmp_path / "mem.db"), LocalGitSource(repo.path),
                       actor="tester") as svc:
        yield svc


def memory_input(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "repo": REPO,
        "subject": "API version synchronization",
        "fact": "The API version must match between the client config and the server routes.",
        "citations": [
            {"path": "src/config.py", "line_start": 1, "line_end": 1},
            {"path": "server/routes.go", "line_start": 3, "line_end": 3},
        ],
        "reason": "Prevents integration breakage when the version is bumped.",
        "created_by": "coding-agent",
    }
    data.update(overrides)
    return data


def kinds(service: MemoryService, memory_id: str) -> list[str]:
    service.telemetry.flush()
    return [e.kind.value for e in service.memories.events(memory_id=memory_id)]


# ---------------------------------------------------------------------------- store


def test_store_fingerprints_citations(service: MemoryService, repo: GitRepo) -> None:
    memory = service.store(memory_input()).memory
    assert memory.status is Status.ACTIVE
    assert memory.created_by == "coding-agent"
    first = memory.citations[0]
    assert first.sha == repo.head
    assert first.blob_sha == git_blob_sha(CONFIG.encode())
    assert len(first.fingerprint.line_hashes) == 1
    assert len(first.snippet_hash) == 16
    assert service.memories.get(memory.id) == memory
    assert kinds(service, memory.id) == ["created"]


TOTAL = ("def total(items, tax_rate, discount):\n"
         "    subtotal = sum(i.price * i.qty for i in items)\n"
         "    return subtotal * (1 + tax_rate) - discount\n\n\n"
         "def avg(xs):\n    return sum(xs) / len(xs)\n")
WRAPPED = ("def total(\n    items,\n    tax_rate,\n    discount,\n):\n"
           "    subtotal = sum(\n        i.price * i.qty for i in items\n    )\n"
           "    return subtotal * (1 + tax_rate) - discount\n\n\n"
           "def avg(xs):\n    return sum(xs) / len(xs)\n")


def test_code_found_rewrapped_is_fingerprinted_again_where_it_now_is(tmp_path: Path) -> None:
    """Re-wrapped code holds at its new, longer range; from then on that range is what
    the citation names, so a later edit elsewhere in the file leaves it valid where it is
    (not "relocated" to the same place, with a telemetry event, pass after pass)."""
    repo = GitRepo.project(tmp_path / "calc", {"lib/calc.py": TOTAL},
                           origin="https://github.com/acme/app.git")
    with MemoryService(SQLiteStore(tmp_path / "m.db"), LocalGitSource(repo.path)) as service:
        memory = service.store(memory_input(citations=[
            {"path": "lib/calc.py", "line_start": 1, "line_end": 3}])).memory
        repo.write("lib/calc.py", WRAPPED)
        repo.commit("black")
        (check,) = service.verify([memory.id]).verifications[0].checks
        assert (check.outcome, str(check.location)) == (Outcome.RELOCATED, "lib/calc.py:1-9")
        (cited,) = service.memories.get(memory.id).citations
        assert (cited.line_start, cited.line_end, len(cited.fingerprint.line_hashes)) \
            == (1, 9, 9)
        assert cited.fingerprint.anchor is not None
        assert cited.fingerprint.anchor.name == memory.citations[0].fingerprint.anchor.name
        for edit in range(2):
            repo.write("lib/calc.py", WRAPPED + f"\n\nX{edit} = {edit}\n")
            repo.commit(f"edit {edit}")
            (check,) = service.verify([memory.id]).verifications[0].checks
            assert (check.outcome, check.step) == (Outcome.VALID, 2)
        assert kinds(service, memory.id).count("relocated") == 1


def test_a_relocation_whose_file_cannot_be_read_again_keeps_its_fingerprint() -> None:
    # The check read the file; a cache that has let it go since, and a source that
    # cannot give it now, must not fail the pass: the citation moves as it did before.
    citation = Citation("a.py", 1, 3, "c" * 40, "b" * 40,
                        fingerprint_lines(["x = 1", "y = 2", "z = 3"], 1, 3))
    check = CitationCheck(citation, Outcome.RELOCATED, Location("a.py", 4, 9), "d" * 40,
                          1.0, step=4)
    moved = _advance(check, "e" * 40, FileCache(DictSource({})))
    assert (moved.line_start, moved.line_end, moved.sha, moved.blob_sha) == (4, 9, "e" * 40,
                                                                             "d" * 40)
    assert moved.fingerprint == citation.fingerprint


def test_store_pins_each_citation_to_its_own_sha(service: MemoryService, repo: GitRepo) -> None:
    old = repo.head
    repo.write("src/config.py", "# moved\n" + CONFIG)
    repo.commit("header")
    memory = service.store(memory_input(citations=[
        {"path": "src/config.py", "line_start": 1, "line_end": 1, "sha": old}])).memory
    assert memory.citations[0].sha == old
    # At HEAD the line moved one down: verification follows it.
    report = service.verify([memory.id])
    (check,) = report.verifications[0].checks
    assert check.outcome is Outcome.RELOCATED
    assert str(check.location) == "src/config.py:2"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"repo": "not-a-repo"}, "repo must be 'owner/name'"),
        ({"repo": "a/b/c"}, "repo must be 'owner/name'"),
        ({"subject": "  "}, "subject must not be empty"),
        ({"fact": ""}, "fact must not be empty"),
        ({"fact": None}, "fact is required"),
        ({"subject": "x" * 201}, "subject is 201 characters long; the limit is 200"),
        ({"citations": []}, "at least one citation"),
        ({"citations": [{"path": "/etc/passwd", "line_start": 1, "line_end": 1}]},
         "must be relative"),
        ({"citations": [{"path": "../outside.py", "line_start": 1, "line_end": 1}]},
         "'..' found"),
        ({"citations": [{"path": "src/config.py", "line_start": 0, "line_end": 1}]},
         "line_start must be 1 or more"),
        ({"citations": [{"path": "src/config.py", "line_start": 3, "line_end": 2}]},
         "line_end (2) is before line_start (3)"),
        ({"citations": [{"path": "src/config.py", "line_start": 5, "line_end": 90}]},
         "past the end of src/config.py, which has 6 lines"),
        ({"citations": [{"path": "src/nope.py", "line_start": 1, "line_end": 1}]},
         "src/nope.py does not exist at HEAD"),
        ({"citations": [{"path": "logo.png", "line_start": 1, "line_end": 1}]},
         "logo.png is binary; only UTF-8 text can be cited"),
        ({"citations": [{"path": "latin1.txt", "line_start": 1, "line_end": 1}]},
         "latin1.txt is not UTF-8 text; only UTF-8 text can be cited"),
        ({"citations": [{"path": "src/config.py", "line_start": 3, "line_end": 3}]},
         "only blank lines"),
        ({"citations": [{"path": "src/config.py", "line_start": "one", "line_end": 1}]},
         "line_start must be a whole number"),
        # past what SQLite's and Postgres' integers hold: refused, never an OverflowError
        ({"citations": [{"path": "src/config.py", "line_start": 1, "line_end": 2**63}]},
         "line_end must be at most 2147483647, got 9223372036854775808"),
        ({"citations": [{"path": "src/config.py", "line_start": "99999999999999999999"}]},
         "line_start must be at most 2147483647"),
        ({"colour": "red"}, "unknown field(s) in memory: colour"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(
        service: MemoryService, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        service.store(memory_input(**overrides))
    assert message in str(info.value)
    assert service.memories.recent(REPO, status=None) == []
    assert service.memories.events(repo=REPO) == []


def test_reads_by_lines_past_any_integer_are_refused_in_one_line(
        service: MemoryService) -> None:
    for lines in ((2**63, 2**63), (1, 2**31)):
        with pytest.raises(ValidationError, match="must be at most 2147483647"):
            service.search_by_path(REPO, "src/config.py", lines)
        with pytest.raises(ValidationError, match="<= 2147483647"):
            service.memories.by_path(REPO, "src/config.py", lines=lines)


@pytest.mark.parametrize("path", ["", "../etc/passwd", "a\x00b"])
def test_a_bad_path_to_read_by_is_named_once(service: MemoryService, path: str) -> None:
    """``memory_search_by_path`` and ``vmem list --path`` say ``path ...``, not
    ``path.path ...`` (the path was checked as a citation's)."""
    for read in (lambda: service.search_by_path(REPO, path),
                 lambda: service.list_memories(REPO, where=MemoryFilter(path=path))):
        with pytest.raises(ValidationError, match=r"^path ") as info:
            read()
        assert "path.path" not in str(info.value)


def test_unknown_ref_is_a_clear_error(service: MemoryService) -> None:
    with pytest.raises(NotFound, match="no-such-branch"):
        service.store(memory_input(), ref="no-such-branch")
    assert service.memories.recent(REPO, status=None) == []


def test_second_citation_failing_writes_nothing(service: MemoryService) -> None:
    bad = memory_input()
    bad["citations"].append({"path": "server/routes.go", "line_start": 1, "line_end": 99})
    with pytest.raises(ValidationError, match=r"citations\[2\]"):
        service.store(bad)
    assert service.memories.recent(REPO, status=None) == []


# ---------------------------------------------------------------------------- reading


def test_get_recent_search_and_by_path(service: MemoryService) -> None:
    a = service.store(memory_input())
    b = service.store(memory_input(subject="Request timeout", fact="Clients time out after "
                                   "30 seconds.", citations=[
                                       {"path": "src/config.py", "line_start": 2,
                                        "line_end": 2}], tags=["http"]))
    assert [m.id for m in service.get_recent(REPO)] == [b.id, a.id]
    assert [m.id for m in service.get_recent(REPO, limit=1)] == [b.id]
    assert [m.id for m in service.search(REPO, "timeout")] == [b.id]
    assert [m.id for m in service.search(REPO, "http")] == [b.id]
    assert service.search(REPO, "nothing-like-this") == []
    assert {m.id for m in service.search_by_path(REPO, "src/config.py")} == {a.id, b.id}
    assert [m.id for m in service.search_by_path(REPO, "src/config.py", (2, 4))] == [b.id]
    assert [m.id for m in service.search_by_path(REPO, "./server//routes.go")] == [a.id]
    assert service.get_recent("other/repo") == []
    assert kinds(service, b.id).count("retrieved") == 6


def test_search_reads_whole_only_what_it_keeps_and_drops_what_went_meanwhile(
        service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SQLite store gives hits without their memories; the service reads those it
    keeps. One forgotten or invalidated between the two reads is not returned."""
    kept = [service.store(memory_input(subject=f"retry rule {i}", fact=f"retry {i}")).memory
            for i in range(4)]
    store = service.memories
    assert isinstance(store, SQLiteStore)
    whole: list[list[str]] = []
    read_many = store.get_many
    monkeypatch.setattr(store, "get_many", lambda ids: whole.append(list(ids)) or read_many(ids))
    found = service.search(REPO, "retry", limit=2)
    assert [m.id for m in found] == [m.id for m in service.search(REPO, "retry", limit=2)]
    assert len(found) == 2
    assert whole[0] == [m.id for m in found]  # the two kept, not all four ranked

    real_hits = store.search_hits

    def hits_then_changes(*args: Any, **kwargs: Any) -> Any:
        hits = real_hits(*args, **kwargs)
        service.forget(kept[0].id, reason="test")  # another process, meanwhile
        service.invalidate(kept[1].id, "gone")
        return hits

    monkeypatch.setattr(store, "search_hits", hits_then_changes)
    assert [m.id for m in service.search(REPO, "retry")] == [kept[3].id, kept[2].id]


def test_get_unknown_id(service: MemoryService) -> None:
    with pytest.raises(NotFound):
        service.get("00000000-0000-0000-0000-000000000000")
    with pytest.raises(ValidationError, match="limit"):
        service.get_recent(REPO, limit=0)


# ---------------------------------------------------------------------------- lifecycle


def test_refresh_invalidate_and_applied(service: MemoryService) -> None:
    memory = service.store(memory_input()).memory
    refreshed = service.refresh(memory.id)
    assert refreshed.refreshed_at > memory.refreshed_at
    applied = service.log_applied(memory.id)
    assert applied.applied_count == 1
    with pytest.raises(ValidationError, match="reason"):
        service.invalidate(memory.id, " ")
    gone = service.invalidate(memory.id, "routes moved to v2")
    assert (gone.status, gone.invalid_reason) == (Status.INVALID, "routes moved to v2")
    with pytest.raises(Conflict, match="invalid"):
        service.invalidate(memory.id, "again")
    with pytest.raises(Conflict):
        service.refresh(memory.id)
    assert kinds(service, memory.id) == ["created", "refreshed", "applied", "invalidated"]
    assert service.get_recent(REPO) == []


def test_a_reason_past_the_limit_is_refused_everywhere_one_is_given(
        service: MemoryService) -> None:
    # Before: invalidate and reject kept a reason of any length (a pasted log of
    # 100,000 characters became the memory's invalid reason, shown by show, log and
    # every context naming it); MCP and recite stopped at 2000.
    memory = service.store(memory_input()).memory
    long = "x" * 2001
    for act in (lambda: service.invalidate(memory.id, long),
                lambda: service.reject(memory.id, long),
                lambda: service.recite(memory.id, [{"path": "src/config.py",
                                                    "line_start": 2}], reason=long)):
        with pytest.raises(ValidationError, match="2001 characters long; the limit is 2000"):
            act()
    assert service.memories.get(memory.id) == memory
    assert kinds(service, memory.id) == ["created"]
    assert service.invalidate(memory.id, "  " + "y" * 2000 + "  ").invalid_reason == "y" * 2000


def test_supersede_chain_and_conflicts(service: MemoryService) -> None:
    old = service.store(memory_input())
    new = service.supersede(old.id, {"subject": "API version (corrected)",
                                     "fact": "Only the server routes carry the version.",
                                     "citations": [{"path": "server/routes.go",
                                                    "line_start": 3, "line_end": 3}]})
    assert new.supersedes == old.id
    assert new.repo == REPO
    assert service.memories.get(old.id).status is Status.SUPERSEDED
    assert service.memories.get(old.id).superseded_by == new.id
    assert [m.id for m in service.history(old.id)] == [old.id, new.id]
    assert [m.id for m in service.history(new.id)] == [old.id, new.id]
    with pytest.raises(Conflict, match="superseded"):
        service.supersede(old.id, memory_input())
    service.invalidate(new.id, "wrong")
    with pytest.raises(Conflict, match="invalid"):
        service.supersede(new.id, memory_input())
    with pytest.raises(NotFound):
        service.supersede("00000000-0000-0000-0000-000000000000", memory_input())
    newer = service.store(memory_input())
    with pytest.raises(ValidationError, match="differs"):
        service.supersede(newer.id, memory_input(repo="other/repo"))
    assert "superseded" in kinds(service, old.id)


# ---------------------------------------------------------------------------- verify


def test_verify_refreshes_relocates_and_invalidates(service: MemoryService,
                                                    repo: GitRepo) -> None:
    version = service.store(memory_input()).memory
    timeout = service.store(memory_input(subject="Timeout", fact="30 seconds", citations=[
        {"path": "src/config.py", "line_start": 2, "line_end": 2}])).memory
    headers = service.store(memory_input(subject="Headers", fact="send the version",
                                         citations=[{"path": "src/config.py",
                                                     "line_start": 5, "line_end": 6}])).memory
    repo.write("src/config.py", '"""Config."""\n\n' + CONFIG.replace("TIMEOUT = 30",
                                                                     "TIMEOUT = 60"))
    repo.commit("bump timeout")
    report = service.verify(repo=REPO)
    decisions = {v.memory.id: v.decision for v in report.verifications}
    assert decisions == {version.id: Decision.REFRESH, timeout.id: Decision.INVALIDATE,
                         headers.id: Decision.REFRESH}
    moved = service.memories.get(headers.id)
    assert (moved.citations[0].line_start, moved.citations[0].line_end) == (7, 8)
    assert moved.citations[0].sha == repo.head
    assert moved.citations[0].fingerprint == headers.citations[0].fingerprint
    assert moved.verification_count == 1
    assert moved.verified_commit == repo.head
    relocated = service.memories.events(memory_id=headers.id, kinds=[EventKind.RELOCATED])
    assert relocated[0].detail["old"] == "src/config.py:5-6"
    assert relocated[0].detail["new"] == "src/config.py:7-8"
    broken = service.memories.get(timeout.id)
    assert broken.status is Status.INVALID
    assert broken.invalid_reason is not None
    # the constant is still there by name, with another value: changed, not missing
    assert "src/config.py:2 changed" in broken.invalid_reason
    assert kinds(service, timeout.id)[-2:] == ["verified_invalid", "invalidated"]
    assert kinds(service, version.id)[-3:] == ["verified_valid", "relocated", "refreshed"]
    # A second pass: the unchanged blob now short-circuits at step 1.
    again = service.verify(repo=REPO)
    assert [c.step for v in again.verifications for c in v.checks] == [1, 1, 1]


def test_a_memory_named_twice_is_verified_once(service: MemoryService,
                                               repo: GitRepo) -> None:
    # Before: `vmem verify ID ID` (or a prefix and the whole id) judged it twice in one
    # pass: two verdicts' events and counts, and the report said "0 invalidated" for a
    # memory it had just invalidated (its second verdict found it invalid already).
    timeout = service.store(memory_input(subject="Timeout", fact="30 seconds", citations=[
        {"path": "src/config.py", "line_start": 2, "line_end": 2}])).memory
    repo.write("src/config.py", CONFIG.replace("TIMEOUT = 30", "TIMEOUT = 60"))
    repo.commit("bump timeout")
    report = service.verify([timeout.id, timeout.id[:8], timeout.id])
    assert [v.memory.id for v in report.verifications] == [timeout.id]
    assert report.changed("invalidated") == 1
    assert report.verifications[0].change == "invalidated"
    assert kinds(service, timeout.id) == ["created", "verified_invalid", "invalidated"]
    assert service.memories.get(timeout.id).verification_count == 1


def test_verdict_events_count_unchanged_citations_and_describe_the_rest(
        service: MemoryService, repo: GitRepo) -> None:
    both = service.store(memory_input(citations=[
        {"path": "src/config.py", "line_start": 5, "line_end": 6},
        {"path": "server/routes.go", "line_start": 1, "line_end": 2}])).memory
    repo.write("src/config.py", '"""Config."""\n\n' + CONFIG)
    repo.commit("a docstring")
    service.verify([both.id])
    service.verify([both.id])  # nothing changed since: every file as it was
    first, second = service.memories.events(memory_id=both.id,
                                            kinds=[EventKind.VERIFIED_VALID])
    assert first.detail["unchanged"] == 1  # routes.go: counted, not described
    assert [(o["cited"], o["outcome"], o["step"]) for o in first.detail["outcomes"]] == [
        ("src/config.py:5-6", "relocated", 3)]
    assert (second.detail["unchanged"], second.detail["outcomes"]) == (2, [])


def test_a_pass_over_unchanged_code_shares_what_its_events_say(
        service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every memory whose files are unchanged gets events that say the same: one detail
    # object each kind, written (and encoded) once, read back as it was said.
    memories = [service.store(memory_input(subject=f"memory {i}", fact=f"fact {i}")).memory
                for i in range(3)]
    service.verify([m.id for m in memories])  # their first verdict at the tip
    written: list[Transition] = []
    apply = service.memories.apply
    monkeypatch.setattr(service.memories, "apply",
                        lambda transitions: (written.extend(transitions), apply(transitions))[1])

    service.verify([m.id for m in memories])

    valid = [t.events[0].detail for t in written]
    refreshed = [t.events[1].detail for t in written]
    assert all(detail is valid[0] for detail in valid)
    assert all(detail is refreshed[0] for detail in refreshed)
    assert valid[0] != refreshed[0]
    for m in memories:
        *_, (valid_event, refreshed_event) = [
            (e, f) for e, f in pairwise(service.memories.events(memory_id=m.id))
            if e.kind is EventKind.VERIFIED_VALID]
        assert dict(valid_event.detail) == {"ref": "HEAD", "revision": written[0].verified_commit,
                                            "outcomes": [], "unchanged": 2, "pass_requests": 0}
        assert refreshed_event.kind is EventKind.REFRESHED
        assert dict(refreshed_event.detail) == {"by": "verification", "ref": "HEAD",
                                                "revision": written[0].verified_commit}


def test_the_refresh_of_unchanged_code_is_the_general_verdict(service: MemoryService,
                                                              repo: GitRepo) -> None:
    # A memory every file of which is as it cited it is refreshed by a shortcut, judged
    # on the main line before or placed on it now (its commits contained): the same
    # transition, events included, as the verdict made field by field.
    memory = service.store(memory_input()).memory
    repo.write("NOTES.md", "unrelated\n")
    repo.commit("unrelated")
    source = service.source_for(REPO)
    scope = pass_scope(source, "HEAD", apply=None, branch=service.truth_ref)
    verifier = Verifier(source)
    checks = verifier.check(memory.citations, scope.revision)
    files = verifier.files
    run = VerificationPass(service.memories, service.telemetry, actor="tester", locator=None)
    now = utcnow()
    contained = frozenset(c.sha for c in memory.citations)
    assert [c.step for c in checks] == [1, 1]

    for placed in (None, contained):
        shortcut = run._verdict(memory, checks, Decision.REFRESH, None, scope, placed, now, 3,
                                files)
        general = run._any_verdict(memory, checks, Decision.REFRESH, None, scope, placed,
                                   now, 3, files)
        assert shortcut == general
        assert [e.kind for e in shortcut.events] == [EventKind.VERIFIED_VALID,
                                                      EventKind.REFRESHED]
        again = run._verdict(memory, checks, Decision.REFRESH, None, scope, placed, now, 3,
                             files)
        assert again.events[0].detail is shortcut.events[0].detail  # made once per pass
    # A commit the main line does not contain: its pin moves, so no shortcut.
    off_main = run._verdict(memory, checks, Decision.REFRESH, None, scope,
                            frozenset({"f" * 40}), now, 3, files)
    assert off_main.citations is not None
    assert [c.sha for c in off_main.citations] == [scope.revision] * 2
    assert memory.citations[0].sha != scope.revision


def test_a_verdict_another_writer_came_before_is_reported_as_it_was(
        service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = service.store(memory_input()).memory
    apply = service.memories.apply

    def invalidated_first(transitions: list[Transition]) -> list[bool]:
        apply([Transition(memory.id, status=Status.INVALID, invalid_reason="by hand")])
        return apply(transitions)

    monkeypatch.setattr(service.memories, "apply", invalidated_first)
    (verification,) = service.verify([memory.id]).verifications

    assert verification.decision is Decision.REFRESH
    assert verification.change is None
    assert verification.memory == memory  # as the pass read it
    stored = service.memories.get(memory.id)
    assert (stored.status, stored.verification_count) == (Status.INVALID, 0)


def test_the_garbage_collector_rests_during_a_pass_only(
        service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = service.store(memory_input()).memory
    seen: list[bool] = []
    source = service.source_for(REPO)
    tree = source.tree
    monkeypatch.setattr(source, "tree", lambda rev: (seen.append(gc.isenabled()),
                                                    tree(rev))[1])
    assert gc.isenabled()
    service.verify([memory.id])
    assert seen == [False]
    assert gc.isenabled()
    gc.disable()  # a caller's own choice is kept
    try:
        service.verify([memory.id])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_verify_dry_run_changes_nothing(service: MemoryService, repo: GitRepo) -> None:
    memory = service.store(memory_input())
    repo.write("src/config.py", CONFIG.replace("2024-06", "2025-01"))
    repo.commit("bump")
    report = service.verify([memory.id], apply=False)
    assert report.verifications[0].decision is Decision.INVALIDATE
    assert service.memories.get(memory.id).status is Status.ACTIVE
    # What a dry run saw is telemetry, but not a verdict that dashboards count.
    assert kinds(service, memory.id) == ["created", "checked"]


def test_unverifiable_never_invalidates(service: MemoryService, repo: GitRepo,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    memory = service.store(memory_input())
    repo.write("src/config.py", "# moved\n" + CONFIG)
    repo.commit("move")
    source = service.source_for(REPO)

    def down(sha: str) -> bytes:
        raise SourceUnavailable("network down")

    monkeypatch.setattr(source, "read_blob", down)
    report = service.verify(repo=REPO)
    assert report.verifications[0].decision is Decision.UNVERIFIED
    after = service.memories.get(memory.id)
    assert after.status is Status.ACTIVE
    assert after.verification_count == 0
    assert kinds(service, memory.id)[-1] == "unverifiable"
    assert service.context(REPO).memories == ()


def test_verify_needs_ids_or_repo_and_known_ref(service: MemoryService) -> None:
    with pytest.raises(ValidationError):
        service.verify()
    memory = service.store(memory_input())
    with pytest.raises(NotFound):
        service.verify([memory.id], ref="v99")
    with pytest.raises(NotFound):
        service.verify(["00000000-0000-0000-0000-000000000000"])


def test_worktree_verification_sees_uncommitted_edits(repo: GitRepo, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "wt.db")
    with MemoryService(store, LocalGitSource(repo.path)) as committed:
        memory = committed.store(memory_input())
    (repo.path / "src/config.py").write_text(CONFIG.replace("2024-06", "2099-01"))
    with MemoryService(SQLiteStore(tmp_path / "wt.db"), WorktreeSource(repo.path)) as wt:
        report = wt.verify([memory.id], apply=False)
        assert report.verifications[0].decision is Decision.INVALIDATE
    with MemoryService(SQLiteStore(tmp_path / "wt.db"), LocalGitSource(repo.path)) as head:
        assert head.verify([memory.id]).verifications[0].decision is Decision.REFRESH


def test_context_injects_only_memories_that_hold(service: MemoryService, repo: GitRepo) -> None:
    keep = service.store(memory_input())
    drop = service.store(memory_input(subject="Timeout", fact="30 seconds", citations=[
        {"path": "src/config.py", "line_start": 2, "line_end": 2}]))
    repo.write("src/config.py", CONFIG.replace("TIMEOUT = 30", "TIMEOUT = 5"))
    repo.commit("timeout")
    context = service.context(REPO)
    assert [m.id for m in context.memories] == [keep.id]
    assert keep.id in context.markdown
    assert drop.id not in context.markdown
    assert "API version synchronization" in context.markdown
    assert [v.memory.id for v in context.left_out] == [drop.id]
    assert context.revision == repo.head


def test_check_citations_and_read_citation(service: MemoryService, repo: GitRepo) -> None:
    first = repo.head
    repo.write("src/config.py", "# header\n" + CONFIG)
    repo.commit("header")
    results = list(service.check_citations(REPO, [
        ("moved", {"path": "src/config.py", "line_start": 1, "line_end": 2, "sha": first}),
        ("here", {"path": "server/routes.go", "line_start": 3, "line_end": 3}),
        ("ghost", {"path": "src/ghost.py", "line_start": 1, "line_end": 1}),
        ("bad", "line 4 is not a JSON object"),
    ]))
    assert [r.id for r in results] == ["moved", "here", "ghost", "bad"]
    assert [r.status for r in results] == ["relocated", "valid", "error", "error"]
    assert results[0].check is not None
    assert str(results[0].check.location) == "src/config.py:2-3"
    assert results[0].to_dict() == {"id": "moved", "status": "relocated",
                                    "path": "src/config.py", "line_start": 2, "line_end": 3,
                                    "similarity": 1.0}
    assert "src/ghost.py does not exist" in (results[2].error or "")
    assert results[3].error == "line 4 is not a JSON object"
    (no_sha,) = service.check_citations(REPO, [  # required: an error of its own
        ("no-sha", {"path": "src/config.py", "line_start": 1})], require_sha=True)
    assert no_sha.to_dict() == {"id": "no-sha", "error": "sha (the commit the citation "
                                                         "was made at) is required"}
    with pytest.raises(NotFound):  # an unknown ref fails the run once, before reading
        service.check_citations(REPO, [], ref="no-such-branch")
    cited = service.read_citation(REPO, "src/config.py", (2, 3))
    assert cited == 'API_VERSION = "2024-06"\nTIMEOUT = 30'
    with pytest.raises(ValidationError, match="past the end"):
        service.read_citation(REPO, "src/config.py", (1, 100))


def test_check_citations_without_repo_needs_one_source(repo: GitRepo) -> None:
    one = MemoryService(InMemoryStore(), LocalGitSource(repo.path))
    (result,) = one.check_citations(None, [(1, {"path": "src/config.py", "line_start": 1})])
    assert result.status == "valid"
    many = MemoryService(InMemoryStore(), lambda name: LocalGitSource(repo.path))
    with pytest.raises(ValidationError, match="needs a repo"):
        many.check_citations(None, [])


def test_check_citations_unreadable_commit_is_no_verdict(service: MemoryService,
                                                          repo: GitRepo) -> None:
    class Unreadable(DictSource):
        def tree(self, revision: str) -> dict[str, str]:
            if revision == "old":
                raise SourceUnavailable("the old commit could not be read")
            return super().tree(revision)

    source = Unreadable({"old": {"a.py": "x = 1\n"}, "new": {"a.py": "x = 1\n"}},
                        refs={"HEAD": "new"})
    checked = MemoryService(InMemoryStore(), source)
    (result,) = checked.check_citations(None, [("a", {"path": "a.py", "line_start": 1,
                                                     "sha": "old"})])
    assert (result.status, result.error, result.check) == ("unverifiable", None, None)
    assert result.unreadable == "the old commit could not be read"
    assert result.to_dict()["line_start"] is None


def test_stats(service: MemoryService, repo: GitRepo) -> None:
    a = service.store(memory_input())
    service.store(memory_input(subject="Timeout", fact="30", citations=[
        {"path": "src/config.py", "line_start": 2, "line_end": 2}]))
    repo.write("src/config.py", CONFIG.replace("TIMEOUT = 30", "TIMEOUT = 5"))
    repo.commit("timeout")
    service.verify(repo=REPO)
    service.log_applied(a.id)
    stats = service.stats(REPO)
    assert stats.by_status["active"] == 1
    assert stats.by_status["invalid"] == 1
    assert stats.events["created"] == 2
    assert stats.events["applied"] == 1
    assert stats.invalidation_rate == pytest.approx(0.5)
    assert stats.citations == 2
