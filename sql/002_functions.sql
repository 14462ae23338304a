-- 002_functions: the mutations that must be atomic, and the reads REST clients need.
--
-- Every function is SECURITY INVOKER (the default, stated explicitly): it runs with the
-- caller's rights, so row-level security (003_rls.sql) applies inside it exactly as it
-- does to a direct query. A tenant calling agent_memory_supersede on another tenant's
-- memory simply does not see it: 'not found'.
--
-- Memories travel as JSON in the shape of verified_memory's Memory.to_dict():
--   {"id", "repo", "subject", "fact", "citations": [Citation.to_dict()...], "status",
--    "reason", "category", "tags": [...], "supersedes", "superseded_by", "created_by",
--    "created_at", "refreshed_at", "verification_count", "applied_count",
--    "verified_commit", "invalid_reason"}
-- plus, when written, "search_terms": {"subject": [...], "tags": [...], "fact": [...]}.
-- Events are TelemetryEvent.to_dict(): {"kind", "repo", "memory_id", "actor", "at",
-- "detail"}.
--
-- Errors carry SQLSTATEs the Python stores translate:
--   VM404 -> NotFound        (the memory does not exist, or is not yours)
--   VM409 -> Conflict        (the memory to supersede is no longer active)
--   22023 -> ValidationError (a malformed argument)
--   23505 -> Conflict        (a memory with this id already exists)

-- ---------------------------------------------------------------- the read model

-- A memory with its citations, in Memory.to_dict() shape: what every read returns, over
-- SQL or REST. security_invoker: the caller's row-level security applies through it.
create or replace view agent_memory_full with (security_invoker = true) as
select
  m.id, m.repo, m.subject, m.fact, m.reason, m.category, m.tags, m.status,
  m.supersedes, m.superseded_by, m.created_by, m.created_at, m.refreshed_at,
  m.verification_count, m.applied_count, m.verified_commit, m.invalid_reason,
  coalesce((
    select jsonb_agg(jsonb_build_object(
             'path', c.path,
             'line_start', c.line_start,
             'line_end', c.line_end,
             'sha', c.sha,
             'blob_sha', c.blob_sha,
             'snippet_hash', c.snippet_hash,
             'line_hashes', to_jsonb(string_to_array(c.line_hashes, ' ')),
             'anchor', c.anchor
           ) order by c.position)
    from agent_memory_citation c
    where c.memory_id = m.id
  ), '[]'::jsonb) as citations
from agent_memory m;

-- Repositories that have memories (MemoryStore.repos()).
create or replace view agent_memory_repos with (security_invoker = true) as
select distinct repo from agent_memory;

-- ---------------------------------------------------------------- search helpers

-- The fallback tokenizer for memories written without "search_terms" (by hand, in SQL):
-- lower-cased runs of anything but spaces and punctuation.
create or replace function agent_memory_terms(p_text text)
returns text[]
language plpgsql
immutable
parallel safe
security invoker
as $$
begin
  return (
    select coalesce(array_agg(t), '{}'::text[])
    from regexp_split_to_table(lower(coalesce(p_text, '')), '[[:space:][:punct:]]+') as t
    where t <> ''
  );
end;
$$;

-- A tsvector from pre-computed terms, built as a literal so that no text-search parser
-- or dictionary touches (and re-splits) them. Positions make repeated words count and
-- weights make a subject hit outrank a tag hit, which outranks a fact hit.
create or replace function agent_memory_search_vector(
  p_subject text[], p_tags text[], p_fact text[]
)
returns tsvector
language plpgsql
immutable
parallel safe
security invoker
as $$
begin
  return (
    select coalesce(string_agg(
             '''' || replace(replace(term, '\', '\\'), '''', '''''') || ''':'
               || least(pos, 16383) || weight,
             ' '), '')::tsvector
    from (
      select term, weight, row_number() over (order by part, ord) as pos
      from (
        select term, 'A' as weight, 1 as part, ord
          from unnest(coalesce(p_subject, '{}'::text[])) with ordinality as s(term, ord)
        union all
        select term, 'B', 2, ord
          from unnest(coalesce(p_tags, '{}'::text[])) with ordinality as s(term, ord)
        union all
        select term, 'C', 3, ord
          from unnest(coalesce(p_fact, '{}'::text[])) with ordinality as s(term, ord)
      ) as terms
      where term <> ''
    ) as numbered
  );
