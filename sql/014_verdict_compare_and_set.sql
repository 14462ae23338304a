-- 014_verdict_compare_and_set: a late verdict does not overwrite a later one.
--
-- A verification pass decides whether its verdict may stand (an explicit apply at an
-- older commit of the main line must not judge a memory judged at a later one) when it
-- reads the memories, and writes the verdict after checking every citation. Another
-- pass could record a verdict in between, and agent_memory_apply, checking only the
-- status, let the older verdict overwrite it. A verdict's transition now carries the
-- verified_commit its pass read ("expect_judged"), and is applied only if the memory
-- was still last judged there (Transition.expects; SQLite checks the same in Python).

-- As in 007, plus "expect_judged": the verified_commit a verdict's pass read ('' for
-- none); a transition whose memory another verdict judged meanwhile is skipped.
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
  v_judged text;
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
    select status, repo, verified_commit into v_status, v_repo, v_judged
    from agent_memory where id = v_id;
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
    if v_status is distinct from coalesce(t ->> 'expect', 'active')
       or (t ->> 'expect_judged' is not null
           and coalesce(v_judged, '') <> t ->> 'expect_judged') then
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
