-- Every run's whole output (docs/history.md#output): what stdout and stderr of each attempt
-- printed, in the chunks it was read in, bounded per attempt by the job's `output: {max}` — the
-- head as it came and the tail at the end; a gap between one chunk's end and the next chunk's
-- offset is output that was dropped. Written while the job runs, a few times a second, so that any
-- host can read it live (`baton logs --follow`). Pruned with its run, or sooner by
-- `retention: {output}`.
CREATE TABLE baton_run_output (
  run_id      BIGINT UNSIGNED   NOT NULL,  -- baton_runs.id
  -- The run's namespace: `retention: {output}` prunes one namespace's output by age.
  namespace   VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  seq         INT UNSIGNED      NOT NULL,  -- the order of the run's chunks, all attempts
  attempt     SMALLINT UNSIGNED NOT NULL,
  stream      TINYINT UNSIGNED  NOT NULL,  -- 1 stdout, 2 stderr
  byte_offset BIGINT UNSIGNED   NOT NULL,  -- where the chunk starts in its attempt's output
  read_at     DATETIME(3)       NOT NULL,  -- when the runner read it (its host's clock, UTC)
  data        MEDIUMBLOB        NOT NULL,  -- the bytes as printed (not necessarily UTF-8)
  PRIMARY KEY (run_id, seq),
  KEY baton_run_output_age (namespace, read_at)
) ENGINE=InnoDB