end;
$$;

-- Every term must match; the last one as a prefix (the user may still be typing it).
-- NULL (matches nothing) when there are no terms.
create or replace function agent_memory_tsquery(p_terms text[])
returns tsquery
language plpgsql
immutable
parallel safe
security invoker
as $$
begin
  return (
    select nullif(string_agg(
             '''' || replace(replace(term, '\', '\\'), '''', '''''') || ''''
               || case when ord = last then ':*' else '' end,
             ' & ' order by ord), '')::tsquery
    from (
      select term, ord, max(ord) over () as last
      from unnest(coalesce(p_terms, '{}'::text[])) with ordinality as t(term, ord)
      where term <> ''
    ) as terms
  );
end;
$$;

-- ---------------------------------------------------------------- row writers

create or replace function agent_memory_insert_citations(
  p_memory_id text, p_repo text, p_citations jsonb
)
returns void
language plpgsql
security invoker
set search_path from current
as $$
begin
  if jsonb_typeof(p_citations) is distinct from 'array' or jsonb_array_length(p_citations) = 0
  then
    raise exception 'memory % needs at least one citation', p_memory_id
      using errcode = '22023';
  end if;
  insert into agent_memory_citation (
    memory_id, position, repo, path, line_start, line_end, sha, blob_sha, snippet_hash,
    line_hashes, anchor
  )
  select
    p_memory_id,
    (c.ord - 1)::integer,
    p_repo,
    c.value ->> 'path',
    (c.value ->> 'line_start')::integer,
    (c.value ->> 'line_end')::integer,
    c.value ->> 'sha',
    c.value ->> 'blob_sha',
    c.value ->> 'snippet_hash',
    coalesce((
      select string_agg(h.hash, ' ' order by h.ord)
      from jsonb_array_elements_text(
        case jsonb_typeof(c.value -> 'line_hashes') when 'array' then c.value -> 'line_hashes'
        else '[]'::jsonb end
      ) with ordinality as h(hash, ord)
    ), ''),
    case jsonb_typeof(c.value -> 'anchor') when 'object' then c.value -> 'anchor' end
  from jsonb_array_elements(p_citations) with ordinality as c(value, ord);
end;
$$;

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
  -- In order: identity values follow the order the events were given.
  insert into agent_memory_telemetry (kind, repo, memory_id, actor, at, detail)
  select
    e.value ->> 'kind',
    e.value ->> 'repo',
    e.value ->> 'memory_id',
    e.value ->> 'actor',
    coalesce((e.value ->> 'at')::timestamptz, now()),
    coalesce(nullif(e.value -> 'detail', 'null'::jsonb), '{}'::jsonb)
  from jsonb_array_elements(p_events) with ordinality as e(value, ord)
  order by e.ord;
end;
$$;

create or replace function agent_memory_insert(p_memory jsonb)
returns void
language plpgsql
security invoker
set search_path from current
as $$
declare
  v_terms jsonb := coalesce(p_memory -> 'search_terms', '{}'::jsonb);
  v_tags text[];
