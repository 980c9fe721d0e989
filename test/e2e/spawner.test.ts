/**
 * The runner's spawner (src/execution/spawner.ts) with real `baton start` processes:
 * - `kill -9` of a runner whose command job runs through the spawner: the spawner (the job's
 *   parent, not the runner) kills the job's whole process group, a grandchild too, and exits; its
 *   own environment never held the runner's BATON_DATABASE_URL.
 * - `kill -9` of the spawner mid-run: the runner kills the job's group, the row ends `failed` with
 *   "baton's spawner process died", and a later fire runs `done` under a new spawner.
 * Every check is against real processes (/proc) and the real rows in the shared MariaDB.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { runs } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { killGroup, parentOf, pidFile, processGone } from '../helpers/procfs.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('spawner', { perTest: true });

/** The runner's spawner, from the pids its first run wrote: parent of the job, child of the runner. */
async function spawnerOf(runner: RunnerProcess, dir: string, runId: number): Promise<number> {
  const spawner = await pidFile(dir, `parent-${runId}.pid`);
  expect(spawner).not.toBe(runner.child.pid);
  expect(parentOf(spawner)).toBe(runner.child.pid);
  expect(readFileSync(`/proc/${spawner}/cmdline`, 'utf8')).toContain('spawner.js');
  return spawner;
}

/**
 * The first run: long, with a grandchild, both ignoring SIGTERM (only the SIGKILL that follows it
 * ends them); later ones short. Each writes its parent's pid.
 */
const SCHEDULE = `
namespace: spawner
jobs:
  job:
    schedule: "*/2 * * * * *"
    overlap: skip
    command:
      - sh
      - -c
      - 'echo $PPID > parent-$BATON_RUN_ID.pid; if mkdir first.marker 2>/dev/null; then trap "" TERM; sleep 30 & echo $! > child.pid; echo $$ > job.pid; wait; else echo short; fi'
`;

describe('kill -9 of a runner', () => {
  it('the spawner kills the job and its grandchild, then exits', async () => {
    const config = writeSchedule(SCHEDULE);
    const dir = path.dirname(config);
    const [runner] = await fleet.start(['solo'], {
      config,
      // The URL in the runner's environment too: the spawner must not inherit it.
      env: { BATON_DATABASE_URL: fleet.db.url },
    });
    const line = await runner!.waitForLog('fire won: running');
    const runId = Number(line.runId);
    const jobPid = await pidFile(dir, 'job.pid');
    const childPid = await pidFile(dir, 'child.pid');
    expect(Number(line.jobPid)).toBe(jobPid);
    const spawner = await spawnerOf(runner!, dir, runId);
    const environ = readFileSync(`/proc/${spawner}/environ`, 'utf8');
    expect(environ).not.toContain('BATON_');
    expect(environ).not.toContain(fleet.db.url);

    expect(await runner!.stop('SIGKILL')).toBeNull();
    // SIGTERM to the group at once, SIGKILL a second later; then the spawner exits. The job
    // ignores SIGTERM: a moment on, it is still there, and only the SIGKILL ends it.
    await sleep(200);
    expect({ job: processGone(jobPid), grandchild: processGone(childPid) }).toEqual({
      job: false,
      grandchild: false,
    });
    const gone = await waitFor(
      'the job, its grandchild and the spawner to be gone',
      () => processGone(jobPid) && processGone(childPid) && processGone(spawner),
      { timeoutMs: 5_000, intervalMs: 20 },
    ).catch(() => false);
    // Read before cleaning up: the test's own SIGKILL must not pass for the spawner's.
    const after = {
      job: processGone(jobPid),
      grandchild: processGone(childPid),
      spawner: processGone(spawner),
    };
    if (!gone) killGroup(jobPid); // leave nothing behind for the next test
    expect(after).toEqual({ job: true, grandchild: true, spawner: true });
  });
});

