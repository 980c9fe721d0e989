-- The compact form of the skips of jobs with `skips: tally` (docs/history.md, "Skip tallies"):
-- one row per job, runner, kind and hour of fires, counting the skips that runner would otherwise
-- have written to baton_runs one row each. Only skips of a fire whose winner the runner saw
-- (`taken`, `already-ran`) are counted here; every other skip still writes its row there.
CREATE TABLE baton_skip_tallies (
  namespace    VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job          VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- The hour (UTC) the counted fires' instants fall in: [period_start, period_start + 1h).
  period_start DATETIME     NOT NULL,
  host         VARCHAR(255) NOT NULL,
  reason_kind  VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,  -- taken | already-ran
  skips        INT UNSIGNED NOT NULL,
  first_fire   DATETIME(3)  NOT NULL,  -- the earliest and latest fire counted
  last_fire    DATETIME(3)  NOT NULL,
  last_reason  VARCHAR(512) NOT NULL,  -- the sentence of the latest skip counted
  updated_at   DATETIME(3)  NOT NULL,
  PRIMARY KEY (namespace, job, period_start, host, reason_kind),
  KEY baton_skip_tallies_period (namespace, period_start)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
