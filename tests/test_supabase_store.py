"""The Supabase store's REST calls, exactly: method, path, query parameters and body.

No server: ``httpx.MockTransport`` answers with canned PostgREST responses and records
what supabase-py sent. What those calls do in the database (functions, views, RLS) is
tested on a real Postgres in the contract suite, ``test_rls.py`` and ``tests/pg.py``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.fake_postgrest import make_jwt
from verified_memory.config import Settings
from verified_memory.errors import (
    Conflict,
    MissingDependency,
    NotFound,
    StoreError,
    ValidationError,
    VerifiedMemoryError,
)
from verified_memory.models import (
    NEVER_JUDGED,
    Anchor,
    Citation,
    EventKind,
    Fingerprint,
    Memory,
    Status,
    TelemetryEvent,
    Transition,
)
from verified_memory.store import open_store
from verified_memory.store.supabase import SupabaseStore

URL = "https://project.supabase.co"
KEY = make_jwt({"role": "service_role"})
T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
REPO = "acme/api"

Answer = httpx.Response | Callable[[httpx.Request], httpx.Response] | Exception


class Recorder:
    """A transport that answers from a queue and remembers every request."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.answers: list[Answer] = []

    def answer(self, *answers: Answer) -> None:
        self.answers.extend(answers)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if self.answers else httpx.Response(200, json=[])
        if isinstance(answer, Exception):
            raise answer
        return answer(request) if callable(answer) else answer

    def calls(self) -> list[tuple[str, str, list[tuple[str, str]], Any]]:
        return [
            (r.method, r.url.path, list(r.url.params.multi_items()),
             json.loads(r.content) if r.content else None)
            for r in self.requests
        ]


@pytest.fixture
def http() -> Recorder:
    return Recorder()


@pytest.fixture
def store(http: Recorder) -> Iterator[SupabaseStore]:
    opened = SupabaseStore.connect(
        URL, KEY, http_client=httpx.Client(transport=httpx.MockTransport(http)), retry=False,
        page_size=1000,
    )
    yield opened
    opened.close()


def _memory(memory_id: str = "m1", **fields: Any) -> Memory:
    citation = Citation(
        path="src/app.py", line_start=10, line_end=12, sha="a" * 40, blob_sha="b" * 40,
        fingerprint=Fingerprint("00000000000000aa", (1, 0, 2**64 - 1),
                                Anchor("function_definition", "App.run", "c" * 16, 1, "python")),
    )
    values: dict[str, Any] = {"id": memory_id, "repo": REPO, "subject": "Session.request retries",
                              "fact": "GET is retried; POST never.", "citations": (citation,),
                              "tags": ("http",), "created_at": T0, "refreshed_at": T0}
    values.update(fields)
    return Memory(**values)


def _event(kind: EventKind = EventKind.CREATED, memory_id: str | None = "m1") -> TelemetryEvent:
    return TelemetryEvent(kind=kind, repo=REPO, memory_id=memory_id, actor="agent", at=T0,
                          detail={"n": 1}, key="k1")


def _row(memory: Memory) -> dict[str, Any]:
    """An ``agent_memory_full`` row as PostgREST serialises it."""
    return memory.to_dict()


# --------------------------------------------------------------------------- writes


MEMORY_WIRE = {
    "id": "m1",
    "repo": "acme/api",
    "subject": "Session.request retries",
    "fact": "GET is retried; POST never.",
    "reason": None,
    "category": None,
    "tags": ["http"],
    "status": "active",
    "supersedes": None,
    "superseded_by": None,
    "created_by": None,
    "created_at": "2026-03-01T09:30:00.000000+00:00",
    "refreshed_at": "2026-03-01T09:30:00.000000+00:00",
    "verification_count": 0,
    "applied_count": 0,
    "verified_commit": None,
    "invalid_reason": None,
    "verified_ref": None,
    "success_count": 0,
    "failure_count": 0,
    "used_at": None,
    "promoted_to": None,
    "citations": [{
        "path": "src/app.py", "line_start": 10, "line_end": 12, "sha": "a" * 40,
        "blob_sha": "b" * 40, "snippet_hash": "00000000000000aa",
        "line_hashes": ["0000000000000001", "0000000000000000", "ffffffffffffffff"],
        "anchor": {"kind": "function_definition", "name": "App.run", "text_hash": "c" * 16,
                   "offset": 1, "language": "python"},
    }],
    "search_terms": {"subject": ["session", "request", "retries"], "tags": ["http"],
                     "fact": ["get", "is", "retried", "post", "never"]},
}
EVENT_WIRE = {"kind": "created", "repo": "acme/api", "memory_id": "m1", "actor": "agent",
              "at": "2026-03-01T09:30:00.000000+00:00", "detail": {"n": 1}, "key": "k1"}


