-- Room for longer kinds: `no-eligible-runner` (a `missed` row of a fire that no live runner may
-- run, docs/placement.md) is 18 characters, the column had 16. Same character set and NULL as
-- migration 0006; 32 utf8mb4 characters (128 bytes) still have a one-byte length, so the server
-- widens it in place, without copying the table (MariaDB 10.4+, MySQL 5.7+).
ALTER TABLE baton_runs MODIFY COLUMN reason_kind VARCHAR(32) NULL
