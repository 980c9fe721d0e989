/**
 * The quickest proof of one winner per fire: the fire protocol itself (`contend`), called by two
 * in-process contenders against the real server — each with its own lock session and pool, as
 * `baton run` opens them — racing for the same fires. No runner processes, no timers, no clocks:
 * only the lock and the fire key decide, and the history must show exactly one winner per fire.
 *
 * Per fire (an instant an hour ago, so it is due by any clock):
 * - both contenders call `contend` at once: one wins, the other records a skip naming the
 *   winner's host;
 * - the winner gives its lock back (its row stays `running`: the run is not this test's concern),
 *   and a third, late contender then gets the lock — the case of a host whose clock is late,
 *   arriving after a short job — and is refused by the fire key alone: "this fire already ran".
 *
 * With `overlap: allow` there is no lock at all, and the fire key alone picks the one winner.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDatabaseUrl, type DatabaseTarget } from '../../src/config/database-url.js';
import {
  contend,
  type ContendOptions,
  type Contention,
  type FireContext,
} from '../../src/coordination/fire-protocol.js';
import { openCoordination } from '../../src/coordination/open-coordination.js';
import { jobLockName } from '../../src/lock-names.js';
import { openPool } from '../../src/store/connect.js';
import { DeadlinePool } from '../../src/store/deadline.js';
import type { Attempt } from '../../src/store/runs.js';
import { byFire, createTestDatabase, runs, type TestDatabase } from '../helpers/db.js';
import { expectOneWinnerPerFire, skipKindOf } from '../helpers/fires.js';

const NAMESPACE = 'contend';
/** The same statement deadline as `baton run`'s pool. */
const STATEMENT_DEADLINE_MS = 10_000;
const FIRES = 50;

let db: TestDatabase;
let target: DatabaseTarget;
const contenders: FireContext[] = [];
const pools: DeadlinePool[] = [];
/** The two that race, and the late third one. */
let alpha: FireContext, beta: FireContext, late: FireContext;

/**
 * A contender as `baton run` opens one: its own pool, and the lock session from openCoordination
 * (which migrates the database first, under its lock).
 */
async function openContender(host: string): Promise<FireContext> {
  const pool = new DeadlinePool(openPool(target, 2), STATEMENT_DEADLINE_MS);
  pools.push(pool);
  const { lock } = await openCoordination(target, pool);
  const c: FireContext = {
    database: target.database,
    namespace: NAMESPACE,
    host,
    pid: process.pid,
    pool,
    lock,
  };
  contenders.push(c);
  return c;
}

beforeAll(async () => {
  db = await createTestDatabase('contend');
  target = parseDatabaseUrl(db.url);
  alpha = await openContender('alpha');
  beta = await openContender('beta');
  late = await openContender('late');
});

afterAll(async () => {
  for (const c of contenders) await c.lock.close();
  for (const pool of pools) await pool.end().catch(() => {});
  await db?.drop();
});

/** Whole-second instants an hour ago, oldest first: due by the database's clock for certain. */
function pastInstants(count: number): Date[] {
  const start = Math.floor(Date.now() / 1000) * 1000 - 3_600_000;
  return Array.from({ length: count }, (_, i) => new Date(start + i * 1000));
}

function attemptOf(c: FireContext, job: string, scheduledAt: Date): Attempt {
  return { namespace: NAMESPACE, job, scheduledAt, trigger: 'schedule', host: c.host, pid: c.pid };
}

/** Both contenders at once for one fire, the first to start alternating from fire to fire. */
async function race(
  pair: readonly [FireContext, FireContext],
  job: string,
  at: Date,
  i: number,
  options: ContendOptions,
): Promise<{ winner: FireContext; won: Extract<Contention, { won: true }>; lost: Contention }> {
  const order = i % 2 === 0 ? pair : ([pair[1], pair[0]] as const);
  const results = await Promise.all(order.map((c) => contend(c, attemptOf(c, job, at), options)));
  const winners = results.flatMap((r, k) => (r.won ? [{ winner: order[k]!, won: r }] : []));
  expect(winners.length, `winners of ${at.toISOString()} by contend`).toBe(1);
  const { winner, won } = winners[0]!;
  return { winner, won, lost: results.find((r) => !r.won)! };
}

async function lockIsFree(name: string): Promise<boolean> {
  const [row] = await db.query<{ free: number }>('SELECT IS_FREE_LOCK(?) AS free', [name]);
  return Number(row!.free) === 1;
}

/**
 * The history of `job`: per fire one row per contender, one winner — the one `contend` named —
 * and skips that name it, the late contender's refused by the fire key.
 */
