-- 008_audit_hygiene: see everything, forget on request, lose nothing, count right.
--
-- 1. Event keys. Every event carries a key (written by the client, or made here), kept
--    through export and import: an import skips the keys a database holds, so a file
--    imported twice adds nothing. Events written before this migration have none.
-- 2. Partial indexes for the audit trail (`vmem log`): a repository's or a memory's
--    changes, newest first, without walking past the reads (`retrieved`, `checked`: most
--    of the table).
-- 3. Tombstones. Forgetting a memory deletes its row (subject, fact, reason, tags) and,
--    by the cascade, its citations; a row of agent_memory_tombstone keeps which memory it
--    was, where, who forgot it, when and why, and a `forgotten` event records it. Any
--    delete of a memory leaves both (a trigger), whatever path it took; tenants may
--    delete only in their own repositories (row-level security, as for every write).
-- 4. The telemetry archive. `vmem db compact` moves old events into
--    agent_memory_telemetry_archive; the append-only rule lets an event leave the live
--    table only once its copy is there. Archived events still count in the statistics.
-- 5. Functions: listings by any filter (agent_memory_find), id prefixes
--    (agent_memory_match_ids), forgetting (agent_memory_forget), archiving
--    (agent_memory_archive_events: owner and service role only), imports in one
--    transaction (agent_memory_import), what a database holds (agent_memory_info), and
--    agent_memory_stats with tombstones and archived events.

-- ---------------------------------------------------------------- event keys

alter table agent_memory_telemetry add column if not exists key text;
create unique index if not exists agent_memory_telemetry_key_idx
  on agent_memory_telemetry (key) where key is not null;
create index if not exists agent_memory_telemetry_repo_changes_idx
  on agent_memory_telemetry (repo, at, id) where kind not in ('retrieved', 'checked');
create index if not exists agent_memory_telemetry_memory_changes_idx
  on agent_memory_telemetry (memory_id, at, id) where kind not in ('retrieved', 'checked');

alter table agent_memory_telemetry
  drop constraint if exists agent_memory_telemetry_kind_check;
alter table agent_memory_telemetry
  add constraint agent_memory_telemetry_kind_check
  check (kind in ('created', 'retrieved', 'verified_valid', 'verified_invalid',
                  'unverifiable', 'relocated', 'refreshed', 'invalidated', 'revived',
                  'checked', 'recited', 'superseded', 'applied', 'feedback', 'approved',
                  'rejected', 'validated', 'promoted', 'expired', 'forgotten'));

-- A key for an event written without one: the time in nanoseconds and 64 random bits,
-- in hex, like verified_memory.models.new_event_key.
create or replace function agent_memory_new_key()
returns text
language sql
volatile
security invoker
as $$
  select lpad(to_hex((extract(epoch from clock_timestamp()) * 1000000000)::bigint), 16, '0')
         || substr(md5(random()::text || clock_timestamp()::text), 1, 16)
$$;

-- As in 002, with the key.
create or replace function agent_memory_insert_events(p_events jsonb)
returns void
language plpgsql
security invoker
set search_path from current
as $$
begin
  if p_events is null or jsonb_typeof(p_events) = 'null' then
    return;
  end if;
  if jsonb_typeof(p_events) <> 'array' then
    raise exception 'events must be a JSON array' using errcode = '22023';
  end if;
  insert into agent_memory_telemetry (kind, repo, memory_id, actor, at, detail, key)
  select
    e.value ->> 'kind',
    e.value ->> 'repo',
    e.value ->> 'memory_id',
    e.value ->> 'actor',
    coalesce((e.value ->> 'at')::timestamptz, now()),
    coalesce(nullif(e.value -> 'detail', 'null'::jsonb), '{}'::jsonb),
    coalesce(e.value ->> 'key', agent_memory_new_key())
  from jsonb_array_elements(p_events) with ordinality as e(value, ord)
  order by e.ord;
end;
$$;

-- ---------------------------------------------------------------- tombstones

create table if not exists agent_memory_tombstone (
  id text primary key,
  repo text not null,
  status text not null,
  forgotten_by text,
  forgotten_at timestamptz not null default now(),
  reason text not null
);

