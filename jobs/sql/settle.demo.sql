-- settle: sample payments for trying jobs/settle.ts (after jobs/sql/settle.sql). 600 payments of
-- five providers spread over the day before yesterday, yesterday and today (UTC, relative to the
-- moment this file is applied), plus payments on the edges of yesterday: its first instant (in)
-- and today's first instant (out). `baton run settle` then settles yesterday.
--   mysql -h HOST -u USER DATABASE < jobs/sql/settle.demo.sql
INSERT INTO settle_txn (provider_no, amount, paid_at)
WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 600)
SELECT 1 + i % 5,
       (i * 7919 % 10000) / 100 + 1,
       TIMESTAMP(UTC_DATE()) - INTERVAL (i % 3) DAY + INTERVAL (i * 137 % 86400) SECOND
FROM n;

INSERT INTO settle_txn (provider_no, amount, paid_at) VALUES
  (1, 1000.00, TIMESTAMP(UTC_DATE()) - INTERVAL 1 DAY),
  (2, 2000.00, TIMESTAMP(UTC_DATE()) - INTERVAL 1000 MICROSECOND),
  (3, 4000.00, TIMESTAMP(UTC_DATE()));
