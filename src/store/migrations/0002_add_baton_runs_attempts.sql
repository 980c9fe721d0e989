-- How many times the winner started the job for this fire: 1, or more when `retries` made it try
-- again (same fire, same row, still holding the lock). 0 on rows that never ran anything
-- (skipped, missed). Statuses added with this version (the column is free text): timeout, lost,
-- interrupted, missed; see docs/history.md.
ALTER TABLE baton_runs ADD COLUMN attempts SMALLINT UNSIGNED NOT NULL DEFAULT 0 AFTER exit_code
