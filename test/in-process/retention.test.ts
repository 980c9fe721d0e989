/**
 * Retention in the daemon (`retention:`, src/daemon/retention-schedule.ts), in the test process;
 * the `baton prune` command, its output and exit codes, is e2e/retention.test.ts.
 *
 * - `RetentionSchedule` on its own: it prunes soon after start and again at every interval,
 *   yields to whoever holds the namespace's prune lock, gives the lock back, prunes nothing once
 *   stopped, and survives a database it cannot use (a warning, tried again at the next interval).
 * - A runner built in the test process (in-process-fleet.ts) with `retention:` prunes by itself
 *   soon after it starts, and by the new retention soon after a reload (`Runner.reload`, what
 *   SIGHUP calls: e2e/reload.test.ts proves the signal reloads) — not an interval (an hour) later:
 *   only the first prune's delay is shortened, the interval stays the default.
 *
 * Rows are written with SQL at known ages (`NOW(3) - INTERVAL n SECOND`) into one namespace per
 * test, in the file's own database.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import mysql, { type RowDataPacket } from 'mysql2/promise';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { loadConfig } from '../../src/config/load.js';
import { RetentionSchedule } from '../../src/daemon/retention-schedule.js';
import { pruneLockName } from '../../src/lock-names.js';
import { openPool } from '../../src/store/connect.js';
import { DeadlinePool } from '../../src/store/deadline.js';
import { writeSchedule, type LogLine } from '../helpers/cli.js';
import { plantAgedRuns, runIdsOf } from '../helpers/db.js';
import { expectQuiet } from '../helpers/fleet.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('retention_daemon');
const DAY = 86_400;

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
    const [recent] = await plantAgedRuns(fleet.db, [
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
      expect(await runIdsOf(fleet.db, ns)).toHaveLength(5);

      // The holder is done: the next interval prunes, and gives the lock back.
      await other.query('DO RELEASE_LOCK(?)', [lockName]);
      const pruned = await waitFor('a prune', () =>
        lines.find((l) => l.msg === 'history pruned' && l.skips === 4),
      );
      expect(pruned).toMatchObject({ runs: 0, skips: 4, batches: 1 });
      expect(await runIdsOf(fleet.db, ns)).toEqual([recent]);
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
    // Stopped: no prune after stop() returned — a negative check, over two of its 300 ms
    // intervals (test/README.md, "Short cadences").
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
  it('prunes the history by itself soon after it starts, and by the new retention after a reload', async () => {
    const ns = 'ret-daemon';
    const [recent, failed] = await plantAgedRuns(fleet.db, [
      { namespace: ns, job: 'a', status: 'skipped', age: DAY },
      { namespace: ns, job: 'a', status: 'failed', age: 31 * DAY },
      { namespace: ns, job: 'a', status: 'skipped', age: 31 * DAY },
      // A job no longer in the file: its history is the namespace's too.
      { namespace: ns, job: 'gone', status: 'skipped', age: 45 * DAY },
    ]);
    const config = writeSchedule(
      `namespace: ${ns}\njobs:\n  a:\n    schedule: "@yearly"\n    command: ["true"]\n` +
        'retention:\n  skips: 30d\n',
    );
    // "Soon" is the first prune's delay (5 s by default), shortened; the interval between two
    // prunes stays an hour, so the prune after the reload is the reload's, not the interval's.
    const [runner] = await fleet.start(['solo'], {
      config,
      runner: { timings: { retention: { firstPruneDelayMs: 200 } } },
    });
    const first = await runner!.waitForLog('history pruned');
    expect(first).toMatchObject({ runs: 0, skips: 2, runsBefore: null });
    expect(await runIdsOf(fleet.db, ns)).toEqual([recent, failed]);

    // The reloaded retention covers runs too, and applies soon (not an hour later). What
    // `baton start` does on SIGHUP (start.ts): the file read again, the runner reloaded.
    writeFileSync(config, readFileSync(config, 'utf8').replace('  skips: 30d', '  runs: 30d'));
    const loaded = runner!.nextEvent('schedule:loaded');
    expect(runner!.runner.reload(loadConfig(config))).toEqual({
      added: [],
      removed: [],
      changed: [],
    });
    expect(await loaded).toEqual({ jobs: ['a'] });
    const second = await runner!.waitForLog('history pruned', (l) => l.runs === 1);
    expect(second).toMatchObject({ runs: 1, skips: 0, skipsBefore: null });
    expect(await runIdsOf(fleet.db, ns)).toEqual([recent]);
    expect(runner!.lines.filter((l) => l.msg === 'history pruned')).toHaveLength(2);

    // A graceful stop (SIGTERM's), and nothing logged as an error.
    await runner!.stop();
    expect(runner!.lines.filter((l) => l.msg === 'runner stopped')).toHaveLength(1);
    expectQuiet([runner!]);
  });
});
