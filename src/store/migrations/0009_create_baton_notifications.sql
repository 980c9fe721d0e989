-- The notification outbox (docs/notifications.md): one row per event per target, written in the
-- same transaction as the event it tells of (a verdict, a `missed` row, a reaper's `lost`), so no
-- event is lost when the runner that noticed it dies, and the unique key makes it one row however
-- many runners notice. Whichever runner holds the namespace's notify lock delivers the rows,
-- claiming each for a bounded time (`claim_until`): a deliverer that dies has its claim taken over.
CREATE TABLE baton_notifications (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  namespace       VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- failed | timeout | lost | missed | recovered | no-success | runner-gone | summary | test
  event           VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- The job the event is about; the runner's host for `runner-gone`.
  subject         VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  -- The fire's instant; for an episode (`no-success`, `runner-gone`, `summary`), when it began.
  fire            DATETIME(3)  NOT NULL,
  slot            TINYINT UNSIGNED NOT NULL DEFAULT 0,  -- the worker slot of a fan-out fire
  rerun           SMALLINT UNSIGNED NOT NULL DEFAULT 0, -- which run of the fire (0: the scheduled one)
  target          VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  run_id          BIGINT UNSIGNED NULL,                 -- baton_runs.id of the run or missed row
  -- pending | sending | sent | failed (gave up) | held (throttled) | folded (told in a summary)
  status          VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  created_at      DATETIME(3)  NOT NULL,
  due_at          DATETIME(3)  NOT NULL,                -- not delivered before (retry backoff)
  attempts        SMALLINT UNSIGNED NOT NULL DEFAULT 0,
  -- When the throttle let it through (or held it); the last one let through starts the window.
  decided_at      DATETIME(3)  NULL,
  claimed_by      VARCHAR(255) NULL,                    -- host of the deliverer holding it
  claim_until     DATETIME(3)  NULL,                    -- its claim lapses then
  sent_at         DATETIME(3)  NULL,
  response_status INT          NULL,                    -- HTTP status, SMTP code or exit code
  last_error      VARCHAR(1024) NULL,
  folded_into     BIGINT UNSIGNED NULL,                 -- the summary (or recovered) row that told it
  details         TEXT         NULL,                    -- JSON facts known when it was recorded
  PRIMARY KEY (id),
  UNIQUE KEY baton_notifications_event (namespace, event, subject, fire, slot, rerun, target),
  KEY baton_notifications_due (namespace, status, due_at),
  KEY baton_notifications_subject (namespace, subject, target, status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
