-- settle (seed 001): the tables of jobs/settle.ts. Plain SQL for MySQL 8.0+ and MariaDB 10.3+,
-- independent of baton; apply it with any client before enabling the job:
--   mysql -h HOST -u USER DATABASE < jobs/sql/settle.sql
-- Safe to apply again (CREATE TABLE IF NOT EXISTS). Times are UTC, DATETIME(3).

-- The payments the shop records, one row each. The job reads one day of them.
CREATE TABLE IF NOT EXISTS settle_txn (
  txn_no      BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  provider_no INT NOT NULL,
  amount      DECIMAL(15, 2) NOT NULL,
  paid_at     DATETIME(3) NOT NULL,
  KEY paid_at_provider (paid_at, provider_no)
) ENGINE=InnoDB;

-- The daily totals: one row per (settle_date, provider_no). The UNIQUE key is the defence of
-- the seed: the job's INSERT ... ON DUPLICATE KEY UPDATE overwrites a total instead of adding a
-- second row, so running the batch twice gives the same table. Keep it the table's only unique
-- key besides the primary key (which the job never writes).
CREATE TABLE IF NOT EXISTS settle_daily (
  settle_no   BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  settle_date DATE NOT NULL,
  provider_no INT NOT NULL,
  amount      DECIMAL(15, 2) NOT NULL,
  txn_count   INT NOT NULL,
  settled_at  DATETIME(3) NOT NULL,
  UNIQUE KEY uk_date_provider (settle_date, provider_no)
) ENGINE=InnoDB;

-- An existing settle_daily WITHOUT the key (the seed's situation, doubles already in it): the key
-- cannot be added while duplicates remain (ER_DUP_ENTRY). Clean first, then add it:
--   SELECT settle_date, provider_no, COUNT(*) FROM settle_daily
--     GROUP BY settle_date, provider_no HAVING COUNT(*) > 1;
--   CREATE TABLE settle_daily_backup LIKE settle_daily;
--   INSERT INTO settle_daily_backup SELECT * FROM settle_daily;
--   DELETE s1 FROM settle_daily s1 JOIN settle_daily s2
--     ON s1.settle_date = s2.settle_date AND s1.provider_no = s2.provider_no
--    AND s1.settle_no > s2.settle_no;
--   ALTER TABLE settle_daily ADD UNIQUE KEY uk_date_provider (settle_date, provider_no);
-- (From code: findDuplicates and addUniqueKey in docs/job-sdk.md.)
