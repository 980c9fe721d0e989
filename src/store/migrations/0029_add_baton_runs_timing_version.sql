-- The timing version (baton_timings.version) a scheduled fire's row was claimed under; NULL for
-- an operator's run, a catch-up found before the runner read the versions, and rows of older
-- runners. At the end of the row, as 0006 says: an instant ADD COLUMN where the server has one.
ALTER TABLE baton_runs
  ADD COLUMN timing_version INT UNSIGNED NULL
