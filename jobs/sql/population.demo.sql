-- population: the 120 places of the seed's test, for trying jobs/population.ts (after
-- jobs/sql/population.sql). Place 107 is the seed's 여의도한강공원, where its deadlock showed.
--   mysql -h HOST -u USER DATABASE < jobs/sql/population.demo.sql
INSERT INTO place (id, name)
WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 120)
SELECT i, IF(i = 107, 'Yeouido Hangang Park', CONCAT('place ', i)) FROM n;
