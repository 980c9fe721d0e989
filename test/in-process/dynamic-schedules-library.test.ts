/**
 * Schedules created at run time in library mode (docs/library-mode.md, "Schedules created at run
 * time"): replicas of an application, each a `createScheduler` on one database, whose handlers run
 * in this very process — so what ran is judged by the handlers' own journal (each appends
 * `key instant replica`), not only by baton's rows.
 *
 * - 50 tenants' schedules upserted from one replica while three run them every 2 s: each
 *   (key, instant) runs exactly once, with its params, and no instant of a key is left out; a
 *   replica restarted mid-way runs its share; `remove` from another replica stops the removed keys
 *   on every replica within the stated delay;
 * - the same key upserted from two replicas at once is one schedule: one row, one revision, one
 *   run per instant;
 * - an identical upsert changes nothing (no revision bump); a changed one moves it by one;
 * - the CLI reads a key's runs (`history`/`explain --key`), pauses one key or the whole job
 *   (`pause --key`), and counts each job's schedules (`status`), from the tables alone.
 */
import pino from 'pino';
import { Writable } from 'node:stream';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { Scheduler } from '../../src/index.js';
import { baton } from '../helpers/cli-in-process.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { json } from '../helpers/inspect.js';
import { waitFor } from '../helpers/wait.js';

/** What docs/library-mode.md promises: a change reaches every replica within this. */
const STATED_DELAY_MS = 2_000;
const EVERY_2S = '*/2 * * * * *';

interface Entry {
  key: string;
  at: number;
  replica: string;
  params: Record<string, string>;
}

/** Three replicas' worth of schedulers on one database, each with the job `report`. */
class App {
  readonly journal: Entry[] = [];
  /** Log lines at error level or above, of every replica. */
  readonly errors: string[] = [];
  private readonly started: Scheduler[] = [];

  private constructor(readonly db: TestDatabase) {}

  static async create(label: string): Promise<App> {
    const app = new App(await createTestDatabase(label, { migrated: true }));
    onTestFinished(async () => {
      await Promise.all(app.started.map((s) => s.stop({ force: true })));
      await app.db.drop();
    });
    return app;
  }

  /** A replica (`replica` names it in the journal: a restarted one is told apart). */
  async replica(host: string, replica = host): Promise<Scheduler> {
    const { createScheduler } = await import('../../src/index.js');
    const sink = new Writable({
      write: (chunk: Buffer, _enc, done) => {
        for (const line of chunk.toString().split('\n').filter(Boolean)) {
          const l = JSON.parse(line) as { level: number; msg: string };
          if (l.level >= 50) this.errors.push(`${host}: ${l.msg}`);
        }
        done();
      },
    });
    const s = createScheduler({
      databaseUrl: this.db.url,
      host,
      namespace: 'tenants',
      log: pino({ level: 'warn' }, sink),
    });
    // The job's own options give the policies; the schedules give the timing and the params.
    s.job('report', { timeout: '1m' }, (ctx) => {
      this.journal.push({
        key: ctx.key ?? '',
        at: ctx.scheduledAt.getTime(),
        replica,
        params: ctx.params,
      });
    });
    await s.start();
    this.started.push(s);
    return s;
  }

  /** The journal's (key, instant) pairs that ran more than once. */
  twice(): string[] {
    const seen = new Map<string, number>();
    for (const e of this.journal) {
      const id = `${e.key} ${new Date(e.at).toISOString()}`;
      seen.set(id, (seen.get(id) ?? 0) + 1);
    }
    return [...seen].filter(([, n]) => n > 1).map(([id, n]) => `${id} ×${n}`);
  }

  instantsOf(key: string): number[] {
    return this.journal
      .filter((e) => e.key === key)
      .map((e) => e.at)
      .sort((a, b) => a - b);
  }
}

const tenants = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => `t${String(from + i).padStart(2, '0')}`);

