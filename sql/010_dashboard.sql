-- 010_dashboard: the views `vmem dashboard` reads, for Supabase's dashboard, Grafana or
-- Metabase too.
--
-- The SQLite store has the same views, columns and numbers (its migration 7, in
-- verified_memory/store/sqlite_views.py; the list is verified_memory/store/views.py).
-- All are security_invoker: a tenant sees the repositories its JWT lists (003_rls.sql),
-- anon nothing. Days are UTC days. Only verdicts are verified_valid/verified_invalid:
-- a `checked` event (a view, a dry run, a memory not merged yet) keeps its own kind.
--
-- These read the events themselves (a few hundred milliseconds for a million events);
-- SQLite keeps running counts instead, which on a shared database would make every
-- writer wait for the same counter rows.

-- Events per repository, UTC day and kind; feedback events split by their outcome.
create or replace view agent_memory_events_daily with (security_invoker = true) as
select
  repo,
  (at at time zone 'UTC')::date as day,
  kind,
  count(*) as events,
  count(*) filter (where kind = 'feedback' and detail ->> 'outcome' = 'success')
    as successes,
  count(*) filter (where kind = 'feedback' and detail ->> 'outcome' = 'failure')
    as failures
from agent_memory_telemetry
group by repo, (at at time zone 'UTC')::date, kind;

-- Which files break memories: per file and day, the citations a verdict found changed
-- or missing (a verified_invalid event's outcomes; the file where the code is now, or
-- the cited file when it is gone).
create or replace view agent_memory_breaks_daily with (security_invoker = true) as
select
  t.repo,
  (t.at at time zone 'UTC')::date as day,
  o ->> 'path' as path,
  count(*) as breaks
from agent_memory_telemetry t
cross join lateral jsonb_array_elements(
  case jsonb_typeof(t.detail -> 'outcomes') when 'array' then t.detail -> 'outcomes'
  else '[]'::jsonb end) as o
where t.kind = 'verified_invalid'
  and jsonb_typeof(o) = 'object'
  and jsonb_typeof(o -> 'path') = 'string'
  and o ->> 'outcome' in ('changed', 'missing')
group by t.repo, (t.at at time zone 'UTC')::date, o ->> 'path';

-- One row per memory: what a listing needs (last use: used_at, else its creation).
create or replace view agent_memory_summary with (security_invoker = true) as
select
  id, repo, subject, status, category, created_at, refreshed_at,
  coalesce(used_at, created_at) as last_used_at,
  verification_count, applied_count, success_count, failure_count, invalid_reason
from agent_memory;

-- Per repository: active memories never applied, and active memories whose feedback
-- reported a failure.
create or replace view agent_memory_attention with (security_invoker = true) as
select
  repo,
  count(*) filter (where status = 'active' and applied_count = 0) as never_applied,
  count(*) filter (where status = 'active' and failure_count > 0) as failing
from agent_memory
group by repo;

-- Active memories by the UTC day they were last used (or stored): what expires next.
create or replace view agent_memory_last_use_daily with (security_invoker = true) as
select
  repo,
  (coalesce(used_at, created_at) at time zone 'UTC')::date as day,
  count(*) as memories
from agent_memory
where status = 'active'
group by repo, (coalesce(used_at, created_at) at time zone 'UTC')::date;

-- What the views read fast. The planner is told how few (repository, day, kind) groups a
-- million events make (it guessed a third of the rows, and aggregated on one core: twice
-- as slow); the verified_invalid events that name broken files are indexed apart (a few
-- percent of all events); and each listing of memories reads its first rows in order.
create statistics if not exists agent_memory_telemetry_daily_stats (ndistinct)
  on repo, kind, ((at at time zone 'UTC')::date) from agent_memory_telemetry;
create index if not exists agent_memory_telemetry_broken_idx
  on agent_memory_telemetry (at) where kind = 'verified_invalid';
create index if not exists agent_memory_never_applied_idx
  on agent_memory (repo, status, applied_count, created_at);
create index if not exists agent_memory_failing_idx
  on agent_memory (repo, status, failure_count);
create index if not exists agent_memory_last_use_idx
  on agent_memory (repo, status, (coalesce(used_at, created_at)));

revoke all on agent_memory_events_daily, agent_memory_breaks_daily, agent_memory_summary,
  agent_memory_attention, agent_memory_last_use_daily from public, anon;
grant select on agent_memory_events_daily, agent_memory_breaks_daily, agent_memory_summary,
  agent_memory_attention, agent_memory_last_use_daily to authenticated, service_role;
