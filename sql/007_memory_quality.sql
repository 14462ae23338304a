-- 007_memory_quality: duplicates, approval, feedback to promotion, expiry.
--
-- 1. The expired status: a memory unused for too long (28 days by default) is no longer
--    injected; it keeps its history and comes back when it is verified and used.
-- 2. Feedback counters (success_count, failure_count), the last use (used_at: stored,
--    approved, refreshed by request, applied; not a verification pass) and the rules
--    file a memory was promoted into (promoted_to), appended to agent_memory_full.
-- 3. Telemetry kinds for approval (approved, rejected), promotion (validated, promoted)
--    and decay (expired).
-- 4. agent_memory_apply and agent_memory_stats learn the new columns; a dashboard view of
--    each repository's memory health (agent_memory_quality).

alter table agent_memory add column if not exists success_count integer not null default 0;
alter table agent_memory add column if not exists failure_count integer not null default 0;
alter table agent_memory add column if not exists used_at timestamptz;
alter table agent_memory add column if not exists promoted_to text;
-- Existing memories were last used when they were last refreshed.
update agent_memory set used_at = refreshed_at where used_at is null;

alter table agent_memory drop constraint if exists agent_memory_status_check;
alter table agent_memory add constraint agent_memory_status_check
  check (status in ('active', 'pending', 'invalid', 'superseded', 'expired'));
alter table agent_memory drop constraint if exists agent_memory_feedback_counts_check;
alter table agent_memory add constraint agent_memory_feedback_counts_check
  check (success_count >= 0 and failure_count >= 0);

alter table agent_memory_telemetry
  drop constraint if exists agent_memory_telemetry_kind_check;
alter table agent_memory_telemetry
  add constraint agent_memory_telemetry_kind_check
  check (kind in ('created', 'retrieved', 'verified_valid', 'verified_invalid',
                  'unverifiable', 'relocated', 'refreshed', 'invalidated', 'revived',
                  'checked', 'recited', 'superseded', 'applied', 'feedback', 'approved',
                  'rejected', 'validated', 'promoted', 'expired'));

create or replace view agent_memory_full with (security_invoker = true) as
select
  m.id, m.repo, m.subject, m.fact, m.reason, m.category, m.tags, m.status,
  m.supersedes, m.superseded_by, m.created_by, m.created_at, m.refreshed_at,
  m.verification_count, m.applied_count, m.verified_commit, m.invalid_reason,
  coalesce((
    select jsonb_agg(jsonb_build_object(
             'path', c.path,
             'line_start', c.line_start,
             'line_end', c.line_end,
             'sha', c.sha,
             'blob_sha', c.blob_sha,
             'snippet_hash', c.snippet_hash,
             'line_hashes', to_jsonb(string_to_array(c.line_hashes, ' ')),
             'anchor', c.anchor
           ) order by c.position)
    from agent_memory_citation c
    where c.memory_id = m.id
  ), '[]'::jsonb) as citations,
  m.verified_ref, m.success_count, m.failure_count, m.used_at, m.promoted_to
from agent_memory m;


-- Inserts the quality columns too; otherwise as in 006.
create or replace function agent_memory_insert(p_memory jsonb)
returns void
language plpgsql
security invoker
set search_path from current
as $$
declare
  v_terms jsonb := coalesce(p_memory -> 'search_terms', '{}'::jsonb);
  v_tags text[];
begin
  if jsonb_typeof(p_memory) is distinct from 'object' then
    raise exception 'a memory must be a JSON object' using errcode = '22023';
  end if;
  v_tags := coalesce(array(
    select jsonb_array_elements_text(
      case jsonb_typeof(p_memory -> 'tags') when 'array' then p_memory -> 'tags'
      else '[]'::jsonb end)
  ), '{}'::text[]);
  if exists (select from agent_memory where id = p_memory ->> 'id') then
    raise exception 'memory % already exists', p_memory ->> 'id' using errcode = '23505';
  end if;
  insert into agent_memory (
    id, repo, subject, fact, reason, category, tags, status, supersedes, superseded_by,
    created_by, created_at, refreshed_at, verification_count, applied_count,
    verified_commit, invalid_reason, verified_ref, success_count, failure_count,
    used_at, promoted_to, search
  ) values (
    p_memory ->> 'id',
    p_memory ->> 'repo',
    p_memory ->> 'subject',
    p_memory ->> 'fact',
    p_memory ->> 'reason',
    p_memory ->> 'category',
    v_tags,
    coalesce(p_memory ->> 'status', 'active'),
    p_memory ->> 'supersedes',
    p_memory ->> 'superseded_by',
    p_memory ->> 'created_by',
    coalesce((p_memory ->> 'created_at')::timestamptz, now()),
    coalesce((p_memory ->> 'refreshed_at')::timestamptz,
             (p_memory ->> 'created_at')::timestamptz, now()),
    coalesce((p_memory ->> 'verification_count')::integer, 0),
    coalesce((p_memory ->> 'applied_count')::integer, 0),
    p_memory ->> 'verified_commit',
    p_memory ->> 'invalid_reason',
    p_memory ->> 'verified_ref',
    coalesce((p_memory ->> 'success_count')::integer, 0),
    coalesce((p_memory ->> 'failure_count')::integer, 0),
    (p_memory ->> 'used_at')::timestamptz,
    p_memory ->> 'promoted_to',
    agent_memory_search_vector(
      case jsonb_typeof(v_terms -> 'subject') when 'array'
        then array(select jsonb_array_elements_text(v_terms -> 'subject'))
        else agent_memory_terms(p_memory ->> 'subject') end,
      case jsonb_typeof(v_terms -> 'tags') when 'array'
        then array(select jsonb_array_elements_text(v_terms -> 'tags'))
        else agent_memory_terms(array_to_string(v_tags, ' ')) end,
      case jsonb_typeof(v_terms -> 'fact') when 'array'
        then array(select jsonb_array_elements_text(v_terms -> 'fact'))
        else agent_memory_terms(p_memory ->> 'fact') end
    )
  );
  perform agent_memory_insert_citations(
    p_memory ->> 'id', p_memory ->> 'repo', p_memory -> 'citations'
  );
