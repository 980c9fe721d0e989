-- The fires of child jobs (`after:`, docs/dependencies.md): one row per child, instant and
-- generation, the chain's outbox. It is written in the transaction of a parent's verdict (or
-- `missed` row), so that a runner killed right after the verdict loses nothing, and at a parent's
-- instant by every runner that has the child (so that a parent that does not run at all still
-- decides its child). Any live runner that has the child then judges it (store/dependent-fires.ts,
-- fire/dependents.ts): starts it through the child's lock and fire key, or skips it as `upstream`.
CREATE TABLE baton_dependent_fires (
  namespace    VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job          VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,  -- the child
  scheduled_at DATETIME(3)  NOT NULL,            -- the parents' instant: the child's fire
  rerun        SMALLINT UNSIGNED NOT NULL,       -- the child's generation to claim (0: the chain's own)
  -- waiting: not judged yet; started: the child's fire was contended and has its winner
  -- (run_id); skipped: judged not to run (reason, run_id = the `upstream` skip row).
  status       VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  check_at     DATETIME(3)  NOT NULL,            -- when runners judge it next (database time)
  -- The runner judging it now, until when (database time): one judge at a time, so that a fire
  -- is never both contended by one runner and skipped as upstream by another. Renewed while its
  -- judge contends the child's fire; a judge that dies lets it lapse.
  judged_by    VARCHAR(255) NULL,
  judged_until DATETIME(3)  NULL,
  deadline     DATETIME(3)  NOT NULL,            -- scheduled_at + `within`
  -- The parent runs the judgement rested on, as JSON {"settle": 123, ...}: those that let the
  -- child start, or the one that stopped it.
  parent_runs  VARCHAR(2048) NULL,
  run_id       BIGINT UNSIGNED NULL,
  reason       VARCHAR(512) NULL,
  created_at   DATETIME(3)  NOT NULL,
  updated_at   DATETIME(3)  NOT NULL,
  PRIMARY KEY (namespace, job, scheduled_at, rerun),
  -- The runners' look for the rows due: their own children's, never a removed child's rows.
  KEY baton_dependent_fires_due (namespace, status, job, check_at),
  KEY baton_dependent_fires_run (run_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
