-- Per job and status, newest fire first: `baton status` asks each job for its latest `done` run
-- (namespace, job, status equal; ORDER BY scheduled_at DESC LIMIT 1), which the fire key cannot
-- answer without walking the job's whole history once failures and skips pile up. Added online
-- (InnoDB builds a secondary key without blocking writes).
ALTER TABLE baton_runs ADD KEY baton_runs_job_status (namespace, job, status, scheduled_at)
