-- 013_by_path_one_order: a file's memories in one order, whatever the clocks, the hand
-- edits and the database's collation.
--
-- agent_memory_by_path (011) answers newest created first, ties by id. Three ways it
-- disagreed with the other stores, or with itself:
--
-- 1. A creation time in the future (another machine's clock ahead, an import) kept its
--    memory first for as long as the clock stayed behind it: for ever, for a year 2099.
--    No memory is created after the database took it in, so a later time is stored as
--    the database's now(), on insert and on update (SQLite and the in-memory store
--    store their own clock's now: the client is the database there). Times already in
--    the future are brought back below.
-- 2. A created_at edited by hand left each citation's copy of it (which orders the
--    index) as it was: the memory was found by its old time. Now an update of the
--    memory's time updates the copies, and a citation's copy cannot be set apart from
--    its memory's (the insert trigger of 011 runs on such an update too).
-- 3. Equal times were ordered by the ids in the database's collation (en_US puts 'a'
--    before 'B'; SQLite and Python compare bytes: 'B' first). The index and the
--    function now order ids by their bytes (collate "C", UTF-8 byte order, which is
--    code point order), as every other store does.

create or replace function agent_memory_created_at_not_later()
returns trigger language plpgsql security invoker set search_path from current as $$
begin
  -- now() is when the transaction began: never later than the insert itself.
  new.created_at := least(new.created_at, now());
  return new;
end;
$$;

create or replace function agent_memory_created_at_copies()
returns trigger language plpgsql security invoker set search_path from current as $$
begin
  update agent_memory_citation set memory_created_at = new.created_at
    where memory_id = new.id and memory_created_at is distinct from new.created_at;
  return null;
end;
$$;

create or replace trigger agent_memory_created_at_not_later
  before insert or update of created_at on agent_memory
  for each row execute function agent_memory_created_at_not_later();

create or replace trigger agent_memory_created_at_copies
  after update of created_at on agent_memory
  for each row when (old.created_at is distinct from new.created_at)
  execute function agent_memory_created_at_copies();

-- 011's trigger, run on an update of the copy too: it is set from the memory, always.
create or replace trigger agent_memory_citation_created_at
  before insert or update of memory_id, memory_created_at on agent_memory_citation
  for each row execute function agent_memory_citation_created_at();

update agent_memory set created_at = now() where created_at > now();
update agent_memory_citation c set memory_created_at = m.created_at
  from agent_memory m
  where m.id = c.memory_id and c.memory_created_at is distinct from m.created_at;

drop index if exists agent_memory_citation_newest_idx;
create index if not exists agent_memory_citation_newest_idx
  on agent_memory_citation (repo, path, memory_created_at desc, memory_id collate "C")
  include (line_start, line_end);

-- The arguments as in 007 to 011 (Supabase calls the function by their names).
create or replace function agent_memory_by_path(
  p_repo text, p_path text, p_line_start integer default null, p_line_end integer default null,
  p_limit integer default 50, p_category text default null, p_tag text default null)
returns setof agent_memory_full language plpgsql stable security invoker
set search_path from current set plan_cache_mode = force_custom_plan
set max_parallel_workers_per_gather = 0
as $$
begin
  -- As in 011, the ids compared by their bytes: grouped and ordered so, in the index's
  -- own order, the walk still stops at the limit.
  return query
    with newest as (
      select c.memory_created_at as created_at, c.memory_id collate "C" as id
      from agent_memory_citation c join agent_memory m on m.id = c.memory_id
      where c.repo = p_repo and c.path = p_path and m.repo = p_repo and m.status = 'active'
        and (p_line_end is null or c.line_start <= p_line_end)
        and (p_line_start is null or c.line_end >= p_line_start)
        and (p_category is null or m.category = p_category)
        and (p_tag is null or p_tag = any(m.tags))
      group by c.memory_created_at, c.memory_id collate "C"
      order by c.memory_created_at desc, c.memory_id collate "C"
      limit p_limit)
    select f.* from newest n
    join agent_memory_full f on f.id = n.id collate "default"
    order by n.created_at desc, n.id;
end;
$$;
