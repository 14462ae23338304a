-- 014_refreshed_not_later: a refresh time later than now is stored as now, as a creation
-- time is (013).
--
-- recent() lists a repository's memories newest refreshed first. A refresh time in the
-- future (a clock ahead, an import, a hand edit) kept its memory first in `vmem recent`
-- for as long as the clock stayed behind it: a day for a memory refreshed "tomorrow".
-- No memory is refreshed after the database took the refresh in, so a later time is
-- stored as the database's now(), on insert and on update, by the trigger that already
-- did so for the creation time (renamed for both). Times already in the future are
-- brought back below. Every other store applies the same rule with its own clock
-- (store/_rows.py: time_not_later; SQLite migration 13 for hand edits).

create or replace function agent_memory_times_not_later()
returns trigger language plpgsql security invoker set search_path from current as $$
begin
  -- now() is when the transaction began: never later than the write itself.
  new.created_at := least(new.created_at, now());
  new.refreshed_at := least(new.refreshed_at, now());
  return new;
end;
$$;

drop trigger if exists agent_memory_created_at_not_later on agent_memory;
drop function if exists agent_memory_created_at_not_later();

create or replace trigger agent_memory_times_not_later
  before insert or update of created_at, refreshed_at on agent_memory
  for each row execute function agent_memory_times_not_later();

update agent_memory set refreshed_at = now() where refreshed_at > now();