begin
  if jsonb_typeof(p_memory) is distinct from 'object' then
    raise exception 'a memory must be a JSON object' using errcode = '22023';
  end if;
  v_tags := coalesce(array(
    select jsonb_array_elements_text(
      case jsonb_typeof(p_memory -> 'tags') when 'array' then p_memory -> 'tags'
      else '[]'::jsonb end)
  ), '{}'::text[]);
  if exists (select from agent_memory where id = p_memory ->> 'id') then
    -- Name the id: a unique violation names only the constraint. (Rows hidden by
    -- row-level security still collide below, with the generic message.)
    raise exception 'memory % already exists', p_memory ->> 'id' using errcode = '23505';
  end if;
  insert into agent_memory (
    id, repo, subject, fact, reason, category, tags, status, supersedes, superseded_by,
    created_by, created_at, refreshed_at, verification_count, applied_count,
    verified_commit, invalid_reason, search
  ) values (
    p_memory ->> 'id',
    p_memory ->> 'repo',
    p_memory ->> 'subject',
    p_memory ->> 'fact',
    p_memory ->> 'reason',
    p_memory ->> 'category',
    v_tags,
    coalesce(p_memory ->> 'status', 'active'),
    p_memory ->> 'supersedes',
    p_memory ->> 'superseded_by',
    p_memory ->> 'created_by',
    coalesce((p_memory ->> 'created_at')::timestamptz, now()),
    coalesce((p_memory ->> 'refreshed_at')::timestamptz,
             (p_memory ->> 'created_at')::timestamptz, now()),
    coalesce((p_memory ->> 'verification_count')::integer, 0),
    coalesce((p_memory ->> 'applied_count')::integer, 0),
    p_memory ->> 'verified_commit',
    p_memory ->> 'invalid_reason',
    -- Terms from the client (the same tokenizer as every other store), else SQL's own.
    agent_memory_search_vector(
      case jsonb_typeof(v_terms -> 'subject') when 'array'
        then array(select jsonb_array_elements_text(v_terms -> 'subject'))
        else agent_memory_terms(p_memory ->> 'subject') end,
      case jsonb_typeof(v_terms -> 'tags') when 'array'
        then array(select jsonb_array_elements_text(v_terms -> 'tags'))
        else agent_memory_terms(array_to_string(v_tags, ' ')) end,
      case jsonb_typeof(v_terms -> 'fact') when 'array'
        then array(select jsonb_array_elements_text(v_terms -> 'fact'))
        else agent_memory_terms(p_memory ->> 'fact') end
    )
  );
  perform agent_memory_insert_citations(
    p_memory ->> 'id', p_memory ->> 'repo', p_memory -> 'citations'
  );
end;
$$;

-- ---------------------------------------------------------------- reading back

-- One memory with its citations, in Memory.to_dict() shape; NULL if not visible.
create or replace function agent_memory_json(p_id text)
returns jsonb
language plpgsql
stable
security invoker
set search_path from current
as $$
begin
  return (
    select to_jsonb(f) from agent_memory_full f where f.id = p_id
  );
end;
$$;

-- ---------------------------------------------------------------- mutations (RPC)

-- Insert a memory with its citations and events, all or nothing.
create or replace function agent_memory_add(p_memory jsonb, p_events jsonb default '[]')
returns void
language plpgsql
security invoker
set search_path from current
as $$
begin
  perform agent_memory_insert(p_memory);
  perform agent_memory_insert_events(p_events);
end;
$$;

-- Insert p_new and retire p_old_id, only while p_old_id is still active: of two agents
-- superseding the same memory at once, the second waits for the first's row lock, then
-- sees 'superseded' and gets VM409.
create or replace function agent_memory_supersede(
  p_old_id text, p_new jsonb, p_events jsonb default '[]'
)
returns void
language plpgsql
security invoker
set search_path from current
as $$
declare
  v_status text;
  v_new_id text := p_new ->> 'id';
begin
  select status into v_status from agent_memory where id = p_old_id for update;
  if not found then
    raise exception 'memory % not found', p_old_id using errcode = 'VM404';
  end if;
  if v_status <> 'active' then
    raise exception 'memory % is %, not active: it cannot be superseded', p_old_id, v_status
      using errcode = 'VM409';
  end if;
  if p_new ->> 'supersedes' is not null and p_new ->> 'supersedes' <> p_old_id then
    raise exception 'memory % says it supersedes %, not %',
      v_new_id, p_new ->> 'supersedes', p_old_id using errcode = '22023';
  end if;
  perform agent_memory_insert(jsonb_set(p_new, '{supersedes}', to_jsonb(p_old_id)));
  update agent_memory set status = 'superseded', superseded_by = v_new_id
  where id = p_old_id;
  perform agent_memory_insert_events(p_events);
