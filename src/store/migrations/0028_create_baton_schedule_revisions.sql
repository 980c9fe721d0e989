-- The revision of each namespace's schedules created at run time (baton_schedules): one row per
-- namespace, moved up by one in the transaction of every change. Its row lock orders the
-- writers, so revisions commit in the order they were given: a replica that has read every row
-- up to revision R never meets a later commit at or below R. Replicas read this row once a
-- second (with their run requests, store/replica-inbox.ts) to notice a change.
CREATE TABLE baton_schedule_revisions (
  namespace  VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  revision   BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (namespace)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
