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
 * And a scheduler in this process (or a script): options validated as the file's, two schedulers
 * of one process (distinct identities start, a twin is refused; each its own `keepAlive`),
 * timeouts through ctx.signal, and `keepAlive: false` leaving the process's end to the
 * application's own work.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, libfaketime, ROOT, RunnerProcess } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { freePort } from '../helpers/private-server.js';
import {
  cancelRunRequest,
  findRunRequest,
  insertRunRequest,
  openRunRequests,
  takeRunRequest,
} from '../../src/store/run-requests.js';
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
  output_tail: string | null;
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
    type Replica = { host: string; alive: boolean; clockOffsetMs: number | null };
    const runners = (JSON.parse(status.stdout) as { runners: Replica[] }).runners;
    // The skewed replica's clock is really behind, as the registry measured it.
    const skewed = runners.find((r) => r.host === SKEWED)?.clockOffsetMs;
    expect(skewed, `${SKEWED}'s clock offset`).toBeLessThan(-250);
    expect(
      runners
        .filter((r) => r.alive)
        .map((r) => r.host)
        .sort(),
    ).toEqual(HOSTS);

    // The scheduler's registry, served by the app's own HTTP server: each replica counts the
    // ticks it won; together they are at least the fires of the ground truth read above.
    let counted = 0;
    for (const [host, replica] of replicas) {
      const port = /listening on (\d+)/.exec(replica.stderr)?.[1];
      expect(port, host).toBeDefined();
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const done = /baton_runs_total\{baton_job="tick",status="done"\} (\d+)/.exec(text);
      expect(done, `${host}: ${text.slice(0, 300)}`).not.toBeNull();
      counted += Number(done![1]);
    }
    expect(counted).toBeGreaterThanOrEqual(ticks.length);
  });

  it('baton run <job> from the CLI runs it on a replica, through the lock, with its --env', async () => {
    const run = await cli(['run', 'report', '--env', 'PERIOD=2026-11']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/report started on lib-[abc] \(run \d+\)/);
    const reports = await db.query<{ host: string; run_id: number; period: string | null }>(
      'SELECT * FROM app_reports',
    );
    expect(reports).toHaveLength(1);
    expect(reports[0]!.period).toBe('2026-11');
    const [row] = await runsOf('report');
    expect(row).toMatchObject({ status: 'done', triggered_by: 'manual', host: reports[0]!.host });
    expect(row!.lock_connection_id).not.toBeNull();
    const [recorded] = await db.query<{ params: string }>(
      'SELECT params FROM baton_runs WHERE id = ?',
      [row!.id],
    );
    expect(JSON.parse(recorded!.params)).toEqual({ env: { PERIOD: '2026-11' } });
    // What a handler cannot take is refused before anything is asked.
    const withArgs = await baton(
      ['run', 'report', '--database-url', db.url, '--namespace', 'shop', '--', 'x'],
      { timeoutMs: 60_000, cwd: os.tmpdir() },
    );
    expect(withArgs.code, withArgs.stderr).toBe(64);
    expect(withArgs.stderr).toContain('arguments after -- are for command jobs');
    expect(await runsOf('report')).toHaveLength(1);
  });

  it('a request the CLI gave up on is taken by no replica later, nor a stale one', async () => {
    const ask = () =>
      insertRunRequest(db.conn, { namespace: 'shop', job: 'nobody', requestedBy: 'op', env: {} });
    const cancelled = await ask();
    expect(await cancelRunRequest(db.conn, cancelled, 'no replica took it in time')).toBe(true);
    expect(await takeRunRequest(db.conn, cancelled, 'lib-a')).toBe(false);
    expect(await findRunRequest(db.conn, cancelled)).toMatchObject({
      takenBy: '',
      outcome: 'cancelled: no replica took it in time',
    });
    // Taken first: the CLI's cancel fails, and it follows the run instead.
    const taken = await ask();
    expect(await takeRunRequest(db.conn, taken, 'lib-a')).toBe(true);
    expect(await cancelRunRequest(db.conn, taken, 'too late')).toBe(false);
    // Older than the CLI waits: not listed, not taken.
    const stale = await ask();
    await db.query(
      'UPDATE baton_run_requests SET requested_at = NOW(3) - INTERVAL 20 SECOND WHERE id = ?',
      [stale],
    );
    expect((await openRunRequests(db.conn, 'shop', 'lib-a', ['nobody'])).map((r) => r.id)).toEqual(
      [],
    );
    expect(await takeRunRequest(db.conn, stale, 'lib-a')).toBe(false);
  });

  it('a lost lock session aborts the handler through ctx.signal, and the row says so', async () => {
    const asked = cli(['run', 'slow']);
    const running = await waitFor('slow running', async () =>
      (await runsOf('slow')).find((r) => r.status === 'running'),
    );
    // The row is running from its claim; the handler is called a moment later. A session lost
    // in between is a run never started ('lost: not started', fire/run-fire.ts), with no
    // handler to abort: kill the session once the handler has been called.
    await replicas
      .get(running.host)!
      .waitForLog('fire won: running', (l) => Number(l.runId) === Number(running.id));
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
    // Its own runner usually writes the verdict as it aborts the handler; another replica's
    // reaper may see the dead session first. Either way the row is lost and names the session.
    expect(done.error).toMatch(
      /lost: (the runner's lock session ended|its runner on \S+ is gone \(lock session \d+ ended)/,
    );
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
    const before = replica.lines.length;
    const started = Date.now();
    const code = await replica.stop('SIGTERM', 20_000);
    expect(code, host).toBe(0);
    expect(Date.now() - started).toBeLessThan(12_000);
    await sleep(0);
    expect(replica.lines.some((l) => l.msg === 'runner stopped')).toBe(true);
    // Errors of the stop only (a lost session in an earlier test is logged at error, rightly).
    const errors = replica.errors().filter((l) => replica.lines.indexOf(l) >= before);
    expect(errors, host).toEqual([]);
  });
});

