"""Settings, read from the environment once per process (and overridable per call).

- ``VMEM_DATABASE_URL``: ``sqlite:///path/to/file.db`` (the default: a file in the
  user's data directory), ``postgresql://…``; or Supabase through ``SUPABASE_URL`` and
  ``SUPABASE_KEY``.
- ``VMEM_ACTOR``: who telemetry says acted (default ``vmem``).
- ``GITHUB_TOKEN`` (and ``GITHUB_API_URL`` for GitHub Enterprise): read code through the
  GitHub API when no working copy is at hand.
- ``VMEM_CONTEXT_TIME_LIMIT`` (default 5) and ``VMEM_VERIFY_TIME_LIMIT`` (default 60):
  the seconds one verification pass may spend reading code, for ``vmem context`` and the
  MCP tools, and for ``vmem verify``, the review bot and the other commands
  (``verified_memory.budget``); what is left when time runs out is ``unverifiable``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verified_memory.errors import ValidationError

__all__ = ["CONTEXT_TIME_LIMIT", "VERIFY_TIME_LIMIT", "Settings", "default_database_url",
           "time_limit"]

APP_NAME = "verified-memory"
#: Seconds a pass may spend reading code: session start and agent tools must answer
#: fast; a verification or a review may take longer, but not forever.
CONTEXT_TIME_LIMIT = 5.0
VERIFY_TIME_LIMIT = 60.0


def default_database_url() -> str:
    import platformdirs

    path = Path(platformdirs.user_data_dir(APP_NAME)) / "memory.db"
    return f"sqlite:///{path}"


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str
    actor: str = "vmem"
    supabase_url: str | None = None
    supabase_key: str | None = None
    github_token: str | None = None
    github_api_url: str | None = None  # GitHub Enterprise: https://HOST/api/v3
    context_time_limit: float = CONTEXT_TIME_LIMIT
    verify_time_limit: float = VERIFY_TIME_LIMIT

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        return cls(
            database_url=env.get("VMEM_DATABASE_URL") or default_database_url(),
            actor=env.get("VMEM_ACTOR") or "vmem",
            supabase_url=env.get("SUPABASE_URL") or None,
            supabase_key=env.get("SUPABASE_KEY") or None,
            github_token=env.get("GITHUB_TOKEN") or None,
            github_api_url=env.get("GITHUB_API_URL") or None,
            context_time_limit=time_limit(env.get("VMEM_CONTEXT_TIME_LIMIT"),
                                          "VMEM_CONTEXT_TIME_LIMIT", CONTEXT_TIME_LIMIT),
            verify_time_limit=time_limit(env.get("VMEM_VERIFY_TIME_LIMIT"),
                                         "VMEM_VERIFY_TIME_LIMIT", VERIFY_TIME_LIMIT),
        )

    def __repr__(self) -> str:  # never print secrets
        return f"Settings(database_url={_redact(self.database_url)!r}, actor={self.actor!r})"


def _redact(url: str) -> str:
    """Hide a password in a database URL (``postgresql://user:***@host/db``)."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        if ":" in creds:
            creds = creds.split(":", 1)[0] + ":***"
        return f"{scheme}://{creds}@{host}"
    return url


def time_limit(value: str | float | None, where: str, default: float) -> float:
    """Seconds from a setting: a number above 0 and at most a day (``default`` if unset)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= 86_400:
        raise ValidationError(f"{where} must be a number of seconds above 0 and at most "
                              f"86400, got {value!r}")
    return seconds
