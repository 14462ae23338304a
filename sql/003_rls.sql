-- 003_rls: row-level security for many tenants sharing one database, Supabase style.
--
--   anon           nothing: no grants, no policies.
--   authenticated  only the repositories listed in its JWT's app_metadata.repos, e.g.
--                  {"app_metadata": {"repos": ["acme/api", "acme/web", "tools/*"]}}
--                  ("owner/*" grants every repository of that owner). app_metadata is
--                  writable only with the service key, never by the user themself
--                  (unlike user_metadata), so a user cannot grant themself a repository.
--   service_role   everything (it also has BYPASSRLS on Supabase).
--   table owner    everything (owners bypass RLS): `vmem` connecting with a
--                  postgresql:// URL as the owner is the trusted, single-tenant case.
--
-- On Supabase the roles and auth.jwt() exist already; on a plain Postgres they are
-- created here, only when absent, shaped like Supabase's, so the same policies work and
-- can be tested by `set role authenticated` + `set request.jwt.claims` as PostgREST does.
-- Views are security_invoker and functions SECURITY INVOKER, so these policies apply
-- through every path: table, view or function.

do $$
begin
  if not exists (select from pg_roles where rolname = 'anon') then
    create role anon nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'authenticated') then
    create role authenticated nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'service_role') then
    begin
      create role service_role nologin noinherit bypassrls;
    exception when insufficient_privilege then
      -- Only superusers grant BYPASSRLS; the service_role policies below suffice.
      create role service_role nologin noinherit;
    end;
  end if;
exception when insufficient_privilege then
  raise exception 'verified-memory needs the roles anon, authenticated and service_role'
    using errcode = '42501',
          hint = 'create them, or migrate as a role with CREATEROLE';
end;
$$;

-- auth.jwt(): the request's JWT claims as PostgREST sets them. Supabase ships it; we
-- create it only where it is missing.
do $$
begin
  if not exists (select from pg_namespace where nspname = 'auth') then
    create schema auth;
  end if;
  if to_regprocedure('auth.jwt()') is null then
    create function auth.jwt()
    returns jsonb
    language sql
    stable
    as $f$
      select coalesce(
        nullif(current_setting('request.jwt.claim', true), ''),
        nullif(current_setting('request.jwt.claims', true), '')
      )::jsonb
    $f$;
    grant usage on schema auth to anon, authenticated, service_role;
    grant execute on function auth.jwt() to anon, authenticated, service_role;
  end if;
end;
$$;

-- The repositories the current request may see: app_metadata.repos, or nothing.
create or replace function agent_memory_claimed_repos()
returns text[]
language plpgsql
stable
security invoker
as $$
begin
  return (
    select coalesce(array(
      select jsonb_array_elements_text(claims -> 'app_metadata' -> 'repos')
      from (select auth.jwt() as claims) as j
      where jsonb_typeof(claims -> 'app_metadata' -> 'repos') = 'array'
    ), '{}'::text[])
  );
end;
$$;

-- Whether p_repo is among p_claimed ("owner/name", or "owner/*" for a whole owner).
create or replace function agent_memory_repo_allowed(p_repo text, p_claimed text[])
returns boolean
language sql
immutable
parallel safe
security invoker
as $$
  select p_repo = any (p_claimed) or split_part(p_repo, '/', 1) || '/*' = any (p_claimed)
$$;

alter table agent_memory enable row level security;
alter table agent_memory_citation enable row level security;
alter table agent_memory_telemetry enable row level security;

-- (select ...) makes the claims an init-plan: read once per statement, not per row.
drop policy if exists agent_memory_tenant_select on agent_memory;
create policy agent_memory_tenant_select on agent_memory
  for select to authenticated
  using (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())));
drop policy if exists agent_memory_tenant_insert on agent_memory;
create policy agent_memory_tenant_insert on agent_memory
  for insert to authenticated
  with check (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())));
drop policy if exists agent_memory_tenant_update on agent_memory;
create policy agent_memory_tenant_update on agent_memory
  for update to authenticated
  using (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())))
  with check (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())));
