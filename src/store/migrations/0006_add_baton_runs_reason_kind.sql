-- Why a runner did not run a fire, as a word that queries, filters and metrics can use (the
-- `reason` beside it is the sentence for people): on `skipped` rows taken | already-ran | overlap
-- | behind | paused, on `missed` rows not-run; NULL on the rows of runs (REASON_KINDS in
-- src/run-status.ts, docs/history.md). Free text like `status`, not an ENUM: a later kind is
-- written by the code that knows it, with no ALTER TABLE. At the end of the row, so that the
-- server adds it in place, without copying the table (INSTANT on MariaDB 10.3+ and MySQL 8).
-- Migration 0007 fills it in on the rows written before it.
ALTER TABLE baton_runs ADD COLUMN reason_kind VARCHAR(16) NULL
