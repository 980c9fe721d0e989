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
import { createTestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

describe('pools in library mode', () => {
  it('lets one handler of the pool run at a time across three replicas', async () => {
    const db = await createTestDatabase('pools_lib', { migrated: true });
    const { createScheduler } = await import('../../src/index.js');
    let running = 0;
    let most = 0;
    const ran = new Map<string, number>();
    const schedulers: Scheduler[] = [];
    for (const host of ['app-1', 'app-2', 'app-3']) {
      const s = createScheduler({
        databaseUrl: db.url,
        host,
        namespace: 'pooled',
        pools: { db: { slots: 1 } },
        log: pino({ level: 'silent' }),
      });
      for (const job of ['sync-a', 'sync-b', 'sync-c']) {
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
      schedulers.push(s);
    }
    await Promise.all(schedulers.map((s) => s.start()));
    onTestFinished(async () => {
      await Promise.all(schedulers.map((s) => s.stop()));
      await db.drop();
    });
    await waitFor(
      'each job ran twice',
      () => ['sync-a', 'sync-b', 'sync-c'].every((j) => (ran.get(j) ?? 0) >= 2),
      {
        timeoutMs: 60_000,
        intervalMs: 100,
      },
    );
    await Promise.all(schedulers.map((s) => s.stop()));
    // The handlers' own count: never two at once.
    expect(most).toBe(1);
    const [skips] = await db.query<{ n: number }>(
      `SELECT COUNT(*) AS n FROM baton_runs WHERE reason_kind = 'pool'`,
    );
    expect(Number(skips!.n)).toBeGreaterThan(0);
  });

  it('gives each fan-out worker a slot: three workers, a pool of two, two at once', async () => {
    const db = await createTestDatabase('pools_lib_fan', { migrated: true });
    const { createScheduler } = await import('../../src/index.js');
    let running = 0;
    let most = 0;
    const perFire = new Map<number, number>();
    const schedulers: Scheduler[] = [];
    for (const host of ['app-1', 'app-2', 'app-3']) {
      const s = createScheduler({
        databaseUrl: db.url,
        host,
        namespace: 'pooled',
        pools: { db: { slots: 2 } },
        log: pino({ level: 'silent' }),
      });
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
      schedulers.push(s);
    }
    await Promise.all(schedulers.map((s) => s.start()));
    onTestFinished(async () => {
      await Promise.all(schedulers.map((s) => s.stop()));
      await db.drop();
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
    const [skips] = await db.query<{ n: number }>(
      `SELECT COUNT(*) AS n FROM baton_runs WHERE reason_kind = 'pool'`,
    );
    expect(Number(skips!.n)).toBeGreaterThan(0);
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