end;
$$;

-- As in 006, plus the feedback counters, "used_at" and "promoted_to".
create or replace function agent_memory_apply(p_transitions jsonb)
returns jsonb
language plpgsql
security invoker
set search_path from current
as $$
declare
  t jsonb;
  v_id text;
  v_status text;
  v_repo text;
  v_unconfirm boolean;
  v_results boolean[] := '{}';
begin
  if jsonb_typeof(p_transitions) is distinct from 'array' then
    raise exception 'transitions must be a JSON array' using errcode = '22023';
  end if;
  perform 1 from agent_memory
  where id in (select x ->> 'memory_id' from jsonb_array_elements(p_transitions) as x)
  order by id
  for update;
  for t in select value from jsonb_array_elements(p_transitions) with ordinality
           as x(value, ord) order by ord
  loop
    v_id := t ->> 'memory_id';
    select status, repo into v_status, v_repo from agent_memory where id = v_id;
    if not found then
      raise exception 'memory % not found', v_id using errcode = 'VM404';
    end if;
    if least(coalesce((t ->> 'add_verifications')::integer, 0),
             coalesce((t ->> 'add_applications')::integer, 0),
             coalesce((t ->> 'add_successes')::integer, 0),
             coalesce((t ->> 'add_failures')::integer, 0)) < 0 then
      raise exception 'transition of memory %: counters only grow', v_id
        using errcode = '22023';
    end if;
    if v_status is distinct from coalesce(t ->> 'expect', 'active') then
      v_results := array_append(v_results, false);
      continue;
    end if;
    v_unconfirm := coalesce((t ->> 'unconfirm')::boolean, false);
    update agent_memory set
      status = coalesce(t ->> 'status', status),
      invalid_reason = case when t ->> 'status' = 'active' then null
                            else coalesce(t ->> 'invalid_reason', invalid_reason) end,
      refreshed_at = coalesce((t ->> 'refreshed_at')::timestamptz, refreshed_at),
      verified_commit = case when v_unconfirm then null
                             else coalesce(t ->> 'verified_commit', verified_commit) end,
      verified_ref = case when v_unconfirm then null
                          else coalesce(t ->> 'verified_ref', verified_ref) end,
      verification_count = verification_count
        + coalesce((t ->> 'add_verifications')::integer, 0),
      applied_count = applied_count + coalesce((t ->> 'add_applications')::integer, 0),
      success_count = success_count + coalesce((t ->> 'add_successes')::integer, 0),
      failure_count = failure_count + coalesce((t ->> 'add_failures')::integer, 0),
      used_at = coalesce((t ->> 'used_at')::timestamptz, used_at),
      promoted_to = coalesce(t ->> 'promoted_to', promoted_to)
    where id = v_id;
    if jsonb_typeof(t -> 'citations') = 'array' then
      delete from agent_memory_citation where memory_id = v_id;
      perform agent_memory_insert_citations(v_id, v_repo, t -> 'citations');
    end if;
    perform agent_memory_insert_events(t -> 'events');
    v_results := array_append(v_results, true);
  end loop;
  return coalesce(to_jsonb(v_results), '[]'::jsonb);
end;
$$;

