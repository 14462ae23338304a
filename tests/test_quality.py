"""Memory quality through the service, the CLI and MCP: duplicates and conflicts on
store, categories that need approval, feedback to validation and promotion, poor
performers, expiry, ranking with tag penalties, the soft limit. Real git repositories,
real SQLite files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from benchmarks.novelty_threshold import errors, load, sweep
from tests.gitrepo import GitRepo
from tests.test_cli import vmem, vmem_json
from verified_memory import (
    Conflict,
    EventKind,
    LocalGitSource,
    MemoryService,
    Status,
)
from verified_memory.models import Decision, Transition, utcnow
from verified_memory.quality import (
    DUPLICATE_SIMILARITY,
    QualityPolicy,
    normalize_category,
    text_similarity,
)
from verified_memory.store.sqlite import SQLiteStore

REPO = "acme/net"
NET = """\
MAX_RETRIES = 3
TIMEOUT = 10
BACKOFF = 0.5


def fetch(url):
    for _ in range(MAX_RETRIES):
        if get(url, timeout=TIMEOUT):
            return True
        sleep(BACKOFF)
    return False


def close(conn):
    conn.flush()
    return None
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    repo = GitRepo.project(tmp_path / "net", {"net/fetch.py": NET},
                           origin="https://github.com/acme/net.git")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'q.db'}")
    return repo


@pytest.fixture
def db(repo: GitRepo, tmp_path: Path) -> Path:
    return tmp_path / "q.db"


def service_for(repo: GitRepo, db: Path, **policy: Any) -> MemoryService:
    return MemoryService(SQLiteStore(db), LocalGitSource(repo.path), actor="alice",
                         policy=QualityPolicy(**policy))


@pytest.fixture
def service(repo: GitRepo, db: Path) -> Iterator[MemoryService]:
    with service_for(repo, db) as svc:
        yield svc


def memory(subject: str = "Retry budget",
           fact: str = "fetch retries MAX_RETRIES times, then gives up.",
           lines: tuple[int, int] = (6, 11), **extra: Any) -> dict[str, Any]:
    return {"repo": REPO, "subject": subject, "fact": fact,
            "citations": [{"path": "net/fetch.py", "line_start": lines[0],
                           "line_end": lines[1]}], **extra}


def kinds(service: MemoryService, memory_id: str) -> list[str]:
    service.telemetry.flush()
    return [e.kind.value for e in service.memories.events(memory_id=memory_id)]


# --------------------------------------------------------------------------- novelty


def test_the_same_memory_stored_three_times_is_one_memory(service: MemoryService) -> None:
    first = service.store(memory())
    again = service.store(memory())
    reworded = service.store(memory(fact="fetch retries MAX_RETRIES times and then gives up"))
    assert not first.duplicate
    assert again.duplicate
    assert again.id == first.id
    assert reworded.duplicate
    assert reworded.id == first.id
    assert [m.id for m in service.memories.recent(REPO)] == [first.id]
    assert kinds(service, first.id) == ["created", "refreshed", "refreshed"]
    assert service.memories.events(memory_id=first.id)[1].detail["by"] == "duplicate"


