-- 011_by_path_newest_created: a file's memories, newest created first, from one index.
--
-- agent_memory_by_path (009) answered newest refreshed first, so it had to choose
-- between reading every memory citing the file (and sorting them) and walking the
-- repository's memories newest first (asking each whether it cites the file): a walk
-- that is long for a file few memories cite. The refresh order could not be kept in
-- the citation index, because every verification pass moves it; and since a pass
-- refreshes every memory it checks at one time, a file's memories mostly tied on it,
-- leaving their order to their ids. Now by_path answers newest created first (ties:
-- the smaller id first). A memory's creation time never changes, so each citation row
-- carries it (filled in by a trigger, whatever wrote the row) and the index on
-- (repo, path, created desc, memory) lists a file's newest memories first: the read
-- stops at the limit, however many memories cite the file. SQLite's migration 9 does
-- the same.

alter table agent_memory_citation add column if not exists memory_created_at timestamptz;

update agent_memory_citation c set memory_created_at = m.created_at
  from agent_memory m
  where m.id = c.memory_id and c.memory_created_at is distinct from m.created_at;

create or replace function agent_memory_citation_created_at()
returns trigger
language plpgsql
security invoker
set search_path from current
as $$
begin
  select m.created_at into new.memory_created_at from agent_memory m where m.id = new.memory_id;
  return new;
end;
$$;

drop trigger if exists agent_memory_citation_created_at on agent_memory_citation;
create trigger agent_memory_citation_created_at
  before insert or update of memory_id on agent_memory_citation
  for each row execute function agent_memory_citation_created_at();

-- Every read by (repo, path) starts with the same two columns; the cited lines in each
-- entry answer a question about lines without reading the citation's row.
drop index if exists agent_memory_citation_repo_path_idx;
create index if not exists agent_memory_citation_newest_idx
  on agent_memory_citation (repo, path, memory_created_at desc, memory_id)
  include (line_start, line_end);

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
begin
  -- plpgsql, planned for each call with its arguments: the planner walks the file's
  -- citations newest first and stops at the limit, or, for a category or a tag that
  -- few memories have, starts from those memories instead (a SQL function would be
  -- planned without the arguments' values and always walk).
  return query
    select f.* from agent_memory_full f
    where f.id in (
      select c.memory_id from agent_memory_citation c
      join agent_memory m on m.id = c.memory_id
      where c.repo = p_repo and c.path = p_path
        and (p_line_end is null or c.line_start <= p_line_end)
        and (p_line_start is null or c.line_end >= p_line_start)
        and m.repo = p_repo and m.status = 'active'
        and (p_category is null or m.category = p_category)
        and (p_tag is null or p_tag = any(m.tags))
      group by c.memory_created_at, c.memory_id
      order by c.memory_created_at desc, c.memory_id
      limit p_limit)
    order by f.created_at desc, f.id;
end;
$$;
