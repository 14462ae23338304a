"""Keep every test away from the user's machine: home, data dir, git config, secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

# The throwaway Postgres server for the Postgres and Supabase tests (see tests/pg.py), and
# headless Chromium for the dashboard's browser tests (tests/browser.py).
pytest_plugins = ["tests.pg", "tests.browser"]


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(Path(home) / ".local" / "share"))
    for name in ("VMEM_DATABASE_URL", "SUPABASE_URL", "SUPABASE_KEY", "GITHUB_TOKEN",
                 "VMEM_ACTOR", "VMEM_TRUTH_REF",
                 # The suite may itself run in GitHub Actions, where vmem refuses to run
                 # without a named store (cli/ci.py); tests that want CI set these.
                 "GITHUB_ACTIONS", "GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Test Author")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@example.com")
