/**
 * The spawner (src/execution/spawner.ts) seen through `startJob`, as the daemon uses it: a command
 * job without `tee` runs as a child of the spawner, not of this process, and ends exactly as a job
 * spawned here would:
 * - the job's environment is the one a direct spawn gives (no BATON_* of the runner, none of the
 *   withheld variables), and the spawner's own environment is empty;
 * - spawn failures read as before (command not found, working directory not found, permission
 *   denied);
 * - a stop reaches the whole process group (a grandchild too), and the first stop's status wins;
 * - a spawner killed with SIGKILL under a live run: the runner kills the run's group, the run ends
 *   `failed` saying so, and the next run gets a new spawner.
 * Needs `npm run build` (the spawner runs from dist/, like the module host).
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import type { JobDefinition } from '../../src/config/schema.js';
import type { FireInfo } from '../../src/execution/job-context.js';
import { startJob } from '../../src/execution/job-process.js';
import { Spawner } from '../../src/execution/spawner-client.js';
import { parentOf, pidFile, processGone } from '../helpers/procfs.js';
import { waitFor } from '../helpers/wait.js';

/** This file's spawner, as a runner owns one. */
const launchers = { spawner: new Spawner() };
afterAll(() => launchers.spawner.close());

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'baton-spawner-'));
});

/** Variables set in this process for the test (the runner's environment, as it were). */
const planted = new Set<string>();
function plant(key: string, value: string): void {
  process.env[key] = value;
  planted.add(key);
}
afterEach(() => {
  for (const key of planted) delete process.env[key];
  planted.clear();
});

/** One job from a schedules file in the test's folder. */
function job(yaml: string): JobDefinition {
  const config = parseConfig(
    path.join(dir, 'schedules.yaml'),
    `jobs:\n  j:\n    schedule: "0 3 * * *"\n${yaml}`,
  );
  return config.jobs[0]!;
}

const FIRE: FireInfo = {
  job: 'j',
  runId: 42,
  fence: 42,
  scheduledAt: new Date('2030-01-01T03:00:00Z'),
  trigger: 'schedule',
  host: 'unit',
  attempt: 1,
  worker: { slot: 1, count: 1 },
};

