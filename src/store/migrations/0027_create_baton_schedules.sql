-- Library mode's schedules created at run time (`scheduler.schedules.upsert(job, key, …)`,
-- docs/library-mode.md): one row per (namespace, job, key). Each fires as the subject
-- `<job>:<key>` in baton_runs.job (src/schedule-keys.ts), through the fire protocol like any job.
-- Written by INSERT … ON DUPLICATE KEY UPDATE, so that one key upserted twice, or by two replicas
-- at once, is one row. `revision` is the namespace's revision (baton_schedule_revisions) at the
-- row's last change: every replica reads the rows past the revision it has (store/schedules.ts).
-- A removed schedule keeps its row, `removed_at` set and its revision moved, so that every replica
-- sees the removal; such rows are pruned with the runs' bound (`retention:`).
CREATE TABLE baton_schedules (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  namespace    VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job          VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  schedule_key VARCHAR(127) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  schedule     VARCHAR(255) NOT NULL,      -- the cron expression, as schedules.yaml's
  timezone     VARCHAR(64)  NOT NULL,      -- IANA name
  params       TEXT         NULL,          -- JSON object name → value: the handler's ctx.params
  revision     BIGINT UNSIGNED NOT NULL,
  created_at   DATETIME(3)  NOT NULL,
  updated_at   DATETIME(3)  NOT NULL,      -- its definition's last change (or its return)
  removed_at   DATETIME(3)  NULL,
  PRIMARY KEY (id),
  UNIQUE KEY baton_schedules_key (namespace, job, schedule_key),
  KEY baton_schedules_revision (namespace, revision),
  KEY baton_schedules_removed (namespace, removed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