comment on table agent_memory_tombstone is
  'verified-memory: what is left of a forgotten memory (its text and citations are deleted)';

create index if not exists agent_memory_tombstone_repo_idx
  on agent_memory_tombstone (repo, forgotten_at desc);
-- Short ids: a prefix search on either table's ids, whatever the database's collation.
create index if not exists agent_memory_id_pattern_idx
  on agent_memory (id text_pattern_ops);
create index if not exists agent_memory_tombstone_id_pattern_idx
  on agent_memory_tombstone (id text_pattern_ops);

-- Every deleted memory leaves a tombstone and a `forgotten` event: through
-- agent_memory_forget, which says who and why (transaction-local settings), or any other
-- delete (then the role, and "deleted directly in the database").
create or replace function agent_memory_tombstone_on_delete()
returns trigger
language plpgsql
security invoker
set search_path from current
as $$
declare
  v_by text := coalesce(nullif(current_setting('vmem.forget_by', true), ''), current_user);
  v_reason text := coalesce(nullif(current_setting('vmem.forget_reason', true), ''),
                            'deleted directly in the database');
  v_at timestamptz := coalesce(nullif(current_setting('vmem.forget_at', true), '')::timestamptz,
                               now());
begin
  insert into agent_memory_tombstone (id, repo, status, forgotten_by, forgotten_at, reason)
  values (old.id, old.repo, old.status, v_by, v_at, v_reason)
  on conflict (id) do nothing;
  insert into agent_memory_telemetry (kind, repo, memory_id, actor, at, detail, key)
  values ('forgotten', old.repo, old.id, v_by, v_at,
          jsonb_build_object('reason', v_reason, 'status', old.status), agent_memory_new_key());
  return old;
end;
$$;

drop trigger if exists agent_memory_tombstone_on_delete on agent_memory;
create trigger agent_memory_tombstone_on_delete
  after delete on agent_memory
  for each row execute function agent_memory_tombstone_on_delete();

