-- 016_dashboard_days_indexed: the dashboard reads its window's events, not every event.
--
-- `vmem dashboard` asks agent_memory_events_daily and agent_memory_breaks_daily (010) for
-- the days of its window. Their day is (at at time zone 'UTC')::date, and a condition on
-- it is a condition on that expression, which no index of `at` serves: every read scanned
-- every event (at 300,000 events over two years, a week's dashboard took 86 ms, a month's
-- 87 ms, growing with the table). An index of the expression itself gives the read the
-- events of its days only (13 and 28 ms; the same rows). The broken files' index of 010
-- (verified_invalid events by time) becomes the same, by day: a window's read takes its
-- days' verdicts, where it took every verdict ever written. A long window still reads the
-- events it counts: the planner then scans the table in parallel, as before (it knows how
-- many events a window holds from the statistics 010 keeps on the day). Building the two
-- indexes holds writes of events back for a moment: 0.2 s at 300,000 events.

create index if not exists agent_memory_telemetry_day_idx
  on agent_memory_telemetry (((at at time zone 'UTC')::date));
create index if not exists agent_memory_telemetry_broken_day_idx
  on agent_memory_telemetry (((at at time zone 'UTC')::date))
  where kind = 'verified_invalid';
drop index if exists agent_memory_telemetry_broken_idx;

