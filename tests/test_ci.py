"""cli/ci.py: how a GitHub Actions run is recognised, and a fork's pull request told
from the repository's own (the command-level behaviour is in test_review.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from verified_memory.cli.ci import (
    NEUTRAL_EXIT,
    fork_of_pull_request,
    in_github_actions,
    require_store,
)
from verified_memory.errors import ValidationError


def event(tmp_path: Path, payload: Any, name: str = "pull_request") -> dict[str, str]:
    path = tmp_path / "event.json"
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": name,
            "GITHUB_EVENT_PATH": str(path)}


def pull(head: dict[str, Any] | None) -> dict[str, Any]:
    return {"pull_request": {"head": {"repo": head},
                             "base": {"repo": {"full_name": "acme/app", "fork": False}}}}


def test_github_actions_is_recognised_by_its_variable() -> None:
    assert in_github_actions({"GITHUB_ACTIONS": "true"})
    assert in_github_actions({"GITHUB_ACTIONS": "True"})
    assert not in_github_actions({"GITHUB_ACTIONS": "false"})
    assert not in_github_actions({"CI": "true"})


@pytest.mark.parametrize(("payload", "name", "expected"), [
    (pull({"full_name": "mallory/app", "fork": True}), "pull_request", "mallory/app"),
    (pull({"full_name": "mallory/app", "fork": False}), "pull_request", "mallory/app"),
    (pull({"full_name": "acme/app", "fork": False}), "pull_request", None),
    (pull(None), "pull_request", "a deleted fork"),
    (pull({"full_name": "mallory/app", "fork": True}), "pull_request_review", "mallory/app"),
    (pull({"full_name": "mallory/app", "fork": True}), "push", None),
    ("{not json", "pull_request", None),
    ({"pull_request": "odd"}, "pull_request", None),
])
def test_a_fork_is_told_from_the_event_payload(tmp_path: Path, payload: Any, name: str,
                                               expected: str | None) -> None:
    assert fork_of_pull_request(event(tmp_path, payload, name)) == expected


def test_no_event_file_is_no_fork(tmp_path: Path) -> None:
    environ = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request",
               "GITHUB_EVENT_PATH": str(tmp_path / "missing.json")}
    assert fork_of_pull_request(environ) is None
    with pytest.raises(ValidationError, match="without a memory store"):
        require_store(None, environ)


def test_require_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_store(None, {})  # not in CI: the default store is fine
    actions = {"GITHUB_ACTIONS": "true"}
    require_store("postgresql://db/memories", actions)
    require_store(None, actions | {"SUPABASE_URL": "https://x.supabase.co",
                                   "SUPABASE_KEY": "k"})
    with pytest.raises(ValidationError, match="SUPABASE_KEY is set but SUPABASE_URL is empty"):
        require_store("  ", actions | {"SUPABASE_KEY": "k"})
    fork = event(tmp_path, pull({"full_name": "mallory/app", "fork": True}))
    with pytest.raises(SystemExit) as exit_info:
        require_store(None, fork)
    assert exit_info.value.code == NEUTRAL_EXIT == 78
    assert capsys.readouterr().out.startswith("::warning title=verified-memory::")
