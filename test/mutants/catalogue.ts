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
        file: 'src/store/migrations/0001_create_baton_runs.sql',
        find: 'UNIQUE KEY baton_runs_fire',
        replace: 'KEY baton_runs_fire',
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
        file: 'src/coordination/run-fire.ts',
        find: 'await attemptRuns(c, job, fire, control, contendMs, options);',
        replace:
          'await attemptRuns(c, job, fire, control, contendMs, { ...options, heldLock: claim.lockName } as RunFireOptions);',
      },
      {
        file: 'src/coordination/run-fire.ts',
        find: "void run.stop(`timeout: the run took longer than ${limit}`, KILL_GRACE_MS, 'timeout');",
        replace:
          "void run.stop(`timeout: the run took longer than ${limit}`, KILL_GRACE_MS, 'timeout');\n" +
          '            const held = (options as { heldLock?: string | null }).heldLock;\n' +
          '            if (held) void c.lock.release(held);',
      },
    ],
    killers: [
      {
        file: 'test/e2e/policies.test.ts',
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
        find: "for (const run of groups) run.signalGroup('SIGKILL');",
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
        file: 'src/execution/job-process.ts',
        find: `'kill -s TERM -- "-$1" 2>/dev/null; sleep 1; kill -s KILL -- "-$1" 2>/dev/null; exit 0'`,
        replace: `'kill -s TERM -- "-$1" 2>/dev/null; exit 0'`,
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
        find: "      signalAll('SIGKILL');\n",
        replace: '',
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
        file: 'src/coordination/lock-session.ts',
        find: 'for (const reject of [...this.unsettled]) reject(error);',
        replace: 'void error;',
      },
    ],
    killers: [{ file: 'test/e2e/lock-session.test.ts', test: 'fails them at once as not run' }],
  },
  {
    id: 'claim-before-due',
    guarantee: 'no-early-start',
    what:
      "The claim no longer waits for the database's clock to reach the fire (`NOW(3) >= " +
      'scheduled_at`): a runner whose estimate of that clock is off starts the run early.',
    edits: [
      {
        file: 'src/store/runs.ts',
        find: "SELECT ?, ?, ?, ?, ?, 'running', ?, ?, ?, NOW(3), 1 FROM DUAL WHERE NOW(3) >= ?`,",
        replace:
          "SELECT ?, ?, ?, ?, ?, 'running', ?, ?, ?, NOW(3), 1 FROM DUAL WHERE ? IS NOT NULL`,",
      },
      {
        file: 'src/store/runs.ts',
        find: 'WHERE NOW(3) >= f.scheduled_at`,',
        replace: 'WHERE f.scheduled_at IS NOT NULL`,',
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
];