def test_add_is_one_rpc_with_the_memory_and_its_events(store: SupabaseStore,
                                                       http: Recorder) -> None:
    http.answer(httpx.Response(204))
    store.add(_memory(), [_event()])
    assert http.calls() == [("POST", "/rest/v1/rpc/agent_memory_add", [],
                             {"p_memory": MEMORY_WIRE, "p_events": [EVENT_WIRE]})]
    sent = http.requests[0].headers
    assert sent["apikey"] == KEY
    assert sent["authorization"] == f"Bearer {KEY}"
    assert sent["content-type"] == "application/json"


def test_a_guarded_add_lists_then_adds_unless_the_candidates_changed(
        store: SupabaseStore, http: Recorder) -> None:
    """Two calls (sql/012): the candidates, then the add with the ids ``decide`` saw;
    told they changed, it lists and decides again."""
    other = _memory("m0", subject="Another claim")
    http.answer(httpx.Response(200, json=[]), httpx.Response(200, json=False),
                httpx.Response(200, json=[_row(other)]), httpx.Response(200, json=True))
    asked: list[list[str]] = []

    def decide(found: Sequence[Memory]) -> list[TelemetryEvent]:
        asked.append([m.id for m in found])
        return [_event()]

    assert store.add_unless_duplicate(_memory(), decide) is True
    listing = ("POST", "/rest/v1/rpc/agent_memory_repeat_candidates", [("limit", "1000")],
               {"p_memory": MEMORY_WIRE, "p_limit": 100})
    adding = {"p_memory": MEMORY_WIRE, "p_limit": 100, "p_events": [EVENT_WIRE]}
    assert http.calls() == [
        listing, ("POST", "/rest/v1/rpc/agent_memory_add_unless_changed", [],
                  {**adding, "p_seen": []}),
        listing, ("POST", "/rest/v1/rpc/agent_memory_add_unless_changed", [],
                  {**adding, "p_seen": ["m0"]}),
    ]
    assert asked == [[], ["m0"]]


def test_a_guarded_add_told_it_repeats_one_sends_no_add(store: SupabaseStore,
                                                        http: Recorder) -> None:
    http.answer(httpx.Response(200, json=[_row(_memory("m0"))]))
    assert store.add_unless_duplicate(_memory(), lambda found: None) is False
    assert [path for _, path, _, _ in http.calls()] == [
        "/rest/v1/rpc/agent_memory_repeat_candidates"]


def test_a_guarded_add_answered_anything_but_a_boolean_is_an_error(store: SupabaseStore,
                                                                   http: Recorder) -> None:
    http.answer(httpx.Response(200, json=[]), httpx.Response(200, json="yes"))
    with pytest.raises(StoreError, match="answered str; is the database migrated"):
        store.add_unless_duplicate(_memory(), lambda found: [_event()])


def test_supersede_sends_the_old_id_and_the_back_pointer(store: SupabaseStore,
                                                         http: Recorder) -> None:
    http.answer(httpx.Response(204))
    store.supersede("old", _memory(), [_event(EventKind.SUPERSEDED, "old")])
    [(method, path, params, body)] = http.calls()
    assert (method, path, params) == ("POST", "/rest/v1/rpc/agent_memory_supersede", [])
    assert body["p_old_id"] == "old"
    assert body["p_new"] == {**MEMORY_WIRE, "supersedes": "old"}
    assert body["p_events"] == [{**EVENT_WIRE, "kind": "superseded", "memory_id": "old"}]


