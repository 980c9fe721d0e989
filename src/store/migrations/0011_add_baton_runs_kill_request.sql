-- A kill request on a running run (`baton kill`, docs/history.md#kill): written by whichever host
-- the operator acts on, conditional on the row still being `running`; the runner that owns the run
-- reads it (one statement a second, by primary key, only while it has runs), stops the job and
-- writes the verdict `killed`. Who asked and why are in baton_audit too; these columns are what
-- the owner needs to act: who (for the row's error), why, and the grace before SIGKILL.
ALTER TABLE baton_runs
  ADD COLUMN kill_requested_at DATETIME(3)  NULL AFTER output_tail,
  ADD COLUMN kill_requested_by VARCHAR(255) NULL AFTER kill_requested_at,
  ADD COLUMN kill_reason       VARCHAR(512) NULL AFTER kill_requested_by,
  ADD COLUMN kill_grace_ms     INT UNSIGNED NULL AFTER kill_reason