function environment(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

/** A job that leaves a grandchild, writes both pids and its parent's, and waits. */
const LONG_JOB = `    command: ["sh", "-c", "echo $PPID > parent.pid; sleep 30 & echo $! > child.pid; echo $$ > job.pid; wait"]\n`;

describe('a command job through the spawner', () => {
  it('runs as a child of the spawner with the environment a direct spawn gives', async () => {
    plant('BATON_DATABASE_URL', 'mysql://root:hunter2@db.example/baton');
    plant('SPAWNER_TEST_SECRET_URL', 'mysql://app:hunter2@db.example/shop');
    plant('SPAWNER_TEST_PLAIN', 'inherited');
    const write = (name: string) =>
      job(
        `    command: ["sh", "-c", "echo $PPID > ${name}.ppid; cat /proc/self/environ > ${name}.env"]\n` +
          `    env: { JOB_OWN: "from the job" }\n`,
      );
    const options = { withholdEnv: ['SPAWNER_TEST_SECRET_URL'] };

    const viaSpawner = await startJob(write('spawner'), FIRE, { ...options, launchers }).result;
    // `tee` runs are spawned by this process: the reference.
    const direct = await startJob(write('direct'), FIRE, { ...options, tee: true, launchers })
      .result;
    expect(viaSpawner).toMatchObject({ status: 'done', exitCode: 0, error: null });
    expect(direct).toMatchObject({ status: 'done', exitCode: 0, error: null });

    const spawnerPid = Number(readFileSync(path.join(dir, 'spawner.ppid'), 'utf8'));
    expect(spawnerPid).not.toBe(process.pid);
    expect(Number(readFileSync(path.join(dir, 'direct.ppid'), 'utf8'))).toBe(process.pid);
    expect(readFileSync(`/proc/${spawnerPid}/cmdline`, 'utf8')).toContain('spawner.js');
    // The spawner itself carries nothing of the runner's environment (Node adds its channel's).
    const own = environment(readFileSync(`/proc/${spawnerPid}/environ`, 'utf8'));
    expect(Object.keys(own).filter((key) => !key.startsWith('NODE_CHANNEL_'))).toEqual([]);

    const jobEnv = environment(readFileSync(path.join(dir, 'spawner.env'), 'utf8'));
    const directEnv = environment(readFileSync(path.join(dir, 'direct.env'), 'utf8'));
    expect(jobEnv).toEqual(directEnv);
    expect(jobEnv).toMatchObject({
      SPAWNER_TEST_PLAIN: 'inherited',
      JOB_OWN: 'from the job',
      BATON_RUN_ID: '42',
      BATON_JOB: 'j',
    });
    expect(jobEnv).not.toHaveProperty('BATON_DATABASE_URL');
    expect(jobEnv).not.toHaveProperty('SPAWNER_TEST_SECRET_URL');
  });

  it('reports spawn failures in the same words as a direct spawn', async () => {
    writeFileSync(path.join(dir, 'not-executable.sh'), '#!/bin/sh\n');
    chmodSync(path.join(dir, 'not-executable.sh'), 0o644);
    // A working directory removed after the schedules were loaded.
    mkdirSync(path.join(dir, 'gone'));
    const inGone = job('    command: ["true"]\n    cwd: gone\n');
    rmdirSync(path.join(dir, 'gone'));
    const cases = [
      { job: job('    command: ["/nonexistent/x"]\n'), error: 'command not found: /nonexistent/x' },
      { job: inGone, error: `working directory not found: ${path.join(dir, 'gone')}` },
      {
        job: job(`    command: ["${path.join(dir, 'not-executable.sh')}"]\n`),
        error: `permission denied: ${path.join(dir, 'not-executable.sh')}`,
      },
    ];
    for (const { job, error } of cases) {
      for (const tee of [false, true]) {
        const run = startJob(job, FIRE, { tee, launchers });
        await run.started;
        expect(run.pid, `${error} (tee ${tee})`).toBeUndefined();
        expect(await run.result, `${error} (tee ${tee})`).toMatchObject({
          status: 'failed',
          exitCode: null,
          signal: null,
          error,
          outputTail: '',
        });
      }
    }
  });

  it('keeps the output tail and the exit code', async () => {
    const result = await startJob(
      job('    command: ["sh", "-c", "seq 1 5000; echo oops >&2; exit 3"]\n'),
      FIRE,
      { tailBytes: 64, launchers },
    ).result;
    expect(result).toMatchObject({ status: 'failed', exitCode: 3, error: 'exited with code 3' });
    expect(result.outputTail.startsWith('…')).toBe(true);
    expect(result.outputTail.endsWith('4999\n5000\noops\n')).toBe(true);
    expect(Buffer.byteLength(result.outputTail.slice(1))).toBeLessThanOrEqual(64);
  });

  it('stops the whole process group; the first stop decides the status', async () => {
    const run = startJob(job(LONG_JOB), FIRE, { launchers });
    await run.started;
    const jobPid = await pidFile(dir, 'job.pid');
    const childPid = await pidFile(dir, 'child.pid');
    expect(run.pid).toBe(jobPid);

    void run.stop('timeout: the run took longer than 1s', 5_000, 'timeout');
    const result = await run.stop('interrupted: later', 5_000, 'interrupted');
    expect(result).toMatchObject({
      status: 'timeout',
      signal: 'SIGTERM',
      error: 'timeout: the run took longer than 1s',
    });
    expect(processGone(jobPid)).toBe(true);
    await waitFor('the grandchild to be gone', () => processGone(childPid));
  });
});

describe('the spawner killed under a live run', () => {
  it('kills the run’s group, fails the run saying so, and starts a new spawner for the next', async () => {
    const run = startJob(job(LONG_JOB), FIRE, { launchers });
    await run.started;
    const jobPid = await pidFile(dir, 'job.pid');
    const childPid = await pidFile(dir, 'child.pid');
    const spawnerPid = await pidFile(dir, 'parent.pid');
    expect(parentOf(spawnerPid)).toBe(process.pid);

    process.kill(spawnerPid, 'SIGKILL');
    const result = await run.result;
    expect(result).toMatchObject({
      status: 'failed',
      exitCode: null,
      error: "baton's spawner process died (killed by SIGKILL); the run's processes were killed",
    });
    await waitFor('the job and its grandchild to be gone', () => {
      return processGone(jobPid) && processGone(childPid);
    });

    const next = await startJob(
      job('    command: ["sh", "-c", "echo $PPID > next.pid; echo fine"]\n'),
      FIRE,
      { launchers },
    ).result;
    expect(next).toMatchObject({ status: 'done', exitCode: 0, outputTail: 'fine\n' });
    const nextSpawner = await pidFile(dir, 'next.pid');
    expect(nextSpawner).not.toBe(spawnerPid);
    expect(parentOf(nextSpawner)).toBe(process.pid);
  });
});

describe('a spawner per root', () => {
  // Two runners in one process (library mode, the in-process tests) must not share a spawner: a
  // lease one of them revokes would stop the other's runs.
  it('gives each Spawner its own process, and one that is closed exits', async () => {
    const other = { spawner: new Spawner() };
    const command = '    command: ["sh", "-c", "echo $PPID > $BATON_RUN_ID.pid"]\n';
    const mine = await startJob(job(command), { ...FIRE, runId: 1 }, { launchers }).result;
    const theirs = await startJob(job(command), { ...FIRE, runId: 2 }, { launchers: other }).result;
    expect([mine.status, theirs.status]).toEqual(['done', 'done']);
    const [a, b] = [await pidFile(dir, '1.pid'), await pidFile(dir, '2.pid')];
    expect(a).not.toBe(b);
    expect([parentOf(a), parentOf(b)]).toEqual([process.pid, process.pid]);
    other.spawner.close();
    await waitFor('the closed spawner to exit', () => processGone(b));
    expect(processGone(a)).toBe(false);
  });
});
