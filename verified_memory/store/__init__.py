"""Memory stores behind the ``MemoryStore`` Protocol, and ``open_store`` to pick one."""

from __future__ import annotations

from verified_memory.config import Settings, is_postgres_url
from verified_memory.errors import ValidationError
from verified_memory.store.base import MemoryStore

__all__ = ["MemoryStore", "open_store", "sqlite_path"]

#: ``git:FOLDER``: memories as files in the repository (``gitstore/store.py``).
GIT = "git:"


def sqlite_path(url: str | None = None, settings: Settings | None = None) -> str | None:
    """The file of the SQLite store ``open_store`` would open (None for another kind)."""
    settings = settings or Settings.from_env()
    if url is None and settings.supabase_url and settings.supabase_key:
        return None
    url = url or settings.database_url
    if is_postgres_url(url) or url in (":memory:", "memory://") or url.startswith(GIT):
        return None
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    return None if "://" in url else url


def open_store(url: str | None = None, settings: Settings | None = None, *,
               create: bool = True) -> MemoryStore:
    """Open the store a URL names: ``sqlite:///file``, a bare file path, ``:memory:``,
    ``postgresql://…`` or a libpq keyword/value string (``host=db dbname=app``),
    ``git:FOLDER`` (the repository as the store: ``git:.memory``); with no
    URL, Supabase when ``SUPABASE_URL`` and ``SUPABASE_KEY`` are set, else
    ``VMEM_DATABASE_URL``, else the default SQLite file. ``create=False``: a SQLite file
    that does not exist is ``NotFound``, not created (commands that only read)."""
    settings = settings or Settings.from_env()
    if url is None and settings.supabase_url and settings.supabase_key:
        from verified_memory.store.supabase import SupabaseStore

        return SupabaseStore.from_settings(settings)
    url = url or settings.database_url
    if url.startswith(GIT):  # the repository as the store: git:.memory
        from verified_memory.gitstore.store import GitStore

        return GitStore(url.removeprefix(GIT), create=create)
    if is_postgres_url(url):  # a URL, or a libpq string such as "host=db password=..."
        from verified_memory.store.postgres import PostgresStore

        return PostgresStore(url)
    if url == ":memory:" or url == "memory://":
        from verified_memory.store.memory import InMemoryStore

        return InMemoryStore()
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        # sqlite:////abs/path and sqlite:///rel/path both work, as in SQLAlchemy
    elif "://" in url:
        raise ValidationError(
            f"unsupported database URL scheme: {url.split('://', 1)[0]}:// "
            "(use sqlite:///FILE or postgresql://…)"
        )
    else:
        path = url
    from verified_memory.store.sqlite import SQLiteStore

    return SQLiteStore(path, create=create)
