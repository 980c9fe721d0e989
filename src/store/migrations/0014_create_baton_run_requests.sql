-- Library mode's `baton run <job>`: the CLI cannot run a job whose code is a function inside an
-- application, so it asks the fleet. A request is written by the CLI, taken by exactly one
-- library-mode replica that has the job (`taken_by` set by a conditional UPDATE), and run there
-- through the job's lock like any manual run; `run_id` then names its row in baton_runs and the
-- CLI follows that row to its verdict (docs/library-mode.md). A request the CLI gave up on is
-- cancelled by the same conditional UPDATE (`taken_by` = '', outcome `cancelled: …`), so no
-- replica can take it later. Pruned with the runs (`retention:`). `env`: the `--env K=V`
-- parameters as a JSON object (the replica masks the job's secretEnv on the run's row).
CREATE TABLE baton_run_requests (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  namespace    VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job          VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  requested_at DATETIME(3)  NOT NULL,
  requested_by VARCHAR(255) NOT NULL,      -- the operator (OS user), as in baton_audit
  taken_by     VARCHAR(255) NULL,          -- the replica (host) that took it
  taken_at     DATETIME(3)  NULL,
  run_id       BIGINT UNSIGNED NULL,       -- baton_runs.id of the run it started
  outcome      VARCHAR(512) NULL,          -- started | busy: … | not run: … | cancelled: …
  env          TEXT         NULL,
  PRIMARY KEY (id),
  KEY baton_run_requests_recent (namespace, requested_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