-- Forget memories: p_ids (each in p_repo when given), or every memory of p_repo. A
-- memory the caller cannot see (another tenant's) is not found: VM404, nothing deleted.
create or replace function agent_memory_forget(
  p_ids text[], p_repo text, p_by text, p_reason text, p_at timestamptz default null
)
returns setof agent_memory_tombstone
language plpgsql
security invoker
set search_path from current
as $$
declare
  v_ids text[];
  v_missing text;
begin
  if p_reason is null or btrim(p_reason) = '' then
    raise exception 'forgetting a memory needs a reason' using errcode = '22023';
  end if;
  if p_ids is null then
    if p_repo is null then
      raise exception 'forget needs memory ids or a repository' using errcode = '22023';
    end if;
    select coalesce(array_agg(id order by id), '{}') into v_ids
    from (select id from agent_memory where repo = p_repo order by id for update) as m;
  else
    perform 1 from agent_memory where id = any(p_ids) order by id for update;
    select x into v_missing from unnest(p_ids) as x
    where not exists (select from agent_memory m
                      where m.id = x and (p_repo is null or m.repo = p_repo))
    limit 1;
    if v_missing is not null then
      raise exception 'memory % not found%', v_missing,
        case when p_repo is null then '' else ' in ' || p_repo end using errcode = 'VM404';
    end if;
    v_ids := p_ids;
  end if;
  perform set_config('vmem.forget_by', coalesce(p_by, ''), true);
  perform set_config('vmem.forget_reason', btrim(p_reason), true);
  perform set_config('vmem.forget_at', coalesce(p_at, now())::text, true);
  delete from agent_memory where id = any(v_ids);
  perform set_config('vmem.forget_by', '', true);
  perform set_config('vmem.forget_reason', '', true);
  perform set_config('vmem.forget_at', '', true);
  return query select * from agent_memory_tombstone where id = any(v_ids) order by id;
end;
$$;

-- ---------------------------------------------------------------- the archive

create table if not exists agent_memory_telemetry_archive (
  id bigint primary key,
  kind text not null,
  repo text not null,
  memory_id text,
  actor text,
  at timestamptz not null,
  detail jsonb not null default '{}'::jsonb,
  key text,
  archived_at timestamptz not null default now()
);

comment on table agent_memory_telemetry_archive is
  'verified-memory: telemetry moved out of the live table by compaction (still counted)';

create index if not exists agent_memory_telemetry_archive_repo_at_idx
  on agent_memory_telemetry_archive (repo, at, id);
create index if not exists agent_memory_telemetry_archive_memory_idx
  on agent_memory_telemetry_archive (memory_id, id) where memory_id is not null;
create unique index if not exists agent_memory_telemetry_archive_key_idx
  on agent_memory_telemetry_archive (key) where key is not null;

-- Append-only, as in 002, except that an event may leave the live table once its copy is
-- in the archive; the archive itself is append-only.
create or replace function agent_memory_telemetry_append_only()
returns trigger
language plpgsql
security invoker
as $$
begin
  if tg_op = 'DELETE' and tg_table_name = 'agent_memory_telemetry' and exists (
       select from agent_memory_telemetry_archive a
       where a.id = old.id and a.key is not distinct from old.key) then
    return old;
  end if;
  raise exception '% is append-only', tg_table_name using errcode = '55000';
end;
$$;

drop trigger if exists agent_memory_telemetry_archive_append_only
  on agent_memory_telemetry_archive;
create trigger agent_memory_telemetry_archive_append_only
  before update or delete on agent_memory_telemetry_archive
  for each row execute function agent_memory_telemetry_append_only();

-- Move every event older than p_before into the archive; how many moved.
create or replace function agent_memory_archive_events(p_before timestamptz)
returns bigint
language plpgsql
security invoker
set search_path from current
as $$
declare
  v_moved bigint;
begin
  insert into agent_memory_telemetry_archive
    (id, kind, repo, memory_id, actor, at, detail, key, archived_at)
  select id, kind, repo, memory_id, actor, at, detail, key, now()
  from agent_memory_telemetry where at < p_before;
  delete from agent_memory_telemetry where at < p_before;
  get diagnostics v_moved = row_count;
  return v_moved;
end;
$$;

-- ---------------------------------------------------------------- reads

-- Memories of p_repo by any filter, every status unless one is named, most recently
-- refreshed first. Each status is its own range of (repo, status, refreshed_at), cut at
-- p_limit before they are merged: a listing costs p_limit rows per status.
create or replace function agent_memory_find(
  p_repo text, p_status text default null, p_category text default null,
  p_tag text default null, p_path text default null, p_created_by text default null,
  p_since timestamptz default null, p_limit integer default 50
)
returns setof agent_memory_full
language plpgsql
stable
security invoker
set search_path from current
as $$
begin
  return query
    select f.*
    from (
      select hit.id, hit.refreshed_at
      from unnest(case when p_status is null
                       then array['active', 'pending', 'invalid', 'superseded', 'expired']
                       else array[p_status] end) as s(status)
      cross join lateral (
        select m.id, m.refreshed_at from agent_memory m
        where m.repo = p_repo and m.status = s.status
          and (p_category is null or m.category = p_category)
          and (p_tag is null or p_tag = any(m.tags))
          and (p_created_by is null or m.created_by = p_created_by)
          and (p_since is null or m.created_at >= p_since)
          and (p_path is null or m.id in (
                select c.memory_id from agent_memory_citation c
                where c.repo = p_repo and c.path = p_path))
        order by m.refreshed_at desc, m.id
        limit p_limit
      ) as hit
      order by hit.refreshed_at desc, hit.id
      limit p_limit
    ) as page
    join agent_memory_full f on f.id = page.id
    order by page.refreshed_at desc, page.id;
end;
$$;

-- Ids of memories and tombstones starting with p_prefix (taken literally: % and _ are
-- not wildcards), sorted.
create or replace function agent_memory_match_ids(p_prefix text, p_limit integer default 10)
returns table (id text)
language plpgsql
stable
security invoker
set search_path from current
as $$
declare
  v_like text := replace(replace(replace(coalesce(p_prefix, ''), '\', '\\'), '%', '\%'),
                         '_', '\_') || '%';
begin
  return query
    select found.id from (
      select m.id from agent_memory m where m.id like v_like
      union
      select t.id from agent_memory_tombstone t where t.id like v_like
    ) as found
    order by found.id
    limit p_limit;
end;
$$;

-- ---------------------------------------------------------------- imports

-- An import in one transaction: the memories whose id is neither a memory nor a
-- tombstone yet, then the events whose key neither telemetry table holds, in order, then
-- the tombstones whose id is neither. Returns {"memories", "events", "tombstones"}: how
-- many of each were written.
create or replace function agent_memory_import(
  p_memories jsonb, p_events jsonb, p_tombstones jsonb default '[]'
)
returns jsonb
language plpgsql
security invoker
set search_path from current
as $$
declare
  v_memory jsonb;
  v_memories integer := 0;
  v_fresh jsonb;
  v_tombstones integer := 0;
begin
  if jsonb_typeof(p_memories) is distinct from 'array'
     or jsonb_typeof(p_events) is distinct from 'array'
     or jsonb_typeof(p_tombstones) is distinct from 'array' then
    raise exception 'memories, events and tombstones must be JSON arrays'
      using errcode = '22023';
  end if;
  for v_memory in select value from jsonb_array_elements(p_memories) with ordinality
                  as x(value, ord) order by ord
  loop
    continue when exists (select from agent_memory where id = v_memory ->> 'id')
               or exists (select from agent_memory_tombstone where id = v_memory ->> 'id');
    perform agent_memory_insert(v_memory);
    v_memories := v_memories + 1;
  end loop;
  v_fresh := coalesce((
    select jsonb_agg(e.value order by e.ord)
    from jsonb_array_elements(p_events) with ordinality as e(value, ord)
    where not exists (select from agent_memory_telemetry t where t.key = e.value ->> 'key')
      and not exists (select from agent_memory_telemetry_archive a
                      where a.key = e.value ->> 'key')
  ), '[]'::jsonb);
  perform agent_memory_insert_events(v_fresh);
  insert into agent_memory_tombstone (id, repo, status, forgotten_by, forgotten_at, reason)
  select t.value ->> 'id', t.value ->> 'repo', t.value ->> 'status',
         t.value ->> 'forgotten_by', (t.value ->> 'forgotten_at')::timestamptz,
         t.value ->> 'reason'
  from jsonb_array_elements(p_tombstones) as t(value)
  where not exists (select from agent_memory m where m.id = t.value ->> 'id')
    and not exists (select from agent_memory_tombstone s where s.id = t.value ->> 'id');
  get diagnostics v_tombstones = row_count;
  return jsonb_build_object('memories', v_memories, 'events', jsonb_array_length(v_fresh),
                            'tombstones', v_tombstones);
end;
$$;

-- ---------------------------------------------------------------- what a database holds

-- Counts of what the caller may see, the tables' size, and the schema version when the
-- caller may read the migrations table.
create or replace function agent_memory_info()
returns jsonb
language plpgsql
stable
security invoker
set search_path from current
as $$
declare
  v_version text;
begin
  if to_regclass('agent_memory_migrations') is not null
     and has_table_privilege('agent_memory_migrations', 'select') then
    execute 'select max(version) from agent_memory_migrations' into v_version;
  end if;
  return jsonb_build_object(
    'schema_version', v_version,
    'memories', (select count(*) from agent_memory),
    'forgotten', (select count(*) from agent_memory_tombstone),
    'events', (select count(*) from agent_memory_telemetry),
    'archived_events', (select count(*) from agent_memory_telemetry_archive),
    'repos', (select count(distinct repo) from agent_memory),
    'size_bytes', (
      select sum(pg_total_relation_size(t::regclass))
      from unnest(array['agent_memory', 'agent_memory_citation', 'agent_memory_telemetry',
                        'agent_memory_telemetry_archive', 'agent_memory_tombstone']) as t
    )
  );
end;
$$;

-- As in 007, with tombstones ("forgotten") and archived events counted.
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
        from unnest(array['active', 'pending', 'invalid', 'superseded', 'expired'])
             with ordinality as s(status, ord)
        left join (
          select status, count(*) as count from agent_memory where repo = p_repo
          group by status
        ) as n on n.status = s.status
      ),
      'events', coalesce((
        select jsonb_object_agg(kind, count order by kind)
        from (
          select kind, count(*) as count from (
            select kind from agent_memory_telemetry where repo = p_repo
            union all
            select kind from agent_memory_telemetry_archive where repo = p_repo
          ) as every_event
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
      ),
      'validated', (
        select count(*) from agent_memory
        where repo = p_repo and status = 'active' and applied_count >= 3
          and success_count + failure_count > 0
          and success_count >= 0.9 * (success_count + failure_count)
      ),
      'poor', (
        select count(*) from agent_memory
        where repo = p_repo and status = 'active' and success_count + failure_count >= 4
          and success_count < 0.5 * (success_count + failure_count)
      ),
      'forgotten', (select count(*) from agent_memory_tombstone where repo = p_repo)
    )
  );
end;
$$;

-- Dashboards: a forgotten memory counts as status 'forgotten' (it is in no other).
create or replace view agent_memory_status_counts with (security_invoker = true) as
select repo, status, count(*) as memories
from agent_memory
group by repo, status
union all
select repo, 'forgotten', count(*)
from agent_memory_tombstone
group by repo;

-- ---------------------------------------------------------------- security

alter table agent_memory_tombstone enable row level security;
alter table agent_memory_telemetry_archive enable row level security;

-- A tenant forgets (deletes) only in its own repositories; the tombstone and event the
-- trigger writes are checked by the insert policies below and of 003.
drop policy if exists agent_memory_tenant_delete on agent_memory;
create policy agent_memory_tenant_delete on agent_memory
  for delete to authenticated
  using (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())));

