-- Re-runs and manual parameters (issue 20; docs/history.md, "Re-runs"). A re-run of a fire is a
-- new generation of the same fire: `rerun` is 0 on every scheduled, catch-up and ordinary manual
-- row, and 1, 2, … on the rows of `baton run --fire T --again` (and backfills). It joins the
-- unique fire key before `winner`, so each generation has its own one-winner guarantee and
-- generation 0's is exactly what it was. `params`: the run's manual parameters as JSON
-- (`{"env": {…}, "args": […]}`, values of the job's `secretEnv` masked), NULL without any.
ALTER TABLE baton_runs
  ADD COLUMN rerun SMALLINT UNSIGNED NOT NULL DEFAULT 0 AFTER scheduled_at,
  ADD COLUMN params TEXT NULL AFTER output_tail,
  DROP KEY baton_runs_fire,
  ADD UNIQUE KEY baton_runs_fire (namespace, job, scheduled_at, rerun, winner)
