/**
 * History retention: `baton prune` and `retention:` delete exactly the rows older than the bound
 * (by `scheduled_at`, against the database's clock) and nothing else:
 *
 * - rows just past the bound go, rows just inside it stay, `running` rows stay however old, each
 *   job keeps its latest success, other namespaces are untouched; the work is done in batches
 *   (`--batch-size 3` takes several), and `--dry-run` counts the same rows and deletes none;
 * - `retention: { runs, skips }` prunes the two kinds at their own bounds;
 * - bad input (`--older-than 5`, less than a day, `retention: forever`) is refused with a plain
 *   message and its exit code, and deletes nothing;
 * - every read is an index range or a single index dive (EXPLAIN), never a scan of the table;
 * - a user without DELETE gets a clear database error;
 * - the daemon's `RetentionSchedule` prunes on its own, yields to whoever holds the prune lock,
 *   releases it, and survives a database it cannot use;
 * - a running daemon with `retention:` prunes by itself (enabled once the runner wires it in).
 *
 * Rows are written with SQL at known ages (`NOW(3) - INTERVAL n SECOND`) into one namespace per
 * test, in the file's own database; the CLI runs as a real process.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import mysql, { type RowDataPacket } from 'mysql2/promise';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneLockName } from '../../src/lock-names.js';
import { RetentionSchedule } from '../../src/daemon/retention.js';
import { openPool } from '../../src/store/connect.js';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { DeadlinePool } from '../../src/store/deadline.js';
import { migrateDatabase } from '../../src/store/migrate.js';
import {
  COUNT_SQL,
  LATEST_DONE_SQL,
  NEXT_JOB_SQL,
  SELECT_BATCH_SQL,
} from '../../src/store/prune.js';
import { baton, writeSchedule } from '../helpers/cli.js';
import { dbNow, plantRun } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('retention');
const SECOND = 1;
const HOUR = 3_600;
const DAY = 86_400;

beforeAll(async () => {
  await migrateDatabase(parseDatabaseUrl(fleet.db.url));
});

interface Row {
  namespace: string;
  job: string;
  status: string;
  /** Age of the fire when the row is written, in seconds. */
  age: number;
}

/**
 * Writes rows at their ages (by the database's clock; each row ended when its fire came); returns
 * their ids in order. Skips have no winner, missed rows 0.
 */
async function insertRows(rows: Row[]): Promise<number[]> {
  const now = (await dbNow(fleet.db)).getTime();
  const ids: number[] = [];
  for (const { age, ...r } of rows) {
    ids.push(await plantRun(fleet.db, { ...r, scheduledAt: new Date(now - age * 1_000) }));
  }
  return ids;
}

async function idsOf(namespace: string): Promise<number[]> {
  const rows = await fleet.db.query<{ id: number }>(
    'SELECT id FROM baton_runs WHERE namespace = ? ORDER BY id',
    [namespace],
  );
  return rows.map((r) => Number(r.id));
}

function prune(args: string[]) {
  return baton(['prune', '--database-url', fleet.db.url, ...args]);
}

/** A bound printed by prune is the database's now minus the retention (the clocks agree here). */
function expectBound(iso: string | null, retentionSeconds: number): void {
  expect(iso).not.toBeNull();
  const expected = Date.now() - retentionSeconds * 1_000;
  expect(Math.abs(Date.parse(iso!) - expected)).toBeLessThan(60_000);
}

const JOB_FILE = (namespace: string, extra = '') =>
  writeSchedule(
    `namespace: ${namespace}\njobs:\n  a:\n    schedule: "@yearly"\n    command: ["true"]\n${extra}`,
  );