drop policy if exists agent_memory_service on agent_memory;
create policy agent_memory_service on agent_memory
  for all to service_role using (true) with check (true);

-- A citation's repo always equals its memory's (composite foreign key), so checking
-- it is checking the memory's.
drop policy if exists agent_memory_citation_tenant on agent_memory_citation;
create policy agent_memory_citation_tenant on agent_memory_citation
  for all to authenticated
  using (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())))
  with check (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())));
drop policy if exists agent_memory_citation_service on agent_memory_citation;
create policy agent_memory_citation_service on agent_memory_citation
  for all to service_role using (true) with check (true);

-- Telemetry is append-only: read and insert, nothing else.
drop policy if exists agent_memory_telemetry_tenant_select on agent_memory_telemetry;
create policy agent_memory_telemetry_tenant_select on agent_memory_telemetry
  for select to authenticated
  using (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())));
drop policy if exists agent_memory_telemetry_tenant_insert on agent_memory_telemetry;
create policy agent_memory_telemetry_tenant_insert on agent_memory_telemetry
  for insert to authenticated
  with check (agent_memory_repo_allowed(repo, (select agent_memory_claimed_repos())));
drop policy if exists agent_memory_telemetry_service on agent_memory_telemetry;
create policy agent_memory_telemetry_service on agent_memory_telemetry
  for all to service_role using (true) with check (true);

-- Privileges. Supabase's default privileges grant everything in public to anon,
-- authenticated and service_role: take back what anon and authenticated must not have.
revoke all on agent_memory, agent_memory_citation, agent_memory_telemetry,
  agent_memory_full, agent_memory_repos from public, anon, authenticated;
grant select, insert, update on agent_memory to authenticated;
grant select, insert, update, delete on agent_memory_citation to authenticated;
grant select, insert on agent_memory_telemetry to authenticated;
grant select on agent_memory_full, agent_memory_repos to authenticated;
grant all on agent_memory, agent_memory_citation, agent_memory_telemetry to service_role;
grant select on agent_memory_full, agent_memory_repos to service_role;

revoke all on function
  agent_memory_terms(text),
  agent_memory_search_vector(text[], text[], text[]),
  agent_memory_tsquery(text[]),
  agent_memory_insert_citations(text, text, jsonb),
  agent_memory_insert_events(jsonb),
  agent_memory_insert(jsonb),
  agent_memory_json(text),
  agent_memory_add(jsonb, jsonb),
  agent_memory_supersede(text, jsonb, jsonb),
  agent_memory_apply(jsonb),
  agent_memory_log(jsonb),
  agent_memory_search(text, text[], integer),
  agent_memory_by_path(text, text, integer, integer, integer),
  agent_memory_stats(text),
  agent_memory_claimed_repos(),
  agent_memory_repo_allowed(text, text[])
  from public, anon;
grant execute on function
  agent_memory_terms(text),
  agent_memory_search_vector(text[], text[], text[]),
  agent_memory_tsquery(text[]),
  agent_memory_insert_citations(text, text, jsonb),
  agent_memory_insert_events(jsonb),
  agent_memory_insert(jsonb),
  agent_memory_json(text),
  agent_memory_add(jsonb, jsonb),
  agent_memory_supersede(text, jsonb, jsonb),
  agent_memory_apply(jsonb),
  agent_memory_log(jsonb),
  agent_memory_search(text, text[], integer),
  agent_memory_by_path(text, text, integer, integer, integer),
  agent_memory_stats(text),
  agent_memory_claimed_repos(),
  agent_memory_repo_allowed(text, text[])
  to authenticated, service_role;

-- The migrations table (created by `vmem db migrate`) is nobody's business over REST.
do $$
begin
  if to_regclass('agent_memory_migrations') is not null then
    alter table agent_memory_migrations enable row level security;
    revoke all on agent_memory_migrations from public, anon, authenticated;
  end if;
end;
$$;
