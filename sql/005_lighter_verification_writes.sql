-- 005_lighter_verification_writes: what a verification pass writes, made cheaper.
--
-- 1. One index fewer to keep up. Every refresh moves a memory's refreshed_at, and so its
--    entry in each index on it; (repo, refreshed_at) served only listings of every
--    status (an export), which can sort a repository's rows instead.
drop index if exists agent_memory_repo_refreshed_idx;

-- 2. agent_memory_apply answers which transitions were applied. 002 answered each
--    applied transition with the memory as it now is (agent_memory_json), and a
--    verification pass applies thousands: the client threw that work away, because
--    Transition.apply_to computes the same memory without a read. Now the answer is one
--    boolean per transition, in order: true applied, false skipped (the memory was no
--    longer in the expected status). Same signature: grants and callers stay as they are.

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
  -- An array, appended in place: concatenating jsonb would copy it at every step.
  v_results boolean[] := '{}';
begin
  if jsonb_typeof(p_transitions) is distinct from 'array' then
    raise exception 'transitions must be a JSON array' using errcode = '22023';
  end if;
  -- Lock every row up front, in id order, so that two overlapping batches wait for
  -- each other instead of deadlocking.
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
    update agent_memory set
      status = coalesce(t ->> 'status', status),
      invalid_reason = coalesce(t ->> 'invalid_reason', invalid_reason),
      refreshed_at = coalesce((t ->> 'refreshed_at')::timestamptz, refreshed_at),
      verified_commit = coalesce(t ->> 'verified_commit', verified_commit),
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
