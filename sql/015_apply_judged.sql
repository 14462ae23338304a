-- 015_apply_judged: transitions checked against more than their memory's status.
--
-- 1. A late verdict does not overwrite a later one. A verification pass decides whether
--    its verdict may stand (an explicit apply at an older commit of the main line must
--    not judge a memory judged at a later one) when it reads the memories, and writes
--    the verdict after checking every citation. Another pass could record a verdict in
--    between, and agent_memory_apply, checking only the status, let the older verdict
--    overwrite it. A verdict's transition now carries the verified_commit its pass read
--    ("expect_judged", '' for none), and is applied only if the memory is still judged
--    there.
-- 2. A correction that waits for approval retires what it corrects only once approved:
--    the approval and the retirement are two transitions that each require the other's
--    memory in a status ("requires": {"memory_id", "status"}), so they apply together or
--    not at all; the retirement sets "superseded_by".
--
-- Transition.expects and Transition.required say the same for SQLite. The stores call
-- agent_memory_apply_judged, so a database not migrated says so rather than applying
-- transitions unchecked.

-- agent_memory_apply (007), each transition in turn, skipping (false) a verdict whose
-- memory another verdict judged since its pass read it, and a transition whose required
-- memory is not in the status required (or not found). The batch's rows, and those it
-- requires, are locked first, in id order as agent_memory_apply locks them, so nothing
-- changes between the checks and the write; each check sees the transitions of the
-- batch before it.
create or replace function agent_memory_apply_judged(p_transitions jsonb)
returns jsonb language plpgsql security invoker set search_path from current as $$
declare
  v_item jsonb;
  v_judged text;
  v_required boolean;
  v_applied boolean[] := '{}';
begin
  -- (jsonb_array_elements refuses a batch that is not an array: 22023, as 007 does.)
  perform 1 from agent_memory m
    join jsonb_array_elements(p_transitions) as b(item)
      on m.id in (b.item ->> 'memory_id', b.item -> 'requires' ->> 'memory_id')
    order by m.id for update of m;
  for v_item in select e.item from jsonb_array_elements(p_transitions)
                  with ordinality as e(item, n) order by e.n
  loop
    v_required := jsonb_typeof(v_item -> 'requires') is distinct from 'object'
      or exists (select 1 from agent_memory
                 where id = v_item -> 'requires' ->> 'memory_id'
                   and status = v_item -> 'requires' ->> 'status');
    select coalesce(verified_commit, '') into v_judged
    from agent_memory where id = v_item ->> 'memory_id';
    if found and (v_judged <> coalesce(v_item ->> 'expect_judged', v_judged)
                  or not v_required) then
      v_applied := v_applied || false;
    else  -- a memory not found: agent_memory_apply raises, and nothing is written
      v_applied := v_applied
        || (agent_memory_apply(jsonb_build_array(v_item)) ->> 0)::boolean;
      if v_applied[cardinality(v_applied)] and v_item ->> 'superseded_by' is not null then
        update agent_memory set superseded_by = v_item ->> 'superseded_by'
        where id = v_item ->> 'memory_id';
      end if;
    end if;
  end loop;
  return coalesce(to_jsonb(v_applied), '[]'::jsonb);
end;
$$;

revoke all on function agent_memory_apply_judged(jsonb) from public, anon;
grant execute on function agent_memory_apply_judged(jsonb) to authenticated, service_role;
