/**
 * Fencing (issue 43) with real runners on the real database: a run baton has stopped cannot
 * commit its effects after the job's next run started. Judged by the table the jobs write, not by
 * baton's rows: every write stores its run's fence, and the table's AUTO_INCREMENT id orders the
 * writes as the database committed them (an id is taken at the insert, and a fenced transaction
 * that commits after a newer claim moved the fence does not commit at all). A stale writer's
 * refusals are written beside them (unfenced, kind `refused`), which proves it really wrote on.
 *
 * 1. Library mode, two replicas (processes): a handler ignores its signal and writes through
 *    `ctx.db.fenced` every 200 ms; its replica's lock session is KILLed; the next fire runs (on
 *    the other replica, or on its own once reconnected) while the stale handler goes on writing.
 * 2. Daemon: the host of a runner running a module job is frozen (SIGSTOP of the runner and all
 *    its processes, the job's among them: a frozen VM), its lock session KILLed, the next fire
 *    runs on another runner; then the frozen host thaws (SIGCONT) with the job's writes in flight.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, RunnerProcess, startRunner, writeSchedule, type LogLine } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

interface Write {
  id: number;
  fence: number;
  host: string;
  kind: 'write' | 'refused';
}

async function writes(db: TestDatabase): Promise<Write[]> {
  const rows = await db.query<Write>('SELECT id, fence, host, kind FROM fenced_writes ORDER BY id');
  return rows.map((r) => ({ ...r, id: Number(r.id), fence: Number(r.fence) }));
}

/** The fence of the first run of `writer`, once it has written a few times (wherever it won). */
async function firstRunWriting(db: TestDatabase): Promise<number> {
  const first = await waitFor(
    'the first run writing',
    async () => {
      const all = await writes(db);
      const fence = all[0]?.fence;
      return all.filter((w) => w.fence === fence).length >= 3 ? all[0] : undefined;
    },
    { timeoutMs: 30_000 },
  );
  return first.fence;
}

async function createWritesTable(db: TestDatabase): Promise<void> {
  await db.query(`CREATE TABLE fenced_writes (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    fence BIGINT UNSIGNED NOT NULL, host VARCHAR(64) NOT NULL, kind VARCHAR(16) NOT NULL)`);
}

/**
 * The verdict on the table: the stale run (fence `stale`) kept writing after the newer run's
 * first write — refused — and not one of its writes committed after it.
 */
function expectNoStaleWriteAfterSuccessor(all: Write[], stale: number): void {
  const firstNew = all.find((w) => w.kind === 'write' && w.fence > stale);
  expect(firstNew, 'a newer run wrote').toBeDefined();
  const after = all.filter((w) => w.id > firstNew!.id && w.fence === stale);
  // The situation: the stale run really tried to write after its successor started.
  expect(after.filter((w) => w.kind === 'refused').length).toBeGreaterThan(0);
  expect(after.filter((w) => w.kind === 'write')).toEqual([]);
}

describe('library mode: a handler that ignores its signal after its lock session was KILLed', () => {
  let db: TestDatabase;
  const replicas: RunnerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('fence_lib', { migrated: true });
    await createWritesTable(db);
  });

  afterAll(async () => {
    for (const r of replicas) await r.stop('SIGKILL').catch(() => undefined);
    await db?.drop();
  });

  it('cannot commit a write after the next run started: every later write is refused', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-fence-lib-'));
    const script = path.join(dir, 'app.mjs');
    writeFileSync(
      script,
      `import { createScheduler, StaleFenceError } from ${JSON.stringify(path.join(ROOT, 'dist/index.js'))};
const host = process.env.HOST;
const s = createScheduler({ databaseUrl: process.env.DATABASE_URL, host, namespace: 'fence',
  heartbeat: '500ms', heartbeatDeadline: '2s', reaperInterval: '1s', registryInterval: '1s' });
s.job('writer', { schedule: '* * * * * *' }, async (ctx) => {
  let abortedAt = null;
  ctx.signal.addEventListener('abort', () => (abortedAt = Date.now()));
  let refused = 0;
  const until = Date.now() + 20_000;
  while (Date.now() < until) {
    try {
      await ctx.db.fenced((tx) =>
        tx.query('INSERT INTO fenced_writes (fence, host, kind) VALUES (?, ?, ?)', [ctx.fence, host, 'write']));
    } catch (err) {
      if (!(err instanceof StaleFenceError)) throw err;
      refused++;
      await ctx.db.query('INSERT INTO fenced_writes (fence, host, kind) VALUES (?, ?, ?)', [ctx.fence, host, 'refused']);
      // Past its grace (1 s after a lost session) and refused a few times: done.
      if (refused >= 5 && abortedAt != null && Date.now() - abortedAt > 3_000) return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
});
await s.start();
`,
    );
    for (const host of ['fa', 'fb']) {
      const env: NodeJS.ProcessEnv = {};
      for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BATON_')) env[k] = v;
      Object.assign(env, { DATABASE_URL: db.url, HOST: host, BATON_LOG_LEVEL: 'debug' });
      const child = spawn(process.execPath, [script], { cwd: dir, env });
      replicas.push(new RunnerProcess(host, child));
    }
    // The first run of `writer`, wherever it won, has written a few times.
    const stale = await firstRunWriting(db);
    const [row] = await db.query<{ lock_connection_id: number; host: string }>(
      'SELECT lock_connection_id, host FROM baton_runs WHERE id = ?',
      [stale],
    );
    await db.query('KILL ?', [row!.lock_connection_id]);
    const victim = replicas.find((r) => r.host === row!.host)!;

    // The next run writes, while the stale handler goes on (it ignores its signal) …
    await waitFor('the next run writing', async () =>
      (await writes(db)).some((w) => w.kind === 'write' && w.fence > stale),
    );
    // … and is told at its grace that it may still be running, and what of its writes is refused.
    const ignored = await victim.waitForLog(
      'a handler ignored its abort signal',
      (l: LogLine) => Number(l.runId) === stale,
      30_000,
    );
    expect(String(ignored.error)).toContain('its fenced writes');
    // Its end is reported with the refusals counted; none committed after it was given up.
    const ended = await victim.waitForLog(
      'a handler that ignored its abort signal has ended',
      (l: LogLine) => Number(l.runId) === stale,
      30_000,
    );
    expect(Number(ended.fencedRefused)).toBeGreaterThanOrEqual(5);
    // Commits after it was given up but before its verdict or its successor's claim are allowed
    // (none of them after the successor started: judged on the table below); only counted here.
    expect(Number.isInteger(ended.fencedCommitted)).toBe(true);

    const all = await writes(db);
    expectNoStaleWriteAfterSuccessor(all, stale);
    expect(all.filter((w) => w.fence === stale && w.kind === 'refused').length).toBe(
      Number(ended.fencedRefused),
    );
    const [staleRow] = await db.query<{ status: string }>(
      'SELECT status FROM baton_runs WHERE id = ?',
      [stale],
    );
    expect(staleRow!.status).toBe('lost');
  });
});

