-- The versions of each job's timing (docs/schedules.md, "Changing a job's time"): its cron
-- expression and time zone, which decide which instants are its fires. A runner that loads a
-- timing the table does not have records it as the next version, with an effective instant the
-- same for every runner (or an operator does, `baton definitions apply --at`): before it every
-- runner fires the job by the previous version, from it by this one. Rows are never deleted by
-- the runners: the history's `timing_version` names them.
CREATE TABLE baton_timings (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  namespace     VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job           VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  version       INT UNSIGNED NOT NULL,
  -- The timing's fingerprint (config/fingerprint.ts `timingPrint`): a runner finds its own
  -- definition's version by it.
  print         CHAR(16)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  schedule      TEXT         NOT NULL,
  timezone      VARCHAR(64)  NOT NULL,
  effective_at  DATETIME(3)  NOT NULL,
  -- first: the job's first version (in force from the beginning); settle: the default instant
  -- after the settle window; operator: chosen with `baton definitions apply --at`.
  chosen_by     VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  recorded_at   DATETIME(3)  NOT NULL,
  recorded_by   VARCHAR(255) NOT NULL,
  -- Changed when an operator moves a pending version's instant: what the runners watch.
  updated_at    DATETIME(6)  NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY baton_timings_version (namespace, job, version),
  -- The runners' look for a change (store/timings.ts timingsMarker): the namespace's rows only.
  KEY baton_timings_changed (namespace, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
