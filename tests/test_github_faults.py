"""Fault injection for the GitHub source: every fault, bounded time, never a false verdict.

A repository of twelve memories (cited files unchanged, moved, edited, deleted, renamed)
is verified once with GitHub answering normally: that run's decisions are the truth.
Then the same memories are verified again, each time from a fresh copy of the store and
a cold cache, while the fake GitHub misbehaves: 5xx on 10, 50 and 100 % of requests, a
primary rate limit that resets soon or in an hour, secondary rate limits (403 and 429,
with and without ``Retry-After``), timeouts, connection resets, a revoked token,
truncated trees and a 404 for the ref. Each run must give

- no false verdict: a memory is refreshed or invalidated only as in the fault-free run,
  with the same citations; anything else stays ``unverified`` and keeps its status;
- no lost memory: the store holds the same memories, none half-changed;
- no traceback: the pass returns (or, through the CLI, exits with one line);
- bounded time: within the pass's time budget (60 s for ``verify``, 5 s for the
  context), counted on a fake clock that sleeps and timeouts advance, so the suite
  itself never waits; and a bounded number of requests.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import responses

from tests.github_payloads import (
    SCENARIOS,
    FakeClock,
    FakeGitHub,
    FaultyGitHub,
    fault_error,
    fault_share,
)
from tests.test_cli import vmem
from verified_memory import budget as budgets
from verified_memory.budget import time_budget
from verified_memory.errors import CredentialsRejected, NotFound
from verified_memory.models import Decision, Status
from verified_memory.service import MemoryService
from verified_memory.sources.github import GitHubSource
from verified_memory.store.sqlite import SQLiteStore

REPO = "octo/faults"
TOKEN = "ghp_FaultSuiteTokenNeverPrinted0123456789"
VERIFY_LIMIT, CONTEXT_LIMIT = 60.0, 5.0


def _code(n: int) -> str:
    return (f"def handler_{n}(request):\n    value = request.get('k{n}')\n"
            f"    return transform_{n}(value)\n")


def _files(version: int) -> dict[str, str]:
    """Version 1: twelve files. Version 2: 0-3 unchanged, 4-7 moved down, 8-9 edited,
    10 deleted, 11 renamed (with its neighbour)."""
    files = {f"pkg/mod{n}/code_{n}.py": _code(n) for n in range(12)}
    if version == 2:
        for n in range(4, 8):
            files[f"pkg/mod{n}/code_{n}.py"] = "# a header\n\n" + _code(n)
        for n in (8, 9):
            files[f"pkg/mod{n}/code_{n}.py"] = _code(n).replace("value", "other thing")
        del files["pkg/mod10/code_10.py"]
        files["pkg/moved/renamed_11.py"] = files.pop("pkg/mod11/code_11.py")
    return files


@dataclass
class World:
    fake: FakeGitHub
    db: Path  # the store with the twelve memories, before any verification
    ids: list[str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("faults")
    fake = FakeGitHub(REPO)
    fake.commit(_files(1))
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake.install(rsps)
        source = GitHubSource(REPO, TOKEN, cache_dir=root / "cache", sleep=lambda s: None)
        with MemoryService(SQLiteStore(root / "memories.db"), source) as service:
            ids = [service.store({
                "repo": REPO, "subject": f"handler {n}", "fact": f"handler_{n} transforms",
                "citations": [{"path": path, "line_start": 1, "line_end": 3}]}, ref="main").id
                for n, path in enumerate(_files(1))]
    fake.commit(_files(2))
    return World(fake, root / "memories.db", ids)


@dataclass
class Run:
    decisions: dict[str, Decision]
    places: dict[str, list[str]]
    statuses: dict[str, Status]
    elapsed: float  # on the fake clock
    requests: int
    reason: str | None
    error: Exception | None = None
    down: Exception | None = None  # the source-wide failure the pass met, if any


def _run(world: World, tmp_path: Path, name: str, *, limit: float = VERIFY_LIMIT,
         context: bool = False) -> Run:
    clock = FakeClock()
    fault = SCENARIOS[name](clock)
    world.fake.truncate_over = 5 if name.startswith("truncated") else None
    db = tmp_path / f"{abs(hash(name))}.db"
    shutil.copy(world.db, db)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        faulty = FaultyGitHub(world.fake, clock, fault)
        faulty.install(rsps)
        source = GitHubSource(REPO, TOKEN, cache_dir=tmp_path / f"cache-{abs(hash(name))}",
                              sleep=clock.sleep, clock=clock.time)
        with MemoryService(SQLiteStore(db), source) as service:
            error: Exception | None = None
            decisions: dict[str, Decision] = {}
            places: dict[str, list[str]] = {}
            with time_budget(limit, clock=clock.monotonic) as budget:
                try:
                    if context:
                        found = service.context(REPO, ref="main", limit=len(world.ids))
                        decisions = {m.id: Decision.REFRESH for m in found.memories}
                        decisions |= {v.memory.id: v.decision for v in found.left_out}
                    else:
                        report = service.verify(world.ids, ref="main")
                        decisions = {v.memory.id: v.decision for v in report.verifications}
                        places = {v.memory.id: [str(c.location) for c in v.checks]
                                  for v in report.verifications}
                except (NotFound, CredentialsRejected) as exc:
                    error = exc
            assert budget is not None
            statuses = {m.id: m.status for m in service.memories.get_many(world.ids)}
            return Run(decisions, places, statuses, clock.now, faulty.sent, budget.reason,
                       error, budget.down)


@pytest.fixture(scope="module")
def truth(world: World, tmp_path_factory: pytest.TempPathFactory) -> Run:
    run = _run(world, tmp_path_factory.mktemp("truth"), "no fault")
    assert list(run.decisions.values()) == (
        [Decision.REFRESH] * 8 + [Decision.INVALIDATE] * 3 + [Decision.REFRESH])
    return run


def _no_false_verdicts(run: Run, truth: Run, world: World) -> None:
    for memory_id in world.ids:
        decision = run.decisions.get(memory_id, Decision.UNVERIFIED)
        if decision is Decision.UNVERIFIED:
            assert run.statuses[memory_id] is Status.ACTIVE  # kept its status: no verdict
        else:
            assert decision is truth.decisions[memory_id]
            assert run.statuses[memory_id] is truth.statuses[memory_id]
            if run.places:
                assert run.places[memory_id] == truth.places[memory_id]
    assert set(run.statuses) == set(world.ids)  # nothing lost


# Requests a pass may send at most: the fault-free run's, times the attempts of a
# request, with the breaker cutting an outage short.
MAX_REQUESTS = 60


@pytest.mark.parametrize("name", [n for n in SCENARIOS if n != "no fault"])
def test_a_verify_pass_under_faults(name: str, world: World, truth: Run,
                                    tmp_path: Path) -> None:
    started = time.monotonic()
    run = _run(world, tmp_path, name)
    _no_false_verdicts(run, truth, world)
    assert run.elapsed <= VERIFY_LIMIT
    assert run.requests <= MAX_REQUESTS
    assert time.monotonic() - started < 20  # the suite never waits for real
    unverified = [m for m, d in run.decisions.items() if d is Decision.UNVERIFIED]
    if name == "revoked token":
        assert isinstance(run.down, CredentialsRejected)  # the entry points raise it
        assert run.requests == 1  # the breaker: one 401 is enough
    elif unverified:
        assert run.reason or all(run.decisions[m] is Decision.UNVERIFIED for m in unverified)


@pytest.mark.parametrize("name", ["5xx 10%", "primary limit, reset in 20 s",
                                  "429 with Retry-After", "403 secondary with Retry-After",
                                  "truncated trees", "connection resets"])
def test_faults_that_pass_within_the_budget_change_nothing(name: str, world: World,
                                                            truth: Run, tmp_path: Path) -> None:
    run = _run(world, tmp_path, name)
    assert run.decisions == truth.decisions
    assert run.places == truth.places


@pytest.mark.parametrize(("name", "most_requests", "most_seconds"), [
    ("5xx 100%", 5, 16),                          # the ref: five attempts, then the breaker
    ("network down", 5, 16),
    ("primary limit, reset in an hour", 1, 0),    # given up at once
    ("403 secondary without Retry-After", 1, 0),  # its minute does not fit the budget
    ("429 without Retry-After", 1, 0),
    ("timeouts", 3, VERIFY_LIMIT),                # each request gets only the time left
    # asked once a pass, not once a memory (the ref, the default branch, the tree)
    ("tree answered with garbage", 3, 0),
])
def test_an_outage_costs_a_few_requests_not_some_per_memory(
        name: str, most_requests: int, most_seconds: float, world: World, truth: Run,
        tmp_path: Path) -> None:
    run = _run(world, tmp_path, name)
    assert set(run.decisions.values()) == {Decision.UNVERIFIED}
    assert run.requests <= most_requests
    assert run.elapsed <= most_seconds
    # The pass says why: GitHub was down, or (one tree that cannot be parsed) each memory.
    assert (run.reason is not None) is (name != "tree answered with garbage")


@pytest.mark.parametrize("name", [n for n in SCENARIOS if n not in ("no fault", "revoked token")])
def test_the_context_answers_within_its_five_seconds(name: str, world: World, truth: Run,
                                                      tmp_path: Path) -> None:
    run = _run(world, tmp_path, name, limit=CONTEXT_LIMIT, context=True)
    assert run.elapsed <= CONTEXT_LIMIT
    _no_false_verdicts(run, truth, world)


def test_a_404_for_the_ref_is_an_error_that_changes_nothing(world: World, truth: Run,
                                                           tmp_path: Path) -> None:
    clock = FakeClock()
    db = tmp_path / "ref.db"
    shutil.copy(world.db, db)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        faulty = FaultyGitHub(world.fake, clock, lambda request, n: (
            fault_error(404, "Not Found") if "/commits/" in request.url else None))
        faulty.install(rsps)
        source = GitHubSource(REPO, TOKEN, cache_dir=tmp_path / "cache", sleep=clock.sleep,
                              clock=clock.time)
        with MemoryService(SQLiteStore(db), source) as service, \
                time_budget(VERIFY_LIMIT, clock=clock.monotonic):
            with pytest.raises(NotFound, match="not found, or it has no ref 'main'"):
                service.verify(world.ids, ref="main")
            after = service.memories.get_many(world.ids)
    assert [m.status for m in after] == [Status.ACTIVE] * len(world.ids)
    assert [m.verification_count for m in after] == [0] * len(world.ids)
    assert faulty.sent == 1


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def cli_world(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
              ) -> tuple[FakeClock, Path]:
    """The CLI against the faulty GitHub on the fake clock, outside a working copy."""
    clock = FakeClock()
    db = tmp_path / "cli.db"
    shutil.copy(world.db, db)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setattr(budgets, "monotonic", clock.monotonic)
    real = GitHubSource.from_settings.__func__  # type: ignore[attr-defined]

    def from_settings(cls: type[GitHubSource], repo: str, settings: Any,
                      **options: Any) -> GitHubSource:
        return real(cls, repo, settings, sleep=clock.sleep, clock=clock.time, **options)

    monkeypatch.setattr(GitHubSource, "from_settings", classmethod(from_settings))
    world.fake.truncate_over = None
    return clock, db


def test_cli_revoked_token_is_an_error_not_a_checked_context(
        world: World, cli_world: tuple[FakeClock, Path], capsys: pytest.CaptureFixture[str],
) -> None:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        FaultyGitHub(world.fake, cli_world[0],
                     lambda request, n: fault_error(401, "Bad credentials")).install(rsps)
        for command in (["context", "--hook", "claude-code"], ["verify"]):
            code, out, err = vmem(capsys, *command, "--repo", REPO, "--ref", "main")
            assert code == 1
            assert out == ""  # no context that could read as checked
            assert err.startswith("vmem: error: GitHub rejected the credentials (401 Bad "
                                  "credentials)")
            assert err.count("\n") == 1
            assert "Traceback" not in err
            assert TOKEN not in out + err
    with SQLiteStore(cli_world[1]) as store:
        assert {m.status for m in store.get_many(world.ids)} == {Status.ACTIVE}


def test_cli_outage_says_what_was_not_checked_and_shows_its_waits(
        world: World, cli_world: tuple[FakeClock, Path], capsys: pytest.CaptureFixture[str],
) -> None:
    clock, _ = cli_world
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        FaultyGitHub(world.fake, clock, fault_share(100)).install(rsps)
        code, out, err = vmem(capsys, "context", "--repo", REPO, "--ref", "main")
        assert code == 0, err
        assert clock.now <= CONTEXT_LIMIT
        assert "0 memories checked against the code at `main` just now; 12 more could not " \
               "be checked" in out
        lines = err.splitlines()
        assert lines[0].startswith("vmem: GitHub ref 'main' of octo/faults: 502 Bad Gateway; "
                                   "retrying in 1 s (")
        assert lines[-1].startswith("vmem: 12 of 12 memories could not be verified (no "
                                    "verdict: they keep their status): not checked:")
        assert "Traceback" not in err
        clock.now = 0.0
        code, out, err = vmem(capsys, "verify", "--repo", REPO, "--ref", "main")
        assert code == 0, err
        assert clock.now <= VERIFY_LIMIT
        assert "0 hold, 0 do not hold, 12 could not be verified; nothing stored changed" in out
        assert err.splitlines()[-1].startswith(
            "vmem: 12 of 12 memories could not be verified (no verdict: they keep their "
            "status): GitHub could not be read (ref 'main' of octo/faults): 502 Bad Gateway; "
            "gave up after 5 attempts")
        code, _, err = vmem(capsys, "--time-limit", "2", "verify", "--repo", REPO, "--ref",
                            "main")
        assert code == 0
        assert "this pass's 2 s time limit ran out" in err


def test_cli_review_without_network_says_so_within_its_limit(
        world: World, cli_world: tuple[FakeClock, Path], capsys: pytest.CaptureFixture[str],
) -> None:
    clock, _ = cli_world
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        FaultyGitHub(world.fake, clock, SCENARIOS["network down"](clock)).install(rsps)
        code, out, err = vmem(capsys, "review", "--repo", REPO, "--pr", "5")
    assert code == 1
    assert out == ""
    lines = err.splitlines()
    # Not silent: each wait is announced before it starts, then one error line.
    assert [line.split(";")[1].split("(")[0].strip() for line in lines[:-1]] == [
        "retrying in 1 s", "retrying in 2 s", "retrying in 4 s", "retrying in 8 s"]
    assert lines[0].startswith("vmem: GitHub pull request #5 of octo/faults: connection "
                               "failed (ConnectionError)")
    assert lines[-1].startswith("vmem: error: GitHub could not be read (pull request #5 of "
                                "octo/faults): connection failed (ConnectionError); gave up "
                                "after 5 attempts")
    assert clock.now == 15 <= VERIFY_LIMIT


def test_mcp_revoked_token_is_a_tool_error_and_an_outage_answers_in_time(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    import mcp
    from mcp.types import TextContent

    from verified_memory.mcp_server import build_server

    clock = FakeClock()
    monkeypatch.setattr(budgets, "monotonic", clock.monotonic)
    db = tmp_path / "mcp.db"
    shutil.copy(world.db, db)
    world.fake.truncate_over = None

    def answer(fault: Any) -> tuple[bool, str, Any]:
        server = build_server(lambda: MemoryService(SQLiteStore(db), GitHubSource(
            REPO, TOKEN, cache_dir=tmp_path / "cache", sleep=clock.sleep, clock=clock.time)),
            default_repo=REPO)

        async def go() -> Any:
            async with mcp.Client(server) as client:
                return await client.call_tool("memory_get_recent", {"ref": "main"})

        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            FaultyGitHub(world.fake, clock, fault).install(rsps)
            result = asyncio.run(go())
        content = result.content[0]
        assert isinstance(content, TextContent)
        return bool(result.is_error), content.text, result.structured_content

    failed, message, _ = answer(lambda request, n: fault_error(401, "Bad credentials"))
    assert failed
    assert ("code unavailable (no verdict on any memory): GitHub rejected the credentials "
            "(401 Bad credentials)") in message
    clock.now = 0.0
    failed, text, data = answer(fault_share(100))
    assert not failed
    assert clock.now <= CONTEXT_LIMIT
    assert data["verified"] == []
    assert len(data["not_verified"]) == len(world.ids)
    assert "12 more could not be checked" in text


def test_a_request_gets_only_the_time_left_in_the_pass(world: World, tmp_path: Path) -> None:
    clock = FakeClock()
    timeouts: list[float] = []

    def record(request: Any, n: int) -> None:
        timeouts.append(request.req_kwargs["timeout"])

    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        FaultyGitHub(world.fake, clock, record).install(rsps)
        source = GitHubSource(REPO, TOKEN, cache_dir=tmp_path / "cache", sleep=clock.sleep,
                              clock=clock.time, timeout=30)
        with time_budget(5, clock=clock.monotonic):
            clock.now = 3.5
            commit = source.resolve("main")
        source.tree(commit)  # after the pass: the client's own timeout again
    assert timeouts == [1.5, 30]