def test_apply_sends_the_batch_and_reads_which_were_applied(store: SupabaseStore,
                                                     http: Recorder) -> None:
    after = _memory(status=Status.INVALID, invalid_reason="gone", verification_count=1)
    http.answer(httpx.Response(200, json=[_row(after), None]))
    results = store.apply([
        Transition("m1", status=Status.INVALID, invalid_reason="gone", add_verifications=1,
                   refreshed_at=T0, expect_judged=NEVER_JUDGED,
                   expect_citations=(("src/a.py", 3, 4, "ab12"),),
                   events=(_event(EventKind.INVALIDATED),)),
        Transition("m2", expect=Status.PENDING),
    ])
    assert results == [True, False]
    [(_, path, _, body)] = http.calls()
    assert path == "/rest/v1/rpc/agent_memory_apply_demoting"
    assert body == {"p_transitions": [
        {"memory_id": "m1", "expect": "active", "expect_judged": "",
         "expect_citations": [["src/a.py", 3, 4, "ab12"]], "status": "invalid",
         "invalid_reason": "gone",
         "refreshed_at": "2026-03-01T09:30:00.000000+00:00", "verified_commit": None,
         "verified_ref": None, "unconfirm": False, "citations": None, "add_verifications": 1,
         "add_applications": 0, "add_successes": 0, "add_failures": 0, "used_at": None,
         "promoted_to": None, "demote": False, "superseded_by": None, "requires": None,
         "events": [{**EVENT_WIRE, "kind": "invalidated"}]},
        {"memory_id": "m2", "expect": "pending", "expect_judged": None,
         "expect_citations": None, "status": None,
         "invalid_reason": None,
         "refreshed_at": None, "verified_commit": None, "verified_ref": None,
         "unconfirm": False, "citations": None,
         "add_verifications": 0, "add_applications": 0, "add_successes": 0,
         "add_failures": 0, "used_at": None, "promoted_to": None, "demote": False,
         "superseded_by": None, "requires": None, "events": []},
    ]}


def test_nothing_to_write_sends_nothing(store: SupabaseStore, http: Recorder) -> None:
    assert store.apply([]) == []
    store.log([])
    assert store.get_many([]) == []
    assert store.search(REPO, " -- ") == []
    assert store.events(kinds=[]) == []
    assert http.requests == []


def test_log_is_one_rpc(store: SupabaseStore, http: Recorder) -> None:
    http.answer(httpx.Response(200, json=2))
    store.log([_event(), _event(EventKind.APPLIED)])
    assert http.calls() == [("POST", "/rest/v1/rpc/agent_memory_log", [],
                             {"p_events": [EVENT_WIRE, {**EVENT_WIRE, "kind": "applied"}]})]


def test_invalid_input_is_refused_before_any_request(store: SupabaseStore,
                                                     http: Recorder) -> None:
    with pytest.raises(ValidationError):
        store.add(_memory(citations=()))
    with pytest.raises(ValidationError):
        store.log([TelemetryEvent(EventKind.FEEDBACK, REPO, detail={"x": float("nan")})])
    with pytest.raises(ValidationError):
        store.apply([Transition("m1", add_verifications=-1)])
    assert http.requests == []


# --------------------------------------------------------------------------- reads


def test_get_many_reads_the_view_in_the_order_asked(store: SupabaseStore,
                                                    http: Recorder) -> None:
    a, b = _memory("a"), _memory("b", subject="other")
    http.answer(httpx.Response(200, json=[_row(b), _row(a)]))
    assert store.get_many(["a", "b", "a"]) == [a, b, a]
    assert http.calls() == [("GET", "/rest/v1/agent_memory_full",
                             [("select", "*"), ("id", "in.(a,b)")], None)]


def test_get_many_asks_in_chunks_and_names_the_first_unknown(store: SupabaseStore,
                                                             http: Recorder) -> None:
    ids = [f"id{n}" for n in range(150)]
    http.answer(httpx.Response(200, json=[]), httpx.Response(200, json=[]))
    with pytest.raises(NotFound, match="memory id0 not found"):
        store.get_many(ids)
    filters = [dict(params)["id"] for _, _, params, _ in http.calls()]
    assert filters == [f"in.({','.join(ids[:100])})", f"in.({','.join(ids[100:])})"]


def test_get_quotes_ids_postgrest_would_misread(store: SupabaseStore, http: Recorder) -> None:
    http.answer(httpx.Response(200, json=[_row(_memory("a,b"))]))
    assert store.get("a,b").id == "a,b"
    assert dict(http.calls()[0][2])["id"] == 'in.("a,b")'


def test_recent_filters_orders_and_limits(store: SupabaseStore, http: Recorder) -> None:
    http.answer(httpx.Response(200, json=[_row(_memory())]), httpx.Response(200, json=[]))
    assert store.recent(REPO, limit=5) == [_memory()]
    store.recent(REPO, status=None)
    assert [params for _, _, params, _ in http.calls()] == [
        [("select", "*"), ("repo", "eq.acme/api"), ("status", "eq.active"),
         ("order", "refreshed_at.desc,id.asc"), ("limit", "5")],
        [("select", "*"), ("repo", "eq.acme/api"), ("order", "refreshed_at.desc,id.asc"),
         ("limit", "50")],
    ]


