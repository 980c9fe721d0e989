-- The pool whose slot a run held (`pool:` of its job, docs/pools.md); NULL for a job without one
-- and for every row but a winner's. The slots themselves are named locks on the runners' lock
-- sessions: this column is what names a slot's holder (the run on that session in that pool) in
-- a `pool` skip, `baton status` and the dashboard. ASCII like the job's name: a pool's name is
-- checked the same way.
ALTER TABLE baton_runs
  ADD COLUMN pool VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL AFTER params
