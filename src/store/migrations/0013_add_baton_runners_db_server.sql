-- Which database server each runner's lock session is on (daemon/link.ts): `@@server_uuid` on
-- MySQL, `server_id N` on MariaDB. Refreshed with every registry heartbeat, so that after a
-- failover an operator sees which runners reached the promoted server (and a row replicated from
-- the old primary still names it). NULL on rows of runners older than the column.
ALTER TABLE baton_runners
  ADD COLUMN db_server VARCHAR(255) NULL AFTER lock_connection_id
