-- The failovers the fleet lived through (store/failovers.ts): one row per move of the run ids,
-- written by the first runner to reach a promoted server, before it contends for any fire there.
-- The move puts baton_runs' AUTO_INCREMENT past every id the old primary can have handed out in
-- the replication lag, so that a run id names one run only, also across a failover; a runner that
-- arrives after it finds the row and does not move them again.
CREATE TABLE baton_failovers (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  -- The promoted server (`ServerFacts.identity`: `@@server_uuid` on MySQL, `server_id N` on
  -- MariaDB) and the server the runner was on before.
  server         VARCHAR(255)    NOT NULL,
  from_server    VARCHAR(255)    NOT NULL,
  moved_at       DATETIME(3)     NOT NULL,  -- database time
  host           VARCHAR(255)    NOT NULL,  -- the runner that moved the ids
  runs_id_before BIGINT UNSIGNED NULL,      -- MAX(baton_runs.id) on the new server then
  runs_id_floor  BIGINT UNSIGNED NOT NULL,  -- every run after the move has a higher id
  PRIMARY KEY (id),
  KEY baton_failovers_server (server, moved_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