drop policy if exists agent_memory_tombstone_tenant_select on agent_memory_tombstone;
create policy agent_memory_tombstone_tenant_select on agent_memory_tombstone
  for select to authenticated
  using (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())));
drop policy if exists agent_memory_tombstone_tenant_insert on agent_memory_tombstone;
create policy agent_memory_tombstone_tenant_insert on agent_memory_tombstone
  for insert to authenticated
  with check (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())));
drop policy if exists agent_memory_tombstone_service on agent_memory_tombstone;
create policy agent_memory_tombstone_service on agent_memory_tombstone
  for all to service_role using (true) with check (true);

drop policy if exists agent_memory_telemetry_archive_tenant_select
  on agent_memory_telemetry_archive;
create policy agent_memory_telemetry_archive_tenant_select on agent_memory_telemetry_archive
  for select to authenticated
  using (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())));
drop policy if exists agent_memory_telemetry_archive_service on agent_memory_telemetry_archive;
create policy agent_memory_telemetry_archive_service on agent_memory_telemetry_archive
  for all to service_role using (true) with check (true);

revoke all on agent_memory_tombstone, agent_memory_telemetry_archive
  from public, anon, authenticated;
grant delete on agent_memory to authenticated;
grant select, insert on agent_memory_tombstone to authenticated;
grant select on agent_memory_telemetry_archive to authenticated;
grant all on agent_memory_tombstone, agent_memory_telemetry_archive to service_role;

revoke all on function
  agent_memory_new_key(),
  agent_memory_tombstone_on_delete(),
  agent_memory_forget(text[], text, text, text, timestamptz),
  agent_memory_archive_events(timestamptz),
  agent_memory_find(text, text, text, text, text, text, timestamptz, integer),
  agent_memory_match_ids(text, integer),
  agent_memory_import(jsonb, jsonb, jsonb),
  agent_memory_info()
  from public, anon;
grant execute on function
  agent_memory_new_key(),
  agent_memory_tombstone_on_delete(),
  agent_memory_forget(text[], text, text, text, timestamptz),
  agent_memory_find(text, text, text, text, text, text, timestamptz, integer),
  agent_memory_match_ids(text, integer),
  agent_memory_import(jsonb, jsonb, jsonb),
  agent_memory_info()
  to authenticated, service_role;
-- Archiving moves every tenant's telemetry: the owner's and the service role's business.
revoke all on function agent_memory_archive_events(timestamptz) from authenticated;
grant execute on function agent_memory_archive_events(timestamptz) to service_role;