describe('kill -9 of the spawner mid-run', () => {
  it('fails the run saying so, kills its group, and a later fire runs under a new spawner', async () => {
    const config = writeSchedule(SCHEDULE);
    const dir = path.dirname(config);
    const db = fleet.db;
    const [runner] = await fleet.start(['solo'], { config });
    const line = await runner!.waitForLog('fire won: running');
    const runId = Number(line.runId);
    const jobPid = await pidFile(dir, 'job.pid');
    const childPid = await pidFile(dir, 'child.pid');
    const spawner = await spawnerOf(runner!, dir, runId);

    process.kill(spawner, 'SIGKILL');
    // The runner sends SIGTERM to the group, SIGKILL a second later; the job ignores SIGTERM.
    await sleep(200);
    expect(processGone(jobPid) || processGone(childPid), 'the job survived the SIGTERM').toBe(
      false,
    );

    const failed = await waitFor(
      'the run to end failed',
      async () => (await runs(db, 'job')).find((r) => r.id === runId && r.status !== 'running'),
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    expect(failed).toMatchObject({
      status: 'failed',
      exit_code: null,
      error: "baton's spawner process died (killed by SIGKILL); the run's processes were killed",
    });
    // Ended only once its processes were: read before cleaning up, so that the test's own
    // SIGKILL does not pass for the runner's.
    const after = { job: processGone(jobPid), grandchild: processGone(childPid) };
    if (!after.job || !after.grandchild) killGroup(jobPid);
    expect(after).toEqual({ job: true, grandchild: true });

    const later = await waitFor(
      'a later fire done',
      async () =>
        (await runs(db, 'job')).find((r) => r.winner === 1 && r.id > runId && r.status === 'done'),
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    expect(later).toMatchObject({
      host: 'solo',
      exit_code: 0,
      error: null,
      output_tail: 'short\n',
    });
    const newSpawner = await spawnerOf(runner!, dir, later.id);
    expect(newSpawner).not.toBe(spawner);

    expect(await runner!.stop('SIGTERM')).toBe(0);
    const rows = await runs(db, 'job');
    expect(rows.filter((r) => r.status === 'running')).toEqual([]);
    expect(rows.filter((r) => r.status === 'failed').map((r) => r.id)).toEqual([runId]);
    // The failed run is a warning (as any failed run); nothing else went wrong.
    expect(runner!.errors()).toEqual([]);
    expect(runner!.stderr).toBe('');
    // A runner that stopped leaves no spawner behind.
    await waitFor('the new spawner to exit', () => processGone(newSpawner), { timeoutMs: 5_000 });
  });
});

describe('a stuck spawner (SIGSTOP)', () => {
  it('does not keep a timeout or a stop from reaching the job', async () => {
    const config = writeSchedule(`
namespace: spawner
jobs:
  long:
    schedule: "*/2 * * * * *"
    timeout: 2s
    command: ["sh", "-c", "echo $PPID > parent-$BATON_RUN_ID.pid; echo $$ > job.pid; exec sleep 300"]
`);
    const dir = path.dirname(config);
    const db = fleet.db;
    const [runner] = await fleet.start(['stuck'], { config, args: ['--grace', '1'] });
    const line = await runner!.waitForLog('fire won: running');
    const runId = Number(line.runId);
    const jobPid = await pidFile(dir, 'job.pid');
    const spawner = await spawnerOf(runner!, dir, runId);
    process.kill(spawner, 'SIGSTOP');
    try {
      // The timeout's signals go from the runner to the job's group, not through the spawner.
      await waitFor('the job killed by its timeout', () => processGone(jobPid), {
        timeoutMs: 10_000,
      });
      // …while the spawner is still there, stopped: it was not what ended the job.
      expect(processGone(spawner)).toBe(false);
      // Its verdict is the spawner's to report; a spawner that does not is killed, and the run
      // ends as the spawner's runs do when it dies.
      const ended = await waitFor(
        'the run ended',
        async () => (await runs(db, 'long')).find((r) => r.id === runId && r.status !== 'running'),
        { timeoutMs: 15_000, intervalMs: 100 },
      );
      expect(ended.status).toMatch(/^(timeout|failed)$/);
      // A stop is not held up either: the runner exits by itself (a SIGKILL after 20 s would
      // give no exit code).
      expect(await runner!.stop('SIGTERM', 20_000)).toBe(0);
    } finally {
      try {
        process.kill(spawner, 'SIGCONT');
        process.kill(spawner, 'SIGKILL');
      } catch {
        // Already gone (killed by the runner).
      }
      killGroup(jobPid);
    }
  });
});