describe('schedules created at run time, three replicas', () => {
  it('runs each tenant once per instant, a restarted replica its share, and stops removed keys everywhere', async () => {
    const app = await App.create('dyn_lib');
    const [a, b] = [await app.replica('app-1'), await app.replica('app-2')];
    let c = await app.replica('app-3');
    const keys = tenants(0, 50);

    // Upserted from one replica, while all three run.
    const upserted = await Promise.all(
      keys.map((key) =>
        a.schedules.upsert('report', key, { schedule: EVERY_2S, params: { TENANT: key } }),
      ),
    );
    expect(upserted.every((u) => u.status === 'created')).toBe(true);
    await waitFor(
      'every tenant run three times',
      () => keys.every((k) => app.instantsOf(k).length >= 3),
      { timeoutMs: 30_000, intervalMs: 100 },
    );

    // A replica restarted mid-way (the same host, a new scheduler) runs its share again.
    await c.stop();
    const restartedAt = Date.now();
    c = await app.replica('app-3', 'app-3 (restarted)');
    await waitFor(
      'the restarted replica running tenants',
      () => app.journal.filter((e) => e.replica === 'app-3 (restarted)').length >= 10,
      { timeoutMs: 30_000, intervalMs: 100 },
    );

    // Half of them removed from another replica than the one that created them.
    const removed = keys.slice(25);
    const live = keys.slice(0, 25);
    expect(await Promise.all(removed.map((k) => b.schedules.remove('report', k)))).toEqual(
      removed.map(() => true),
    );
    const removedAt = Date.now();
    // Past the stated delay, with two more instants of the live keys to see it by.
    const bound = removedAt + STATED_DELAY_MS;
    await waitFor(
      'the live tenants run twice past the stated delay',
      () => live.every((k) => app.instantsOf(k).filter((at) => at > bound).length >= 2),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    await Promise.all([a.stop(), b.stop(), c.stop()]);

    // Once per (key, instant), judged by the handlers themselves.
    expect(app.twice()).toEqual([]);
    // No run of a removed key anywhere after the delay.
    const late = app.journal.filter((e) => removed.includes(e.key) && e.at > bound);
    expect(late.map((e) => `${e.key} ${new Date(e.at).toISOString()} ${e.replica}`)).toEqual([]);
    // No instant of a live key left out, from the first after its upsert was written on (every
    // 2 s): a replica that reads a change late fires its instants since, late.
    const written = await app.db.query<{ schedule_key: string; created_at: Date }>(
      'SELECT schedule_key, created_at FROM baton_schedules',
    );
    const createdAt = new Map(written.map((r) => [r.schedule_key, r.created_at.getTime()]));
    for (const key of live) {
      const at = app.instantsOf(key);
      expect({ key, first: at[0] }).toEqual({
        key,
        first: Math.floor(createdAt.get(key)! / 2_000) * 2_000 + 2_000,
      });
      const gaps = at.slice(1).filter((t, i) => t - at[i]! !== 2_000);
      expect({ key, gaps: gaps.map((t) => new Date(t).toISOString()) }).toEqual({ key, gaps: [] });
    }
    // Each run had its schedule's params; the restarted replica ran some after its restart.
    expect(app.journal.every((e) => e.params.TENANT === e.key)).toBe(true);
    expect(app.journal.some((e) => e.replica === 'app-3 (restarted)' && e.at > restartedAt)).toBe(
      true,
    );
    // Every replica ran some: the fires are spread (first asker), not all on the upserting one.
    expect(new Set(app.journal.map((e) => e.replica.slice(0, 5)))).toEqual(
      new Set(['app-1', 'app-2', 'app-3']),
    );

    // baton's rows say the same: one `done` winner per journal entry, with its params.
    const rows = await app.db.query<{ job: string; at: Date; params: string | null }>(
      `SELECT job, scheduled_at AS at, params FROM baton_runs
        WHERE namespace = 'tenants' AND winner IS NOT NULL AND status = 'done'`,
    );
    const fromRows = rows.map((r) => `${r.job} ${r.at.toISOString()}`).sort();
    const fromJournal = app.journal
      .map((e) => `report:${e.key} ${new Date(e.at).toISOString()}`)
      .sort();
    expect(fromRows).toEqual(fromJournal);
    expect(
      rows.every((r) => r.params === JSON.stringify({ env: { TENANT: r.job.slice(7) } })),
    ).toBe(true);
    // Nothing else was written: no run of another status, no runner error.
    const others = await app.db.query<{ job: string; status: string; host: string }>(
      `SELECT job, scheduled_at, status, host, reason_kind, LEFT(COALESCE(reason, error), 120) AS why
         FROM baton_runs WHERE status NOT IN ('done', 'skipped') ORDER BY id LIMIT 5`,
    );
    expect(others).toEqual([]);
    expect(app.errors).toEqual([]);
    const stored = await app.db.query<{ removed: number; n: number }>(
      `SELECT removed_at IS NOT NULL AS removed, COUNT(*) AS n FROM baton_schedules GROUP BY 1
        ORDER BY 1`,
    );
    expect(stored.map((r) => [Number(r.removed), Number(r.n)])).toEqual([
      [0, 25],
      [1, 25],
    ]);
  }, 150_000);

  it('gives one schedule for one key upserted from two replicas at once', async () => {
    const app = await App.create('dyn_lib_race');
    const replicas = [await app.replica('app-1'), await app.replica('app-2')];
    await app.replica('app-3');
    const definition = { schedule: EVERY_2S, params: { TENANT: 'same' } };
    const outcomes = await Promise.all(
      replicas.map((s) => s.schedules.upsert('report', 'same', definition)),
    );
    // One of them wrote it; the other found it written (or both read it unwritten and the
    // second, under the revision's lock, found it equal).
    expect(outcomes.map((o) => o.status).sort()).toEqual(['created', 'unchanged']);
    expect(new Set(outcomes.map((o) => o.revision)).size).toBe(1);
    const rows = await app.db.query<{ n: number }>(
      `SELECT COUNT(*) AS n FROM baton_schedules WHERE job = 'report' AND schedule_key = 'same'`,
    );
    expect(Number(rows[0]!.n)).toBe(1);
    const [revision] = await app.db.query<{ revision: number }>(
      `SELECT revision FROM baton_schedule_revisions WHERE namespace = 'tenants'`,
    );
    expect(Number(revision!.revision)).toBe(1);
    await waitFor('four runs of the key', () => app.instantsOf('same').length >= 4, {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    expect(app.twice()).toEqual([]);
    expect((await replicas[1]!.schedules.list('report')).map((s) => s.key)).toEqual(['same']);
  }, 90_000);

  it('changes nothing for an identical upsert, and moves the revision by one for a change', async () => {
    const app = await App.create('dyn_lib_idem');
    const s = await app.replica('app-1');
    const revision = async () =>
      Number(
        (
          await app.db.query<{ revision: number }>(
            `SELECT revision FROM baton_schedule_revisions WHERE namespace = 'tenants'`,
          )
        )[0]!.revision,
      );
    const row = async () =>
      (
        await app.db.query<{ revision: number; updated_at: Date }>(
          `SELECT revision, updated_at FROM baton_schedules WHERE schedule_key = 'k1'`,
        )
      )[0]!;
    const first = await s.schedules.upsert('report', 'k1', {
      schedule: '0 3 * * *',
      timezone: 'Asia/Seoul',
      params: { B: '2', A: '1' },
    });
    expect(first).toEqual({ job: 'report', key: 'k1', status: 'created', revision: 1 });
    const before = await row();
    // The same definition, its params in another order: nothing is written.
    for (let i = 0; i < 3; i++) {
      const again = await s.schedules.upsert('report', 'k1', {
        schedule: '0 3 * * *',
        timezone: 'Asia/Seoul',
        params: { A: '1', B: '2' },
      });
      expect(again).toEqual({ job: 'report', key: 'k1', status: 'unchanged', revision: 1 });
    }
    expect(await revision()).toBe(1);
    expect(await row()).toEqual(before);
    // A change of params alone is a change.
    const changed = await s.schedules.upsert('report', 'k1', {
      schedule: '0 3 * * *',
      timezone: 'Asia/Seoul',
      params: { A: '1', B: '3' },
    });
    expect(changed).toMatchObject({ status: 'changed', revision: 2 });
    expect(await revision()).toBe(2);
    // Removing twice: one change; upserting it again brings it back.
    expect(await s.schedules.remove('report', 'k1')).toBe(true);
    expect(await s.schedules.remove('report', 'k1')).toBe(false);
    expect(await revision()).toBe(3);
    expect(await s.schedules.list()).toEqual([]);
    const back = await s.schedules.upsert('report', 'k1', { schedule: '0 3 * * *' });
    expect(back).toMatchObject({ status: 'created', revision: 4 });
    expect((await s.schedules.list('report')).map((x) => [x.key, x.timezone])).toEqual([
      ['k1', 'UTC'],
    ]);
    // A param named `__proto__` (a valid name) is kept, not taken for the object's prototype.
    const proto = JSON.parse('{"__proto__": "kept"}') as Record<string, string>;
    await s.schedules.upsert('report', 'k2', { schedule: '0 3 * * *', params: proto });
    const stored = await app.db.query<{ params: string | null }>(
      `SELECT params FROM baton_schedules WHERE schedule_key = 'k2'`,
    );
    expect(stored[0]!.params).toBe('{"__proto__":"kept"}');
  });

  it('lets the CLI read, pause and count a key from the tables alone', async () => {
    const app = await App.create('dyn_lib_cli');
    const [a] = [await app.replica('app-1'), await app.replica('app-2')];
    for (const key of ['t1', 't2']) {
      await a!.schedules.upsert('report', key, { schedule: EVERY_2S, params: { TENANT: key } });
    }
    await waitFor(
      'two runs of each key',
      () => ['t1', 't2'].every((k) => app.instantsOf(k).length >= 2),
      {
        timeoutMs: 30_000,
        intervalMs: 100,
      },
    );
    const cli = (...args: string[]) =>
      baton([...args, '--database-url', app.db.url, '--namespace', 'tenants']);

    const history = json<{ job: string; params: unknown }[]>(
      await cli('history', 'report', '--key', 't1', '--json', '--status', 'done'),
    );
    expect(history.length).toBeGreaterThanOrEqual(2);
    expect(new Set(history.map((r) => r.job))).toEqual(new Set(['report:t1']));
    expect(history[0]!.params).toEqual({ env: { TENANT: 't1' } });
    const option = await cli('history', 'report', '--key', '--all');
    expect(option.code).toBe(64);
    expect(option.stderr).toContain(`--key "--all" may contain only ASCII letters`);
    expect((await cli('history', '--key', 't1')).stderr).toContain('--key needs a job');

    const explained = await cli('explain', 'report', '--key', 't1');
    expect(explained.code).toBe(0);
    expect(explained.stdout).toContain('job:        report:t1 (namespace tenants)');
    expect(explained.stdout).toContain(
      'schedule:   "*/2 * * * * *" UTC, params {"TENANT":"t1"} (key t1 of report; since',
    );
    const doc = json<{ job: string; schedule: { key: string; removedAt: null } }>(
      await cli('explain', 'report', '--key', 't1', '--json'),
    );
    expect(doc).toMatchObject({ job: 'report:t1', schedule: { key: 't1', removedAt: null } });
    const none = await cli('explain', 'report', '--key', 'ghost');
    expect(none.code).toBe(64);
    expect(none.stderr).toContain('report has no schedule under the key "ghost"');

    // (stderr says this directory's schedules.yaml is of another namespace: left out.)
    const status = JSON.parse((await cli('status', '--json')).stdout) as {
      dynamicSchedules: { job: string; count: number }[];
    };
    expect(status.dynamicSchedules).toEqual([{ job: 'report', count: 2 }]);
    expect((await cli('status')).stdout).toContain('SCHEDULES CREATED AT RUN TIME: 2');

    // One key paused: its fires are skipped as paused on every replica, the other key runs on.
    expect((await cli('pause', 'report', '--key', 'ghost')).code).toBe(64);
    expect((await cli('pause', 'report', '--key', 't1', '--reason', 'tenant on hold')).code).toBe(
      0,
    );
    const pausedAt = Date.now();
    await waitFor(
      'a fire of t1 skipped as paused, and t2 run twice since',
      async () => {
        const [row] = await app.db.query<{ n: number }>(
          `SELECT COUNT(*) AS n FROM baton_runs WHERE job = 'report:t1' AND reason_kind = 'paused'`,
        );
        return (
          Number(row!.n) > 0 &&
          app.instantsOf('t2').filter((at) => at > pausedAt + 2_000).length >= 2
        );
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    expect(app.instantsOf('t1').filter((at) => at > pausedAt + 2_000)).toEqual([]);
    expect((await cli('resume', 'report', '--key', 't1')).code).toBe(0);

    // The job paused: every key of it.
    expect((await cli('pause', 'report')).code).toBe(0);
    const jobPausedAt = Date.now();
    await waitFor(
      'a fire of each key skipped as paused after the job was',
      async () => {
        const rows = await app.db.query<{ job: string }>(
          `SELECT DISTINCT job FROM baton_runs WHERE reason_kind = 'paused' AND scheduled_at > ?`,
          [new Date(jobPausedAt + 2_000)],
        );
        return rows.length === 2;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    expect(app.journal.filter((e) => e.at > jobPausedAt + 2_000)).toEqual([]);
    expect(app.twice()).toEqual([]);
  }, 90_000);
});