def test_unbounded_reads_come_in_pages(http: Recorder) -> None:
    store = SupabaseStore.connect(
        URL, KEY, http_client=httpx.Client(transport=httpx.MockTransport(http)), retry=False,
        page_size=2,
    )
    rows = [_row(_memory(f"m{n}")) for n in range(5)]
    http.answer(*(httpx.Response(200, json=rows[i:i + 2]) for i in (0, 2, 4)))
    assert [m.id for m in store.recent(REPO, limit=None)] == [f"m{n}" for n in range(5)]
    windows = [[p for p in params if p[0] in {"limit", "offset"}]
               for _, _, params, _ in http.calls()]
    assert windows == [[("limit", "2")], [("limit", "2"), ("offset", "2")],
                       [("limit", "2"), ("offset", "4")]]
    http.requests.clear()
    http.answer(httpx.Response(200, json=rows[0:2]), httpx.Response(200, json=rows[2:3]))
    assert len(store.recent(REPO, limit=3)) == 3
    assert [dict(params).get("limit") for _, _, params, _ in http.calls()] == ["2", "1"]


def test_search_sends_the_terms_every_store_uses(store: SupabaseStore, http: Recorder) -> None:
    http.answer(httpx.Response(200, json=[_row(_memory())]))
    assert store.search(REPO, "Session.request  retr", limit=7) == [_memory()]
    assert http.calls() == [("POST", "/rest/v1/rpc/agent_memory_search", [("limit", "7")],
                             {"p_repo": REPO, "p_terms": ["session", "request", "retr"],
                              "p_limit": 7, "p_category": None, "p_tag": None})]


def test_by_path_sends_the_line_window(store: SupabaseStore, http: Recorder) -> None:
    http.answer(httpx.Response(200, json=[]), httpx.Response(200, json=[]))
    store.by_path(REPO, "src/app.py", lines=(3, 9), limit=10)
    store.by_path(REPO, "src/app.py")
    assert [(path, params, body) for _, path, params, body in http.calls()] == [
        ("/rest/v1/rpc/agent_memory_by_path", [("limit", "10")],
         {"p_repo": REPO, "p_path": "src/app.py", "p_line_start": 3, "p_line_end": 9,
          "p_limit": 10, "p_category": None, "p_tag": None}),
        ("/rest/v1/rpc/agent_memory_by_path", [("limit", "50")],
         {"p_repo": REPO, "p_path": "src/app.py", "p_line_start": None, "p_line_end": None,
          "p_limit": 50, "p_category": None, "p_tag": None}),
    ]


def test_events_filter_and_come_back_oldest_first(store: SupabaseStore, http: Recorder) -> None:
    http.answer(httpx.Response(200, json=[{**EVENT_WIRE, "id": 7}]))
    [got] = store.events(repo=REPO, memory_id="m1", kinds=[EventKind.CREATED, "applied"],
                         limit=3)
    assert got == TelemetryEvent(EventKind.CREATED, REPO, "m1", "agent", T0, {"n": 1}, id=7,
                                 key="k1")
    assert http.calls() == [("GET", "/rest/v1/agent_memory_telemetry", [
        ("select", "id,kind,repo,memory_id,actor,at,detail,key"), ("repo", "eq.acme/api"),
        ("memory_id", "eq.m1"), ("kind", "in.(created,applied)"), ("order", "at.asc,id.asc"),
        ("limit", "3")], None)]


def test_stats_and_repos(store: SupabaseStore, http: Recorder) -> None:
    http.answer(
        httpx.Response(200, json={"repo": REPO, "by_status": {"active": 2, "invalid": 1},
                                  "events": {"created": 3}, "citations": 4}),
        httpx.Response(200, json=[{"repo": "acme/api"}, {"repo": "acme/web"}]),
    )
    stats = store.stats(REPO)
    assert stats.by_status == {"active": 2, "pending": 0, "invalid": 1, "superseded": 0,
                               "expired": 0}
    assert stats.events == {"created": 3}
    assert stats.citations == 4
    assert store.repos() == ["acme/api", "acme/web"]
    assert http.calls() == [
        ("POST", "/rest/v1/rpc/agent_memory_stats", [], {"p_repo": REPO}),
        ("GET", "/rest/v1/agent_memory_repos", [("select", "repo"), ("order", "repo.asc"),
                                                ("limit", "1000")], None),
    ]


