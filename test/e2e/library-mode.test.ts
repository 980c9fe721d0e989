/**
 * Library mode end to end (issue 23): the example app (examples/library-app/server.mjs), an HTTP
 * service defining its jobs in code, started as three replica processes — one of them with its
 * clock 0.4 s behind (libfaketime) — on one database. The tests share that fleet, in order:
 *
 * 1. every fire of `tick` ran once by the ground truth (`app_ticks`, a plain table the handler
 *    writes), every replica's attempt is in `baton history`, `baton status` lists the replicas,
 *    and /metrics of the app's own server counts the runs;
 * 2. `baton run report` from the CLI (no schedules file) runs on a replica, through the lock;
 * 3. a KILL of the lock session's connection aborts the in-process handler through ctx.signal
 *    within the heartbeat deadline, and the row is `lost` saying why;
 * 4. `kill -9` of the replica running a job: the run is `lost`, the next fire runs elsewhere;
 * 5. SIGTERM: the replica drains and its process exits on its own (nothing calls process.exit).
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, libfaketime, ROOT, RunnerProcess } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { sleep, waitFor } from '../helpers/wait.js';

const APP = path.join(ROOT, 'examples/library-app/server.mjs');
const HOSTS = ['lib-a', 'lib-b', 'lib-c'];
const SKEWED = 'lib-c';
const HEARTBEAT_DEADLINE_MS = 2_000;

let db: TestDatabase;
const replicas = new Map<string, RunnerProcess>();

function startReplica(host: string): RunnerProcess {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BATON_')) env[k] = v;
  Object.assign(env, {
    DATABASE_URL: db.url,
    BATON_HOST: host,
    BATON_LOG_LEVEL: 'debug',
    HEARTBEAT: '500ms',
    HEARTBEAT_DEADLINE: `${HEARTBEAT_DEADLINE_MS}ms`,
    REAPER_INTERVAL: '1s',
    REGISTRY_INTERVAL: '1s',
    ...(host === SKEWED
      ? { LD_PRELOAD: libfaketime(), FAKETIME: '-0.4', FAKETIME_DONT_FAKE_MONOTONIC: '1' }
      : {}),
  });
  const child = spawn(process.execPath, [APP], { cwd: ROOT, env });
  const replica = new RunnerProcess(host, child);
  replicas.set(host, replica);
  return replica;
}

/** The CLI where there is no schedules file: the fleet's jobs are known only to the replicas. */
const cli = (args: string[]) =>
  baton([...args, '--database-url', db.url, '--namespace', 'shop'], {
    timeoutMs: 60_000,
    cwd: os.tmpdir(),
  });

interface Row {
  id: number;
  job: string;
  host: string;
  status: string;
  winner: number | null;
  error: string | null;
  scheduled_at: Date;
  lock_connection_id: number | null;
  triggered_by: string;
}

const runsOf = (job: string) =>
  db.query<Row>('SELECT * FROM baton_runs WHERE job = ? ORDER BY id', [job]);

