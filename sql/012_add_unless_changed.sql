-- 012_add_unless_changed: a guarded add over REST, checked in the database.
--
-- MemoryService.store adds a memory unless it repeats one: Python (quality.classify)
-- decides over the memories it may repeat (store/base.py: repeat_candidates). Postgres
-- asks inside the transaction that adds, behind an advisory lock per repository. Over
-- Supabase's REST API each call is a transaction of its own, so the store asks first and
-- adds after, and a rival's memory could land in between: two agents storing one memory
-- at once both stored it. Now the add says which candidates its decision saw, and
-- agent_memory_add_unless_changed lists them again, behind the lock PostgresStore takes,
-- and adds only if they are still those; otherwise it adds nothing and answers false,
-- and the store decides again over the fresh candidates (optimistic concurrency).

-- The memories p_memory may repeat, in repeat_candidates' order: for each citation in
-- turn, the active memories citing its lines (agent_memory_by_path, p_limit each); for a
-- pending memory then, for each file it cites, the pending memories citing that file
-- (agent_memory_find, p_limit each); each memory once, where it first appears.
create or replace function agent_memory_repeat_candidates(p_memory jsonb,
                                                          p_limit integer default 100)
returns setof agent_memory_full
language plpgsql stable security invoker
set search_path from current
as $$
declare
  v_repo text := p_memory ->> 'repo';
  v_ids text[] := '{}';
  v_found text[];
  v_cited record;
begin
  for v_cited in
    select e.c ->> 'path' as path, (e.c ->> 'line_start')::integer as line_start,
           (e.c ->> 'line_end')::integer as line_end
    from jsonb_array_elements(coalesce(p_memory -> 'citations', '[]')) with ordinality
      as e(c, n)
    order by e.n
  loop
    select coalesce(array_agg(b.id order by b.ordinality), '{}') into v_found
      from agent_memory_by_path(v_repo, v_cited.path, v_cited.line_start,
                                v_cited.line_end, p_limit) with ordinality as b;
    v_ids := v_ids || array(select u.id from unnest(v_found) with ordinality as u(id, n)
                            where u.id <> all(v_ids) order by u.n);
  end loop;
  if p_memory ->> 'status' = 'pending' then
    for v_cited in
      select e.c ->> 'path' as path
      from jsonb_array_elements(p_memory -> 'citations') with ordinality as e(c, n)
      group by e.c ->> 'path'
      order by min(e.n)
    loop
      select coalesce(array_agg(f.id order by f.ordinality), '{}') into v_found
        from agent_memory_find(v_repo, 'pending', null, null, v_cited.path, null, null,
                               p_limit) with ordinality as f;
      v_ids := v_ids || array(select u.id from unnest(v_found) with ordinality as u(id, n)
                              where u.id <> all(v_ids) order by u.n);
    end loop;
  end if;
  return query
    select f.* from unnest(v_ids) with ordinality as u(id, n)
    join agent_memory_full f on f.id = u.id
    order by u.n;
end;
$$;

-- Add p_memory (and p_events) if its candidates are still p_seen, the ids the caller's
-- decision saw; else add nothing and answer false. The lock is PostgresStore's guarded
-- add's (ADD_LOCK, "vmad", and the repository's hashtext): both kinds of client of one
-- database wait for each other. Taken before the candidates are listed; this function
-- is volatile, so that listing (read committed) sees what the add before it committed.
create or replace function agent_memory_add_unless_changed(
  p_memory jsonb, p_events jsonb, p_seen text[], p_limit integer default 100
)
returns boolean
language plpgsql
security invoker
set search_path from current
as $$
begin
  perform pg_advisory_xact_lock(1986879844, hashtext(p_memory ->> 'repo'));
  if (select coalesce(array_agg(r.id order by r.id), '{}')
      from agent_memory_repeat_candidates(p_memory, p_limit) as r)
     is distinct from
     (select coalesce(array_agg(distinct s.id order by s.id), '{}')
      from unnest(coalesce(p_seen, '{}')) as s(id)) then
    return false;
  end if;
  perform agent_memory_add(p_memory, coalesce(p_events, '[]'));
  return true;
end;
$$;

revoke all on function
  agent_memory_repeat_candidates(jsonb, integer),
  agent_memory_add_unless_changed(jsonb, jsonb, text[], integer)
  from public, anon;
grant execute on function
  agent_memory_repeat_candidates(jsonb, integer),
  agent_memory_add_unless_changed(jsonb, jsonb, text[], integer)
  to authenticated, service_role;
