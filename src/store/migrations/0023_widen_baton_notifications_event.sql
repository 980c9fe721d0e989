-- Room for longer event names: `no-eligible-runner` (a job no live runner may run,
-- docs/placement.md) is 18 characters, the column had 16. In place, as 0022.
ALTER TABLE baton_notifications
  MODIFY COLUMN event VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL
