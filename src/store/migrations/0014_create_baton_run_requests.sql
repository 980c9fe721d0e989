-- Library mode's `baton run <job>`: the CLI cannot run a job whose code is a function inside an
-- application, so it asks the fleet. A request is written by the CLI, taken by exactly one
-- library-mode replica that has the job (`taken_by` set by a conditional UPDATE), and run there
-- through the job's lock like any manual run; `run_id` then names its row in baton_runs and the
-- CLI follows that row to its verdict (docs/library-mode.md). Never deleted: they are few.
CREATE TABLE baton_run_requests (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  namespace    VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job          VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  requested_at DATETIME(3)  NOT NULL,
  requested_by VARCHAR(255) NOT NULL,      -- the operator (OS user), as in baton_audit
  taken_by     VARCHAR(255) NULL,          -- the replica (host) that took it
  taken_at     DATETIME(3)  NULL,
  run_id       BIGINT UNSIGNED NULL,       -- baton_runs.id of the run it started
  outcome      VARCHAR(512) NULL,          -- started | busy: … | not run: …
  PRIMARY KEY (id),
  KEY baton_run_requests_open (namespace, taken_by, requested_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
