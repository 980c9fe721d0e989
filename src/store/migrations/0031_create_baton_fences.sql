-- Fencing (issue 43, docs/design.md "Fencing a stopped run"): the newest fence of each job's lock.
-- A run's fence is its run id (`baton_runs.id`: it only grows, and after a failover it moves past
-- every id the old primary gave out — store/failovers.ts), so the row of a run is its fence's
-- record. This table holds, per job and worker slot (the scope of the job's lock), the fence of the
-- latest claim: a winner writes it after its claim and before its run starts
-- (store/fire-writes.ts), and the job helpers' fenced transactions (sdk/fence.ts) read it with a
-- locking read before they commit, so a run whose lock was taken by a newer claim commits nothing
-- after that claim's run started. `overlap: allow` jobs take no lock and write no row here.
CREATE TABLE baton_fences (
  namespace  VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  job        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  slot       TINYINT      NOT NULL,          -- baton_runs.winner: the worker (or host) slot
  fence      BIGINT UNSIGNED NOT NULL,       -- the latest claim's run id; never lowered
  fenced_at  DATETIME(3)  NOT NULL,          -- when it last moved (the database's clock)
  PRIMARY KEY (namespace, job, slot)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
