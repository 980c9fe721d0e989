-- Fleet controls: a paused job is skipped by every runner at its next fire (`baton pause`,
-- `baton resume`). One row per paused job; resuming deletes it.
CREATE TABLE baton_pauses (
  namespace  VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  reason     VARCHAR(512) NULL,
  paused_by  VARCHAR(255) NOT NULL,
  paused_at  DATETIME(3)  NOT NULL,
  PRIMARY KEY (namespace, job)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
