-- feed (seed 004): the tables of jobs/feed.ts. Plain SQL for MySQL 8.0+ and MariaDB 10.3+,
-- independent of baton; apply it with any client:
--   mysql -h HOST -u USER DATABASE < jobs/sql/feed.sql
-- Safe to apply again (CREATE TABLE IF NOT EXISTS).

CREATE TABLE IF NOT EXISTS pet (
  id    BIGINT NOT NULL PRIMARY KEY,
  power BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- A pet's food. `version` is the optimistic writers' check: every write bumps it (the locked
-- writers too), and an UPDATE that expects an older version changes nothing.
CREATE TABLE IF NOT EXISTS food (
  pet_id  BIGINT NOT NULL PRIMARY KEY,
  count   BIGINT NOT NULL,
  version BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB;