-- As in 006, with the expired status, and the quality counts: "validated" (active,
-- applied at least 3 times, at least 90 % of its feedback a success: a promotion
-- candidate) and "poor" (at least 4 feedbacks, under 50 % success). The same rules as
-- verified_memory/quality.py; the store contract suite checks the two agree.
create or replace function agent_memory_stats(p_repo text)
returns jsonb
language plpgsql
stable
security invoker
set search_path from current
as $$
begin
  return (
    select jsonb_build_object(
      'repo', p_repo,
      'by_status', (
        select jsonb_object_agg(s.status, coalesce(n.count, 0) order by s.ord)
        from unnest(array['active', 'pending', 'invalid', 'superseded', 'expired'])
             with ordinality as s(status, ord)
        left join (
          select status, count(*) as count from agent_memory where repo = p_repo
          group by status
        ) as n on n.status = s.status
      ),
      'events', coalesce((
        select jsonb_object_agg(kind, count order by kind)
        from (
          select kind, count(*) as count from agent_memory_telemetry where repo = p_repo
          group by kind
        ) as k
      ), '{}'::jsonb),
      'citations', (
        select count(*) from agent_memory_citation c
        join agent_memory m on m.id = c.memory_id
        where m.repo = p_repo and m.status = 'active'
      ),
      'unconfirmed', (
        select count(*) from agent_memory
        where repo = p_repo and status = 'active' and verified_ref is null
      ),
      'validated', (
        select count(*) from agent_memory
        where repo = p_repo and status = 'active' and applied_count >= 3
          and success_count + failure_count > 0
          and success_count >= 0.9 * (success_count + failure_count)
      ),
      'poor', (
        select count(*) from agent_memory
        where repo = p_repo and status = 'active' and success_count + failure_count >= 4
          and success_count < 0.5 * (success_count + failure_count)
      )
    )
  );
end;
$$;

-- Memory health per repository, for dashboards: how many memories are active, waiting
-- for approval, validated (promotion candidates), poor performers, promoted, expired.
create or replace view agent_memory_quality with (security_invoker = true) as
select
  repo,
  count(*) filter (where status = 'active') as active,
  count(*) filter (where status = 'pending') as pending,
  count(*) filter (where status = 'active' and applied_count >= 3
                   and success_count + failure_count > 0
                   and success_count >= 0.9 * (success_count + failure_count)) as validated,
  count(*) filter (where status = 'active' and success_count + failure_count >= 4
                   and success_count < 0.5 * (success_count + failure_count)) as poor,
  count(*) filter (where promoted_to is not null) as promoted,
  count(*) filter (where status = 'expired') as expired,
  count(*) filter (where status = 'invalid') as invalid,
  count(*) filter (where status = 'superseded') as superseded
from agent_memory
group by repo;

revoke all on agent_memory_quality from public, anon;
grant select on agent_memory_quality to authenticated, service_role;

-- search and by_path filter by category and tag, before the limit. The three- and
-- five-argument versions of 002 are replaced (not overloaded), so that a REST call with
-- named arguments has one function to choose.
drop function if exists agent_memory_search(text, text[], integer);
drop function if exists agent_memory_by_path(text, text, integer, integer, integer);

create or replace function agent_memory_search(
  p_repo text, p_terms text[], p_limit integer default 20,
  p_category text default null, p_tag text default null
)
returns setof agent_memory_full
language plpgsql
stable
security invoker
set search_path from current
as $$
begin
  return query
    select f.*
    from (
      select m.id, m.refreshed_at,
             ts_rank('{0.1, 0.25, 0.5, 1.0}', m.search, q.query, 1) as rank
      from agent_memory m, agent_memory_tsquery(p_terms) as q(query)
      where m.repo = p_repo and m.status = 'active' and m.search @@ q.query
        and (p_category is null or m.category = p_category)
        and (p_tag is null or p_tag = any(m.tags))
      order by rank desc, m.refreshed_at desc, m.id
      limit p_limit
    ) as hit
    join agent_memory_full f on f.id = hit.id
    order by hit.rank desc, hit.refreshed_at desc, hit.id;
end;
$$;

create or replace function agent_memory_by_path(
  p_repo text, p_path text, p_line_start integer default null,
  p_line_end integer default null, p_limit integer default 50,
  p_category text default null, p_tag text default null
)
returns setof agent_memory_full
language plpgsql
stable
security invoker
set search_path from current
as $$
begin
  return query
    select f.*
    from agent_memory_full f
    where f.repo = p_repo and f.status = 'active'
      and (p_category is null or f.category = p_category)
      and (p_tag is null or p_tag = any(f.tags))
      and f.id in (
        select c.memory_id from agent_memory_citation c
        where c.repo = p_repo and c.path = p_path
          and (p_line_end is null or c.line_start <= p_line_end)
          and (p_line_start is null or c.line_end >= p_line_start)
      )
    order by f.refreshed_at desc, f.id
    limit p_limit;
end;
$$;

revoke all on function agent_memory_search(text, text[], integer, text, text),
  agent_memory_by_path(text, text, integer, integer, integer, text, text) from public, anon;
grant execute on function agent_memory_search(text, text[], integer, text, text),
  agent_memory_by_path(text, text, integer, integer, integer, text, text)
  to authenticated, service_role;

-- How many memories a repository has in a status (any status: null); an index count,
-- for the soft limit checked on every store.
create or replace function agent_memory_count(p_repo text, p_status text default 'active')
returns bigint
language sql
stable
security invoker
set search_path from current
as $$
  select count(*) from agent_memory
  where repo = p_repo and (p_status is null or status = p_status);
$$;

revoke all on function agent_memory_count(text, text) from public, anon;
grant execute on function agent_memory_count(text, text) to authenticated, service_role;
