-- feed: two pets for trying jobs/feed.ts (after jobs/sql/feed.sql), each with 3,000 portions of
-- food: less than the default run's 32 × 100 requests, so the bowl runs empty as in the seed's
-- test and the last requests find nothing. Applying it again refills the bowls.
--   mysql -h HOST -u USER DATABASE < jobs/sql/feed.demo.sql
INSERT INTO pet (id, power) VALUES (1, 0), (2, 0)
  ON DUPLICATE KEY UPDATE power = 0;
INSERT INTO food (pet_id, count, version) VALUES (1, 3000, 0), (2, 3000, 0)
  ON DUPLICATE KEY UPDATE count = 3000, version = 0;
