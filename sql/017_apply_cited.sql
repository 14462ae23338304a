-- 017_apply_cited: a verdict is written only on the citations it was reached on.
--
-- A verification pass reads the memories, checks their citations, then writes its
-- verdicts; agent_memory_apply_judged (015) skips a verdict whose memory another verdict
-- judged meanwhile. A memory never judged on the main line (stored on a branch since
-- merged) and re-cited off it while the pass checks its code (vmem recite on a branch: a
-- view) keeps its status and its verified_commit (none), so 015 let the verdict on its
-- old citations overwrite it: an invalidation of lines it no longer cites, or a
-- relocation of the old citations written over the new ones. A verdict's transition now
-- also carries the citations its pass checked ("expect_citations": [path, line_start,
-- line_end, snippet_hash] each, in position order), and is applied only if the memory
-- still cites exactly those.
--
-- Transition.expects says the same for SQLite. The stores call agent_memory_apply_cited
-- (015 called 007's agent_memory_apply the same way), so a database not migrated says
-- so rather than applying verdicts on citations unchecked.

-- agent_memory_apply_judged (015), each transition in turn, skipping (false) one whose
-- expect_citations (when an array) are not its memory's citations. A batch in which no
-- transition names its citations is 015's whole. The batch's rows are
-- locked first, in id order as 015 locks them, so no re-cite lands between a check and
-- its write; each check sees the transitions of the batch before it. A memory not found
-- is left to 015, which raises, and nothing is written.
create or replace function agent_memory_apply_cited(p_transitions jsonb)
returns jsonb language plpgsql security invoker set search_path from current as $$
declare
  v_item jsonb;
  v_results jsonb := '[]'::jsonb;
begin
  -- No verdict names its citations (a pass over memories judged before): 015 as it is,
  -- one call for the batch.
  if not exists (select 1 from jsonb_array_elements(p_transitions) as b(item)
                 where jsonb_typeof(b.item -> 'expect_citations') = 'array') then
    return agent_memory_apply_judged(p_transitions);
  end if;
  -- The rows 015 locks (each transition's memory and the one it requires), in its order.
  perform 1 from agent_memory
    where id in (select jsonb_array_elements(p_transitions) ->> 'memory_id'
                 union select jsonb_array_elements(p_transitions) -> 'requires' ->> 'memory_id')
    order by id for update;
  for i in 0 .. jsonb_array_length(p_transitions) - 1 loop
    v_item := p_transitions -> i;
    if jsonb_typeof(v_item -> 'expect_citations') = 'array'
       and exists (select 1 from agent_memory where id = v_item ->> 'memory_id')
       and v_item -> 'expect_citations' <> (
         select coalesce(jsonb_agg(jsonb_build_array(c.path, c.line_start, c.line_end,
                                                     c.snippet_hash) order by c.position),
                         '[]'::jsonb)
         from agent_memory_citation c where c.memory_id = v_item ->> 'memory_id') then
      v_results := v_results || 'false'::jsonb;
    else
      v_results := v_results || (agent_memory_apply_judged(jsonb_build_array(v_item)) -> 0);
    end if;
  end loop;
  return v_results;
end;
$$;

revoke all on function agent_memory_apply_cited(jsonb) from public, anon;
grant execute on function agent_memory_apply_cited(jsonb) to authenticated, service_role;
