-- The runner registry: one row per runner (namespace + host id), refreshed by its heartbeat.
-- `baton status` reads it to show the live fleet, each runner's clock offset, and whether all
-- runners loaded the same schedule. A restarted runner overwrites its host's row.
CREATE TABLE baton_runners (
  namespace        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  host             VARCHAR(255) NOT NULL,
  pid              INT UNSIGNED NOT NULL,
  version          VARCHAR(32)  NOT NULL,
  started_at       DATETIME(3)  NOT NULL,
  -- Database time of the last heartbeat; a runner that stops heartbeating is shown as gone.
  last_seen_at     DATETIME(3)  NOT NULL,
  -- NULL while running; set by a graceful stop, so a drained server is not reported as crashed.
  stopped_at       DATETIME(3)  NULL,
  -- How far the runner's clock is ahead of the database's (negative: behind), in ms.
  clock_offset_ms  INT          NULL,
  lock_connection_id BIGINT UNSIGNED NULL,
  -- {"job": "<fingerprint of its definition>", ...}: what this runner loaded.
  schedule         MEDIUMTEXT   NOT NULL,
  PRIMARY KEY (namespace, host)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