describe('baton prune --older-than', () => {
  it('deletes exactly the rows older than the bound, in batches; --dry-run counts them and deletes nothing', async () => {
    const ns = 'ret';
    const gone: Row[] = [
      // Seven skips of `a` past the bound: three batches of at most three.
      ...[
        31 * DAY,
        30 * DAY + SECOND,
        30 * DAY + 2 * SECOND,
        32 * DAY,
        33 * DAY,
        34 * DAY,
        90 * DAY,
      ].map((age) => ({ namespace: ns, job: 'a', status: 'skipped', age })),
      // One row of each finished status of `a`: a newer success exists, so the old one goes.
      { namespace: ns, job: 'a', status: 'done', age: 31 * DAY },
      { namespace: ns, job: 'a', status: 'failed', age: 40 * DAY },
      { namespace: ns, job: 'a', status: 'timeout', age: 35 * DAY },
      { namespace: ns, job: 'a', status: 'interrupted', age: 32 * DAY },
      { namespace: ns, job: 'a', status: 'lost', age: 33 * DAY },
      { namespace: ns, job: 'a', status: 'missed', age: 45 * DAY },
      // `b` has succeeded only long ago: its latest success stays, the one before goes.
      { namespace: ns, job: 'b', status: 'done', age: 60 * DAY },
      { namespace: ns, job: 'b', status: 'skipped', age: 50 * DAY },
    ];
    const kept: Row[] = [
      { namespace: ns, job: 'a', status: 'skipped', age: 29 * DAY + 23 * HOUR },
      { namespace: ns, job: 'a', status: 'skipped', age: DAY },
      { namespace: ns, job: 'a', status: 'failed', age: 29 * DAY + 23 * HOUR },
      { namespace: ns, job: 'a', status: 'done', age: DAY },
      // A run going on now is never deleted, however old its fire.
      { namespace: ns, job: 'a', status: 'running', age: 40 * DAY + 5 * SECOND },
      { namespace: ns, job: 'b', status: 'running', age: 35 * DAY },
      { namespace: ns, job: 'b', status: 'done', age: 50 * DAY },
    ];
    await insertRows(gone);
    const keptIds = await insertRows(kept);
    // Another namespace on the same database is not this prune's business.
    const otherIds = await insertRows([
      { namespace: 'ret-other', job: 'a', status: 'skipped', age: 40 * DAY },
    ]);
    const config = JOB_FILE(ns);
    const all = await idsOf(ns);
    const expected = { runs: 7, skips: 8, batches: 6 + 3 + 1 + 1 };

    const dry = await prune([
      '--config',
      config,
      '--older-than',
      '30d',
      '--batch-size',
      '3',
      '--dry-run',
      '--json',
    ]);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
    const counted = JSON.parse(dry.stdout) as Record<string, unknown>;
    expect(counted).toMatchObject({ namespace: ns, dryRun: true, ...expected });
    expect(counted.skipsBefore).toBe(counted.runsBefore);
    expectBound(counted.runsBefore as string, 30 * DAY);
    expect(await idsOf(ns)).toEqual(all);

    const real = await prune(['--config', config, '--older-than', '30d', '--batch-size', '3']);
    expect(real.stderr).toBe('');
    expect(real.code).toBe(0);
    const said =
      /^deleted 7 runs and 8 skips scheduled before (\S+) in namespace "ret" \(11 batches\)\n$/.exec(
        real.stdout,
      );
    expect(said, real.stdout).not.toBeNull();
    expectBound(said![1]!, 30 * DAY);
    expect(await idsOf(ns)).toEqual([...keptIds].sort((x, y) => x - y));
    expect(await idsOf('ret-other')).toEqual(otherIds);

    // Nothing is left to delete.
    const again = await prune(['--config', config, '--older-than', '30d', '--dry-run']);
    expect(again.stdout).toMatch(
      /^would delete 0 runs and 0 skips scheduled before \S+ in namespace "ret" \(0 batches\)\n$/,
    );
  });

  it('honours retention: { runs, skips } of the schedules file, each at its own bound', async () => {
    const ns = 'ret2';
    const [, skip6d, , failed60d, , done2d, running200d] = await insertRows([
      { namespace: ns, job: 'a', status: 'skipped', age: 8 * DAY },
      { namespace: ns, job: 'a', status: 'skipped', age: 6 * DAY },
      { namespace: ns, job: 'a', status: 'failed', age: 91 * DAY },
      { namespace: ns, job: 'a', status: 'failed', age: 60 * DAY },
      { namespace: ns, job: 'a', status: 'done', age: 100 * DAY },
      { namespace: ns, job: 'a', status: 'done', age: 2 * DAY },
      { namespace: ns, job: 'a', status: 'running', age: 200 * DAY },
    ]);
    const config = JOB_FILE(ns, 'retention:\n  runs: 90d\n  skips: 7d\n');

    const result = await prune(['--config', config]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const said =
      /^deleted 2 runs scheduled before (\S+) and 1 skip scheduled before (\S+) in namespace "ret2" \(3 batches\)\n$/.exec(
        result.stdout,
      );
    expect(said, result.stdout).not.toBeNull();
    expectBound(said![1]!, 90 * DAY);
    expectBound(said![2]!, 7 * DAY);
    expect(await idsOf(ns)).toEqual([skip6d, failed60d, done2d, running200d]);

    // The flags replace the file's retention: skips alone, runs kept.
    const skipsOnly = await prune(['--config', config, '--skips-older-than', '5d', '--dry-run']);
    expect(skipsOnly.stdout).toMatch(
      /^would delete 1 skip scheduled before \S+ in namespace "ret2" \(1 batch\); runs are kept\n$/,
    );
    expect(await idsOf(ns)).toEqual([skip6d, failed60d, done2d, running200d]);
  });

  it('refuses bad input with a plain message and its exit code, and deletes nothing', async () => {
    const ns = 'ret3';
    await insertRows([{ namespace: ns, job: 'a', status: 'skipped', age: 400 * DAY }]);
    const before = await idsOf(ns);
    const config = JOB_FILE(ns);
    const cases: { args: string[]; code: number; message: RegExp }[] = [
      {
        args: ['--older-than', '5'],
        code: 64,
        message: /^baton: --older-than "5": expected a duration: write a number with a unit/,
      },
      {
        args: ['--older-than', '2h'],
        code: 64,
        message: /^baton: --older-than 2h: 2h is shorter than 1d: baton keeps at least a day/,
      },
      {
        args: ['--older-than', '30d', '--batch-size', '0'],
        code: 64,
        message: /^baton: --batch-size must be a whole number from 1 to 10000/,
      },
      {
        args: [],
        code: 64,
        message:
          /^baton: say how old history must be to be deleted: --older-than 30d, or `retention:`.*it has no `retention:`/,
      },
    ];
    for (const c of cases) {
      const result = await prune(['--config', config, ...c.args]);
      expect(result.stderr, c.args.join(' ')).toMatch(c.message);
      expect(result.stderr).not.toMatch(/\n\s+at /);
      expect(result.stdout).toBe('');
      expect(result.code, c.args.join(' ')).toBe(c.code);
    }

    const forever = JOB_FILE(ns, 'retention: forever\n');
    const invalid = await prune(['--config', forever]);
    expect(invalid.code).toBe(78);
    expect(invalid.stderr).toContain(
      `${forever}:6:1: retention: expected a duration, got "forever": write a number with a unit`,
    );
    expect(invalid.stderr).not.toMatch(/\n\s+at /);
    expect(await idsOf(ns)).toEqual(before);
  });

  it('reads through indexes only: no statement scans the table (EXPLAIN)', async () => {
    const ns = 'ret-explain';
    await insertRows(
      Array.from({ length: 30 }, (_, i) => ({
        namespace: ns,
        job: `j${i % 3}`,
        status: i % 2 ? 'skipped' : 'done',
        age: (31 + i) * DAY,
      })),
    );
    const explain = (sql: string, values: unknown[]) =>
      fleet.db.query<RowDataPacket>(`EXPLAIN ${sql}`, values);
    const bound = new Date(Date.now() - 30 * DAY * 1_000);
    for (const [sql, values] of [
      [SELECT_BATCH_SQL, [ns, 'j1', 'skipped', bound, 3]],
      [COUNT_SQL, [ns, 'j1', 'skipped', bound]],
    ] as const) {
      const [plan] = await explain(sql, [...values]);
      expect(plan, sql).toMatchObject({ type: 'range', key: 'baton_runs_job_status' });
    }
    for (const [sql, values] of [
      [NEXT_JOB_SQL, [ns, 'j0']],
      [LATEST_DONE_SQL, [ns, 'j1']],
    ] as const) {
      const [plan] = await explain(sql, [...values]);
      expect(plan!.Extra, sql).toBe('Select tables optimized away');
    }
    const [remove] = await explain(
      "DELETE FROM baton_runs WHERE id IN (?) AND status <> 'running'",
      [[1, 2, 3]],
    );
    expect(remove).toMatchObject({ type: 'range', key: 'PRIMARY' });
  });

  it('needs DELETE: a user without it gets a clear database error, and no password is shown', async () => {
    const ns = 'ret4';
    const [old] = await insertRows([{ namespace: ns, job: 'a', status: 'skipped', age: 40 * DAY }]);
    const user = `baton_t_${randomBytes(3).toString('hex')}`;
    const password = `pw-${randomBytes(8).toString('hex')}`;
    await fleet.db.query('CREATE USER ?@? IDENTIFIED BY ?', [user, '%', password]);
    try {
      await fleet.db.query('GRANT SELECT, INSERT, UPDATE ON ??.* TO ?@?', [
        fleet.db.name,
        user,
        '%',
      ]);
      const url = `mysql://${user}:${password}@127.0.0.1:3306/${fleet.db.name}`;
      const args = ['prune', '--database-url', url, '--namespace', ns, '--older-than', '30d'];
      // Without the namespace's schedules file its catchUp windows cannot be checked.
      const unchecked = await baton(args);
      expect(unchecked.code).toBe(64);
      expect(unchecked.stderr).toMatch(
        /^baton: cannot check the catchUp windows of namespace "[^"]+" without its schedules file .*--no-catch-up-check/,
      );
      args.push('--no-catch-up-check');
      const denied = await baton(args);
      expect(denied.code).toBe(69);
      expect(denied.stderr).toMatch(/^baton: database error: DELETE command denied/);
      expect(denied.stderr + denied.stdout).not.toContain(password);
      expect(await idsOf(ns)).toEqual([old]);

      await fleet.db.query('GRANT DELETE ON ??.baton_runs TO ?@?', [fleet.db.name, user, '%']);
      const allowed = await baton(args);
      expect(allowed.stdout).toMatch(/^deleted 0 runs and 1 skip /);
      expect(allowed.code).toBe(0);
      expect(await idsOf(ns)).toEqual([]);
    } finally {
      await fleet.db.query('DROP USER IF EXISTS ?@?', [user, '%']);
    }
  });
});

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** A pino logger whose lines the test reads. */
function memoryLogger() {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) {
        lines.push(JSON.parse(line) as LogLine);
      }
      done();
    },
  });
  return { log: pino({ level: 'debug' }, stream), lines };
}

