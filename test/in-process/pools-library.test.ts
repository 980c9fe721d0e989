/**
 * Pools in library mode (docs/pools.md): replicas of an application, each a `createScheduler` on
 * one database, whose handlers run in this very process — so how many of a pool's handlers are
 * running at once is counted exactly, by the handlers themselves, not read from baton's rows.
 *
 * - a pool of one slot shared by three jobs that fire every second and run 700 ms, on three
 *   replicas: never two handlers at once, and every job gets its turn;
 * - a job naming a pool the scheduler was not given is refused like the file's (ConfigError).
 */
import pino from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import type { Scheduler } from '../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Three replicas with `pools`, each given its jobs by `define`, started; stopped and the database
 * dropped when the test ends.
 */
async function replicas(
  label: string,
  pools: Record<string, { slots: number; scope?: 'fleet' | 'host' }>,
  define: (s: Scheduler) => void,
): Promise<{ db: TestDatabase; schedulers: Scheduler[] }> {
  const db = await createTestDatabase(label, { migrated: true });
  const { createScheduler } = await import('../../src/index.js');
  const schedulers = ['app-1', 'app-2', 'app-3'].map((host) => {
    const s = createScheduler({
      databaseUrl: db.url,
      host,
      namespace: 'pooled',
      pools,
      log: pino({ level: 'silent' }),
    });
    define(s);
    return s;
  });
  await Promise.all(schedulers.map((s) => s.start()));
  onTestFinished(async () => {
    await Promise.all(schedulers.map((s) => s.stop()));
    await db.drop();
  });
  return { db, schedulers };
}

/** How many `pool` skips the history has. */
async function poolSkips(db: TestDatabase): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `SELECT COUNT(*) AS n FROM baton_runs WHERE reason_kind = 'pool'`,
  );
  return Number(row!.n);
}

describe('pools in library mode', () => {
  it('lets one handler of the pool run at a time across three replicas', async () => {
    let running = 0;
    let most = 0;
    const ran = new Map<string, number>();
    const jobs = ['sync-a', 'sync-b', 'sync-c'];
    const { db, schedulers } = await replicas('pools_lib', { db: { slots: 1 } }, (s) => {
      for (const job of jobs) {
        s.job(job, { schedule: '* * * * * *', pool: 'db' }, async () => {
          most = Math.max(most, ++running);
          try {
            await new Promise((r) => setTimeout(r, 700));
          } finally {
            running--;
            ran.set(job, (ran.get(job) ?? 0) + 1);
          }
        });
      }
    });
    await waitFor('each job ran twice', () => jobs.every((j) => (ran.get(j) ?? 0) >= 2), {
      timeoutMs: 60_000,
      intervalMs: 100,
    });
    await Promise.all(schedulers.map((s) => s.stop()));
    // The handlers' own count: never two at once.
    expect(most).toBe(1);
    expect(await poolSkips(db)).toBeGreaterThan(0);
  });

  it('gives each fan-out worker a slot: three workers, a pool of two, two at once', async () => {
    let running = 0;
    let most = 0;
    const perFire = new Map<number, number>();
    const { db, schedulers } = await replicas('pools_lib_fan', { db: { slots: 2 } }, (s) => {
      s.job('share', { schedule: '*/2 * * * * *', workers: 3, pool: 'db' }, async (ctx) => {
        most = Math.max(most, ++running);
        try {
          await new Promise((r) => setTimeout(r, 1_000));
        } finally {
          running--;
          const at = ctx.scheduledAt.getTime();
          perFire.set(at, (perFire.get(at) ?? 0) + 1);
        }
      });
    });
    await waitFor(
      'three fires with two workers each',
      () => [...perFire.values()].filter((n) => n === 2).length >= 3,
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    await Promise.all(schedulers.map((s) => s.stop()));
    expect(most).toBe(2);
    expect(Math.max(...perFire.values())).toBe(2);
    // The third worker of each fire was kept out by the pool, and says so.
    expect(await poolSkips(db)).toBeGreaterThan(0);
  });

  it('a host pool full on one host leaves the fire to the others: their slots are their own', async () => {
    // `hog` runs only on app-1 and holds app-1's one slot; `x` prefers app-1, whose slot is taken:
    // the fire is not decided by app-1's skip, and another host runs it in its own slot.
    const ran: string[] = [];
    const { schedulers } = await replicas(
      'pools_lib_host',
      { sftp: { slots: 1, scope: 'host' } },
      (s) => {
        s.job(
          'hog',
          { schedule: '* * * * * *', pool: 'sftp', runOn: { hosts: ['app-1'] } },
          () => new Promise((r) => setTimeout(r, 8_000)),
        );
        s.job('x', { schedule: '*/2 * * * * *', pool: 'sftp', prefer: ['app-1'] }, (ctx) => {
          ran.push(ctx.host);
        });
      },
    );
    await waitFor('x ran three times', () => ran.length >= 3, {
      timeoutMs: 60_000,
      intervalMs: 100,
    });
    await Promise.all(schedulers.map((s) => s.stop()));
    // Every run after hog took app-1's slot was elsewhere; at least one of them, surely.
    expect(ran.filter((h) => h !== 'app-1').length).toBeGreaterThan(0);
  });

  it('refuses a job that names a pool it was not given', async () => {
    const { createScheduler } = await import('../../src/index.js');
    const s = createScheduler({
      databaseUrl: 'mysql://root@127.0.0.1:1/never',
      host: 'app-1',
      namespace: 'pooled',
      pools: { db: { slots: 1 } },
      log: pino({ level: 'silent' }),
    });
    let thrown: unknown;
    try {
      s.job('sync', { schedule: '* * * * * *', pool: 'warehouse' }, () => {});
      await s.start();
    } catch (err) {
      thrown = err;
    } finally {
      await s.stop().catch(() => {});
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect(String((thrown as Error).message)).toMatch(
      /jobs\.sync\.pool: unknown pool "warehouse" \(pools: db\)/,
    );
  });
});
