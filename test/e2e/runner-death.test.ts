/**
 * A run never outlives its runner, and a run's row always ends with the truth about it:
 * - `kill -9` of the winning runner (3 runners): the watchdog kills the job's whole process group
 *   (a grandchild too), another runner's reaper marks the row `lost`, and a later fire runs on a
 *   survivor (guarantees 2 and 3).
 * - `KILL` of the lock session under a running job: the job is aborted, its row says `lost`, the
 *   runner opens a new session and runs the next fire normally (guarantee 2's bounded window).
 * - Graceful stop (SIGTERM): a job longer than `--grace` is stopped and recorded `interrupted`
 *   with its lock freed; one that fits in the grace is waited for and recorded `done`; a second
 *   SIGTERM ends the wait at once.
 * - Module jobs that end without settling (`process.exit` mid-work, a promise nothing keeps
 *   alive, a promise kept alive past `timeout`) are `failed`/`timeout`, never `done`.
 * Every check is against real processes (/proc) and the real rows in the shared MariaDB.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { jobLockName } from '../../src/lock-names.js';
import {
  BATON_BIN,
  baton,
  writeSchedule,
  type LogLine,
  type RunnerProcess,
} from '../helpers/cli.js';
import { lockIsFree, runs, type RunRow } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { useFleet } from '../helpers/fleet.js';
import { killGroup, pidFile, processGone, watchdogsOf } from '../helpers/procfs.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('runner_death', { perTest: true });
/** The kill -9 test's --reaper-interval. */
const REAPER_MS = 500;

async function runRow(id: number): Promise<RunRow & { lock_connection_id: number | null }> {
  const [row] = await fleet.db.query<RunRow & { lock_connection_id: number | null }>(
    'SELECT * FROM baton_runs WHERE id = ?',
    [id],
  );
  return row!;
}

/** Waits for a runner's 'fire won: running' line and returns it with the winner. */
async function firstWin(
  runners: RunnerProcess[],
  timeoutMs = 20_000,
): Promise<{ runner: RunnerProcess; line: LogLine }> {
  return waitFor(
    'a runner to win a fire',
    () => {
      for (const runner of runners) {
        const line = runner.lines.find((l) => l.msg === 'fire won: running');
        if (line) return { runner, line };
      }
      return undefined;
    },
    { timeoutMs },
  );
}

