"""A small PostgREST in front of a real Postgres, as an ``httpx.MockTransport`` handler.

No PostgREST server can be installed here, yet the Supabase store must pass the same
contract suite as every other store, against the real SQL (tables, views, functions,
row-level security). This fake does what PostgREST does for the subset of its API the
store uses, and nothing more:

- ``Authorization: Bearer <JWT>``: the JWT's ``role`` claim becomes the transaction's
  role and its claims ``request.jwt.claims`` (``set local role``, ``set_config``), so
  RLS decides what a request sees. Signatures are not checked.
- ``GET /rest/v1/<table or view>`` with ``select``, ``col=op.value`` filters (``eq``,
  ``neq``, ``gt``, ``gte``, ``lt``, ``lte``, ``in``, ``is``), ``order``, ``limit``,
  ``offset``; ``not.`` before any filter negates it; run read-only, answered with
  ``json_agg`` as PostgREST does.
- ``POST /rest/v1/rpc/<function>`` with named JSON arguments, converted with
  ``json_to_record`` using the function's declared argument types; a set-returning
  function answers rows, a scalar one its value, a void one 204.
- Errors answer PostgREST's JSON (``code``, ``message``, ``details``, ``hint``) and
  HTTP status (``23505`` -> 409, ``42501`` -> 401/403, most others 400).

Every request is recorded in ``requests`` so tests can assert the exact REST calls.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import httpx
import psycopg
from psycopg import sql

__all__ = ["FakePostgrest", "Recorded", "make_jwt"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_OPS = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_RESERVED = {"select", "order", "limit", "offset", "on_conflict", "columns"}


def make_jwt(claims: Mapping[str, Any]) -> str:
    """An unsigned JWT carrying ``claims`` (the fake, like our tests, ignores signatures)."""

    def part(data: Mapping[str, Any]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    params: list[tuple[str, str]]
    body: Any
    headers: Mapping[str, str] = field(repr=False, default_factory=dict)


class _ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, details: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


class FakePostgrest:
    """``FakePostgrest(url).transport()`` is an httpx transport backed by that database."""

    def __init__(self, database_url: str, *, schema: str = "public") -> None:
        self.url = database_url
        self.schema = schema
        self.requests: list[Recorded] = []
        self._conn = psycopg.connect(database_url)
        self._lock = threading.Lock()
        self._signatures: dict[str, list[tuple[str, str]]] = {}

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def close(self) -> None:
        self._conn.close()

    # ------------------------------------------------------------------ dispatch

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = unquote(request.url.path)
        self.requests.append(Recorded(request.method, path, list(request.url.params.multi_items()),
                                      body, dict(request.headers)))
        match = re.fullmatch(r"/rest/v1/(rpc/)?([A-Za-z_][A-Za-z0-9_]*)", path)
        try:
            if not match:
                raise _ApiError(404, "PGRST125", f"Invalid path specified in request URL: {path}")
            claims = self._claims(request)
            with self._lock:
                if match.group(1):
                    if request.method != "POST":
                        raise _ApiError(405, "PGRST101", "only POST rpc is faked")
                    return self._rpc(match.group(2), body or {}, claims,
                                     request.url.params.multi_items())
                if request.method != "GET":
                    raise _ApiError(405, "PGRST101", f"{request.method} is not faked")
                return self._select(match.group(2), request.url.params.multi_items(), claims)
        except _ApiError as exc:
            return _error(exc.status, exc.code, exc.message, exc.details)

    def _claims(self, request: httpx.Request) -> dict[str, Any]:
        auth = request.headers.get("authorization", "")
        if not auth.lower().startswith("bearer "):
            return {"role": "anon"}
        token = auth.split(" ", 1)[1]
        try:
            payload = token.split(".")[1]
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (IndexError, ValueError) as exc:
            raise _ApiError(401, "PGRST301", "JWSError JWSInvalidSignature") from exc
        if not isinstance(claims, dict):
            raise _ApiError(401, "PGRST301", "JWT claims are not an object")
        return claims

    # ------------------------------------------------------------------ transactions

    def _run(self, claims: Mapping[str, Any], query: sql.Composed, params: list[Any],
             *, read_only: bool) -> Any:
        role = str(claims.get("role") or "anon")
        conn = self._conn
        try:
            with conn.transaction():
                if read_only:
                    conn.execute("set transaction read only")
                conn.execute(sql.SQL("set local role {}").format(sql.Identifier(role)))
                conn.execute("select set_config('request.jwt.claims', %s, true)",
                             (json.dumps(claims),))
                row = conn.execute(query, params).fetchone()
                return row[0] if row else None
        except psycopg.Error as exc:
            diag = exc.diag
            code = exc.sqlstate or "XX000"
            raise _ApiError(_status(code, role), code, diag.message_primary or str(exc),
                            diag.message_detail) from exc

    # ------------------------------------------------------------------ GET /table

    def _select(self, relation: str, items: list[tuple[str, str]],
                claims: Mapping[str, Any]) -> httpx.Response:
        columns = "*"
        where: list[sql.Composable] = []
        params: list[Any] = []
        order: list[sql.Composable] = []
        limit: int | None = None
        offset = 0
        for key, value in items:
            if key == "select":
                columns = value
            elif key == "order":
                order.extend(_order(value))
            elif key == "limit":
                limit = int(value)
            elif key == "offset":
                offset = int(value)
            elif key in _RESERVED:
                raise _ApiError(400, "PGRST100", f"{key} is not faked")
            else:
                clause, values = _filter(key, value)
                where.append(clause)
                params.extend(values)
        if not self._relation_exists(relation):
            raise _ApiError(404, "PGRST205", f"Could not find the table "
                            f"'{self.schema}.{relation}' in the schema cache")
        fields = (sql.SQL("*") if columns.strip() == "*" else
                  sql.SQL(", ").join(sql.Identifier(_ident(c.strip())) for c in columns.split(",")))
        inner = sql.SQL("select {} from {}.{}").format(
            fields, sql.Identifier(self.schema), sql.Identifier(relation))
        if where:
            inner += sql.SQL(" where ") + sql.SQL(" and ").join(where)
        if order:
            inner += sql.SQL(" order by ") + sql.SQL(", ").join(order)
        if limit is not None:
            inner += sql.SQL(" limit {}").format(sql.Literal(limit))
        if offset:
            inner += sql.SQL(" offset {}").format(sql.Literal(offset))
        query = sql.SQL("select coalesce(json_agg(t), '[]'::json)::text from ({}) t").format(inner)
        text = self._run(claims, query, params, read_only=True)
        return httpx.Response(200, content=text.encode(),
                              headers={"content-type": "application/json; charset=utf-8"})

    # ------------------------------------------------------------------ POST /rpc

    def _rpc(self, function: str, args: Mapping[str, Any], claims: Mapping[str, Any],
             items: list[tuple[str, str]]) -> httpx.Response:
        signature, returns_set, returns_void = self._function(function, set(args))
        declared = dict(signature)
        unknown = sorted(set(args) - set(declared))
        if unknown:
            raise _ApiError(404, "PGRST202",
                            f"Could not find the function {self.schema}.{function}"
                            f"({', '.join(sorted(args))}) in the schema cache")
        names = [n for n, _ in signature if n in args]
        record = sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(declared[n])) for n in names)
        call_args = sql.SQL(", ").join(
            sql.SQL("{} := a.{}").format(sql.Identifier(n), sql.Identifier(n)) for n in names)
        call = sql.SQL("{}.{}({})").format(
            sql.Identifier(self.schema), sql.Identifier(function), call_args)
        source = (sql.SQL("json_to_record(%s::json) as a({})").format(record) if names
                  else sql.SQL("(select) as a"))
        window: sql.Composable = sql.SQL("")
        for key, value in items:  # PostgREST pages a set-returning function's rows too
            if key in {"limit", "offset"} and returns_set:
                window += sql.SQL(" " + key + " {}").format(sql.Literal(int(value)))
            else:
                raise _ApiError(400, "PGRST100", f"rpc query parameter {key!r} is not faked")
        if returns_set:
            query = sql.SQL(
                "select coalesce(json_agg(t), '[]'::json)::text"
                " from (select r.* from {}, lateral {} r{}) t"
            ).format(source, call, window)
        else:
            query = sql.SQL("select to_json({})::text from {}").format(call, source)
        text = self._run(claims, query, [json.dumps(dict(args))] if names else [],
                         read_only=False)
        if returns_void:
            return httpx.Response(204)
        return httpx.Response(200, content=(text or "null").encode(),
                              headers={"content-type": "application/json; charset=utf-8"})

    def _function(self, name: str, given: set[str]) -> tuple[list[tuple[str, str]], bool, bool]:
        rows = self._conn.execute(
            """
            select coalesce(p.proargnames, '{}'),
                   array(select format_type(t, null) from unnest(p.proargtypes) as t),
                   p.proretset, p.prorettype = 'void'::regtype, p.pronargdefaults
            from pg_proc p join pg_namespace n on n.oid = p.pronamespace
            where n.nspname = %s and p.proname = %s
            """,
            (self.schema, name),
        ).fetchall()
        self._conn.rollback()
        for names, types, returns_set, returns_void, defaults in rows:
            signature = list(zip(names, types, strict=False))
            required = {n for n, _ in signature[: len(signature) - defaults]}
            if required <= given <= {n for n, _ in signature}:
                return signature, bool(returns_set), bool(returns_void)
        raise _ApiError(404, "PGRST202",
                        f"Could not find the function {self.schema}.{name}"
                        f"({', '.join(sorted(given))}) in the schema cache")

    def _relation_exists(self, name: str) -> bool:
        row = self._conn.execute("select to_regclass(%s) is not null",
                                 (f'{self.schema}."{name}"',)).fetchone()
        self._conn.rollback()
        return bool(row and row[0])


# ---------------------------------------------------------------------- parsing


def _ident(name: str) -> str:
    if not _IDENT.match(name):
        raise _ApiError(400, "PGRST100", f"unsupported column name {name!r}")
    return name


def _order(value: str) -> list[sql.Composable]:
    terms: list[sql.Composable] = []
    for term in value.split(","):
        column, *modifiers = term.split(".")
        text = sql.SQL("{}").format(sql.Identifier(_ident(column)))
        for modifier in modifiers:
            if modifier not in {"asc", "desc", "nullsfirst", "nullslast"}:
                raise _ApiError(400, "PGRST100", f"bad order modifier {modifier!r}")
            text += sql.SQL(" " + {"nullsfirst": "nulls first",
                                   "nullslast": "nulls last"}.get(modifier, modifier))
        terms.append(text)
    return terms


def _filter(column: str, value: str) -> tuple[sql.Composable, list[Any]]:
    op, _, operand = value.partition(".")
    if op == "not":  # not.<op>.<operand>: the negation of the filter that follows
        clause, values = _filter(column, operand)
        return sql.SQL("not ({})").format(clause), values
    target = sql.Identifier(_ident(column))
    if op in _OPS:
        return sql.SQL("{} " + _OPS[op] + " %s").format(target), [operand]
    if op == "is":
        if operand not in {"null", "true", "false"}:
            raise _ApiError(400, "PGRST100", f"bad is. operand {operand!r}")
        return sql.SQL("{} is " + operand).format(target), []
    if op == "in":
        if not (operand.startswith("(") and operand.endswith(")")):
            raise _ApiError(400, "PGRST100", f"in. needs (a,b,...), got {operand!r}")
        return sql.SQL("{}::text = any(%s)").format(target), [_split_list(operand[1:-1])]
    if op == "cs":  # an array column contains every element of {a,b,...}
        if not (operand.startswith("{") and operand.endswith("}")):
            raise _ApiError(400, "PGRST100", f"cs. needs {{a,b,...}}, got {operand!r}")
        return sql.SQL("{} @> %s::text[]").format(target), [_split_list(operand[1:-1])]
    raise _ApiError(400, "PGRST100", f"operator {op!r} is not faked")


def _split_list(text: str) -> list[str]:
    """PostgREST's in.(...) list: comma-separated, double-quoted where needed."""
    items: list[str] = []
    current: list[str] = []
    quoted = escaped = was_quoted = False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
            was_quoted = True
        elif char == "," and not quoted:
            items.append("".join(current))
            current, was_quoted = [], False
        else:
            current.append(char)
    if current or was_quoted or items:
        items.append("".join(current))
    return items


def _status(code: str, role: str) -> int:
    if code in {"23503", "23505"}:
        return 409
    if code == "42501":
        return 401 if role == "anon" else 403
    if code in {"42883", "42P01"}:
        return 404
    if code.startswith("08") or code.startswith("53"):
        return 503
    if code.startswith(("25", "40", "55", "57", "58", "XX")):
        return 500
    return 400


def _error(status: int, code: str, message: str, details: str | None = None) -> httpx.Response:
    payload = {"code": code, "details": details, "hint": None, "message": message}
    return httpx.Response(status, json=payload)


# ---------------------------------------------------------------------- clients

SERVICE_KEY = make_jwt({"role": "service_role", "iss": "supabase-fake"})
ANON_KEY = make_jwt({"role": "anon", "iss": "supabase-fake"})
SUPABASE_URL = "https://fake-project.supabase.co"


def user_token(*repos: str, **claims: Any) -> str:
    """A signed-in user's JWT whose ``app_metadata.repos`` lists ``repos``."""
    return make_jwt({"role": "authenticated", "sub": "user-1",
                     "app_metadata": {"repos": list(repos)}, **claims})
