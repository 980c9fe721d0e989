-- Who did what, and why: every operator action (a manual run, a re-run, a backfill, a kill, a
-- pause, a resume), from the CLI on any host or from the write API (docs/history.md#audit).
-- Written once when the action is taken; `outcome` says what came of it when that is known at
-- once (e.g. `refused: already ran`). Listed by `baton audit`; pruned with the history's runs.
CREATE TABLE baton_audit (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  namespace  VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  at         DATETIME(3)  NOT NULL,
  action     VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
  run_id     BIGINT UNSIGNED NULL,       -- baton_runs.id the action is about, when there is one
  fire       DATETIME(3)  NULL,          -- the fire's instant, for a re-run or a backfill step
  operator   VARCHAR(255) NOT NULL,      -- OS user (SUDO_USER under sudo) or the API token's name
  via        VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,  -- cli | api
  host       VARCHAR(255) NOT NULL,      -- where the action was taken
  reason     VARCHAR(512) NULL,
  details    TEXT         NULL,          -- JSON: parameters (secrets masked), range, grace
  outcome    VARCHAR(512) NULL,
  PRIMARY KEY (id),
  KEY baton_audit_at (namespace, at),
  KEY baton_audit_job (namespace, job, at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
