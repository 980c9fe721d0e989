-- reward: 1,000 sample rewards for trying jobs/reward.ts (after jobs/sql/reward.sql), numbered
-- after the highest job_no already queued.
--   mysql -h HOST -u USER DATABASE < jobs/sql/reward.demo.sql
SET @base = (SELECT COALESCE(MAX(job_no), 0) FROM reward_job);
INSERT INTO reward_job (job_no, uid, item_id)
WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
SELECT @base + i, CONCAT('user-', 1 + (@base + i) % 97), 1 + (@base + i) % 5
FROM n;
