-- The run history: one row per runner per fire it considered (winner or not).
-- This table is an interface: operators query it with the mysql client, so columns are plain,
-- documented (docs/history.md) and stable. Times are UTC, DATETIME(3).
CREATE TABLE baton_runs (
  id                 BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  -- Names are validated ASCII; binary collation so that `Settle` and `settle` stay two jobs.
  namespace          VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job                VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- The fire's instant from the cron expression (or the moment of a manual trigger): identical on
  -- every host for the same fire.
  scheduled_at       DATETIME(3)  NOT NULL,
  -- 1 on the row of the runner that won the fire; NULL on every other attempt. NULLs never
  -- compare equal, so the unique fire key below allows any number of skip rows and one winner.
  winner             TINYINT(1)   NULL,
  triggered_by       VARCHAR(16)  NOT NULL,  -- schedule | manual | catchup
  status             VARCHAR(16)  NOT NULL,  -- running | done | failed | skipped
  reason             VARCHAR(512) NULL,      -- why an attempt skipped, in words
  host               VARCHAR(255) NOT NULL,
  pid                INT UNSIGNED NULL,
  lock_connection_id BIGINT UNSIGNED NULL,   -- CONNECTION_ID() of the lock session
  started_at         DATETIME(3)  NOT NULL,
  finished_at        DATETIME(3)  NULL,
  exit_code          INT          NULL,
  error              TEXT         NULL,
  output_tail        MEDIUMTEXT   NULL,      -- the last bytes of stdout+stderr
  PRIMARY KEY (id),
  UNIQUE KEY baton_runs_fire (namespace, job, scheduled_at, winner),
  KEY baton_runs_scheduled (namespace, scheduled_at),
  KEY baton_runs_running (namespace, status, lock_connection_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
