-- 004_views: dashboards over telemetry and memories.
--
-- All views are security_invoker: a tenant's dashboard counts only the repositories its
-- JWT lists (003_rls.sql), and anon sees nothing. Days are UTC days.

-- How often verification finds memories broken, per repository per day: the number to
-- watch when deciding whether memories are worth their cost. Same definition as
-- RepoStats.invalidation_rate: verified_invalid / (verified_valid + verified_invalid).
create or replace view agent_memory_invalidation_daily with (security_invoker = true) as
select
  repo,
  (at at time zone 'UTC')::date as day,
  count(*) filter (where kind = 'verified_valid') as verified_valid,
  count(*) filter (where kind = 'verified_invalid') as verified_invalid,
  count(*) filter (where kind = 'invalidated') as invalidated,
  (count(*) filter (where kind = 'verified_invalid'))::double precision
    / nullif(count(*) filter (where kind in ('verified_valid', 'verified_invalid')), 0)
    as invalidation_rate
from agent_memory_telemetry
where kind in ('verified_valid', 'verified_invalid', 'invalidated')
group by repo, (at at time zone 'UTC')::date;

-- The outcome funnel per repository per day: memories retrieved -> verified valid or
-- invalid -> applied by an agent. Event counts, plus distinct memories at both ends.
create or replace view agent_memory_outcome_funnel with (security_invoker = true) as
select
  repo,
  (at at time zone 'UTC')::date as day,
  count(*) filter (where kind = 'retrieved') as retrieved,
  count(*) filter (where kind = 'verified_valid') as verified_valid,
  count(*) filter (where kind = 'verified_invalid') as verified_invalid,
  count(*) filter (where kind = 'applied') as applied,
  count(distinct memory_id) filter (where kind = 'retrieved') as memories_retrieved,
  count(distinct memory_id) filter (where kind = 'applied') as memories_applied
from agent_memory_telemetry
where kind in ('retrieved', 'verified_valid', 'verified_invalid', 'applied')
group by repo, (at at time zone 'UTC')::date;

-- Memories per repository and status, for a quick health overview.
create or replace view agent_memory_status_counts with (security_invoker = true) as
select repo, status, count(*) as memories
from agent_memory
group by repo, status;

revoke all on agent_memory_invalidation_daily, agent_memory_outcome_funnel,
  agent_memory_status_counts from public, anon;
grant select on agent_memory_invalidation_daily, agent_memory_outcome_funnel,
  agent_memory_status_counts to authenticated, service_role;