describe('library mode: the example app as three replicas', () => {
  beforeAll(async () => {
    db = await createTestDatabase('library');
    await Promise.all(HOSTS.map((h) => startReplica(h).ready()));
  });
  afterAll(async () => {
    if (process.env.LIBRARY_TEST_LOGS) {
      for (const r of replicas.values()) {
        for (const l of r.lines)
          if (l.level >= 30) console.log(r.host, JSON.stringify(l).slice(0, 300));
        console.log(r.host, r.stderr);
      }
    }
    await Promise.all([...replicas.values()].map((r) => r.stop('SIGKILL')));
    await db?.drop();
  });

  it('runs every fire once, and the CLI sees the replicas and their attempts', async () => {
    await waitFor(
      'five ticks',
      async () => {
        const [row] = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM app_ticks');
        return Number(row?.n) >= 5;
      },
      { timeoutMs: 30_000 },
    );
    const twice = await db.query(
      'SELECT fire, COUNT(*) AS n FROM app_ticks GROUP BY fire HAVING n > 1',
    );
    expect(twice).toEqual([]);
    const ticks = await db.query<{ fire: Date; run_id: number; host: string }>(
      'SELECT * FROM app_ticks',
    );
    const winners = (await runsOf('tick')).filter((r) => r.winner);
    // Every run the history says ran is one of the ground truth's, and the other way round.
    for (const t of ticks) {
      const w = winners.find((r) => r.id === Number(t.run_id));
      expect(w?.host, `fire ${t.fire.toISOString()}`).toBe(t.host);
    }
    const history = await cli(['history', 'tick', '--json', '--attempts', '--limit', '500']);
    expect(history.code, history.stderr).toBe(0);
    const rows = JSON.parse(history.stdout) as { host: string }[];
    for (const host of HOSTS)
      expect(
        rows.map((r) => r.host),
        host,
      ).toContain(host);

    const status = await cli(['status', '--json']);
    expect(status.stdout, status.stderr).not.toBe('');
    const runners = (JSON.parse(status.stdout) as { runners: { host: string; alive: boolean }[] })
      .runners;
    expect(
      runners
        .filter((r) => r.alive)
        .map((r) => r.host)
        .sort(),
    ).toEqual(HOSTS);
  });

  it('baton run <job> from the CLI runs it on a replica, through the lock', async () => {
    const run = await cli(['run', 'report']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/report started on lib-[abc] \(run \d+\)/);
    const reports = await db.query<{ host: string; run_id: number }>('SELECT * FROM app_reports');
    expect(reports).toHaveLength(1);
    const [row] = await runsOf('report');
    expect(row).toMatchObject({ status: 'done', triggered_by: 'manual', host: reports[0]!.host });
    expect(row!.lock_connection_id).not.toBeNull();
  });

  it('a lost lock session aborts the handler through ctx.signal, and the row says so', async () => {
    const asked = cli(['run', 'slow']);
    const running = await waitFor('slow running', async () =>
      (await runsOf('slow')).find((r) => r.status === 'running'),
    );
    await db.query('KILL ?', [running.lock_connection_id]);
    const killedAt = Date.now();
    const abort = await waitFor(
      `the abort recorded by the handler on ${running.host}`,
      async () => {
        const [a] = await db.query<{ reason: string; run_id: number }>('SELECT * FROM app_aborts');
        return a;
      },
    );
    expect(Date.now() - killedAt).toBeLessThan(HEARTBEAT_DEADLINE_MS + 1_000);
    expect(Number(abort.run_id)).toBe(running.id);
    expect(abort.reason).toMatch(/lock session ended/);
    const done = await waitFor('the lost verdict', async () =>
      (await runsOf('slow')).find((r) => r.id === running.id && r.status !== 'running'),
    );
    expect(done.status).toBe('lost');
    expect(done.error).toMatch(/lost: the runner's lock session ended/);
    const result = await asked;
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/slow failed: lost/);
  });

  it('kill -9 of the replica running a job: the run is lost, the next fire runs elsewhere', async () => {
    const asked = cli(['run', 'slow']);
    const before = (await runsOf('slow')).length;
    const running = await waitFor('slow running again', async () =>
      (await runsOf('slow')).slice(before).find((r) => r.status === 'running'),
    );
    const victim = replicas.get(running.host)!;
    victim.child.kill('SIGKILL');
    const killedAt = new Date(Date.now() - 500);
    const lost = await waitFor(
      'the reaper marks it lost',
      async () => (await runsOf('slow')).find((r) => r.id === running.id && r.status === 'lost'),
      { timeoutMs: 30_000 },
    );
    expect(lost.error).toBeTruthy();
    await waitFor('a tick won by another replica after the kill', async () =>
      (await runsOf('tick')).find(
        (r) =>
          r.winner && r.scheduled_at > killedAt && r.host !== running.host && r.status === 'done',
      ),
    );
    const result = await asked;
    expect(result.code).not.toBe(0);
    replicas.delete(running.host);
  });

  it('SIGTERM: a replica drains and its process exits on its own', async () => {
    const [host, replica] = [...replicas.entries()][0]!;
    const started = Date.now();
    const code = await replica.stop('SIGTERM', 20_000);
    expect(code, host).toBe(0);
    expect(Date.now() - started).toBeLessThan(12_000);
    await sleep(0);
    expect(replica.lines.some((l) => l.msg === 'runner stopped')).toBe(true);
    const errors = replica.errors();
    expect(errors, host).toEqual([]);
  });
});