# --------------------------------------------------------------------------- errors


def _pgrst(status: int, code: str, message: str = "boom") -> httpx.Response:
    return httpx.Response(status, json={"code": code, "message": message, "details": None,
                                        "hint": None})


@pytest.mark.parametrize(("answer", "error", "words"), [
    (_pgrst(400, "VM409", "memory m0 is invalid, not active"), Conflict, "not active"),
    (_pgrst(400, "VM404", "memory m0 not found"), NotFound, "m0 not found"),
    (_pgrst(409, "23505", "memory m1 already exists"), Conflict, "already exists"),
    (_pgrst(400, "22023", "events must be a JSON array"), ValidationError, "JSON array"),
    (_pgrst(400, "23514", "violates check constraint"), ValidationError, "check constraint"),
    (_pgrst(403, "42501", "new row violates row-level security policy"), StoreError,
     "permission denied"),
    (_pgrst(404, "PGRST202", "Could not find the function"), StoreError, "vmem db migrate"),
    (_pgrst(401, "PGRST301", "JWT expired"), StoreError, "refused the key"),
    (httpx.Response(502, text="<html>Bad Gateway</html>"), StoreError, "HTTP 502"),
    (httpx.Response(401, text=""), StoreError, "refused the key"),
    (httpx.ConnectError("no route to host"), StoreError, "cannot reach Supabase"),
    (httpx.ReadTimeout("timed out"), StoreError, "cannot reach Supabase"),
])
def test_errors_are_translated_and_never_leak(
    store: SupabaseStore, http: Recorder, answer: Answer, error: type[Exception], words: str
) -> None:
    http.answer(answer)
    with pytest.raises(error, match=words) as caught:
        store.add(_memory())
    assert isinstance(caught.value, VerifiedMemoryError)
    assert caught.value.__cause__ is not None
    assert type(caught.value.__cause__).__module__.split(".")[0] in {"postgrest", "httpx"}


def test_reads_translate_errors_too(store: SupabaseStore, http: Recorder) -> None:
    http.answer(_pgrst(404, "PGRST205", "Could not find the table"), httpx.ConnectError("x"))
    with pytest.raises(StoreError, match="vmem db migrate"):
        store.recent(REPO)
    with pytest.raises(StoreError, match="cannot reach"):
        store.events()


def test_a_deadlock_is_retried_because_the_database_rolled_it_back(
    store: SupabaseStore, http: Recorder
) -> None:
    http.answer(_pgrst(500, "40P01", "deadlock detected"), httpx.Response(204))
    store.add(_memory())
    assert len(http.requests) == 2


def test_a_closed_store_sends_nothing(store: SupabaseStore, http: Recorder) -> None:
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.recent(REPO)
    assert http.requests == []


# --------------------------------------------------------------------------- construction


def test_a_users_token_replaces_the_service_key_in_authorization(http: Recorder) -> None:
    token = make_jwt({"role": "authenticated", "app_metadata": {"repos": [REPO]}})
    store = SupabaseStore.connect(URL, make_jwt({"role": "anon"}), access_token=token,
                                  http_client=httpx.Client(transport=httpx.MockTransport(http)))
    store.recent(REPO)
    assert http.requests[0].headers["authorization"] == f"Bearer {token}"


def test_open_store_picks_supabase_from_the_settings() -> None:
    settings = Settings(database_url="sqlite:///unused.db", supabase_url=URL, supabase_key=KEY)
    store = open_store(settings=settings)
    try:
        assert isinstance(store, SupabaseStore)
        assert "project.supabase.co" in repr(store)
        assert KEY not in repr(store)
    finally:
        store.close()


def test_from_settings_needs_both_values() -> None:
    with pytest.raises(ValidationError, match="SUPABASE_URL"):
        SupabaseStore.from_settings(Settings(database_url="x", supabase_url=URL))


def test_a_malformed_url_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="cannot use Supabase"):
        SupabaseStore.connect("project.supabase.co", KEY)


def test_missing_supabase_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "supabase", None)
    with pytest.raises(MissingDependency, match=r"verified-memory\[supabase\]"):
        SupabaseStore.connect(URL, KEY)