describe('kill -9 of the winning runner mid-run', () => {
  it('kills the job and its grandchild, the row becomes lost, and a survivor runs a later fire', async () => {
    const config = writeSchedule(`
namespace: death
jobs:
  long:
    schedule: "*/3 * * * * *"
    overlap: skip
    command:
      - sh
      - -c
      - 'trap "" TERM; echo $$ > job-$BATON_RUN_ID.pid; sleep 30 & echo $! > child-$BATON_RUN_ID.pid; wait'
`);
    const dir = path.dirname(config);
    const db = fleet.db;
    // The reapers look every 0.5 s (default 10 s): the dead runner's row is found at once, and
    // the live run below must survive more of their rounds than before (four, was two of 2 s).
    // At the end the survivors stop their run (which ignores SIGTERM) after the 1 s grace and
    // SIGKILL it 0.5 s later (runs.killGraceMs, default 5 s): how a stop ends a run is proven
    // by the graceful-stop tests below, with the defaults.
    const runners = await fleet.start(['a', 'b', 'c'], {
      config,
      args: ['--reaper-interval', `${REAPER_MS}ms`, '--grace', '1'],
      timings: { runs: { killGraceMs: 500 } },
    });

    const { runner: victim, line } = await firstWin(runners);
    const runId = Number(line.runId);
    const jobPid = Number(line.jobPid);
    expect(await pidFile(dir, `job-${runId}.pid`)).toBe(jobPid);
    const childPid = await pidFile(dir, `child-${runId}.pid`);
    expect(processGone(jobPid)).toBe(false);
    expect(processGone(childPid)).toBe(false);
    const before = await runRow(runId);
    expect(before).toMatchObject({ status: 'running', winner: 1, host: victim.host });

    expect(await victim.stop('SIGKILL')).toBeNull();
    // The watchdog: SIGTERM to the job's process group at once, SIGKILL a second later. The job
    // and its grandchild ignore SIGTERM, so they are still there a moment on, and only the
    // SIGKILL ends them. Soft, so that the rest (the row, the next fire) is checked even when a
    // job survived its runner.
    await sleep(200);
    expect
      .soft({ job: processGone(jobPid), grandchild: processGone(childPid) }, 'after the SIGTERM')
      .toEqual({ job: false, grandchild: false });
    const gone = await waitFor(
      'the job and its grandchild to be gone',
      () => processGone(jobPid) && processGone(childPid),
      { timeoutMs: 3_000, intervalMs: 20 },
    ).catch(() => false);
    expect
      .soft(
        { job: processGone(jobPid), grandchild: processGone(childPid), gone },
        'job processes 3.5 s after their runner was killed',
      )
      .toEqual({ job: true, grandchild: true, gone: true });
    if (!gone) killGroup(jobPid); // leave nothing behind for the next test

    // A survivor's reaper (every 0.5 s) finds the row's lock session gone.
    const survivors = runners.filter((r) => r !== victim);
    const lost = await waitFor(
      'the row to be declared lost',
      async () => {
        const row = await runRow(runId);
        return row.status === 'lost' ? row : undefined;
      },
      { timeoutMs: 2 * REAPER_MS + 6_000, intervalMs: 100 },
    );
    expect(lost.finished_at).not.toBeNull();
    expect(lost.error).toMatch(
      new RegExp(
        `^lost: its runner on ${victim.host} is gone \\(lock session ${before.lock_connection_id} ` +
          `ended, or the server restarted\\); noticed by (${survivors.map((s) => s.host).join('|')}) ` +
          // its reaper's round, or a winner of a later fire that took the job's lock first
          `(at |when it took the job's lock)`,
      ),
    );
    const noticer = survivors.find((s) => lost.error!.includes(`noticed by ${s.host} `))!;
    // Its log line comes after the row is written: waited for, not read at once.
    await noticer.waitForLog('run declared lost', (l) => Number(l.runId) === runId, 10_000);

    // A later fire has a winner on a survivor, running or already done.
    const later = await waitFor(
      'a later fire won by a survivor',
      async () =>
        (await runs(db, 'long')).find(
          (r) =>
            r.winner === 1 &&
            r.scheduled_at > before.scheduled_at &&
            (r.status === 'running' || r.status === 'done'),
        ),
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    expect(survivors.map((s) => s.host)).toContain(later.host);
    // The reapers (every 0.5 s) take only the dead runner's row: the survivor's 30 s run, alive,
    // is still `running` after four of their rounds (each of the two survivors').
    expect(later.status).toBe('running');
    await sleep(4 * REAPER_MS + 500);
    expect((await runRow(later.id)).status, 'the live run after four reaper rounds').toBe(
      'running',
    );

    // The survivors stop cleanly (the later run is stopped after the 1 s grace, and killed 0.5 s
    // on): no row is left running, and the victim's run stays lost.
    expect(await Promise.all(survivors.map((s) => s.stop('SIGTERM')))).toEqual([0, 0]);
    const rows = await runs(db, 'long');
    expect(rows.filter((r) => r.status === 'running')).toEqual([]);
    expect(rows.find((r) => r.id === runId)!.status).toBe('lost');
    expect(rows.find((r) => r.id === later.id)!.status).toMatch(/^(done|interrupted)$/);
    expectOneWinnerPerFire(rows, 'long', { noWinner: ['overlap', 'lock-being-released'] });
    // Only the victim's run was declared lost, by exactly one survivor.
    expect(rows.filter((r) => r.status === 'lost').map((r) => r.id)).toEqual([runId]);
    for (const s of survivors) {
      expect(s.errors(), s.host).toEqual([]);
      expect(s.stderr, s.host).toBe('');
    }
  });
});

describe('kill -9 of `baton run` mid-run', () => {
  it('its watchdog kills the job and its grandchild, which ignore SIGTERM', async () => {
    // `baton run` starts its job itself, with a watchdog of its own (a tiny `sh`), as the daemon
    // does for module jobs.
    const config = writeSchedule(`
namespace: manual-death
jobs:
  long:
    schedule: "0 3 * * *"
    command:
      - sh
      - -c
      - 'trap "" TERM; echo $$ > job.pid; sleep 30 & echo $! > child.pid; wait'
`);
    const dir = path.dirname(config);
    const manual = spawn(
      process.execPath,
      [BATON_BIN, 'run', 'long', '--config', config, '--database-url', fleet.db.url],
      { stdio: 'ignore' },
    );
    const exited = new Promise((resolve) => manual.once('exit', resolve));
    const jobPid = await pidFile(dir, 'job.pid');
    const childPid = await pidFile(dir, 'child.pid');
    try {
      // The watchdog is started before the job (a runner killed between the two spawns must not
      // leave a job without one): pids are handed out in order, so its pid is the lower, unless
      // pid_max wrapped between the two (the job's pid is then near the bottom of the range).
      const [dog, ...more] = watchdogsOf(manual.pid!);
      expect(more, 'one watchdog').toEqual([]);
      const wrapped = jobPid < dog! && jobPid < 1_000;
      expect(dog! < jobPid || wrapped, `watchdog ${dog} started before job ${jobPid}`).toBe(true);
      manual.kill('SIGKILL');
      await exited;
      // SIGTERM at once (ignored: both are still there), SIGKILL a second later.
      await sleep(200);
      expect({ job: processGone(jobPid), grandchild: processGone(childPid) }).toEqual({
        job: false,
        grandchild: false,
      });
      await waitFor(
        'the job and its grandchild to be gone',
        () => processGone(jobPid) && processGone(childPid),
        { timeoutMs: 5_000, intervalMs: 20 },
      );
    } finally {
      killGroup(jobPid);
    }
  });
});

describe('KILL of the lock session under a running job', () => {
  it('aborts the job, records it lost, reopens the session and runs later fires normally', async () => {
    // The first run is long (it takes the marker); later ones are short.
    const config = writeSchedule(`
namespace: killed
jobs:
  job:
    schedule: "* * * * * *"
    overlap: skip
    command:
      - sh
      - -c
      - 'if mkdir first.marker 2>/dev/null; then echo $$ > long.pid; sleep 30 & echo $! > child.pid; wait; else sleep 0.2; fi'
`);
    const dir = path.dirname(config);
    const db = fleet.db;
    const [runner] = await fleet.start(['solo'], {
      config,
      args: ['--heartbeat', '1s', '--heartbeat-deadline', '3s'],
    });
    const { line } = await firstWin([runner!]);
    const runId = Number(line.runId);
    const jobPid = await pidFile(dir, 'long.pid');
    expect(jobPid).toBe(Number(line.jobPid));
    const childPid = await pidFile(dir, 'child.pid');
    const before = await runRow(runId);
    expect(before.status).toBe('running');
    const sessionId = Number(before.lock_connection_id);
    expect(sessionId).toBeGreaterThan(0);

    await db.query('KILL ?', [sessionId]);

    // Heartbeat 1 s + deadline 3 s bound the detection; the job gets 1 s after SIGTERM.
    await waitFor(
      'the job and its child to be gone',
      () => processGone(jobPid) && processGone(childPid),
      { timeoutMs: 8_000, intervalMs: 20 },
    );
    const lost = await waitFor(
      'the row to be lost',
      async () => {
        const row = await runRow(runId);
        return row.status === 'lost' ? row : undefined;
      },
      { timeoutMs: 8_000, intervalMs: 50 },
    );
    expect(lost.error).toMatch(/^lost: the runner's lock session ended \(/);
    expect(lost.finished_at).not.toBeNull();

    const lostLine = await runner!.waitForLog('lock session lost');
    expect(lostLine.aborting).toEqual(['job']);
    expect(Number(lostLine.lockConnectionId)).toBe(sessionId);
    const reopened = await runner!.waitForLog('lock session reopened');
    expect(runner!.lines.indexOf(reopened)).toBeGreaterThan(runner!.lines.indexOf(lostLine));
    const newSession = Number(reopened.lockConnectionId);
    expect(newSession).not.toBe(sessionId);

    // Later fires run normally on the new session.
    const next = await waitFor(
      'a later fire done on the new session',
      async () =>
        (await runs(db, 'job')).find(
          (r) =>
            r.winner === 1 &&
            r.status === 'done' &&
            r.scheduled_at > before.scheduled_at &&
            Number((r as RunRow & { lock_connection_id: number }).lock_connection_id) ===
              newSession,
        ),
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    expect(next).toMatchObject({ host: 'solo', exit_code: 0, error: null });

    expect(await runner!.stop('SIGTERM')).toBe(0);
    const rows = await runs(db, 'job');
    expect(rows.filter((r) => r.status === 'running')).toEqual([]);
    expect(rows.filter((r) => r.status === 'lost').map((r) => r.id)).toEqual([runId]);
    expectOneWinnerPerFire(rows, 'job', { noWinner: ['overlap', 'lock-being-released'] });
    expect(runner!.lines.filter((l) => l.msg === 'lock session reopened')).toHaveLength(1);
    // Nothing went wrong but the lost session itself.
    expect(runner!.errors().filter((l) => l.msg !== 'lock session lost')).toEqual([]);
    expect(runner!.stderr).toBe('');
  });
});

describe('graceful stop (SIGTERM)', () => {
  it('stops a job longer than the grace: interrupted, lock free, process gone, exit 0', async () => {
    // The job takes a second to clean up after SIGTERM (as a batch that finishes its write does):
    // the runner waits for it before it records the verdict and lets go of the lock.
    const config = writeSchedule(`
namespace: graceful
jobs:
  long:
    schedule: "* * * * * *"
    command:
      - sh
      - -c
      - 'trap "sleep 1; echo cleaned > cleaned.txt; exit 0" TERM; echo $$ > job.pid; sleep 30 & echo $! > child.pid; wait'
`);
    const dir = path.dirname(config);
    const db = fleet.db;
    const [runner] = await fleet.start(['solo'], { config, args: ['--grace', '1'] });
    const { line } = await firstWin([runner!]);
    const runId = Number(line.runId);
    const jobPid = await pidFile(dir, 'job.pid');
    const childPid = await pidFile(dir, 'child.pid');
    const lock = jobLockName(db.name, 'graceful', 'long');
    expect(await lockIsFree(fleet.db, lock)).toBe(false);

    expect(await runner!.stop('SIGTERM')).toBe(0);

    const rows = await runs(db, 'long');
    expect(rows.filter((r) => r.status === 'running')).toEqual([]);
    const winners = rows.filter((r) => r.winner === 1);
    expect(winners.map((r) => r.id)).toEqual([runId]);
    expect(winners[0]).toMatchObject({
      status: 'interrupted',
      error: 'interrupted: the runner stopped (SIGTERM)',
    });
    expect(winners[0]!.finished_at).not.toBeNull();
    expect(await lockIsFree(fleet.db, lock)).toBe(true);
    // The runner waited for its job's exit, clean-up included; the grandchild got the same
    // SIGTERM (its group).
    expect(processGone(jobPid)).toBe(true);
    expect(readFileSync(path.join(dir, 'cleaned.txt'), 'utf8')).toBe('cleaned\n');
    await waitFor('the grandchild to be gone', () => processGone(childPid), { timeoutMs: 2_000 });
    expect(runner!.lines.some((l) => l.msg === 'runner stopped')).toBe(true);
    expect(runner!.errors()).toEqual([]);
  });

  it('waits for a job that finishes within the grace: done', async () => {
    const config = writeSchedule(`
namespace: graceful
jobs:
  short:
    schedule: "* * * * * *"
    command: ["sh", "-c", "sleep 3; echo finished > finished-$BATON_RUN_ID.txt"]
`);
    const dir = path.dirname(config);
    const db = fleet.db;
    const [runner] = await fleet.start(['solo'], { config, args: ['--grace', '20'] });
    const { line } = await firstWin([runner!]);
    const runId = Number(line.runId);

    expect(await runner!.stop('SIGTERM')).toBe(0);
    expect(runner!.lines.some((l) => l.msg === 'stopping: waiting for running jobs')).toBe(true);

    const rows = await runs(db, 'short');
    expect(rows.filter((r) => r.status === 'running')).toEqual([]);
    const winners = rows.filter((r) => r.winner === 1);
    expect(winners.map((r) => r.id)).toEqual([runId]);
    expect(winners[0]).toMatchObject({ status: 'done', exit_code: 0, error: null });
    expect(readFileSync(path.join(dir, `finished-${runId}.txt`), 'utf8')).toBe('finished\n');
    expect(await lockIsFree(fleet.db, jobLockName(db.name, 'graceful', 'short'))).toBe(true);
    expect(runner!.errors()).toEqual([]);
  });

  it('stops at once on a second SIGTERM during the grace', async () => {
    const GRACE_S = 30;
    const config = writeSchedule(`
namespace: graceful
jobs:
  long:
    schedule: "* * * * * *"
    command: ["sh", "-c", "echo $$ > job.pid; sleep 60"]
`);
    const dir = path.dirname(config);
    const db = fleet.db;
    const [runner] = await fleet.start(['solo'], { config, args: ['--grace', String(GRACE_S)] });
    const { line } = await firstWin([runner!]);
    const runId = Number(line.runId);
    const jobPid = await pidFile(dir, 'job.pid');

    const signalledAt = Date.now();
    const exit = runner!.stop('SIGTERM', 50_000);
    await runner!.waitForLog('stopping: waiting for running jobs');
    runner!.child.kill('SIGTERM');
    const code = await exit;
    const elapsed = Date.now() - signalledAt;
    expect(code).toBe(0);
    // Behaviour, not speed: the runner did not sit out the grace.
    expect(elapsed).toBeLessThan(GRACE_S * 1000);
    expect(runner!.lines.some((l) => l.msg === 'second signal: stopping running jobs now')).toBe(
      true,
    );

    const rows = await runs(db, 'long');
    expect(rows.filter((r) => r.status === 'running')).toEqual([]);
    const winners = rows.filter((r) => r.winner === 1);
    expect(winners.map((r) => r.id)).toEqual([runId]);
    expect(winners[0]).toMatchObject({
      status: 'interrupted',
      error: 'interrupted: the runner stopped (SIGTERM)',
    });
    expect(processGone(jobPid)).toBe(true);
    expect(await lockIsFree(fleet.db, jobLockName(db.name, 'graceful', 'long'))).toBe(true);
    expect(runner!.errors()).toEqual([]);
  });
});

describe('module jobs that end without settling', () => {
  const schedule = () =>
    writeSchedule(
      `
namespace: modules
jobs:
  exits-zero:
    schedule: "0 3 * * *"
    module: exits-zero.mjs
  exits-three:
    schedule: "0 3 * * *"
    module: exits-three.mjs
  never-settles:
    schedule: "0 3 * * *"
    module: never-settles.mjs
  kept-alive:
    schedule: "0 3 * * *"
    module: kept-alive.mjs
    timeout: 2s
`,
      {
        'exits-zero.mjs':
          'export default async () => {\n' +
          '  await new Promise((r) => setTimeout(r, 50));\n' +
          '  process.exit(0);\n' +
          '  await new Promise((r) => setTimeout(r, 5000));\n' +
          '};\n',
        'exits-three.mjs':
          'export default async () => {\n' +
          '  await new Promise((r) => setTimeout(r, 50));\n' +
          '  process.exit(3);\n' +
          '};\n',
        'never-settles.mjs': 'export default () => new Promise(() => {});\n',
        'kept-alive.mjs':
          'export default () => new Promise(() => { setInterval(() => {}, 1000); });\n',
      },
    );

  async function runJob(config: string, job: string) {
    const result = await baton([
      'run',
      job,
      '--config',
      config,
      '--database-url',
      fleet.db.url,
      '--host',
      'laptop',
    ]);
    const rows = await runs(fleet.db, job);
    expect(rows, result.stderr).toHaveLength(1);
    return { result, row: rows[0]! };
  }

  it('process.exit(0) before the promise settles is a failure, not a success', async () => {
    const { result, row } = await runJob(schedule(), 'exits-zero');
    expect(row).toMatchObject({ winner: 1, triggered_by: 'manual', status: 'failed' });
    expect(row.error).toMatch(/process\.exit/);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/process\.exit/);
  });

  it('process.exit(3) mid-work fails with the job’s own code', async () => {
    const { result, row } = await runJob(schedule(), 'exits-three');
    expect(row).toMatchObject({ status: 'failed', exit_code: 3 });
    expect(row.error).toMatch(/process\.exit\(3\)/);
    expect(result.code).toBe(3);
  });

  it('a promise that never settles, with nothing keeping it alive, fails', async () => {
    const { result, row } = await runJob(schedule(), 'never-settles');
    expect(row.status).toBe('failed');
    expect(row.error).toMatch(/never settled/);
    expect(result.code).toBe(1);
  });

  it('a promise kept alive past its timeout is recorded timeout', async () => {
    const { result, row } = await runJob(schedule(), 'kept-alive');
    expect(row.status).toBe('timeout');
    expect(row.error).toBe('timeout: the run took longer than 2s');
    expect(result.code).toBe(1);
  });
});