async function expectHistory(job: string, winners: Map<number, string>): Promise<void> {
  const rows = await runs(db, job);
  expectOneWinnerPerFire(rows, job);
  const fires = byFire(rows);
  expect(fires.size).toBe(winners.size);
  for (const [at, fire] of fires) {
    const where = `${job} @ ${new Date(at).toISOString()}`;
    const host = winners.get(at)!;
    expect(fire.map((r) => r.host).sort(), where).toEqual(['alpha', 'beta', 'late']);
    const won = fire.filter((r) => r.winner != null);
    expect(
      won.map((r) => [r.host, r.winner, r.status]),
      where,
    ).toEqual([[host, 1, 'running']]);
    for (const skip of fire.filter((r) => r.winner == null)) {
      expect(skip.status, where).toBe('skipped');
      // Whether the loser met the lock or the row, its reason names the winner's host.
      expect(skip.reason, `${where}: ${skip.host}'s skip`).toContain(` ${host} `);
      const kind = skipKindOf(skip.reason ?? '');
      expect(kind, `${where}: ${skip.reason}`).toMatch(/^(taken|claiming|overlap)$/);
      if (kind === 'overlap') {
        // This test leaves every winner's row `running`. A loser that looked the holder up while
        // the winner was still inserting this fire's row finds the winner's row of an earlier
        // fire under the same lock session, and names it: a fire the same host won.
        const earlier = Date.parse(/\(fire (\S+), started /.exec(skip.reason!)?.[1] ?? '');
        expect(earlier, `${where}: ${skip.reason}`).toBeLessThan(at);
        expect(winners.get(earlier), `${where}: ${skip.reason}`).toBe(host);
      }
    }
    // The late one held the lock (the winner had released it): only the fire key refused it.
    const late = fire.find((r) => r.host === 'late')!;
    expect(late.reason, where).toBe(`this fire already ran on ${host} (running)`);
  }
}

describe('two contenders in one process, racing for the same fires', () => {
  it('give every fire exactly one winner; a late third one with the lock is refused by the fire key', async () => {
    const winners = new Map<number, string>();
    for (const [i, at] of pastInstants(FIRES).entries()) {
      const { winner, won, lost } = await race([alpha, beta], 'tick', at, i, {});
      winners.set(at.getTime(), winner.host);
      expect(won.lockName).toBe(jobLockName(target.database, NAMESPACE, 'tick'));
      expect(lost.runId).not.toBe(won.runId);
      // The winner's run is over: it gives the lock back.
      expect(await winner.lock.release(won.lockName!)).toBe(true);
      expect([alpha, beta].map((c) => c.lock.heldCount)).toEqual([0, 0]);
      expect(await lockIsFree(won.lockName!)).toBe(true);
      // Late by an hour, and with it its sense of the time: to it the fire is due just now, so
      // it does not look the fire up first (a stale fire would) — it takes the lock.
      const third = await contend({ ...late, now: () => at }, attemptOf(late, 'tick', at));
      expect(third).toMatchObject({
        won: false,
        reason: `this fire already ran on ${winner.host} (running)`,
      });
      // A refused claim gives the lock back too.
      expect(late.lock.heldCount).toBe(0);
    }
    await expectHistory('tick', winners);
    // Both contenders won some fires: the race was a race.
    expect(new Set(winners.values()).size).toBe(2);
  });

  it('with overlap: allow (no lock), the fire key alone gives one winner per fire', async () => {
    const winners = new Map<number, string>();
    const options: ContendOptions = { overlap: 'allow' };
    for (const [i, at] of pastInstants(FIRES).entries()) {
      const { winner, won } = await race([alpha, beta], 'free', at, i, options);
      winners.set(at.getTime(), winner.host);
      expect(won.lockName).toBeNull();
      expect([alpha, beta].map((c) => c.lock.heldCount)).toEqual([0, 0]);
      // On time by its own clock (as above): so the fire key, not a look-up, refuses it.
      const third = await contend({ ...late, now: () => at }, attemptOf(late, 'free', at), options);
      expect(third).toMatchObject({
        won: false,
        reason: `this fire already ran on ${winner.host} (running)`,
      });
    }
    await expectHistory('free', winners);
  });
});

describe("a runner that is not the fire's first asker (coordination/first-asker.ts)", () => {
  it('finds the fire won and skips it without asking for the lock; an unwon fire it contends as usual', async () => {
    // Its lock session is closed: any GET_LOCK would throw. Only the pool is usable.
    const asideContext = await openContender('aside');
    await asideContext.lock.close();
    for (const at of pastInstants(3)) {
      const onTime = (c: FireContext): FireContext => ({ ...c, now: () => at });
      const won = await contend(onTime(alpha), attemptOf(alpha, 'lead', at));
      expect(won.won, `alpha wins ${at.toISOString()}`).toBe(true);
      const after = await contend(onTime(asideContext), attemptOf(asideContext, 'lead', at), {
        afterLead: true,
      });
      expect(after).toMatchObject({ won: false, kind: 'taken' });
      expect((after as { reason: string }).reason).toMatch(/^this fire is running on alpha /);
      // Without the lead it would have asked for the lock, on a session that is closed.
      await expect(
        contend(onTime(asideContext), attemptOf(asideContext, 'lead', at)),
      ).rejects.toThrow();
      if (won.won) await alpha.lock.release(won.lockName!);
    }
    // A fire nobody won yet: the runner after the lead contends for it like any other, and wins.
    const [unwon] = pastInstants(1).map((d) => new Date(d.getTime() - 60_000));
    const taken = await contend({ ...beta, now: () => unwon! }, attemptOf(beta, 'lead', unwon!), {
      afterLead: true,
    });
    expect(taken.won).toBe(true);
    if (taken.won) await beta.lock.release(taken.lockName!);
    const rows = (await runs(db, 'lead')).filter((r) => r.winner != null);
    expect(rows.map((r) => r.host).sort()).toEqual(['alpha', 'alpha', 'alpha', 'beta']);
  });
});