end;
$$;

-- Apply a batch of transitions (a verification pass) in one transaction. Each is
-- {"memory_id", "expect", "status", "invalid_reason", "refreshed_at", "verified_commit",
--  "citations" (null: unchanged), "add_verifications", "add_applications", "events"}.
-- NULL fields leave the column as it is. A transition whose memory is no longer in the
-- expected status is skipped with its events: its result is JSON null. An unknown
-- memory aborts the whole batch (VM404). Returns one element per transition: the
-- memory after the change, or null.
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
  v_results jsonb[] := '{}';
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
      v_results := array_append(v_results, null::jsonb);
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
    v_results := array_append(v_results, agent_memory_json(v_id));
  end loop;
  return coalesce(to_jsonb(v_results), '[]'::jsonb);
end;
$$;

-- Append telemetry events; returns how many were written.
create or replace function agent_memory_log(p_events jsonb)
returns integer
language plpgsql
security invoker
set search_path from current
as $$
begin
  perform agent_memory_insert_events(p_events);
  return coalesce(jsonb_array_length(p_events), 0);
end;
$$;

-- ---------------------------------------------------------------- reads (RPC)

-- Active memories of p_repo matching every term (the last as a prefix), best first.
-- Terms are words as verified_memory's text_terms() splits them.
create or replace function agent_memory_search(
  p_repo text, p_terms text[], p_limit integer default 20
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
      select m.id, m.refreshed_at,
             ts_rank('{0.1, 0.25, 0.5, 1.0}', m.search, q.query, 1) as rank
      from agent_memory m, agent_memory_tsquery(p_terms) as q(query)
      where m.repo = p_repo and m.status = 'active' and m.search @@ q.query
      order by rank desc, m.refreshed_at desc, m.id
      limit p_limit
    ) as hit
    join agent_memory_full f on f.id = hit.id
    order by hit.rank desc, hit.refreshed_at desc, hit.id;
end;
$$;

-- Active memories of p_repo citing p_path (overlapping the lines when given), newest first.
create or replace function agent_memory_by_path(
  p_repo text, p_path text, p_line_start integer default null,
  p_line_end integer default null, p_limit integer default 50
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
    from agent_memory_full f
    where f.repo = p_repo and f.status = 'active'
      and f.id in (
        select c.memory_id from agent_memory_citation c
        where c.repo = p_repo and c.path = p_path
          and (p_line_end is null or c.line_start <= p_line_end)
          and (p_line_start is null or c.line_end >= p_line_start)
      )
    order by f.refreshed_at desc, f.id
    limit p_limit;
end;
$$;

-- Counts for one repository: memories by status (every status, zero included),
-- events by kind, and citations of active memories.
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
        from unnest(array['active', 'pending', 'invalid', 'superseded'])
             with ordinality as s(status, ord)
        left join (
          select status, count(*) as count from agent_memory where repo = p_repo
          group by status
        ) as n on n.status = s.status
      ),
      'events', coalesce((
        select jsonb_object_agg(kind, count order by kind)
        from (
          select kind, count(*) as count from agent_memory_telemetry where repo = p_repo
          group by kind
        ) as k
      ), '{}'::jsonb),
      'citations', (
        select count(*) from agent_memory_citation c
        join agent_memory m on m.id = c.memory_id
        where m.repo = p_repo and m.status = 'active'
      )
    )
  );
end;
$$;

-- ---------------------------------------------------------------- append-only telemetry

-- As in the SQLite store: events are never edited or deleted one by one. (Retention is
-- a TRUNCATE or a partition drop by the owner, which row triggers do not see.)
create or replace function agent_memory_telemetry_append_only()
returns trigger
language plpgsql
security invoker
as $$
begin
  raise exception 'agent_memory_telemetry is append-only' using errcode = '55000';
end;
$$;

create or replace trigger agent_memory_telemetry_append_only
  before update or delete on agent_memory_telemetry
  for each row execute function agent_memory_telemetry_append_only();
