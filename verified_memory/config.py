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
- ``VMEM_CONTEXT_TIME_LIMIT`` (default 5) and ``VMEM_VERIFY_TIME_LIMIT`` (default 60):
  the seconds one verification pass may spend reading code, for ``vmem context`` and the
  MCP tools, and for ``vmem verify``, the review bot and the other commands
  (``verified_memory.budget``); what is left when time runs out is ``unverifiable``.
  Not part of ``Settings``: ``pass_time_limit`` reads the one a pass uses, when it runs,
  so that a bad value of the other one (or of one ``--time-limit`` overrides) stops
  nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, unquote_plus

from verified_memory.errors import ValidationError

__all__ = ["CONTEXT_TIME_LIMIT", "VERIFY_TIME_LIMIT", "Settings", "conninfo_pairs",
           "default_database_url", "is_postgres_url", "pass_time_limit", "redact", "scrub",
           "secrets_of", "time_limit"]

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
        return f"Settings(database_url={redact(self.database_url)!r}, actor={self.actor!r})"


# --------------------------------------------------------------------------- secrets

#: libpq's connection keywords (``host=db password=...``); a string made only of
#: ``keyword=value`` pairs with these keywords is a Postgres connection string.
_LIBPQ_KEYWORDS = frozenset({
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile",
    "require_auth", "channel_binding", "connect_timeout", "client_encoding", "options",
    "application_name", "fallback_application_name", "keepalives", "keepalives_idle",
    "keepalives_interval", "keepalives_count", "tcp_user_timeout", "replication",
    "gssencmode", "sslmode", "sslnegotiation", "requiressl", "sslcompression", "sslcert",
    "sslkey", "sslpassword", "sslcertmode", "sslrootcert", "sslcrl", "sslcrldir", "sslsni",
    "requirepeer", "ssl_min_protocol_version", "ssl_max_protocol_version", "krbsrvname",
    "gsslib", "gssdelegation", "service", "target_session_attrs", "load_balance_hosts",
})
_PAIR = re.compile(r"\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']+)\s*")


def _secret_key(key: str) -> bool:
    key = key.lower()
    return any(word in key for word in ("pass", "secret", "token", "apikey", "api_key"))


def conninfo_pairs(text: str) -> list[tuple[str, str]] | None:
    """The ``(keyword, raw value)`` pairs of a libpq keyword/value connection string
    (``host=db dbname=app password='s 3'``), or None when ``text`` is not one.

    One keyword libpq is known to take is enough: the others may be newer than this
    list (``sslkeylogfile``) or misspelt, and libpq, not a SQLite file named after the
    whole string (password and all), is what should refuse them."""
    pairs: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        match = _PAIR.match(text, position)
        if match is None:
            return None
        pairs.append((match.group(1), match.group(2)))
        position = match.end()
    if not any(key.lower() in _LIBPQ_KEYWORDS for key, _ in pairs):
        return None
    return pairs


def is_postgres_url(url: str) -> bool:
    """A ``postgresql://`` / ``postgres://`` URL, or a libpq keyword/value string."""
    return url.startswith(("postgresql://", "postgres://")) or conninfo_pairs(url) is not None


def redact(url: str) -> str:
    """A database URL or libpq string with every credential hidden: the password of
    ``user:password@``, and any parameter that names a password, secret or token
    (``?password=``, ``sslpassword=``), as ``***``."""
    pairs = conninfo_pairs(url)
    if pairs is not None:
        return " ".join(f"{k}={'***' if _secret_key(k) else v}" for k, v in pairs)
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    rest, hash_, fragment = rest.partition("#")
    rest, mark, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    if "@" in netloc:
        creds, host = netloc.rsplit("@", 1)
        if ":" in creds:
            creds = creds.split(":", 1)[0] + ":***"
        netloc = f"{creds}@{host}"
    query = "&".join(
        f"{key}={'***' if _secret_key(unquote_plus(key)) else value}" if sep else key
        for key, sep, value in (item.partition("=") for item in query.split("&"))
    )
    return f"{scheme}://{netloc}{slash}{path}{mark}{query}{hash_}{fragment}"


def secrets_of(url: str) -> list[str]:
    """Every credential in a database URL or libpq string (raw and decoded), for
    scrubbing messages that may echo one."""
    found: list[str] = []
    pairs = conninfo_pairs(url)
    if pairs is not None:
        for key, value in pairs:
            if _secret_key(key):
                found += [value, value.strip("'").replace("\\'", "'").replace("\\\\", "\\")]
    elif "://" in url:
        # Split by hand: urlsplit refuses some malformed URLs (``[::1`` as a host), and
        # those are exactly the ones whose error messages must be scrubbed.
        rest = url.split("://", 1)[1].partition("#")[0]
        rest, _, query = rest.partition("?")
        netloc = rest.partition("/")[0]
        if "@" in netloc and ":" in netloc.rsplit("@", 1)[0]:
            password = netloc.rsplit("@", 1)[0].split(":", 1)[1]
            # an '@' left unencoded in it: libpq splits at the first, and echoes the rest
            found += [password, unquote(password), *password.split("@")]
        for key, _, value in (item.partition("=") for item in query.split("&")):
            if value and _secret_key(unquote_plus(key)):
                found += [value, unquote_plus(value)]
    # Longest first (a decoded form may be inside a raw one); a secret of one or two
    # characters would blank out half a message and hardly leaks anything.
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` with the URL's credentials replaced by ``***``."""
    for secret in secrets_of(url):
        text = text.replace(secret, "***")
    return text




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


def pass_time_limit(kind: Literal["context", "verify"],
                    env: Mapping[str, str] | None = None) -> float:
    """The time limit of a pass of ``kind`` from its variable (``VMEM_CONTEXT_TIME_LIMIT``
    or ``VMEM_VERIFY_TIME_LIMIT``), read only when such a pass runs."""
    env = os.environ if env is None else env
    name, default = (("VMEM_CONTEXT_TIME_LIMIT", CONTEXT_TIME_LIMIT) if kind == "context"
                     else ("VMEM_VERIFY_TIME_LIMIT", VERIFY_TIME_LIMIT))
    return time_limit(env.get(name), name, default)
