/**
 * The guarantee mutants (see mutant.ts): the regressions baton must never ship, each with the
 * tests that catch it. Listed, with their killers, in test/README.md (`npm run mutants -- --list`).
 */
import type { Mutant } from './mutant.js';

export const MUTANTS: readonly Mutant[] = [
  {
    id: 'fire-key-dropped',
    guarantee: 'one-winner',
    what:
      'The unique fire key is gone (a plain index instead, and the start-up check no longer ' +
      'asks for uniqueness): only the lock is left.',
    edits: [
      {
        // Where the key lives now: 0012 drops 0001's and makes it again, with `rerun`.
        file: 'src/store/migrations/0012_add_baton_runs_rerun_params.sql',
        find: 'ADD UNIQUE KEY baton_runs_fire',
        replace: 'ADD KEY baton_runs_fire',
      },
      {
        file: 'src/store/server-check.ts',
        find: "Key_name = 'baton_runs_fire' AND Non_unique = 0",
        replace: "Key_name = 'baton_runs_fire'",
      },
    ],
    killers: [
      {
        file: 'test/e2e/one-winner.test.ts',
        test: 'finds the lock free after a short job and meets the fire key',
      },
      {
        file: 'test/e2e/contend-in-process.test.ts',
        test: 'a late third one with the lock is refused by the fire key',
      },
    ],
  },
  {
    id: 'timeout-releases-lock-early',
    guarantee: 'no-overlap',
    what:
      "A timed-out run gives its job's lock back when the timeout fires, before its stopped " +
      'process has exited (one that ignores SIGTERM lives on for the kill grace).',
    edits: [
      {
        file: 'src/fire/run-fire.ts',
        find: "void run.stop(`timeout: the run took longer than ${limit}`, killGraceMs, 'timeout');",
        replace:
          "void run.stop(`timeout: the run took longer than ${limit}`, killGraceMs, 'timeout');\n" +
          '            if (w.claim.lockName) void c.lock.release(w.claim.lockName);',
      },
    ],
    killers: [
      {
        file: 'test/in-process/policies.test.ts',
        test: 'stops the run, records `timeout` with the limit',
      },
    ],
  },
  {
    id: 'spawner-watchdog-no-sigkill',
    guarantee: 'dies-with-runner',
    what:
      "The spawner's watchdog sends SIGTERM to a dead runner's jobs but never the SIGKILL after " +
      'it: a job that ignores SIGTERM outlives its runner.',
    edits: [
      {
        file: 'src/execution/spawner.ts',
        find: "for (const run of orphans) run.signal('SIGKILL');",
        replace: '',
      },
    ],
    killers: [
      {
        file: 'test/e2e/spawner.test.ts',
        test: 'the spawner kills the job and its grandchild, then exits',
      },
      {
        file: 'test/e2e/runner-death.test.ts',
        test: 'kills the job and its grandchild, the row becomes lost, and a survivor runs a later fire',
      },
    ],
  },
  {
    id: 'spawner-watchdog-gone',
    guarantee: 'dies-with-runner',
    what: 'The spawner exits with its runner and leaves the running jobs behind.',
    edits: [
      {
        file: 'src/execution/spawner.ts',
        find: "process.once('disconnect', killOrphans);",
        replace: "process.once('disconnect', () => process.exit(0));",
      },
    ],
    killers: [
      {
        file: 'test/e2e/spawner.test.ts',
        test: 'the spawner kills the job and its grandchild, then exits',
      },
    ],
  },
  {
    id: 'run-watchdog-no-sigkill',
    guarantee: 'dies-with-runner',
    what:
      'The per-run watchdog of `baton run` and module jobs stops at SIGTERM: a job that ignores ' +
      'it outlives a killed `baton run`.',
    edits: [
      {
        file: 'src/execution/watchdog.ts',
        find: `'kill -s KILL -- "-$pgid" 2>/dev/null; pkill -KILL -s "$pgid" 2>/dev/null; exit 0'`,
        replace: `'exit 0'`,
      },
    ],
    killers: [
      {
        file: 'test/e2e/runner-death.test.ts',
        test: 'its watchdog kills the job and its grandchild, which ignore SIGTERM',
      },
    ],
  },
  {
    id: 'spawner-death-no-sigkill',
    guarantee: 'dies-with-runner',
    what:
      "When the spawner dies, the runner SIGTERMs the spawner's jobs but never SIGKILLs them, and " +
      'records them failed while they still run.',
    edits: [
      {
        file: 'src/execution/spawner-client.ts',
        find: 'run.pid == null ? Promise.resolve() : this.processes.endRun(run.pid, ORPHAN_KILL_MS);',
        replace:
          "run.pid == null ? Promise.resolve() : (this.processes.signalRun(run.pid, 'SIGTERM'), Promise.resolve());",
      },
    ],
    killers: [
      {
        file: 'test/e2e/spawner.test.ts',
        test: 'fails the run saying so, kills its group, and a later fire runs under a new spawner',
      },
    ],
  },
  {
    id: 'lost-session-statements-wait',
    guarantee: 'lost-lock',
    what:
      'A lost lock session no longer fails the statements it had not answered: every fire ' +
      'waiting on it waits out a deadline (or forever) instead of being recorded not run at once.',
    edits: [
      {
        file: 'src/coordination/statement-queue.ts',
        find: 'for (const reject of [...this.unsettled]) reject(error);',
        replace: 'void error;',
      },
    ],
    killers: [
      { file: 'test/e2e/lock-session.test.ts', test: 'fails them at once as not run' },
      {
        file: 'test/unit/statement-queue.test.ts',
        test: 'once closed, fails every statement not answered yet and every later one at once',
      },
    ],
  },
  {
    id: 'claim-before-due',
    guarantee: 'no-early-start',
    what:
      "The claim no longer waits for the database's clock to reach the fire (`NOW(3) >= " +
      'scheduled_at`): a runner whose estimate of that clock is off starts the run early.',
    edits: [
      {
        // Every claim's insert, alone or batched (`claimInsert`).
        file: 'src/store/fire-writes.ts',
        find: "WHERE NOW(3) >= f.scheduled_at AND ${definitionFence('f')}",
        replace: "WHERE f.scheduled_at IS NOT NULL AND ${definitionFence('f')}",
      },
    ],
    killers: [
      {
        file: 'test/e2e/clock-skew.test.ts',
        test: "starts no run before its instant by the server's clock",
      },
    ],
  },
  {
    id: 'reclaim-late',
    guarantee: 'sdk',
    what: "`reclaimStale` gives a dead worker's rows back only at three times the bound.",
    edits: [
      {
        file: 'src/sdk/claim.ts',
        find: "const micros = positiveInt('olderThanMs', o.olderThanMs) * 1000;",
        replace: "const micros = positiveInt('olderThanMs', o.olderThanMs) * 3000;",
      },
    ],
    killers: [
      {
        file: 'test/e2e/sdk-claim.test.ts',
        test: 'by the real clock too: reclaimed once the claim is older than the bound',
      },
    ],
  },
  {
    id: 'claim-reads-back-all',
    guarantee: 'sdk',
    what:
      "`claimRows` reads back every row the worker holds, not just this claim's (its token): a " +
      'batch is handed out again.',
    edits: [
      {
        file: 'src/sdk/claim.ts',
        find: '`SELECT * FROM ${c.table} WHERE ${c.worker} = ? AND ${c.token} = ? AND ${c.status} = ? ` +',
        replace:
          '`SELECT * FROM ${c.table} WHERE ${c.worker} = ? AND ? IS NOT NULL AND ${c.status} = ? ` +',
      },
    ],
    killers: [
      { file: 'test/e2e/sdk-claim.test.ts', test: 'reads back only the batch it just claimed' },
    ],
  },
  {
    id: 'local-overlap-check-dropped',
    guarantee: 'no-overlap',
    what:
      'A runner asks for the lock of a job it is already running: GET_LOCK nests within its ' +
      'session, so it "wins" and runs the job beside itself.',
    edits: [
      {
        file: 'src/fire/local-runs.ts',
        find: 'return { runningHere: local?.scheduledAt ?? null, queueUntil: null };',
        replace: 'return { runningHere: null, queueUntil: null };',
      },
    ],
    killers: [{ file: 'test/in-process/overlap.test.ts', test: 'skips its own later fires' }],
  },
  {
    id: 'job-lock-not-taken',
    guarantee: 'no-overlap',
    what: "Contention no longer takes the job's lock: only the fire key is left, so fires overlap.",
    edits: [
      {
        file: 'src/coordination/fire-protocol.ts',
        find: 'const got = await acquire(c, lockName, slotAttempt, options);',
        replace:
          "const got = (await Promise.resolve('acquired')) as 'acquired' | 'busy' | 'taken';",
      },
    ],
    killers: [{ file: 'test/in-process/overlap.test.ts', test: 'never overlaps two runs' }],
  },
  {
    id: 'retry-releases-lock',
    guarantee: 'no-overlap',
    what: "A run waiting to retry gives its job's lock back: another runner starts the job meanwhile.",
    edits: [
      {
        file: 'src/fire/run-fire.ts',
        find: '      await control.waitBeforeRetry(waitMs);',
        replace:
          '      if (w.claim.lockName) await c.lock.release(w.claim.lockName);\n' +
          '      await control.waitBeforeRetry(waitMs);',
      },
    ],
    killers: [
      {
        file: 'test/in-process/policies.test.ts',
        test: 'retries on the same row while holding the lock',
      },
    ],
  },
  {
    id: 'skip-row-not-written',
    guarantee: 'visible',
    what: 'A runner that does not run a fire no longer records its skip row.',
    edits: [
      {
        file: 'src/coordination/fire-protocol.ts',
        find: 'runId: await batches.skip.load(row),',
        replace: 'runId: 0,',
      },
    ],
    killers: [
      {
        file: 'test/e2e/one-winner.test.ts',
        test: 'gives every fire exactly one winner and two skips',
      },
    ],
  },
  {
    id: 'tally-without-winner-seen',
    guarantee: 'visible',
    what:
      'A job with `skips: tally` counts every skip, also those that explain a fire without a ' +
      'winner (overlap, paused, a holder still claiming): such a fire is left without rows.',
    edits: [
      {
        file: 'src/coordination/fire-protocol.ts',
        find: '...(tally && sawWinner ? { tally } : {})',
        replace: '...(tally ? { tally } : {})',
      },
    ],
    killers: [
      {
        file: 'test/in-process/skip-tallies.test.ts',
        test: 'counts the skips of fires with a winner, keeps every other skip as a row',
      },
    ],
  },
  {
    id: 'stale-local-run',
    guarantee: 'visible',
    what:
      'A runner never forgets a finished run of its own: it skips every later fire of the job ' +
      '("an earlier run is still running … (this runner)"), untrue, and fires end up with no winner.',
    edits: [
      {
        file: 'src/fire/run-fire.ts',
        find: 'if (this.local) o.runs.delete(this.local);',
        replace: 'void this.local;',
      },
    ],
    killers: [
      {
        file: 'test/e2e/one-winner.test.ts',
        test: 'gives every fire exactly one winner and two skips',
      },
    ],
  },
  {
    id: 'reaper-reaps-live',
    guarantee: 'visible',
    what: 'The reaper takes every `running` row for an orphan and marks live runs `lost`.',
    edits: [
      {
        file: 'src/store/run-verdicts.ts',
        find: 'RUNNER_GONE_SQL = `(lock_connection_id IS NULL OR started_at < ?',
        replace: 'RUNNER_GONE_SQL = `(TRUE OR started_at < ?',
      },
    ],
    killers: [
      {
        file: 'test/e2e/runner-death.test.ts',
        test: 'kills the job and its grandchild, the row becomes lost, and a survivor runs a later fire',
      },
    ],
  },
  {
    id: 'missed-not-recorded',
    guarantee: 'visible',
    what: 'After an outage, fires nobody attempted get no `missed` row.',
    edits: [
      {
        file: 'src/daemon/recovery.ts',
        find: "if (await insertMissed(pool, attempt, reason, targets, 'not-run', children)) {",
        replace: 'if (await Promise.resolve(insertMissed.length < 0 && targets && children)) {',
      },
    ],
    killers: [{ file: 'test/e2e/outage.test.ts', test: 'no runner runs blind' }],
  },
  {
    id: 'lost-lock-no-abort',
    guarantee: 'lost-lock',
    what: 'A runner whose lock session died lets its running jobs go on, unprotected by their lock.',
    edits: [
      {
        file: 'src/fire/local-runs.ts',
        find: "for (const run of this.runs) run.control.stop(why, this.lostKillGraceMs, 'lost');",
        replace:
          "for (const run of [...this.runs].slice(this.runs.size)) run.control.stop(why, this.lostKillGraceMs, 'lost');",
      },
    ],
    killers: [
      {
        file: 'test/e2e/runner-death.test.ts',
        test: 'aborts the job, records it lost, reopens the session',
      },
    ],
  },
  {
    id: 'read-only-runs',
    guarantee: 'fail-closed',
    what: 'GET_LOCK no longer checks `read_only`: a demoted primary hands out winners.',
    edits: [
      {
        file: 'src/coordination/lock-session.ts',
        find: "'SELECT CASE WHEN @@global.read_only THEN -1 ELSE GET_LOCK(?, ?) END AS got'",
        replace: "'SELECT GET_LOCK(?, ?) AS got'",
      },
      {
        file: 'src/coordination/lock-session.ts',
        find: '`CASE WHEN @@global.read_only THEN -1 ELSE GET_LOCK(?, 0) END AS g${i}`',
        replace: '`GET_LOCK(?, 0) AS g${i}`',
      },
    ],
    killers: [{ file: 'test/e2e/read-only.test.ts', test: 'runs nothing while read-only' }],
  },
  {
    id: 'galera-accepted',
    guarantee: 'fail-closed',
    what: 'A Galera node, where GET_LOCK is local to one node, is no longer refused.',
    edits: [
      {
        file: 'src/store/server-check.ts',
        find: '  if (facts.wsrep) {',
        replace: '  if (facts.wsrep && facts.version === "never") {',
      },
    ],
    killers: [
      {
        file: 'test/e2e/fail-closed.test.ts',
        test: 'exit 78 naming Galera/wsrep, and run nothing',
      },
    ],
  },
  {
    id: 'fire-key-unchecked',
    guarantee: 'fail-closed',
    what: 'A database whose `baton_runs` lost its unique fire key is no longer refused at start-up.',
    edits: [
      {
        file: 'src/store/server-check.ts',
        find: "if (columns !== 'namespace,job,scheduled_at,rerun,winner') {",
        replace: "if (columns === 'never') {",
      },
    ],
    killers: [{ file: 'test/e2e/fail-closed.test.ts', test: 'without its unique fire key' }],
  },
  {
    id: 'invalid-job-dropped',
    guarantee: 'bad-input',
    what: 'A schedules file with a bad job is applied without it, as long as some job is valid.',
    edits: [
      {
        file: 'src/config/load.ts',
        find: 'if (problems.length > 0) throw new ConfigError(problems);',
        replace:
          'if (problems.length > 0 && config.jobs.length === 0) throw new ConfigError(problems);',
      },
    ],
    killers: [
      {
        file: 'test/e2e/config-errors.test.ts',
        test: '`baton start` with an invalid file exits 78 before touching the database',
      },
      { file: 'test/e2e/reload.test.ts', test: 'refuses an invalid file (the old schedule stays)' },
    ],
  },
  {
    id: 'password-shown',
    guarantee: 'secrets',
    what: 'URLs in messages keep their password.',
    edits: [
      {
        file: 'src/config/database-url.ts',
        find: "if (parsed.password) parsed.password = '***';",
        replace: '',
      },
    ],
    killers: [
      { file: 'test/e2e/secrets-and-grants.test.ts', test: 'its log never contains the password' },
      {
        file: 'test/e2e/config-errors.test.ts',
        test: 'an unreachable server is exit 69, with the password masked',
      },
    ],
  },
  {
    id: 'runner-env-to-jobs',
    guarantee: 'secrets',
    what: "Jobs inherit the runner's BATON_* settings, BATON_DATABASE_URL and its password with them.",
    edits: [
      {
        file: 'src/execution/job-environment.ts',
        find: "if (!key.startsWith('BATON_') && !withhold.has(key)) env[key] = value;",
        replace: 'if (!withhold.has(key)) env[key] = value;',
      },
    ],
    killers: [
      {
        file: 'test/e2e/secrets-and-grants.test.ts',
        test: 'the job never sees the database password',
      },
    ],
  },
  {
    id: 'connection-url-to-jobs',
    guarantee: 'secrets',
    what: "Jobs inherit the variables that hold their connections' URLs (`urlFromEnv`).",
    edits: [
      {
        file: 'src/execution/job-environment.ts',
        find: "if (!key.startsWith('BATON_') && !withhold.has(key)) env[key] = value;",
        replace: "if (!key.startsWith('BATON_')) env[key] = value;",
      },
    ],
    killers: [{ file: 'test/e2e/fan-out.test.ts', test: 'its URL never reaches the environment' }],
  },
  {
    id: 'stop-abandons-runs',
    guarantee: 'graceful-stop',
    what:
      'A graceful stop closes the connections without waiting for the runs it stopped: their ' +
      'rows stay `running`.',
    edits: [
      {
        file: 'src/daemon/runner.ts',
        find: '    await this.dispatcher.finished();\n    if (!first) return;',
        replace: '    if (!first) return;',
      },
    ],
    killers: [
      {
        file: 'test/e2e/runner-death.test.ts',
        test: 'stops a job longer than the grace: interrupted',
      },
    ],
  },
  {
    id: 'prune-running',
    guarantee: 'retention',
    what: 'Retention deletes old `running` rows too (a run that is still going, or waits to be reaped).',
    edits: [
      {
        file: 'src/store/prune.ts',
        find: "const PRUNED_STATUSES = RUN_STATUSES.filter((s) => s !== 'running');",
        replace: 'const PRUNED_STATUSES = RUN_STATUSES;',
      },
      {
        file: 'src/store/prune.ts',
        find: "DELETE FROM baton_runs WHERE id IN (?) AND status <> 'running'",
        replace: 'DELETE FROM baton_runs WHERE id IN (?)',
      },
    ],
    killers: [{ file: 'test/e2e/retention.test.ts', test: 'honours retention: { runs, skips }' }],
  },
  {
    id: 'prune-latest-success',
    guarantee: 'retention',
    what: "Retention deletes a job's latest success when it is old (the dead-man's switch loses it).",
    edits: [
      {
        file: 'src/store/prune.ts',
        find: "if (status === 'done') bound = await keepLatestDone(db, namespace, job, bound);",
        replace: 'void keepLatestDone;',
      },
    ],
    killers: [
      { file: 'test/e2e/retention.test.ts', test: 'deletes exactly the rows older than the bound' },
    ],
  },
  {
    id: 'heartbeat-without-deadline',
    guarantee: 'lost-lock',
    what:
      "The lock session's heartbeat waits as long as it takes: behind a dropped link (no FIN, no " +
      'RST) the runner never gives its session up, and its job runs on after the server frees ' +
      'its lock.',
    edits: [
      {
        file: 'src/coordination/lock-session.ts',
        find: "            [],\n            options.deadlineMs,\n          );\n        }, 'first'),\n        options.deadlineMs,\n",
        replace:
          "            [],\n            options.deadlineMs * 100,\n          );\n        }, 'first'),\n        options.deadlineMs * 100,\n",
      },
    ],
    killers: [
      {
        file: 'test/e2e/partition.test.ts',
        test: 'aborts its run before the server frees its lock; no two runs ever overlap',
      },
    ],
  },
  {
    id: 'spawner-ignores-lease',
    guarantee: 'no-overlap',
    what:
      "The spawner ignores the runner's lease: a stalled runner's job runs on beside the next " +
      "fire's run, after the stalled runner's lock session was killed, until the stall ends.",
    edits: [
      {
        file: 'src/execution/spawner.ts',
        find: "else if (req?.kind === 'lease') renewLease(req.ms);",
        replace: "else if (req?.kind === 'lease') void renewLease;",
      },
    ],
    killers: [
      {
        file: 'test/e2e/run-lease.test.ts',
        test: 'stall, then KILL of its lock session: the spawner stops the job within the bound',
      },
    ],
  },
  {
    id: 'watchdog-without-lease',
    guarantee: 'no-overlap',
    what:
      "A module job's watchdog watches for its runner's death only, not for the lease: a " +
      "stalled runner's module job outlives the lock it ran under.",
    edits: [
      {
        file: 'src/execution/watchdog.ts',
        // No first wait, and a renewal sets none: only end-of-file stops the run.
        find: "const first = remaining != null ? seconds(remaining) : '';",
        replace: "const first = remaining != null ? '' : '';",
      },
      {
        file: 'src/execution/watchdog.ts',
        find: 'renew) t="$term" ;;',
        replace: 'renew) t="" ;;',
      },
    ],
    killers: [
      {
        file: 'test/e2e/run-lease.test.ts',
        test: 'a module job (its own watchdog, not the spawner) is stopped within the bound too',
      },
    ],
  },
  {
    id: 'spawn-without-lock-check',
    guarantee: 'lost-lock',
    what:
      'The job is started without a look at its lock session: a fire whose session died while ' +
      'it was being claimed starts its job, which is only aborted once it runs.',
    edits: [
      {
        file: 'src/fire/run-fire.ts',
        find: 'if (!c.lock.usable) {',
        replace: 'if ((() => false)()) {',
      },
    ],
    killers: [
      {
        file: 'test/e2e/spawn-after-loss.test.ts',
        test: 'does not start the job: the row is lost, "not started", and nothing ran',
      },
    ],
  },
  {
    id: 'skip-for-bookkeeping',
    guarantee: 'visible',
    what:
      'A fire is skipped for a run that is over but for its verdict ("an earlier run is still ' +
      'running", untrue): with the verdict slow to write, every runner skips and the fire has ' +
      'no winner.',
    edits: [
      {
        file: 'src/fire/local-runs.ts',
        find: 'if (local?.control.processesEnded) {',
        replace: 'if (local?.control.processesEnded && local.job === "") {',
      },
    ],
    killers: [
      {
        file: 'test/in-process/verdict-pending.test.ts',
        test: 'has a winner: the run is over, only its bookkeeping was pending',
      },
    ],
  },
  {
    id: 'lost-session-left-on-server',
    guarantee: 'lost-lock',
    what:
      'A runner back from a lost session leaves that session to the server: over a link that ' +
      'lost its goodbye, the session and its locks live on for the idle timeout, and every ' +
      "runner skips the job's fires for a run aborted long ago.",
    edits: [
      {
        file: 'src/daemon/link.ts',
        find: 'if (lost) void this.endLostSession(lost);',
        replace: 'if (lost) void this.endLostSession;',
      },
    ],
    killers: [
      {
        file: 'test/e2e/lost-session-ended.test.ts',
        test: 'is KILLed by its runner once back',
      },
    ],
  },
  {
    id: 'failover-not-noticed',
    guarantee: 'one-winner',
    what:
      'A runner reconnecting to another server (a promoted replica) takes it for the old one: ' +
      'the fires whose rows were lost with the replication lag look unattempted and are caught ' +
      'up, so they run twice.',
    edits: [
      {
        file: 'src/daemon/failover.ts',
        find: 'this.server != null && this.server !== facts.identity',
        replace: 'this.server != null && this.server === "" + facts.identity.length',
      },
    ],
    killers: [
      {
        file: 'test/e2e/failover.test.ts',
        test: 'records the lost fires in doubt and runs none twice (onFailover: catchUp runs them once)',
      },
    ],
  },
  {
    id: 'in-doubt-caught-up',
    guarantee: 'one-winner',
    what:
      'After a failover the recovery ignores it: the fires in doubt are caught up like fires ' +
      'nobody attempted, and those that ran on the old primary run again.',
    edits: [
      {
        file: 'src/daemon/recovery.ts',
        find: 'await setAsideInDoubt(c, c.failover ?? null, job, due, from);',
        replace: 'await setAsideInDoubt(c, c.failover ? null : null, job, due, from);',
      },
    ],
    killers: [
      {
        file: 'test/e2e/failover.test.ts',
        test: 'records the lost fires in doubt and runs none twice (onFailover: catchUp runs them once)',
      },
    ],
  },
  {
    id: 'run-ends-at-first-exit',
    guarantee: 'no-overlap',
    what:
      "A run ends when its first process exits: the stop's SIGKILL is cancelled there and what " +
      "the process left in its group gets SIGTERM only, so a wrapper's slow or SIGTERM-deaf child " +
      'lives on beside the retry, the next run or after the runner.',
    edits: [
      {
        file: 'src/execution/job-launch.ts',
        find: 'child.pid == null ? Promise.resolve() : options.processes.whenRunGone(child.pid);',
        replace: 'child.pid == null ? Promise.resolve() : Promise.resolve(options.processes);',
      },
    ],
    killers: [
      {
        file: 'test/e2e/stopped-group.test.ts',
        test: 'SIGKILLs a child that ignores SIGTERM at the grace, then retries',
      },
      {
        file: 'test/e2e/stopped-group.test.ts',
        test: "holds the lock until its slow child is gone: another host's baton run waits",
      },
    ],
  },
  {
    id: 'kill-namespace-checked-after',
    guarantee: 'namespaces',
    what:
      "The write API's kill checks the run's namespace after the kill, as before issue 34: the " +
      "order names no namespace, so another namespace's run is killed, then answered 404.",
    edits: [
      {
        file: 'src/http/write-actions.ts',
        find: '    runId,\n    namespace,\n    operator: r.operator,',
        replace: '    runId,\n    namespace: null,\n    operator: r.operator,',
      },
      {
        file: 'src/http/write-actions.ts',
        find: "  if (outcome.kind === 'not-found') {\n    throw new ApiError(404, 'not-found', `no run",
        replace:
          "  if (outcome.kind === 'not-found' || outcome.run.namespace !== namespace) {\n" +
          "    throw new ApiError(404, 'not-found', `no run",
      },
    ],
    killers: [
      {
        file: 'test/e2e/write-api.test.ts',
        test: "refuses to kill another namespace's run: 404, and the run goes on untouched",
      },
    ],
  },
  {
    id: 'pool-slot-not-taken',
    guarantee: 'pools',
    what: "Contention forgets the job's pool: runs are claimed without a slot, as many as fire.",
    edits: [
      {
        file: 'src/coordination/fire-protocol.ts',
        find: '    pool: options.pool ? poolClaim(c, options.pool, options.signal) : null,',
        replace: '    pool: null,',
      },
    ],
    killers: [
      {
        file: 'test/in-process/pools-library.test.ts',
        test: 'lets one handler of the pool run at a time across three replicas',
      },
      {
        file: 'test/e2e/pools.test.ts',
        test: 'never lets a third run of its jobs live',
      },
    ],
  },
  {
    id: 'pool-slot-nests',
    guarantee: 'pools',
    what:
      'A runner asks for a slot of its pool that it already holds for another run: GET_LOCK ' +
      'nests within its session, so two of its runs share one slot and the pool runs one more.',
    edits: [
      {
        file: 'src/coordination/lock-session.ts',
        find: '`WHEN IS_FREE_LOCK(?) = 1 AND GET_LOCK(?, 0) = 1 THEN ${k + 1}`',
        replace: '`WHEN ? IS NOT NULL AND GET_LOCK(?, 0) = 1 THEN ${k + 1}`',
      },
    ],
    killers: [
      {
        file: 'test/in-process/pools-library.test.ts',
        test: 'lets one handler of the pool run at a time across three replicas',
      },
    ],
  },
  {
    id: 'pool-slot-released-at-claim',
    guarantee: 'pools',
    what:
      "A run gives its pool's slot back once its claim is written, not after its verdict: the " +
      'slot guards the claim only, and the next fires of the pool start beside it.',
    edits: [
      {
        file: 'src/coordination/fire-protocol.ts',
        find: '    return { won: true, runId: claimed, lockName, slot, rerun, poolLock };',
        replace:
          '    if (poolLock) await c.lock.release(poolLock);\n' +
          '    return { won: true, runId: claimed, lockName, slot, rerun, poolLock: null };',
      },
    ],
    killers: [
      {
        file: 'test/in-process/pools-library.test.ts',
        test: 'lets one handler of the pool run at a time across three replicas',
      },
    ],
  },
  {
    id: 'calendar-ignored',
    guarantee: 'not-when-told',
    what:
      "A job's calendars no longer filter its fires: a holiday's instant runs (and is still " +
      'recorded as skipped), a shifted fire runs at both instants.',
    edits: [
      {
        file: 'src/schedule/compound.ts',
        find: 'const union = filter ? (after: Date) => filter.next(unionOfParts, after) : unionOfParts;',
        replace: 'const union = unionOfParts;',
      },
    ],
    killers: [
      {
        file: 'test/in-process/calendars.test.ts',
        test: 'run nothing inside it, write one calendar row per excluded instant, and run a moved fire once',
      },
    ],
  },
  {
    id: 'blackout-ignored',
    guarantee: 'not-when-told',
    what:
      "A fire's pause check no longer looks at the blackouts: the fires inside one run as if it " +
      'were not there.',
    edits: [
      {
        file: 'src/coordination/fire-batches.ts',
        find: '          coveringBlackout(blackouts, job, scheduledAt),',
        replace:
          '          (blackouts.length < 0 ? coveringBlackout(blackouts, job, scheduledAt) : null),',
      },
    ],
    killers: [
      {
        file: 'test/in-process/blackout.test.ts',
        test: 'skips every fire inside it as paused, on every runner; runs again by itself; told twice',
      },
    ],
  },
  {
    id: 'definition-fence-dropped',
    guarantee: 'one-timing',
    what:
      "A scheduled fire's claim no longer checks the job's schedule as the database has it: a " +
      'runner whose read of the timing versions is stale (a stalled database, a paused server) ' +
      'runs the timing the fleet has left, and a replica that could not read a removal runs the key.',
    edits: [
      {
        file: 'src/store/fire-writes.ts',
        find: "WHERE NOW(3) >= f.scheduled_at AND ${definitionFence('f')} ${extra}`",
        replace: 'WHERE NOW(3) >= f.scheduled_at ${extra}`',
      },
    ],
    killers: [
      {
        file: 'test/in-process/definition-fence.test.ts',
        test: 'a runner whose read of the versions is stale claims nothing after the switch',
      },
      {
        file: 'test/in-process/definition-fence.test.ts',
        test: 'removed where the replica cannot see it, fires no more',
      },
    ],
  },
  {
    id: 'stale-fire-dispatched',
    guarantee: 'one-timing',
    what:
      'A due fire of a schedule no longer in force (the loop found it due before the versions ' +
      'were read again: a runner paused across a switch) is contended anyway, under the new ' +
      "version's stamp, which the claim's fence lets through.",
    edits: [
      {
        file: 'src/daemon/dispatcher.ts',
        find: 'if (schedule && !isFireOf(schedule, fire.scheduledAt)) {',
        replace: 'if (schedule && !isFireOf(schedule, fire.scheduledAt) && job.name === "") {',
      },
    ],
    killers: [
      {
        file: 'test/in-process/definition-fence.test.ts',
        test: 'a due fire of the old timing is dropped once the versions are read again',
      },
    ],
  },
  {
    id: 'fenced-writes',
    guarantee: 'fencing',
    what:
      'The fenced helpers (`ctx.db.fenced`, the helpers given `fence`) skip the fence check: a ' +
      'handler that ignored its signal, or a frozen host thawed, commits its writes after the ' +
      "job's next run started.",
    edits: [
      {
        file: 'src/sdk/fence.ts',
        find: '    await checkFence(conn, f);\n    return value;',
        replace: '    return value;',
      },
    ],
    killers: [
      {
        file: 'test/e2e/fencing.test.ts',
        test: 'cannot commit a write after the next run started: every later write is refused',
      },
      {
        file: 'test/e2e/fencing.test.ts',
        test: 'no write of the stopped run lands after the next run started',
      },
      {
        file: 'test/in-process/fencing.test.ts',
        test: 'refuses a stale run: fenced() rolls back and throws StaleFenceError',
      },
    ],
  },
];
