-- Blackouts (`baton blackout`, docs/cli.md): a fleet-wide pause that starts and ends by itself.
-- A scheduled fire whose instant is in [starts_at, ends_at) — and before cancelled_at, when an
-- operator ended it early — is skipped by every runner as `paused`, naming the blackout. The
-- fire's own instant decides, not the runner's clock, so both edges are exact fleet-wide. Rows
-- are never deleted by the runners: the notifier tells each one's start and end once, and the
-- skip rows name them by id.
CREATE TABLE baton_blackouts (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  namespace    VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  starts_at    DATETIME(3)  NOT NULL,      -- UTC, inclusive
  ends_at      DATETIME(3)  NOT NULL,      -- UTC, exclusive
  jobs         TEXT         NULL,          -- JSON array of job names; NULL: every job
  reason       VARCHAR(512) NOT NULL,
  created_by   VARCHAR(255) NOT NULL,      -- operator@host
  created_at   DATETIME(3)  NOT NULL,
  cancelled_at DATETIME(3)  NULL,          -- ended early (`baton blackout cancel`): the database's clock
  cancelled_by VARCHAR(255) NULL,
  PRIMARY KEY (id),
  -- The runners' read with each batch of fires: the namespace's blackouts not yet over.
  KEY baton_blackouts_ends (namespace, ends_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