/** Every live descendant of `pid` (by /proc's parent links), children before grandchildren. */
function descendants(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(name)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of parents.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

function signal(pids: readonly number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // gone
    }
  }
}

describe('daemon: a frozen host thaws with its module job writing', () => {
  let db: TestDatabase;
  const runners: RunnerProcess[] = [];
  let frozen: number[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('fence_daemon', { migrated: true });
    await createWritesTable(db);
  });

  afterAll(async () => {
    signal(frozen, 'SIGCONT');
    for (const r of runners) {
      r.child.kill('SIGCONT');
      await r.stop('SIGKILL').catch(() => undefined);
    }
    await db?.drop();
  });

  it('no write of the stopped run lands after the next run started', async () => {
    const config = writeSchedule(
      `
namespace: fence
jobs:
  writer:
    schedule: "* * * * * *"
    overlap: skip
    module: writer.mjs
`,
      {
        'writer.mjs': `export default async (ctx) => {
  const host = ctx.host;
  const until = Date.now() + 30_000;
  while (Date.now() < until) {
    try {
      await ctx.db.fenced((tx) =>
        tx.query('INSERT INTO fenced_writes (fence, host, kind) VALUES (?, ?, ?)', [ctx.fence, host, 'write']));
    } catch (err) {
      if (err?.code !== 'STALE_FENCE') throw err;
      await ctx.db.query('INSERT INTO fenced_writes (fence, host, kind) VALUES (?, ?, ?)', [ctx.fence, host, 'refused']);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
};
`,
      },
    );
    for (const host of ['da', 'db'])
      runners.push(startRunner({ config, databaseUrl: db.url, host }));
    await Promise.all(runners.map((r) => r.ready()));

    const stale = await firstRunWriting(db);
    const [row] = await db.query<{ lock_connection_id: number; host: string; status: string }>(
      'SELECT lock_connection_id, host, status FROM baton_runs WHERE id = ?',
      [stale],
    );
    expect(row!.status).toBe('running');
    const victim = runners.find((r) => r.host === row!.host)!;
    const other = runners.find((r) => r !== victim)!;

    // A frozen VM: the runner first (so it sees nothing), then every process it started — the
    // job's module host, its watchdog, the spawner.
    victim.child.kill('SIGSTOP');
    frozen = descendants(victim.child.pid!);
    signal(frozen, 'SIGSTOP');
    const lastBefore = (await writes(db)).at(-1)!.id;
    await db.query('KILL ?', [row!.lock_connection_id]);

    // The next fire runs on the other runner (the lock is free), and writes.
    await waitFor(
      'the next run writing on the other runner',
      async () =>
        (await writes(db)).some(
          (w) => w.kind === 'write' && w.fence > stale && w.host === other.host,
        ),
      { timeoutMs: 20_000 },
    );
    // The frozen job wrote nothing meanwhile (the situation is what it says).
    expect((await writes(db)).filter((w) => w.fence === stale && w.id > lastBefore)).toEqual([]);

    // Thaw: the job's processes first (its writes in flight), then the runner.
    signal(frozen, 'SIGCONT');
    victim.child.kill('SIGCONT');
    frozen = [];
    await waitFor(
      'the thawed job refused',
      async () => (await writes(db)).some((w) => w.fence === stale && w.kind === 'refused'),
      { timeoutMs: 20_000 },
    );
    // The thawed runner notices its lost session and stops its job (or its watchdog does);
    // its row is `lost` either way.
    await waitFor('the stale run lost', async () => {
      const [r] = await db.query<{ status: string }>('SELECT status FROM baton_runs WHERE id = ?', [
        stale,
      ]);
      return r!.status === 'lost';
    });
    expectNoStaleWriteAfterSuccessor(await writes(db), stale);
  });
});
