-- `reason_kind` on the rows written before migration 0006, read from the sentences baton wrote
-- (coordination/fire-protocol.ts, store/pauses.ts:pausedReason). By their first words:
--   this fire already ran …, this runner already took worker slot …          already-ran
--   this fire is running on …, this fire is being claimed by …,
--   another run held the lock at this instant …                              taken
--   waited in the queue …, an earlier run is still running …,
--   a manual run is running …, the lock is held by connection …              overlap
--   a later fire (…) is already running …                                    behind
--   paused by …                                                              paused
--   all N worker slots are taken: 1: …, 2: …      overlap if every slot's reason is, else taken
--   any `missed` row                                                         not-run
-- A slot's reason follows "N: ", and only a slot's reason does; the slot reasons that are not
-- overlap start "this fire", "another run held" or "a later fire". A sentence baton never wrote
-- (a hand-made row, a much older version) stays NULL; so do the rows of runs.
--
-- The statement runs under READ COMMITTED (see migrate.ts): it locks only the rows it changes,
-- never the fleet's new claims, skips and verdicts. It is safe to run twice.
UPDATE baton_runs
   SET reason_kind = CASE
     WHEN status = 'missed' THEN 'not-run'
     WHEN reason LIKE 'all % worker slots are taken: %' THEN
       CASE WHEN reason LIKE '%: this fire %' OR reason LIKE '%: another run held %'
                 OR reason LIKE '%: a later fire %' THEN 'taken'
            ELSE 'overlap' END
     WHEN reason LIKE 'this fire already ran %' THEN 'already-ran'
     WHEN reason LIKE 'this runner already took worker slot %' THEN 'already-ran'
     WHEN reason LIKE 'this fire is running on %' THEN 'taken'
     WHEN reason LIKE 'this fire is being claimed by %' THEN 'taken'
     WHEN reason LIKE 'another run held the lock at this instant%' THEN 'taken'
     WHEN reason LIKE 'waited in the queue %' THEN 'overlap'
     WHEN reason LIKE 'an earlier run is still running %' THEN 'overlap'
     WHEN reason LIKE 'a manual run is running %' THEN 'overlap'
     WHEN reason LIKE 'the lock is held by connection %' THEN 'overlap'
     WHEN reason LIKE 'a later fire (%) is already running %' THEN 'behind'
     WHEN reason LIKE 'paused by %' THEN 'paused'
   END
 WHERE status IN ('skipped', 'missed') AND reason_kind IS NULL
