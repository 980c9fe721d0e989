-- `baton run <job> --on-host H` (and the write API's `onHost`): a request addressed to one runner,
-- which that runner alone takes (docs/cli.md, "Running a placed job by hand"). NULL: any live
-- runner that may run the job takes it, as every request did before this column.
ALTER TABLE baton_run_requests
  ADD COLUMN target_host VARCHAR(255) NULL AFTER job
