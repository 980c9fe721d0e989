-- A runner's tags (`baton start --tag sftp --tag region=eu`, docs/placement.md), as a JSON array
-- of strings; NULL for a runner without tags (and for rows of runners older than this column).
-- `baton status` shows them; jobs' `runOn:` is matched by each runner against its own.
ALTER TABLE baton_runners
  ADD COLUMN tags VARCHAR(8000) NULL AFTER detached
