-- 018_demote: a promoted rule taken back out of its rules file (vmem promote ID --remove).
--
-- 1. A "demoted" telemetry event: who took the rule out, and of which file.
-- 2. A transition may clear promoted_to ("demote": true). agent_memory_apply keeps a
--    column whose value is null, so it cannot say "no rules file any more":
--    agent_memory_apply_demoting applies the transitions as agent_memory_apply_cited
--    (017) does, then clears promoted_to of the memories an applied one demoted.
--
-- Transition.apply_to says the same for SQLite. The stores call
-- agent_memory_apply_demoting, so a database not migrated says so rather than keeping
-- a rule the person took out.

alter table agent_memory_telemetry
  drop constraint if exists agent_memory_telemetry_kind_check;
alter table agent_memory_telemetry add constraint agent_memory_telemetry_kind_check check (kind in (
  'created', 'retrieved', 'verified_valid', 'verified_invalid', 'unverifiable', 'relocated',
  'refreshed', 'invalidated', 'revived', 'checked', 'recited', 'superseded', 'applied',
  'feedback', 'approved', 'rejected', 'validated', 'promoted', 'demoted', 'expired',
  'forgotten'));

-- agent_memory_apply_cited, then promoted_to cleared where a transition that demotes
-- was applied and no later one of the batch promoted the memory again: each memory
-- ends as the transitions of the batch, in order, leave it. agent_memory_apply_cited
-- (or 015's function it calls) has locked the batch's rows.
create or replace function agent_memory_apply_demoting(p_transitions jsonb)
returns jsonb language plpgsql security invoker set search_path from current as $$
declare
  v_applied jsonb := agent_memory_apply_cited(p_transitions);
begin
  update agent_memory m set promoted_to = null
  from jsonb_array_elements(p_transitions) with ordinality as t(item, n)
  where m.id = t.item ->> 'memory_id'
    and (t.item ->> 'demote')::boolean
    and (v_applied ->> (t.n - 1)::integer)::boolean
    and not exists (
      select 1 from jsonb_array_elements(p_transitions) with ordinality as l(item, n)
      where l.n > t.n and l.item ->> 'memory_id' = m.id
        and l.item ->> 'promoted_to' is not null
        and (v_applied ->> (l.n - 1)::integer)::boolean);
  return v_applied;
end;
$$;

revoke all on function agent_memory_apply_demoting(jsonb) from public, anon;
grant execute on function agent_memory_apply_demoting(jsonb) to authenticated, service_role;
