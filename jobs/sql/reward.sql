-- reward (seed 000): the tables of jobs/reward.ts. Plain SQL for MySQL 8.0+ and MariaDB 10.3+,
-- independent of baton; apply it with any client before enabling the job:
--   mysql -h HOST -u USER DATABASE < jobs/sql/reward.sql
-- Safe to apply again (CREATE TABLE IF NOT EXISTS). Times are UTC, DATETIME(3).

-- The queue: the application inserts rewards 'ready'; a worker claims a batch with one UPDATE
-- (status 'working', its worker id, a per-claim token, the database's time) and sets 'done'.
CREATE TABLE IF NOT EXISTS reward_job (
  job_no      INT NOT NULL PRIMARY KEY,
  uid         VARCHAR(50) NOT NULL,
  item_id     INT NOT NULL,
  status      VARCHAR(16) NOT NULL DEFAULT 'ready',
  worker_id   VARCHAR(191) NULL,
  claim_token CHAR(36) NULL,
  claimed_at  DATETIME(3) NULL,
  -- Serves the claim's WHERE status = 'ready' ORDER BY job_no (else it scans and locks the table)
  -- and the reclaim's WHERE status = 'working'.
  KEY status_job (status, job_no),
  -- The read-back of a claim.
  KEY claim_token (claim_token)
) ENGINE=InnoDB;

-- The ledger, the seed's second guard: a reward is paid only by the transaction that inserts its
-- job_no here. The PRIMARY KEY makes a second payment impossible, whoever attempts it.
CREATE TABLE IF NOT EXISTS reward_given (
  job_no   INT NOT NULL PRIMARY KEY,
  uid      VARCHAR(50) NOT NULL,
  reg_date DATETIME(3) NOT NULL
) ENGINE=InnoDB;

-- The effect: the item given (the seed's giveItem). Deliberately no unique key on job_no: like
-- most real downstream systems it would accept a second payment; the ledger prevents one.
CREATE TABLE IF NOT EXISTS reward_payment (
  payment_no BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  job_no     INT NOT NULL,
  uid        VARCHAR(50) NOT NULL,
  item_id    INT NOT NULL,
  worker_id  VARCHAR(191) NOT NULL,
  paid_at    DATETIME(3) NOT NULL,
  KEY job_no (job_no),
  KEY worker_id (worker_id)
) ENGINE=InnoDB;
