-- population (seed 002): the tables of jobs/population.ts. Plain SQL for MySQL 8.0+ and
-- MariaDB 10.6+ (FOR UPDATE SKIP LOCKED), independent of baton; apply it with any client:
--   mysql -h HOST -u USER DATABASE < jobs/sql/population.sql
-- Safe to apply again (CREATE TABLE IF NOT EXISTS). Times are UTC, DATETIME(3).

-- The places to refresh. refreshed_for is the fire (its cron instant) that last refreshed the
-- place: a place is due for a fire when refreshed_for < that fire.
CREATE TABLE IF NOT EXISTS place (
  id            INT NOT NULL PRIMARY KEY,
  name          VARCHAR(100) NOT NULL,
  refreshed_for DATETIME(3) NOT NULL DEFAULT '1970-01-01 00:00:00.000',
  -- Serves WHERE refreshed_for < ? ORDER BY refreshed_for, id: the SKIP LOCKED read then examines
  -- (and locks) only the row it takes. Without it, a scan locks every row it reads.
  KEY refresh_order (refreshed_for, id)
) ENGINE=InnoDB;

-- The latest population of each place (1:1 with place), upserted by every refresh.
CREATE TABLE IF NOT EXISTS population (
  place_id   INT NOT NULL PRIMARY KEY,
  people     INT NOT NULL,
  congestion VARCHAR(20) NOT NULL,
  fire_at    DATETIME(3) NOT NULL
) ENGINE=InnoDB;

-- The seed's JobLog: one row per refresh of a place, with the worker that did it. Deliberately no
-- unique key on (place_id, fire_at): a place refreshed twice for one fire must show as two rows.
CREATE TABLE IF NOT EXISTS population_log (
  id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  place_id    INT NOT NULL,
  fire_at     DATETIME(3) NOT NULL,
  run_id      BIGINT NOT NULL,
  host        VARCHAR(191) NOT NULL,
  worker      INT NOT NULL,
  started_at  DATETIME(3) NOT NULL,
  finished_at DATETIME(3) NOT NULL,
  KEY fire_place (fire_at, place_id)
) ENGINE=InnoDB;