def test_a_duplicate_retired_before_its_refresh_is_no_duplicate(
        service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process invalidates the memory a store found it repeats, between the
    check and the refresh: the store asks again and stores the memory (it used to fail:
    "cannot refresh memory ...: it is invalid")."""
    import verified_memory.service as module

    first = service.store(memory())
    checked = module.add_unless_duplicate

    def rival_invalidates(*args: Any) -> bool:
        added = checked(*args)
        if not added and service.memories.get(first.id).status is Status.ACTIVE:
            service.invalidate(first.id, "the rival process: the code changed")
        return added

    monkeypatch.setattr(module, "add_unless_duplicate", rival_invalidates)
    again = service.store(memory())

    assert not again.duplicate
    assert again.id != first.id
    assert service.memories.get(first.id).status is Status.INVALID
    assert [m.id for m in service.memories.recent(REPO)] == [again.id]
    assert kinds(service, again.id) == ["created"]


def test_the_same_code_with_another_claim_is_stored_and_flagged(service: MemoryService) -> None:
    first = service.store(memory())
    other = service.store(memory(fact="fetch retries 5 times, then gives up."))
    assert not other.duplicate
    assert other.conflicts == (first.id,)
    assert other.memory.status is Status.ACTIVE
    created = service.memories.events(memory_id=other.id, kinds=[EventKind.CREATED])[0]
    assert created.detail["conflicts"] == [first.id]
    assert [m.id for m in service.conflicts(other.memory)] == [first.id]
    # The same words about other code are a memory of their own, with no conflict.
    elsewhere = service.store(memory(lines=(14, 16)))
    assert not elsewhere.duplicate
    assert elsewhere.conflicts == ()


def test_the_threshold_is_measured_on_the_labelled_pairs() -> None:
    """tests/data/novelty_pairs.jsonl: DUPLICATE_SIMILARITY merges no two different
    claims and finds most duplicates; it lies in the range that does that best."""
    pairs = load()
    merged, kept = errors(pairs, text_similarity, DUPLICATE_SIMILARITY)
    duplicates = sum(p[3] for p in pairs)
    assert merged == 0
    assert (duplicates - kept) / duplicates >= 0.85
    first, last, fewest = sweep(pairs, text_similarity)
    assert first <= DUPLICATE_SIMILARITY <= last
    assert kept == fewest


# --------------------------------------------------------------------------- approval


def test_categories_are_normalised_and_free_form_is_kept() -> None:
    assert normalize_category("Business Rules") == "business_rule"
    assert normalize_category("business-rule") == "business_rule"
    assert normalize_category("Conventions") == "convention"
    assert normalize_category("gotchas") == "gotcha"
    assert normalize_category("Release Train") == "release_train"


def test_a_business_rule_waits_for_someone_else_to_approve_it(
        repo: GitRepo, db: Path) -> None:
    with service_for(repo, db) as alice:
        stored = alice.store(memory("Revenue date", "Revenue is recognised at invoice date.",
                                    category="business_rules", created_by="alice"))
        rule = stored.memory
        assert (rule.category, rule.status) == ("business_rule", Status.PENDING)
        assert alice.get_recent(REPO) == []
        assert alice.context(REPO).memories == ()
        assert [m.id for m in alice.pending(REPO)] == [rule.id]
        with pytest.raises(Conflict, match="proposed by alice"):
            alice.approve(rule.id)
    with MemoryService(SQLiteStore(db), LocalGitSource(repo.path), actor="bob") as bob:
        approved = bob.approve(rule.id)
        assert approved.status is Status.ACTIVE
        assert [m.id for m in bob.context(REPO).memories] == [rule.id]
        with pytest.raises(Conflict, match="not pending"):
            bob.approve(rule.id)
        assert "approved" in kinds(bob, rule.id)


def test_a_business_rule_proposed_again_is_not_queued_twice(
        repo: GitRepo, db: Path) -> None:
    # An agent that learns the same rule in every session proposes it every time: the
    # queue holds it once, and a rule already approved is a duplicate of that memory.
    rule = memory("Revenue date", "Revenue is recognised at invoice date.",
                  category="business_rule")
    with service_for(repo, db) as alice:
        first = alice.store({**rule, "created_by": "agent-1"})
        again = alice.store({**rule, "created_by": "agent-2"})
        assert not first.duplicate
        assert again.duplicate
        assert again.id == first.id
        assert again.memory.status is Status.PENDING
        assert [m.id for m in alice.pending(REPO)] == [first.id]
        assert [k for k in kinds(alice, first.id) if k != "retrieved"] == ["created",
                                                                        "refreshed"]
        alice.approve(first.id)
        approved_copy = alice.store({**rule, "created_by": "agent-3"})
        assert approved_copy.duplicate
        assert approved_copy.id == first.id
        assert alice.pending(REPO) == []
        # Another claim about the same code waits, with its possible conflict named.
        other = alice.store(memory("Revenue date", "Revenue is never recognised before 2 payments.",
                                   category="business_rule", created_by="agent-4"))
        assert not other.duplicate
        assert other.memory.status is Status.PENDING
        assert other.conflicts == (first.id,)
        (created,) = alice.audit(other.id, kinds=[EventKind.CREATED])
        assert created.detail["conflicts"] == [first.id]
        assert created.detail["pending"] == "category business_rule needs approval"


def test_a_correction_that_needs_approval_retires_the_approved_memory_once_approved(
        repo: GitRepo, db: Path) -> None:
    # Before, the approved rule was superseded the moment its correction was proposed:
    # nothing of it was injected while the correction waited, nor after a rejection.
    rule = memory("Retry budget", "fetch retries MAX_RETRIES times, then gives up.",
                  category="business_rule")
    with service_for(repo, db) as alice:
        approved = alice.store(rule).memory
        alice.approve(approved.id, by="bob")
        fix = {**rule, "fact": "fetch gives up after MAX_RETRIES tries.",
               "created_by": "carol"}
        first = alice.supersede(approved.id, fix)
        assert (first.status, first.supersedes) == (Status.PENDING, approved.id)
        assert alice.memories.get(approved.id).status is Status.ACTIVE
        assert [m.id for m in alice.context(REPO).memories] == [approved.id]
        assert [m.id for m in alice.history(approved.id)] == [approved.id, first.id]
        alice.reject(first.id, "it says the same", by="bob")
        after = alice.memories.get(approved.id)
        assert (after.status, after.superseded_by) == (Status.ACTIVE, None)
        assert "superseded" not in kinds(alice, approved.id)
        second = alice.supersede(approved.id, fix)
        with pytest.raises(Conflict, match="proposed by carol"):
            alice.approve(second.id, by="carol")
        done = alice.approve(second.id, by="bob")
        assert done.status is Status.ACTIVE
        old = alice.memories.get(approved.id)
        assert (old.status, old.superseded_by) == (Status.SUPERSEDED, second.id)
        assert [m.id for m in alice.context(REPO).memories] == [second.id]
        assert [m.id for m in alice.history(second.id)] == [approved.id, second.id]
        (retired,) = alice.audit(approved.id, kinds=[EventKind.SUPERSEDED])
        assert (retired.actor, retired.detail["superseded_by"]) == ("bob", second.id)
        # A correction of a memory retired meanwhile is refused, and changes nothing.
        third = alice.supersede(second.id, {**fix, "fact": "fetch tries MAX_RETRIES times."})
        alice.invalidate(second.id, "the retry loop is gone")
        with pytest.raises(Conflict, match=f"corrects {second.id}, which is invalid now"):
            alice.approve(third.id, by="bob")
        assert alice.memories.get(third.id).status is Status.PENDING
        assert alice.memories.get(second.id).superseded_by is None


def test_reject_and_self_approval_when_configured(repo: GitRepo, db: Path) -> None:
    with service_for(repo, db, self_approval=True) as alice:
        one = alice.store(memory("Discount", "Discounts apply before tax.",
                                 category="business_rule")).memory
        two = alice.store(memory("Fiscal year", "The fiscal year starts on April 1.",
                                 lines=(1, 1), category="business_rule")).memory
        assert alice.approve(one.id).status is Status.ACTIVE
        rejected = alice.reject(two.id, "it starts in January")
        assert rejected.status is Status.INVALID
        assert rejected.invalid_reason == "rejected by alice: it starts in January"
    with service_for(repo, db, approval_categories=frozenset()) as open_policy:
        assert open_policy.store(memory("Tax", "Tax is 20 %.", lines=(2, 2),
                                        category="business_rule")).memory.status \
            is Status.ACTIVE


def test_the_reviewer_named_by_is_the_actor_of_the_approval_and_the_rejection(
        repo: GitRepo, db: Path) -> None:
    # The service acts as alice (the process's user); bob is the reviewer named.
    with service_for(repo, db) as alice:
        one = alice.store(memory("Discount", "Discounts apply before tax.",
                                 category="business_rule")).memory
        two = alice.store(memory("Fiscal year", "The fiscal year starts on April 1.",
                                 lines=(1, 1), category="business_rule")).memory
        alice.approve(one.id, by="bob")
        alice.reject(two.id, "it starts in January", by="carol")
        (approved,) = alice.audit(one.id, kinds=[EventKind.APPROVED])
        (rejected,) = alice.audit(two.id, kinds=[EventKind.REJECTED])
    assert (approved.actor, approved.detail["by"]) == ("bob", "bob")
    assert (rejected.actor, rejected.detail["by"]) == ("carol", "carol")


# --------------------------------------------------------------------------- feedback


def test_feedback_validates_and_a_person_promotes(service: MemoryService, repo: GitRepo,
                                                  tmp_path: Path) -> None:
    from verified_memory.rules_file import write_rule

    m = service.store(memory()).memory
    for _ in range(3):
        service.log_applied(m.id)
    for outcome in ["success"] * 9 + ["failure"]:
        service.feedback(m.id, outcome)
    now = service.memories.get(m.id)
    assert now.validated
    assert (now.success_count, now.failure_count, now.applied_count) == (9, 1, 3)
    assert kinds(service, m.id).count("validated") == 1  # once, when it first qualified
    assert [q.id for q in service.promotion_queue(REPO)] == [m.id]
    rules = repo.path / "AGENTS.md"
    rules.write_text("# Agents\n\nBe kind.\n\n## Testing\n\nRun pytest.\n")
    check = service.promote(m.id, "AGENTS.md", write=lambda c: write_rule(
        rules, c.memory, c.checks, c.revision))
    text = rules.read_text()
    assert text.count(f"<!-- vmem:rule {m.id} -->") == 1
    assert "## Conventions from verified memory" in text
    assert "`net/fetch.py:6-11`" in text
    assert text.index("## Conventions") > text.index("Run pytest.")  # appended, not inside
    assert check.passed
    assert service.memories.get(m.id).promoted_to == "AGENTS.md"
    assert service.promotion_queue(REPO) == []
    # Writing it again replaces the block: the file keeps one rule per memory.
    write_rule(rules, check.memory, check.checks, check.revision)
    assert rules.read_text().count(f"<!-- vmem:rule {m.id} -->") == 1


def test_promotion_needs_validation_and_a_rule_that_could_not_be_written_is_not_recorded(
        service: MemoryService) -> None:
    m = service.store(memory()).memory
    with pytest.raises(Conflict, match="not validated"):
        service.promote(m.id, "AGENTS.md")
    service.memories.apply([Transition(m.id, add_applications=3, add_successes=3)])

    def refuse(_: Any) -> None:
        raise OSError("read-only file system")

    with pytest.raises(OSError, match="read-only"):
        service.promote(m.id, "AGENTS.md", write=refuse)
    assert service.memories.get(m.id).promoted_to is None


def test_a_rule_whose_promotion_could_not_be_recorded_is_taken_back_out(
        service: MemoryService, repo: GitRepo, db: Path) -> None:
    # Another agent invalidates the memory while it is promoted (between its check and
    # the record). Before: the promotion was refused, and the rule stayed in the file.
    from verified_memory.rules_file import write_rule

    m = service.store(memory()).memory
    service.memories.apply([Transition(m.id, add_applications=3, add_successes=3)])
    rules = repo.path / "AGENTS.md"
    rules.write_bytes(b"# Agents\r\n\r\nBe kind.\r\n")

    def write(check: Any) -> Any:
        write_rule(rules, check.memory, check.checks, check.revision)
        with service_for(repo, db) as other:
            other.invalidate(m.id, "the retry loop went away")
        return lambda: rules.write_bytes(b"# Agents\r\n\r\nBe kind.\r\n")

    with pytest.raises(Conflict, match="it is invalid"):
        service.promote(m.id, "AGENTS.md", write=write)
    assert rules.read_bytes() == b"# Agents\r\n\r\nBe kind.\r\n"
    assert kinds(service, m.id)[-1] == "invalidated"  # and no "promoted"


def test_promoting_a_memory_that_is_not_active_says_so(service: MemoryService) -> None:
    # Before: "not validated (applied 3x, success rate 100%): promotion needs at least
    # 3 applications with 90 % success", which the numbers it gave contradicted.
    m = service.store(memory()).memory
    service.memories.apply([Transition(m.id, add_applications=3, add_successes=3)])
    service.invalidate(m.id, "the retry loop went away")
    with pytest.raises(Conflict) as refused:
        service.promote(m.id, "AGENTS.md")
    assert str(refused.value) == (f"memory {m.id} is invalid; only an active memory can "
                                  "be promoted")
    assert service.memories.get(m.id).promoted_to is None


def test_a_poor_performer_is_set_aside_from_context(service: MemoryService) -> None:
    good = service.store(memory()).memory
    poor = service.store(memory("Close", "close flushes the connection first.",
                                lines=(14, 16))).memory
    for outcome in ("failure", "failure", "failure", "success"):
        service.feedback(poor.id, outcome)
    assert service.memories.get(poor.id).poor
    context = service.context(REPO)
    assert [m.id for m in context.memories] == [good.id]
    assert "set aside for poor feedback" in context.markdown
    assert poor.id in context.markdown
    assert service.stats(REPO).poor == 1


# --------------------------------------------------------------------------- decay


def age(service: MemoryService, memory_id: str, days: int) -> None:
    """Pretend nobody used the memory for ``days``."""
    service.memories.apply([Transition(memory_id,
                                       used_at=utcnow() - timedelta(days=days))])


def test_an_unused_memory_expires_at_the_tip_and_comes_back_when_used(
        service: MemoryService, repo: GitRepo) -> None:
    fresh = service.store(memory()).memory
    stale = service.store(memory("Close", "close flushes the connection first.",
                                 lines=(14, 16))).memory
    age(service, stale.id, 30)
    # Off the tip it is left out, not expired.
    repo.run("checkout", "-q", "-b", "topic")
    repo.write("README.md", "topic\n")
    repo.commit("topic")
    view = service.context(REPO)
    assert [m.id for m in view.memories] == [fresh.id]
    assert "1 expired (unused too long)" in view.markdown
    assert service.memories.get(stale.id).status is Status.ACTIVE
    repo.run("checkout", "-q", "main")
    context = service.context(REPO)
    assert [m.id for m in context.memories] == [fresh.id]
    assert service.memories.get(stale.id).status is Status.EXPIRED
    assert kinds(service, stale.id)[-1] == "expired"
    # Used again: verified first, active again, applied.
    back = service.log_applied(stale.id)
    assert (back.status, back.applied_count) == (Status.ACTIVE, 1)
    assert "revived" in kinds(service, stale.id)
    assert [v.decision for v in service.verify([stale.id]).verifications] == [Decision.REFRESH]


def test_an_expired_memory_whose_code_changed_does_not_come_back(
        service: MemoryService, repo: GitRepo) -> None:
    stale = service.store(memory("Close", "close flushes the connection first.",
                                 lines=(14, 16))).memory
    age(service, stale.id, 60)
    service.verify(repo=REPO)
    assert service.memories.get(stale.id).status is Status.EXPIRED
    repo.write("net/fetch.py", NET.replace("conn.flush()", "conn.close()"))
    repo.commit("close closes")
    with pytest.raises(Conflict, match="expired"):
        service.log_applied(stale.id)
    assert service.memories.get(stale.id).status is Status.EXPIRED


def test_expiry_can_be_turned_off(repo: GitRepo, db: Path) -> None:
    with service_for(repo, db, expire_days=0) as svc:
        m = svc.store(memory()).memory
        age(svc, m.id, 400)
        assert [x.id for x in svc.context(REPO).memories] == [m.id]


# --------------------------------------------------------------------------- ranking


def test_tag_penalties_rank_bad_patterns_down_and_safe_mode_drops_them(
        service: MemoryService) -> None:
    poison = service.store(memory("Retry loop", "retries MAX_RETRIES times in fetch",
                                  tags=["POISON_PATH"])).memory
    clean = service.store(memory("Retry loop timing", "fetch retries sleep BACKOFF",
                                 lines=(7, 9))).memory
    hasty = service.store(memory("Retry loop close", "retries end by closing",
                                 lines=(14, 16), tags=["COMPLETION_DRIVE"])).memory
    assert [m.id for m in service.search(REPO, "retry loop")] == [clean.id, hasty.id,
                                                                   poison.id]
    assert [m.id for m in service.search(REPO, "retry loop", safe=True)] == [clean.id,
                                                                             hasty.id]


def test_context_prefers_often_applied_validated_memories(service: MemoryService) -> None:
    plain = service.store(memory()).memory
    proven = service.store(memory("Close", "close flushes the connection first.",
                                  lines=(14, 16))).memory
    service.memories.apply([Transition(proven.id, add_applications=5, add_successes=5)])
    service.verify(repo=REPO)  # both refreshed in the same instant
    assert [m.id for m in service.context(REPO).memories] == [proven.id, plain.id]


def test_listings_filter_by_category_and_tag(service: MemoryService) -> None:
    a = service.store(memory(category="convention", tags=["http"])).memory
    b = service.store(memory("Close", "close flushes the connection first.",
                             lines=(14, 16), category="gotcha")).memory
    assert [m.id for m in service.get_recent(REPO, category="gotcha")] == [b.id]
    assert [m.id for m in service.search(REPO, "fetch", tag="http")] == [a.id]
    assert [m.id for m in service.context(REPO, tag="http").memories] == [a.id]


def test_the_soft_limit_names_the_oldest_unused(repo: GitRepo, db: Path) -> None:
    with service_for(repo, db, soft_limit=2) as svc:
        first = svc.store(memory()).memory
        svc.store(memory("Close", "close flushes the connection first.", lines=(14, 16)))
        third = svc.store(memory("Timeout", "TIMEOUT is ten seconds.", lines=(2, 2)))
        (warning,) = third.warnings
        assert "3 active memories, over the soft limit of 2" in warning
        assert first.id[:8] in warning
        assert svc.soft_limit_warning(REPO) == warning
        # back under the limit: no warning at once (the count past it is what waits)
        svc.invalidate(first.id, "retired")
        assert svc.soft_limit_warning(REPO) is None


# --------------------------------------------------------------------------- the CLI


def test_cli_store_pending_approve_reject_and_promote(
        repo: GitRepo, db: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMEM_ACTOR", "alice")
    cite = ["--cite", "net/fetch.py:6-11"]
    stored = vmem_json(capsys, "store", "--subject", "Retry budget", "--fact",
                       "fetch retries MAX_RETRIES times", *cite)
    code, out, err = vmem(capsys, "store", "--subject", "Retry budget", "--fact",
                          "fetch retries MAX_RETRIES times", *cite)
    assert code == 0, err
    assert f"not stored twice: {stored['id']} already says this" in out
    code, out, err = vmem(capsys, "store", "--subject", "Retry budget", "--fact",
                          "fetch retries 5 times", *cite)
    assert code == 0, err
    assert f"possible conflict: {stored['id']}" in err
    rule = vmem_json(capsys, "store", "--subject", "Revenue", "--fact", "at invoice date",
                     "--cite", "net/fetch.py:1", "--category", "Business Rules")
    assert (rule["status"], rule["category"]) == ("pending", "business_rule")
    pending = vmem_json(capsys, "pending")
    assert [m["id"] for m in pending] == [rule["id"]]
    code, _, err = vmem(capsys, "approve", rule["id"])
    assert code == 1
    assert "proposed by alice" in err
    approved = vmem_json(capsys, "approve", rule["id"], "--by", "bob")
    assert approved["status"] == "active"
    other = vmem_json(capsys, "store", "--subject", "Tax", "--fact", "twenty percent",
                      "--cite", "net/fetch.py:2", "--category", "business_rule")
    rejected = vmem_json(capsys, "reject", other["id"], "--reason", "wrong rate", "--by",
                         "bob")
    assert rejected["invalid_reason"] == "rejected by bob: wrong rate"
    # The log names the reviewer as who acted, not the process's user (VMEM_ACTOR).
    for memory_id, kind in ((rule["id"], "approved"), (other["id"], "rejected")):
        (event,) = vmem_json(capsys, "log", memory_id, "--kind", kind)
        assert (event["actor"], event["what"]) == ("bob", f"{kind} by bob")
    # Promotion: the queue, then the rule in the file.
    with service_for(repo, db) as svc:
        svc.memories.apply([Transition(stored["id"], add_applications=3, add_successes=3)])
    # A memory in an open conflict waits: the other claim is settled first.
    assert vmem_json(capsys, "promote", "--list") == []
    conflicting = vmem_json(capsys, "show", stored["id"])["conflicts"]
    assert len(conflicting) == 1  # the "5 times" memory
    vmem_json(capsys, "invalidate", conflicting[0], "--reason", "it is MAX_RETRIES")
    queue = vmem_json(capsys, "promote", "--list")
    assert [m["id"] for m in queue] == [stored["id"]]
    promoted = vmem_json(capsys, "promote", stored["id"], "--to", "AGENTS.md")
    assert promoted["promoted_to"] == "AGENTS.md"
    assert f"<!-- vmem:rule {stored['id']} -->" in (repo.path / "AGENTS.md").read_text()
    shown = vmem_json(capsys, "show", stored["id"])
    assert shown["validated"] is True
    assert shown["conflicts"] == []
    stats = vmem_json(capsys, "stats")
    assert stats["validated"] == 1
    assert stats["by_status"]["invalid"] == 2


def test_a_promoted_memory_that_breaks_says_its_rule_is_stale(
        repo: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before, the rule stayed in AGENTS.md and nothing said so: `vmem show` read only
    # "promoted into AGENTS.md". The file itself is left as it is: a verification never
    # edits a rules file.
    stored = vmem_json(capsys, "store", "--subject", "Retry budget", "--fact",
                       "fetch retries MAX_RETRIES times", "--cite", "net/fetch.py:6-11")
    with service_for(repo, db) as svc:
        svc.memories.apply([Transition(stored["id"], add_applications=3, add_successes=3)])
    vmem_json(capsys, "promote", stored["id"], "--to", "AGENTS.md")
    rule = (repo.path / "AGENTS.md").read_text()
    repo.write("net/fetch.py", NET.replace("for _ in range(MAX_RETRIES):",
                                           "while True:"))
    repo.commit("retry for ever")
    code, out, err = vmem(capsys, "verify")
    assert code == 0, err
    assert "1 invalidated" in out
    (line,) = [line for line in err.splitlines() if "stale" in line]
    assert line == ("vmem: 1 invalidated memory was promoted into AGENTS.md: its rule there "
                    "is stale now; take it out with `vmem promote ID --remove`: "
                    f"{stored['id'][:8]}")
    assert (repo.path / "AGENTS.md").read_text() == rule
    shown = vmem_json(capsys, "show", stored["id"])
    assert (shown["status"], shown["stale_rule"]) == ("invalid", "AGENTS.md")
    code, out, _ = vmem(capsys, "show", stored["id"])
    assert "where its rule is stale now (the memory is invalid)" in " ".join(out.split())
    (invalidated,) = vmem_json(capsys, "log", stored["id"], "--kind", "invalidated")
    assert invalidated["what"] == "invalidated; its rule in AGENTS.md is stale now"
    assert vmem_json(capsys, "verify", "--json")["stale_rules"] == {}  # said once


def promoted_by_cli(repo: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]
                    ) -> tuple[str, bytes]:
    """A validated memory promoted into AGENTS.md (CRLF, with text of its own) by
    ``vmem promote``; its id, and the file as it was before."""
    rules = repo.path / "AGENTS.md"
    original = b"# Agents\r\n\r\nBe kind.\r\n"
    rules.write_bytes(original)
    stored = vmem_json(capsys, "store", "--subject", "Retry budget", "--fact",
                       "fetch retries MAX_RETRIES times", "--cite", "net/fetch.py:6-11")
    with service_for(repo, db) as svc:
        svc.memories.apply([Transition(stored["id"], add_applications=3, add_successes=3)])
    vmem_json(capsys, "promote", stored["id"], "--to", "AGENTS.md")
    assert f"<!-- vmem:rule {stored['id']} -->" in rules.read_text()
    return stored["id"], original


def test_a_person_takes_a_promoted_rule_back_out(
        repo: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: there was no way; the memory stayed promoted, out of the queue, counted
    # by the dashboard, whatever was done to the file.
    memory_id, original = promoted_by_cli(repo, db, capsys)
    assert vmem_json(capsys, "promote", "--list") == []
    assert vmem_json(capsys, "dashboard", "--json")["repos"][0]["quality"]["promoted"] == 1
    code, out, err = vmem(capsys, "promote", memory_id[:8], "--remove", "--by", "bob")
    assert code == 0, err
    assert out.strip() == f"took the rule of {memory_id} out of AGENTS.md"
    assert (repo.path / "AGENTS.md").read_bytes() == original  # CRLF, section gone too
    shown = vmem_json(capsys, "show", memory_id)
    assert (shown["status"], shown["promoted_to"]) == ("active", None)
    (event,) = vmem_json(capsys, "log", memory_id, "--kind", "demoted")
    assert (event["actor"], event["what"]) == ("bob", "demoted from AGENTS.md by bob")
    assert [m["id"] for m in vmem_json(capsys, "promote", "--list")] == [memory_id]
    assert vmem_json(capsys, "dashboard", "--json")["repos"][0]["quality"]["promoted"] == 0
    # Twice: a memory not promoted is one line, exit 1, and nothing is written.
    code, out, err = vmem(capsys, "promote", memory_id, "--remove")
    assert (code, out) == (1, "")
    assert err == (f"vmem: error: memory {memory_id} is not promoted: there is no rule of "
                   "it to take out\n")
    assert len(vmem_json(capsys, "log", memory_id, "--kind", "demoted")) == 1


def test_a_stale_rule_is_taken_out_of_a_retired_memory(
        repo: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memory_id, original = promoted_by_cli(repo, db, capsys)
    repo.write("net/fetch.py", NET.replace("for _ in range(MAX_RETRIES):", "while True:"))
    repo.commit("retry for ever")
    assert vmem(capsys, "verify")[0] == 0
    assert vmem_json(capsys, "show", memory_id)["stale_rule"] == "AGENTS.md"
    removed = vmem_json(capsys, "promote", memory_id, "--remove")
    assert (removed["status"], removed["promoted_to"]) == ("invalid", None)
    assert "stale_rule" not in removed
    assert (repo.path / "AGENTS.md").read_bytes() == original
    code, out, _ = vmem(capsys, "show", memory_id)
    assert code == 0
    assert "promoted" not in out
    assert vmem_json(capsys, "dashboard", "--json")["repos"][0]["quality"]["promoted"] == 0


def test_a_rule_deleted_by_hand_is_said_and_the_memory_demoted_all_the_same(
        repo: GitRepo, db: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMEM_ACTOR", "carol")
    memory_id, original = promoted_by_cli(repo, db, capsys)
    (repo.path / "AGENTS.md").write_bytes(original + b"\r\nA line of mine.\r\n")
    code, out, err = vmem(capsys, "promote", memory_id, "--remove")
    assert code == 0, err
    assert err == (f"vmem: AGENTS.md held no rule of memory {memory_id} (taken out by "
                   "hand?); it is no longer recorded as promoted\n")
    assert out.strip() == f"demoted {memory_id}"
    assert (repo.path / "AGENTS.md").read_bytes() == original + b"\r\nA line of mine.\r\n"
    assert vmem_json(capsys, "show", memory_id)["promoted_to"] is None
    (event,) = vmem_json(capsys, "log", memory_id, "--kind", "demoted")
    assert (event["actor"], event["what"]) == (
        "carol", "demoted from AGENTS.md by carol; the file held no rule of it")


def test_a_rules_file_that_is_not_there_is_named_where_it_was_looked_for(
        repo: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The file deleted, or vmem run from another directory: the line names the path.
    memory_id, _ = promoted_by_cli(repo, db, capsys)
    (repo.path / "AGENTS.md").unlink()
    code, out, err = vmem(capsys, "promote", memory_id, "--remove")
    assert (code, out.strip()) == (0, f"demoted {memory_id}"), err
    assert err == (f"vmem: there is no {repo.path / 'AGENTS.md'}: no rule of memory "
                   f"{memory_id} to take out; it is no longer recorded as promoted\n")
    assert not (repo.path / "AGENTS.md").exists()
    assert vmem_json(capsys, "show", memory_id)["promoted_to"] is None


def test_a_rules_file_is_named_from_the_working_copy_root(
        repo: GitRepo, db: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the name was stored as typed and read from where vmem ran, so --remove run
    # in a subdirectory looked for net/AGENTS.md and left the rule in the root's file.
    memory_id, original = promoted_by_cli(repo, db, capsys)
    monkeypatch.chdir(repo.path / "net")
    code, out, err = vmem(capsys, "promote", memory_id, "--remove")
    assert (code, out.strip()) == (0, f"took the rule of {memory_id} out of AGENTS.md"), err
    assert (repo.path / "AGENTS.md").read_bytes() == original
    assert not (repo.path / "net" / "AGENTS.md").exists()
    # Promoted from a subdirectory: stored by its place in the working copy.
    (repo.path / "CLAUDE.md").write_text("# Claude\n")
    promoted = vmem_json(capsys, "promote", memory_id, "--to", "../CLAUDE.md")
    assert promoted["promoted_to"] == "CLAUDE.md"
    assert f"vmem:rule {memory_id}" in (repo.path / "CLAUDE.md").read_text()
    monkeypatch.chdir(repo.path)
    assert vmem_json(capsys, "promote", memory_id, "--remove")["promoted_to"] is None
    assert (repo.path / "CLAUDE.md").read_text() == "# Claude\n"


def test_unpaired_markers_refuse_the_removal_and_change_nothing(
        repo: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memory_id, _ = promoted_by_cli(repo, db, capsys)
    rules = repo.path / "AGENTS.md"
    edited = rules.read_bytes().replace(f"<!-- /vmem:rule {memory_id} -->".encode(),
                                        b"Bob was here.")
    rules.write_bytes(edited)
    code, out, err = vmem(capsys, "promote", memory_id, "--remove")
    assert (code, out) == (1, "")
    (line,) = err.splitlines()
    assert line.startswith(f"vmem: error: {rules} line 7: the rule of memory {memory_id} "
                           "starts here but has no end marker")
    assert line.endswith("nothing was written")
    assert rules.read_bytes() == edited
    assert vmem_json(capsys, "show", memory_id)["promoted_to"] == "AGENTS.md"
    assert vmem_json(capsys, "log", memory_id, "--kind", "demoted") == []


def test_remove_takes_a_memory_id_and_the_file_from_the_promotion(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    from verified_memory.rules_file import DEFAULT_SECTION

    for args, said in ((["--remove"], "no --list"), (["x", "--remove", "--to", "A.md"],
                                                     "no --to"),
                       (["x", "--remove", "--section", DEFAULT_SECTION], "no --section"),
                       (["x", "--remove", "--section", "Other"], "no --section"),
                       (["x", "--by", "bob"], "--by goes with --remove")):
        code, _, err = vmem(capsys, "promote", *args)
        assert code == 2
        assert said in err


def test_a_demotion_that_cannot_be_recorded_puts_the_rule_back(
        repo: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Another process retires the memory between the removal and the record: the
    # demotion is refused, and the file holds the rule again (the store still says it
    # is promoted there).
    from verified_memory.rules_file import remove_rule

    memory_id, original = promoted_by_cli(repo, db, capsys)
    rules = repo.path / "AGENTS.md"
    promoted = rules.read_bytes()

    def remove(memory: Any) -> Any:
        undo = remove_rule(rules, memory.id)
        assert rules.read_bytes() == original
        with service_for(repo, db) as other:
            other.invalidate(memory_id, "the retry loop went away")
        return undo

    with service_for(repo, db) as service:
        with pytest.raises(Conflict, match=r"cannot demote memory .*: it is invalid, not "):
            service.demote(memory_id, remove=remove)
        assert rules.read_bytes() == promoted
        assert service.memories.get(memory_id).promoted_to == "AGENTS.md"
        assert kinds(service, memory_id)[-1] == "invalidated"  # and no "demoted"
        # Through the API without a file: the event says nothing of one.
        assert service.demote(memory_id, by="dan").promoted_to is None
        (event,) = service.audit(memory_id, kinds=[EventKind.DEMOTED])
    assert (event.actor, event.detail) == ("dan", {"from": "AGENTS.md", "by": "dan"})


def test_cli_search_safe_mode_and_filters(repo: GitRepo, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    vmem_json(capsys, "store", "--subject", "Retry loop", "--fact", "retry in fetch",
              "--cite", "net/fetch.py:6-11", "--tag", "POISON_PATH")
    safe = vmem_json(capsys, "search", "retry", "--safe")
    assert safe == []
    found = vmem_json(capsys, "search", "retry", "--tag", "POISON_PATH")
    assert len(found) == 1
    assert vmem_json(capsys, "recent", "--category", "gotcha") == []


# --------------------------------------------------------------------------- MCP


def test_mcp_store_tells_a_duplicate_and_approval_is_refused_to_the_proposer(
        repo: GitRepo, db: Path) -> None:
    from tests.test_mcp_server import call, error, ok
    from verified_memory.mcp_server import build_server

    server = build_server(lambda: service_for(repo, db), default_repo=REPO)
    args = {"subject": "Retry budget", "fact": "fetch retries MAX_RETRIES times",
            "citations": [{"path": "net/fetch.py", "line_start": 6, "line_end": 11}]}
    first = ok(call(server, "memory_store", **args))
    second = ok(call(server, "memory_store", **args))
    assert (first["duplicate"], second["duplicate"]) == (False, True)
    assert second["id"] == first["id"]
    proposed = ok(call(server, "memory_store", subject="Revenue", fact="at invoice date",
                       citations=[{"path": "net/fetch.py", "line_start": 1}],
                       category="business_rule"))
    assert proposed["status"] == "pending"
    pending = ok(call(server, "memory_pending"))["pending"]
    assert [m["id"] for m in pending] == [proposed["id"]]
    refused = error(call(server, "memory_approve", memory_id=proposed["id"]))
    assert "proposed by mcp:" in refused
    poison = ok(call(server, "memory_store", subject="Retry hack", fact="retry forever",
                     citations=[{"path": "net/fetch.py", "line_start": 14,
                                 "line_end": 16}], tags=["POISON_PATH"]))
    safe = ok(call(server, "memory_search", query="retry", safe_mode=True))
    assert poison["id"] not in json.dumps(safe["verified"])
    normal = ok(call(server, "memory_search", query="retry"))
    assert [v["id"] for v in normal["verified"]][-1] == poison["id"]
