-- 006_ref_rule: verdicts belong to the ref they were made at.
--
-- A memory is a claim about the repository's main line (its default branch). Only a
-- check at the main line's tip, or an explicit apply after a merge, changes a memory's
-- status; anywhere else a check is a view that changes nothing stored. This migration
-- gives the tables what that rule needs:
--
-- 1. agent_memory.verified_ref: the main line's name where the last verdict was made
--    (with verified_commit, its commit). NULL for a memory never judged there: new,
--    stored on a branch, or re-cited. Appended to agent_memory_full, so every read
--    returns it (a view may only grow at the end).
-- 2. Telemetry kinds for what a check saw without deciding anything ('checked': a
--    view, a dry run, a memory whose commit is not merged yet), for an invalid memory
--    whose code holds again ('revived'), and for citations replaced on request
--    ('recited'). Dashboards keep counting verdicts only (verified_valid/_invalid).
-- 3. agent_memory_apply learns "verified_ref" and "unconfirm" (forget where the memory
--    was judged), and clears invalid_reason when a memory becomes active again (a
--    revival), as Transition.apply_to does.

alter table agent_memory add column if not exists verified_ref text;

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
  m.verified_ref
from agent_memory m;

alter table agent_memory_telemetry
  drop constraint if exists agent_memory_telemetry_kind_check;
alter table agent_memory_telemetry
  add constraint agent_memory_telemetry_kind_check
  check (kind in ('created', 'retrieved', 'verified_valid', 'verified_invalid',
                  'unverifiable', 'relocated', 'refreshed', 'invalidated', 'revived',
                  'checked', 'recited', 'superseded', 'applied', 'feedback'));

-- Inserts verified_ref too; otherwise as in 002.
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
    verified_commit, invalid_reason, verified_ref, search
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

-- As in 005, plus "verified_ref", "unconfirm" and the revival rule.
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
    if coalesce((t ->> 'add_verifications')::integer, 0) < 0
       or coalesce((t ->> 'add_applications')::integer, 0) < 0 then
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
      applied_count = applied_count + coalesce((t ->> 'add_applications')::integer, 0)
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

-- As in 002, plus "unconfirmed": active memories never judged on the main line (stored
-- on a branch, re-cited, or new since the last verification there).
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
        from unnest(array['active', 'pending', 'invalid', 'superseded'])
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
      )
    )
  );
end;
$$;
