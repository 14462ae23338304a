"""Settings, read from the environment once per process (and overridable per call).

- ``VMEM_DATABASE_URL``: ``sqlite:///path/to/file.db`` (the default: a file in the
  user's data directory), ``postgresql://…``; or Supabase through ``SUPABASE_URL`` and
  ``SUPABASE_KEY``.
- ``VMEM_ACTOR``: who telemetry says acted (default ``vmem``).
- ``GITHUB_TOKEN`` (and ``GITHUB_API_URL`` for GitHub Enterprise): read code through the
  GitHub API when no working copy is at hand.
- ``VMEM_TRUTH_REF``: the branch that is every repository's main line (default: each
  repository's default branch; ``git config vmem.truthRef`` sets it per working copy).
  Only a verification at its tip changes what is stored (the ref rule).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Settings", "default_database_url"]

APP_NAME = "verified-memory"


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
    truth_ref: str | None = None  # the main line of every repository (default: detected)

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
            truth_ref=(env.get("VMEM_TRUTH_REF") or "").strip() or None,
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
