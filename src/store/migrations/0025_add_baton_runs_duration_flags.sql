-- Soft duration limits (a job's `duration: {warn, min}`, docs/configuration.md; issue 39).
-- `warn_at`: the instant the run becomes slow, fixed when it is claimed (`started_at` plus the
-- job's warn, in database time) so that any runner — a reaper finding it orphaned, `baton status`,
-- `/metrics` — judges it without the job's definition; NULL for a run without a warn.
-- `slow_at`: when baton told the run was slow; set once, by a conditional UPDATE (`WHERE slow_at
-- IS NULL`) in the transaction that enqueues the `slow` event, so that of the run's own timer,
-- its verdict and every reaper, only the writer that set it tells it.
-- `too_short`: 1 on a `done` run shorter than the job's `min`, set in its verdict's transaction.
-- All three at the end of the row, NULL or with a default: added in place, without copying the
-- table (MariaDB 10.3+, MySQL 8.0.12+).
ALTER TABLE baton_runs
  ADD COLUMN warn_at   DATETIME(3) NULL,
  ADD COLUMN slow_at   DATETIME(3) NULL,
  ADD COLUMN too_short TINYINT(1)  NOT NULL DEFAULT 0