describe('library mode: a scheduler in this process', () => {
  let own: TestDatabase;
  beforeAll(async () => {
    own = await createTestDatabase('library_inproc');
  });
  afterAll(async () => {
    await own?.drop();
  });

  it('keepAlive: false leaves the process to the app: it exits with its own work; the default holds it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-keepalive-'));
    const script = path.join(dir, 'app.mjs');
    // An app whose own work is a 3 s timer, with a job every second; it never stops the scheduler.
    // Each in a namespace of its own: they must not win each other's fires.
    writeFileSync(
      script,
      `import { createScheduler } from ${JSON.stringify(path.join(ROOT, 'dist/index.js'))};
const s = createScheduler({ databaseUrl: process.env.DATABASE_URL, host: process.env.HOST,
  namespace: process.env.HOST, log: undefined, ...JSON.parse(process.env.OPTIONS) });
s.job('beat', { schedule: '* * * * * *' }, async () => {});
await s.start();
setTimeout(() => console.log('app work done'), 3000);
`,
    );
    const run = (host: string, options: object) => {
      const child = spawn(process.execPath, [script], {
        cwd: dir,
        env: {
          ...process.env,
          DATABASE_URL: own.url,
          HOST: host,
          OPTIONS: JSON.stringify(options),
        },
        stdio: 'ignore',
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      return { child, exited };
    };
    const free = run('ka-free', { keepAlive: false });
    const held = run('ka-held', {});
    const started = Date.now();
    expect(await free.exited).toBe(0);
    // It ran while the app was alive, and ended with the app's work, not at once nor never.
    expect(Date.now() - started).toBeGreaterThan(2_500);
    const beats = await own.query<{ n: number }>(
      "SELECT COUNT(*) AS n FROM baton_runs WHERE job = 'beat' AND host = 'ka-free' AND status = 'done'",
    );
    expect(Number(beats[0]!.n)).toBeGreaterThan(0);
    // The default keeps a process whose only work left is its schedule.
    const gone = await Promise.race([held.exited.then(() => true), sleep(4_000).then(() => false)]);
    held.child.kill('SIGKILL');
    expect(gone).toBe(false);
  });

  it('two schedulers in one process keep their own keepAlive: the held one holds it until its stop', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-keepalive-two-'));
    const script = path.join(dir, 'app.mjs');
    // No work of the app's own: an unref'd timer stops the held scheduler after 3 s; the free one
    // (keepAlive: false) is never stopped. Were the policy the process's, the process would either
    // exit at once (both free) or never (both held).
    writeFileSync(
      script,
      `import { createScheduler } from ${JSON.stringify(path.join(ROOT, 'dist/index.js'))};
const make = (host, options) => {
  const s = createScheduler({ databaseUrl: process.env.DATABASE_URL, host, namespace: host, ...options });
  s.job('beat', { schedule: '* * * * * *' }, async () => {});
  return s;
};
const free = make('two-free', { keepAlive: false });
const held = make('two-held', {});
await free.start();
await held.start();
setTimeout(() => void held.stop().then(() => console.log('held stopped')), 3000).unref();
`,
    );
    const child = spawn(process.execPath, [script], {
      cwd: dir,
      env: { ...process.env, DATABASE_URL: own.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const started = Date.now();
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const code = await Promise.race([exited, sleep(15_000).then(() => 'hung' as const)]);
    if (code === 'hung') child.kill('SIGKILL');
    expect(code).toBe(0);
    expect(Date.now() - started).toBeGreaterThan(2_500);
    expect(out).toContain('held stopped');
    const beats = await own.query<{ host: string; n: number }>(
      "SELECT host, COUNT(*) AS n FROM baton_runs WHERE job = 'beat' AND host LIKE 'two-%' AND status = 'done' GROUP BY host ORDER BY host",
    );
    expect(beats.map((b) => b.host)).toEqual(['two-free', 'two-held']);
  });

  it("validates a job's options by the schedules file's schema, with its messages", async () => {
    const { createScheduler, ConfigError } = await import('../../src/index.js');
    const { parseConfig } = await import('../../src/config/load.js');
    const scheduler = createScheduler({ databaseUrl: own.url, host: 'x', namespace: 'inproc' });
    let error: unknown;
    try {
      scheduler.job('settle', { schedule: '0 3 * * *', timeout: 'soon', retries: -1 }, () => {});
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const messages = (error as InstanceType<typeof ConfigError>).problems.map(
      (p) => `${p.path}: ${p.message}`,
    );
    // The file's parser says the same of the same job written in YAML.
    let fromFile: string[] = [];
    try {
      parseConfig(
        '/x/schedules.yaml',
        'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["true"]\n    timeout: soon\n    retries: -1\n',
      );
    } catch (err) {
      fromFile = (err as InstanceType<typeof ConfigError>).problems.map(
        (p) => `${p.path}: ${p.message}`,
      );
    }
    expect(messages.sort()).toEqual(fromFile.sort());
    expect((error as Error).message).toMatch(
      /scheduler: jobs\.settle\.timeout: expected a duration/,
    );
  });

  it('a handler still going after stop() gets no database: ctx.db refuses it', async () => {
    const { createScheduler } = await import('../../src/index.js');
    const { createLogger } = await import('../../src/log.js');
    const scheduler = createScheduler({
      databaseUrl: own.url,
      host: 'me',
      namespace: 'late',
      log: createLogger({ level: 'silent' }),
      timings: { runs: { killGraceMs: 300 } },
    });
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let outcome: string | undefined;
    scheduler.job('late', { schedule: '0 0 1 1 *', enabled: false }, async (ctx) => {
      await gate; // deaf to ctx.signal
      try {
        await ctx.db.query('SELECT 1');
        outcome = 'queried';
      } catch (err) {
        outcome = (err as Error).message;
      }
    });
    await scheduler.start();
    let stopped = false;
    try {
      expect((await scheduler.runNow('late')).status).toBe('started');
      await scheduler.stop({ grace: '200ms' });
      stopped = true;
    } finally {
      release();
      if (!stopped) await scheduler.stop({ grace: '200ms' });
    }
    // A new pool here would hold the application's process open after its stop().
    expect(await waitFor('the late handler', () => outcome)).toBe(
      'ctx.db is not available: the scheduler has stopped',
    );
  });

  it('stop() does not wait for a query of a handler that ignored its signal', async () => {
    const { createScheduler } = await import('../../src/index.js');
    const { createLogger } = await import('../../src/log.js');
    const scheduler = createScheduler({
      databaseUrl: own.url,
      host: 'me',
      namespace: 'deaf',
      log: createLogger({ level: 'silent' }),
      timings: { runs: { killGraceMs: 300 } },
    });
    let query: 'running' | 'answered' | 'cut' | undefined;
    scheduler.job('deaf', { schedule: '0 0 1 1 *', enabled: false }, async (ctx) => {
      query = 'running';
      // Deaf to ctx.signal: the pool's end would wait for this answer (20 s).
      await ctx.db.query('SELECT SLEEP(20)').then(
        () => (query = 'answered'),
        () => (query = 'cut'),
      );
    });
    await scheduler.start();
    expect((await scheduler.runNow('deaf')).status).toBe('started');
    await waitFor('the query to be sent', () => query === 'running');
    await scheduler.stop({ grace: '200ms' });
    // The stop returned before the server answered: it did not wait for the query.
    expect(query).toBe('running');
  });

  it('stop() while start() waits for an unreachable database: start() rejects, nothing was scheduled', async () => {
    const { createScheduler } = await import('../../src/index.js');
    const { pino } = await import('pino');
    const { Writable } = await import('node:stream');
    let waiting!: () => void;
    const waitingForDatabase = new Promise<void>((resolve) => (waiting = resolve));
    const lines = new Writable({
      write(chunk: Buffer, _encoding, done) {
        if (chunk.toString().includes('database unavailable: waiting for it')) waiting();
        done();
      },
    });
    // A closed loopback port: every connect is refused, and start() keeps trying.
    const scheduler = createScheduler({
      databaseUrl: `mysql://root@127.0.0.1:${await freePort()}/never`,
      host: 'early',
      namespace: 'unreachable',
      log: pino({ level: 'warn' }, lines),
    });
    let ran = 0;
    scheduler.job('tick', { schedule: '* * * * * *' }, () => {
      ran++;
    });
    const starting = scheduler.start();
    // Settled either way before it is awaited below: no unhandled rejection meanwhile.
    starting.catch(() => {});
    await waitingForDatabase;
    await scheduler.stop();
    await expect(starting).rejects.toMatchObject({ code: 'SCHEDULER_STOPPED' });
    expect(ran).toBe(0);
  });

  it('a second scheduler starts, its twin is refused; a timeout aborts ctx.signal; a handler ignoring it is reported', async () => {
    const { createScheduler } = await import('../../src/index.js');
    const { createLogger } = await import('../../src/log.js');
    const log = createLogger({ level: 'silent' });
    const seen: string[] = [];
    const scheduler = createScheduler({
      databaseUrl: own.url,
      host: 'me',
      namespace: 'inproc',
      log,
    });
    const never = { schedule: '0 0 1 1 *', enabled: false, timeout: '1s' } as const;
    scheduler.job('polite', never, async (ctx) => {
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
      seen.push(`polite: ${String((ctx.signal.reason as Error).message)}`);
    });
    // With retries: one that may still be running is not retried beside itself.
    let stubbornCalls = 0;
    scheduler.job('stubborn', { ...never, retries: 2, retryDelay: '100ms' }, () => {
      stubbornCalls++;
      return new Promise((resolve) => setTimeout(resolve, 9_000));
    });
    // No timeout: only the kill stops it.
    scheduler.job(
      'deaf',
      { schedule: '0 0 1 1 *', enabled: false },
      () => new Promise((resolve) => setTimeout(resolve, 9_000)),
    );
    // ctx.log is made when first used, and may still be replaced like a plain property.
    scheduler.job('relog', never, (ctx) => {
      ctx.log = ctx.log.child({ step: 'two' });
      ctx.log.info('after the replacement');
    });
    await scheduler.start();
    try {
      const relog = (await scheduler.runNow('relog')) as { runId: number };
      const relogRow = await waitFor('relog ended', async () => {
        const [r] = await own.query<Row>('SELECT * FROM baton_runs WHERE id = ?', [relog.runId]);
        return r && r.status !== 'running' ? r : null;
      });
      expect(relogRow.status, relogRow.error ?? '').toBe('done');
      expect(relogRow.output_tail).toMatch(/"step":"two".*"msg":"after the replacement"/);

      // A second scheduler of this process with an identity of its own is another replica: it
      // starts beside the first.
      const second = createScheduler({
        databaseUrl: own.url,
        host: 'me2',
        namespace: 'inproc2',
        log,
      });
      second.job('t', never, () => {});
      await second.start();
      // One with the identity of a started one would share its registry row: refused, and the
      // row stays the first's (alive, not marked stopped by the refused one's release).
      const twin = createScheduler({ databaseUrl: own.url, host: 'me', namespace: 'inproc', log });
      twin.job('t', never, () => {});
      await expect(twin.start()).rejects.toThrow(
        /a scheduler \(host me, namespace inproc\) is already started in this process/,
      );
      const [registered] = await own.query<{ stopped_at: Date | null; pid: number }>(
        "SELECT stopped_at, pid FROM baton_runners WHERE host = 'me' AND namespace = 'inproc'",
      );
      expect(registered).toMatchObject({ stopped_at: null, pid: process.pid });
      await second.stop();

      const polite = await scheduler.runNow('polite');
      const stubborn = await scheduler.runNow('stubborn');
      expect(polite.status).toBe('started');
      expect(stubborn.status).toBe('started');
      const row = (id: number) =>
        waitFor(`run ${id} ended`, async () => {
          const [r] = await own.query<Row>('SELECT * FROM baton_runs WHERE id = ?', [id]);
          return r && r.status !== 'running' ? r : null;
        });
      const politeRow = await row((polite as { runId: number }).runId);
      expect(politeRow).toMatchObject({ status: 'timeout' });
      expect(seen).toEqual(['polite: timeout: the run took longer than 1s']);
      const stubbornRow = await row((stubborn as { runId: number }).runId);
      expect(stubbornRow.status).toBe('timeout');
      expect(stubbornRow.error).toMatch(
        /the handler ignored ctx\.signal for 5000 ms and may still be running in this process \(an in-process handler cannot be killed\)/,
      );
      expect(stubbornCalls).toBe(1);

      // baton kill from the CLI: the signal is aborted; past the grace the run ends `killed`
      // and says plainly that the handler could not be killed.
      const again = (await scheduler.runNow('deaf')) as { runId: number };
      const kill = await baton(
        ['kill', String(again.runId), '--grace', '1s', '--database-url', own.url],
        {
          cwd: os.tmpdir(),
        },
      );
      expect(kill.code, kill.stderr).toBe(0);
      expect(kill.stdout).toMatch(
        new RegExp(
          `killed run ${again.runId} \\(deaf on me\\): killed by .*an in-process handler cannot be killed`,
        ),
      );
      expect((await row(again.runId)).status).toBe('killed');
    } finally {
      await scheduler.stop({ grace: '1s' });
    }
  }, 30_000);
});
