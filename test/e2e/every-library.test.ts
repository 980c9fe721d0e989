/**
 * `every: true` in library mode (docs/placement.md, docs/library-mode.md): three replicas in this
 * process, an every-second handler that records each call (the jobs' own journal, outside baton's
 * history). Each fire ran once on every replica; a replica stopped and created again under the
 * same `host` mid-way keeps its slot and runs no fire twice; `runNow` of the job is one manual run,
 * on the replica asked, in its slot.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Scheduler } from '../../src/library/scheduler.js';
import { createTestDatabase, runs, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['lib-a', 'lib-b', 'lib-c'];

let db: TestDatabase;
const live = new Set<Scheduler>();
beforeAll(async () => {
  db = await createTestDatabase('every_lib', { migrated: true });
});
afterAll(async () => {
  await Promise.all([...live].map((s) => s.stop({ grace: 0 })));
  await db?.drop();
});

/** What the handler saw: one entry per call. */
interface Call {
  fire: number;
  host: string;
  runId: number;
  trigger: string;
}

describe('every: true with library replicas', () => {
  it('runs each fire once on every replica, across a restart of one', async () => {
    const { createScheduler } = await import('../../src/index.js');
    const { createLogger } = await import('../../src/log.js');
    const calls: Call[] = [];
    const replica = async (host: string): Promise<Scheduler> => {
      const s = createScheduler({
        databaseUrl: db.url,
        host,
        namespace: 'every-lib',
        log: createLogger({ level: 'silent' }),
      });
      s.job('warm', { schedule: '* * * * * *', every: true }, async (ctx) => {
        calls.push({
          fire: ctx.scheduledAt.getTime(),
          host: ctx.host,
          runId: ctx.runId,
          trigger: ctx.fire.trigger,
        });
        await new Promise((r) => setTimeout(r, 100));
      });
      live.add(s);
      await s.start();
      return s;
    };
    // One after the other: replicas started at the same instant may not see each other yet.
    const replicas: Scheduler[] = [];
    for (const host of HOSTS) replicas.push(await replica(host));

    const scheduled = () => calls.filter((c) => c.trigger === 'schedule');
    const ranByAll = () => {
      const by = new Map<number, Set<string>>();
      for (const c of scheduled()) by.set(c.fire, (by.get(c.fire) ?? new Set()).add(c.host));
      return [...by].filter(([, h]) => h.size === HOSTS.length).map(([fire]) => fire);
    };
    await waitFor('four fires run by all three replicas', () => ranByAll().length >= 4, {
      timeoutMs: 20_000,
    });
    const b = replicas[1]!;
    await b.stop({ grace: '5s' });
    live.delete(b);
    const stoppedAt = Date.now();
    const again = await replica('lib-b');
    await waitFor(
      'four fires run by all three after the restart',
      () => ranByAll().filter((f) => f > stoppedAt).length >= 4,
      { timeoutMs: 20_000 },
    );
    // A manual run of an every job is one run, on the replica asked, under its own lock: it
    // may meet that replica's scheduled run (busy), never another replica's.
    await waitFor('a manual run started', async () =>
      (await again.runNow('warm')).status === 'started' ? true : undefined,
    );
    await waitFor('the manual run', () => calls.some((c) => c.trigger === 'manual'));
    await Promise.all([...live].map((s) => s.stop({ grace: '5s' })));
    live.clear();

    // No fire twice on any replica, the restarted one included.
    const keys = scheduled().map((c) => `${new Date(c.fire).toISOString()} ${c.host}`);
    expect(keys.filter((k, i) => keys.indexOf(k) !== i)).toEqual([]);
    // The replicas that stayed up ran every fire from the first all three ran to the last.
    const all = ranByAll().sort((x, y) => x - y);
    const [first, last] = [all[0]!, all.at(-1)!];
    for (const host of ['lib-a', 'lib-c']) {
      const mine = scheduled().filter((c) => c.host === host && c.fire >= first && c.fire <= last);
      expect(mine.length, host).toBe((last - first) / 1000 + 1);
    }
    expect(calls.filter((c) => c.trigger === 'manual').map((c) => c.host)).toEqual(['lib-b']);

    // The history: each call is its host's winner row; each host in one slot throughout;
    // no skips of scheduled fires: no replica wrote a row for another's share.
    const rows = await runs(db, 'warm');
    const skips = rows.filter((r) => r.winner == null);
    expect(skips.filter((r) => r.triggered_by !== 'manual').map((r) => r.reason)).toEqual([]);
    for (const r of skips) expect(r.reason).toMatch(/running on lib-b/);
    const winners = rows.filter((r) => r.winner != null);
    const byId = new Map(winners.map((r) => [r.id, r]));
    for (const c of calls) expect(byId.get(c.runId)?.host, `run ${c.runId}`).toBe(c.host);
    expect(winners.length).toBe(calls.length);
    const slots = new Map<string, Set<number>>();
    for (const r of winners) slots.set(r.host, (slots.get(r.host) ?? new Set()).add(r.winner!));
    expect(Object.fromEntries([...slots].map(([h, s]) => [h, s.size]))).toEqual({
      'lib-a': 1,
      'lib-b': 1,
      'lib-c': 1,
    });
  });
});