describe('RetentionSchedule (the daemon side)', () => {
  let pool: DeadlinePool;
  afterAll(async () => {
    await pool?.end();
  });

  it('prunes soon after start and again at every interval, one runner at a time under the prune lock', async () => {
    const ns = 'ret5';
    pool = new DeadlinePool(openPool(parseDatabaseUrl(fleet.db.url)), 10_000);
    const [recent] = await insertRows([
      { namespace: ns, job: 'a', status: 'skipped', age: DAY },
      ...Array.from({ length: 4 }, (_, i) => ({
        namespace: ns,
        job: 'a',
        status: 'skipped',
        age: 40 * DAY + i,
      })),
    ]);
    // Another runner is pruning: it holds the lock on its own session.
    const lockName = pruneLockName(fleet.db.name, ns);
    const other = await mysql.createConnection({ uri: fleet.db.url });
    const { log, lines } = memoryLogger();
    const schedule = new RetentionSchedule({
      pool: () => pool,
      database: fleet.db.name,
      namespace: ns,
      retention: { runsMs: 30 * DAY * 1_000, skipsMs: 30 * DAY * 1_000 },
      log,
      timings: { intervalMs: 300, firstPruneDelayMs: 100 },
    });
    try {
      const [[held]] = await other.query<RowDataPacket[]>('SELECT GET_LOCK(?, 0) AS got', [
        lockName,
      ]);
      expect(held!.got).toBe(1);
      schedule.start();
      await waitFor('a prune that yields to the lock holder', () =>
        lines.find((l) => l.msg === 'history not pruned: another runner is pruning it'),
      );
      expect(await idsOf(ns)).toHaveLength(5);

      // The holder is done: the next interval prunes, and gives the lock back.
      await other.query('DO RELEASE_LOCK(?)', [lockName]);
      const pruned = await waitFor('a prune', () =>
        lines.find((l) => l.msg === 'history pruned' && l.skips === 4),
      );
      expect(pruned).toMatchObject({ runs: 0, skips: 4, batches: 1 });
      expect(await idsOf(ns)).toEqual([recent]);
      await waitFor('the prune lock to be free again', async () => {
        const [[free]] = await other.query<RowDataPacket[]>('SELECT IS_FREE_LOCK(?) AS free', [
          lockName,
        ]);
        return free!.free === 1;
      });
      // And it goes on: the next interval prunes again (nothing left).
      await waitFor('a second prune', () =>
        lines.find((l) => l.msg === 'history pruned' && l.skips === 0),
      );
    } finally {
      await schedule.stop();
      await other.end();
    }
    // Stopped: no prune after stop() returned.
    const count = lines.length;
    await new Promise((r) => setTimeout(r, 700));
    expect(lines.length).toBe(count);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('logs a prune it cannot do and tries again at the next interval, without throwing', async () => {
    // A database that does not exist: every attempt fails.
    const missing = new DeadlinePool(openPool(parseDatabaseUrl(`${fleet.db.url}_missing`)), 10_000);
    const { log, lines } = memoryLogger();
    const schedule = new RetentionSchedule({
      pool: () => missing,
      database: `${fleet.db.name}_missing`,
      namespace: 'ret6',
      retention: { runsMs: null, skipsMs: 30 * DAY * 1_000 },
      log,
      timings: { intervalMs: 200, firstPruneDelayMs: 50 },
    });
    try {
      schedule.start();
      await waitFor(
        'two failed attempts',
        () =>
          lines.filter((l) => l.msg === 'history not pruned: trying again at the next interval')
            .length >= 2 || undefined,
      );
      const warn = lines.find((l) => l.level === 40)!;
      expect(String(warn.err)).toMatch(/Unknown database/);
    } finally {
      await schedule.stop();
      await missing.end();
    }
  });
});

describe('a running daemon with retention:', () => {
  it('prunes the history by itself soon after it starts, and by the new retention after SIGHUP', async () => {
    const ns = 'ret-daemon';
    const [recent, failed] = await insertRows([
      { namespace: ns, job: 'a', status: 'skipped', age: DAY },
      { namespace: ns, job: 'a', status: 'failed', age: 31 * DAY },
      { namespace: ns, job: 'a', status: 'skipped', age: 31 * DAY },
      // A job no longer in the file: its history is the namespace's too.
      { namespace: ns, job: 'gone', status: 'skipped', age: 45 * DAY },
    ]);
    const config = JOB_FILE(ns, 'retention:\n  skips: 30d\n');
    const [runner] = await fleet.start(['solo'], { config });
    const first = await runner!.waitForLog('history pruned');
    expect(first).toMatchObject({ runs: 0, skips: 2, runsBefore: null });
    expect(await idsOf(ns)).toEqual([recent, failed]);

    // The reloaded retention covers runs too, and applies soon (not an hour later).
    writeFileSync(config, readFileSync(config, 'utf8').replace('  skips: 30d', '  runs: 30d'));
    runner!.child.kill('SIGHUP');
    await runner!.waitForLog('schedule reloaded');
    const second = await runner!.waitForLog('history pruned', (l) => l.runs === 1);
    expect(second).toMatchObject({ runs: 1, skips: 0, skipsBefore: null });
    expect(await idsOf(ns)).toEqual([recent]);

    expect(await runner!.stop()).toBe(0);
    expect(runner!.errors()).toEqual([]);
  });
});
