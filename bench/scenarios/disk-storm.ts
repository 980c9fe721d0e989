/**
 * Issue 15, "Bookkeeping never costs a fire": the storm of many-jobs on a busy disk. 3 runners,
 * 500 no-op jobs firing together every second for 15 instants (7,500 fires; quick: 4 instants),
 * while a separate process writes in a loop on the filesystem of the server's data dir, 1 MiB at
 * a time with an fsync every 64 MiB (bench/lib/disk-pressure.ts says why not one per MiB). The private server keeps
 * `innodb_flush_log_at_trx_commit = 1`: every commit waits for the redo log's fsync, which the
 * writer's fsyncs slow down — so a run's verdict (an UPDATE) can still be on its way when the
 * job's next fire comes, one second later.
 *
 * Before the fix, that fire had no winner: the runner of the earlier run skipped it ("an earlier
 * run is still running on <host> (this runner; …)") and the others found the job's lock held by
 * that run (released only after its verdict). The guarantee checked here: every fire has exactly
 * one winner. Also reported: the reasons on the rows of the fires without a winner, by shape; lag
 * and settle percentiles; the cost of a commit before the writer starts and while it runs.
 *
 * `BENCH_DISK_PRESSURE=off npm run bench -- --only disk-storm` runs the same storm without the
 * writer (commits are still measured twice): what the pressure itself costs.
 */
import { IO_PRESSURE, manyJobsScenario } from './many-jobs.js';

export default manyJobsScenario({
  name: 'disk-storm',
  title: '500 jobs firing together every second on a disk busy with fsyncs (issue 15)',
  periodS: 1,
  instants: { full: 15, quick: 4 },
  diskPressure: IO_PRESSURE,
});
