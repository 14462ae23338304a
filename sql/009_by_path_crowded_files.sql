-- 009_by_path_crowded_files: memories citing a file, fast however often it is cited.
--
-- agent_memory_by_path (007) left the plan to Postgres inside a plpgsql function, which
-- caches one generic plan after five calls: the same plan for a file two memories cite
-- and for one 78,000 of 100,000 memories cite (half a second there: every citing memory
-- read and sorted for the newest 50). Now:
--
-- 1. A bounded count of the file's citations chooses: a crowded file (more than 2,000)
--    walks the repository's memories newest first and asks each whether it cites the
--    file, stopping at the limit; any other file reads its citing memories through
--    the citation index and sorts them (materialized, so the planner cannot turn it
--    into the walk).
-- 2. The function plans each call with its arguments (plan_cache_mode) and without
--    parallel workers, whose start costs more than these look-ups.
-- 3. Both questions answered from indexes, not from citation rows (which carry the
--    fingerprints): which memories cite a file (the (repo, path) index now holds the
--    memory and the last line too), and whether a memory cites it (a new index).

drop index if exists agent_memory_citation_repo_path_idx;
create index if not exists agent_memory_citation_repo_path_idx
  on agent_memory_citation (repo, path, line_start) include (line_end, memory_id);
create index if not exists agent_memory_citation_memory_path_idx
  on agent_memory_citation (memory_id, path, line_start, line_end);

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
set plan_cache_mode = force_custom_plan
set max_parallel_workers_per_gather = 0
as $$
declare
  v_cited integer;
begin
  select count(*) into v_cited
  from (select from agent_memory_citation c
        where c.repo = p_repo and c.path = p_path limit 2001) as cited;
  if v_cited > 2000 then
    return query
      select f.* from agent_memory_full f
      where f.id in (
        select m.id from agent_memory m
        where m.repo = p_repo and m.status = 'active'
          and (p_category is null or m.category = p_category)
          and (p_tag is null or p_tag = any(m.tags))
          and exists (
            select from agent_memory_citation c
            where c.memory_id = m.id and c.path = p_path
              and (p_line_end is null or c.line_start <= p_line_end)
              and (p_line_start is null or c.line_end >= p_line_start))
        order by m.refreshed_at desc, m.id
        limit p_limit)
      order by f.refreshed_at desc, f.id;
  else
    return query
      with hit as materialized (
        select distinct c.memory_id from agent_memory_citation c
        where c.repo = p_repo and c.path = p_path
          and (p_line_end is null or c.line_start <= p_line_end)
          and (p_line_start is null or c.line_end >= p_line_start))
      select f.* from agent_memory_full f
      where f.id in (
        select m.id from hit join agent_memory m on m.id = hit.memory_id
        where m.repo = p_repo and m.status = 'active'
          and (p_category is null or m.category = p_category)
          and (p_tag is null or p_tag = any(m.tags))
        order by m.refreshed_at desc, m.id
        limit p_limit)
      order by f.refreshed_at desc, f.id;
  end if;
end;
$$;
