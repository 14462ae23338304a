"""The read model of dashboards: views every store has, under the same names and columns.

Postgres and Supabase define them in ``sql/004_views.sql``, ``sql/007_memory_quality.sql``
and ``sql/010_dashboard.sql``; the SQLite store in its migration 7 (``store/sqlite.py``),
the in-memory fake by reading a SQLite copy of itself. Grafana, Metabase or Supabase's
own dashboard read the same views; ``vmem dashboard`` reads them through
``MemoryStore.read_view``. One test (``tests/test_dashboard_views.py``) fills SQLite and
Postgres with the same memories and telemetry and checks every view gives the same rows.

Days are UTC days. Verdicts only: a ``checked`` event (a view, a dry run, a memory not
merged yet) is counted under its own kind, never as ``verified_valid`` or
``verified_invalid``, so neither reaches an invalidation rate.

A ``ViewQuery`` asks what a REST API can ask too (Supabase reads views over PostgREST):
one view, optionally one repository, conditions comparing a column with a value, an
order and a limit. Rows come back as dicts, normalised here whatever the store
(``normalize_row``): days are ``date``, times aware UTC ``datetime``, counts ``int``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Literal

from verified_memory.errors import ValidationError
from verified_memory.store._rows import check_limit, time_from_text, time_to_text

__all__ = ["VIEWS", "Condition", "View", "ViewQuery", "as_text", "normalize_row", "sql_select"]

#: How a column's values are read back: "text", "int", "rate" (a float or None), "day"
#: (a ``date``), "time" (an aware UTC ``datetime``).
ColumnType = Literal["text", "int", "rate", "day", "time"]
Op = Literal["=", "<", "<=", ">", ">="]
Condition = tuple[str, Op, Any]
_OPS: frozenset[str] = frozenset({"=", "<", "<=", ">", ">="})


@dataclass(frozen=True, slots=True)
class View:
    """One view: its columns in order, and the columns that make a row unique (the
    order rows come in after whatever the query asks, so every store pages alike)."""

    name: str
    columns: Mapping[str, ColumnType]
    key: tuple[str, ...]


def _view(name: str, key: tuple[str, ...], **columns: ColumnType) -> View:
    return View(name, columns, key)


VIEWS: Mapping[str, View] = {v.name: v for v in (
    # 004: memories per repository and status.
    _view("agent_memory_status_counts", ("repo", "status"), repo="text", status="text",
          memories="int"),
    # 007: each repository's memory health (the rules of Memory.validated and .poor).
    _view("agent_memory_quality", ("repo",), repo="text", active="int", pending="int",
          validated="int", poor="int", promoted="int", expired="int", invalid="int",
          superseded="int"),
    # 004: verdicts per day; the rate is verified_invalid / (verified_valid +
    # verified_invalid), as RepoStats.invalidation_rate.
    _view("agent_memory_invalidation_daily", ("repo", "day"), repo="text", day="day",
          verified_valid="int", verified_invalid="int", invalidated="int",
          invalidation_rate="rate"),
    # 004: retrieved -> verified -> applied per day, events and distinct memories.
    _view("agent_memory_outcome_funnel", ("repo", "day"), repo="text", day="day",
          retrieved="int", verified_valid="int", verified_invalid="int", applied="int",
          memories_retrieved="int", memories_applied="int"),
    # 010: events per kind per day; feedback events split by outcome.
    _view("agent_memory_events_daily", ("repo", "day", "kind"), repo="text", day="day",
          kind="text", events="int", successes="int", failures="int"),
    # 010: citations a verdict found changed or missing, per file per day.
    _view("agent_memory_breaks_daily", ("repo", "day", "path"), repo="text", day="day",
          path="text", breaks="int"),
    # 010: one row per memory, what a listing of memories needs.
    _view("agent_memory_summary", ("id",), id="text", repo="text", subject="text",
          status="text", category="text", created_at="time", refreshed_at="time",
          last_used_at="time", verification_count="int", applied_count="int",
          success_count="int", failure_count="int", invalid_reason="text"),
    # 010: active memories never applied, and active memories with failed feedback.
    _view("agent_memory_attention", ("repo",), repo="text", never_applied="int",
          failing="int"),
    # 010: active memories by the day they were last used (or stored): what expires next.
    _view("agent_memory_last_use_daily", ("repo", "day"), repo="text", day="day",
          memories="int"),
)}


@dataclass(frozen=True, slots=True)
class ViewQuery:
    """Rows of ``view``: of ``repo`` (None: every repository), where every condition
    ``(column, op, value)`` holds, in ``order`` (column names, ``-name`` descending;
    then the view's key), at most ``limit`` of them (None: all)."""

    view: str
    repo: str | None = None
    where: tuple[Condition, ...] = ()
    order: tuple[str, ...] = ()
    limit: int | None = None

    def checked(self) -> View:
        """The view, once every name and operator is known; ``ValidationError`` if not."""
        view = VIEWS.get(self.view)
        if view is None:
            raise ValidationError(f"unknown view {self.view!r}; known: {', '.join(VIEWS)}")
        for column, op, _ in self.where:
            _column(view, column)
            if op not in _OPS:
                raise ValidationError(f"unknown operator {op!r}; use one of {sorted(_OPS)}")
        for column in self.order:
            _column(view, column.removeprefix("-"))
        check_limit(self.limit)
        return view

    def sort(self) -> list[tuple[str, bool]]:
        """(column, descending) pairs: the order asked, then the key's columns."""
        view = self.checked()
        asked = [(c.removeprefix("-"), c.startswith("-")) for c in self.order]
        named = {c for c, _ in asked}
        return asked + [(c, False) for c in view.key if c not in named]

    def conditions(self) -> list[Condition]:
        """``where`` with the repository as its first condition."""
        head: list[Condition] = [("repo", "=", self.repo)] if self.repo is not None else []
        return head + list(self.where)


def _column(view: View, column: str) -> ColumnType:
    kind = view.columns.get(column)
    if kind is None:
        raise ValidationError(f"{view.name} has no column {column!r}; it has "
                              f"{', '.join(view.columns)}")
    return kind


def sql_select(query: ViewQuery, mark: str,
               param: Callable[[ColumnType, Any], Any]) -> tuple[str, list[Any]]:
    """The SQL of ``query`` and its parameters, for SQLite (``mark`` ``?``) and Postgres
    (``%s``). Names come from ``VIEWS`` only; values travel as parameters, each turned
    into what the driver compares best by ``param(column_type, value)``."""
    view = query.checked()
    clauses, params = [], []
    for column, op, value in query.conditions():
        clauses.append(f"{column} {op} {mark}")
        params.append(param(view.columns[column], value))
    sql = f"select {', '.join(view.columns)} from {view.name}"
    if clauses:
        sql += " where " + " and ".join(clauses)
    sql += " order by " + ", ".join(f"{c} desc" if d else c for c, d in query.sort())
    if query.limit is not None:
        sql += f" limit {mark}"
        params.append(query.limit)
    return sql, params


def as_text(kind: ColumnType, value: Any) -> Any:
    """A parameter as stored in SQLite and sent over REST: days and times as ISO text
    (times in the stores' fixed-width UTC spelling, so text order is time order)."""
    if kind == "time" and isinstance(value, datetime):
        return time_to_text(value)
    if kind == "day" and isinstance(value, date):
        return value.isoformat()[:10]
    return value


def normalize_row(view: View, row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as every store answers it: the view's columns, each of its type."""
    return {column: _value(kind, row[column]) for column, kind in view.columns.items()}


def _value(kind: ColumnType, value: Any) -> Any:
    if value is None:
        return None
    if kind == "int":
        return int(value)
    if kind == "rate":
        return float(value)
    if kind == "day":
        if isinstance(value, datetime):
            return value.astimezone(UTC).date()
        return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])
    if kind == "time":
        if isinstance(value, datetime):
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return time_from_text(str(value))
    return str(value)
