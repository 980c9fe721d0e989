/**
 * Placement in library mode (issue 38, docs/placement.md): replicas of an application, each a
 * `createScheduler` with its own `host` and `tags`, on one database.
 *
 * - `runOn: {tags}`: only the replicas with the tag run the handler, every fire; the others
 *   write no row for it, and `runNow` on one of them is `not-run`, saying why.
 * - `prefer`: the preferred replica runs every fire while it is up; stopped, the others take the
 *   fires.
 * - `tags` that are not tags are refused as the file's problems are (ConfigError, exit 78).
 */
import pino from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { timingPrint } from '../../src/config/fingerprint.js';
import type { Scheduler } from '../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

interface Seen {
  job: string;
  at: number;
  host: string;
}

async function replicas(
  db: TestDatabase,
  hosts: { host: string; tags?: string[] }[],
  define: (s: Scheduler, seen: Seen[], host: string) => void,
): Promise<{ schedulers: Map<string, Scheduler>; seen: Seen[] }> {
  const { createScheduler } = await import('../../src/index.js');
  const seen: Seen[] = [];
  const schedulers = new Map<string, Scheduler>();
  for (const { host, tags } of hosts) {
    const s = createScheduler({
      databaseUrl: db.url,
      host,
      ...(tags ? { tags } : {}),
      namespace: 'placed',
      log: pino({ level: 'silent' }),
      timings: { fleetWatch: { companionsMs: 300 } },
    });
    define(s, seen, host);
    schedulers.set(host, s);
  }
  await Promise.all([...schedulers.values()].map((s) => s.start()));
  onTestFinished(async () => {
    await Promise.all([...schedulers.values()].map((s) => s.stop()));
    await db.drop();
  });
  return { schedulers, seen };
}

/** Waits until every replica sees `count` others alive and running `job` in the registry. */
async function seeEachOther(db: TestDatabase, count: number): Promise<void> {
  await waitFor(
    'the replicas registered',
    async () =>
      (
        await db.query(
          `SELECT host FROM baton_runners WHERE namespace = 'placed' AND stopped_at IS NULL`,
        )
      ).length === count,
    { timeoutMs: 20_000, intervalMs: 100 },
  );
}

describe('placement in library mode', () => {
  it('runOn: only the replicas with the tag run the handler, every fire; the others write no row', async () => {
    const db = await createTestDatabase('placement_lib_runon', { migrated: true });
    const { schedulers, seen } = await replicas(
      db,
      [{ host: 'web-1' }, { host: 'gpu-1', tags: ['gpu'] }, { host: 'web-2' }],
      (s, seen, host) => {
        s.job('train', { schedule: '* * * * * *', runOn: { tags: ['gpu'] } }, (ctx) => {
          seen.push({ job: 'train', at: ctx.scheduledAt.getTime(), host });
        });
      },
    );
    await waitFor('five runs', () => seen.length >= 5, { timeoutMs: 20_000, intervalMs: 50 });
    expect(new Set(seen.map((s) => s.host))).toEqual(new Set(['gpu-1']));
    const instants = seen.map((s) => s.at);
    expect(new Set(instants).size, 'once per instant').toBe(instants.length);
    const rows = await db.query<{ host: string }>(
      `SELECT DISTINCT host FROM baton_runs WHERE job = 'train'`,
    );
    expect(rows.map((r) => r.host)).toEqual(['gpu-1']);
    // By hand too: runNow on a replica without the tag is not run, saying why.
    const before = seen.length;
    expect(await schedulers.get('web-1')!.runNow('train')).toEqual({
      status: 'not-run',
      reason: 'train may not run on web-1 (needs tag gpu)',
    });
    expect(seen.slice(before).filter((s) => s.host === 'web-1')).toEqual([]);
  });

  it('prefer: the preferred replica runs every fire while up; stopped, the others take them', async () => {
    const db = await createTestDatabase('placement_lib_prefer', { migrated: true });
    const { schedulers, seen } = await replicas(
      db,
      [{ host: 'app-1' }, { host: 'app-2' }, { host: 'app-3' }],
      (s, seen, host) => {
        s.job(
          'settle',
          // A long lead (an every-second job's may be up to 1 s): the preferred replica wins
          // even when late on a loaded machine.
          { schedule: '* * * * * *', prefer: { hosts: ['app-2'], lead: '900ms' } },
          (ctx) => {
            seen.push({ job: 'settle', at: ctx.scheduledAt.getTime(), host });
          },
        );
      },
    );
    await seeEachOther(db, 3);
    // Before the replicas' first look at each other, any of them may ask first: from app-2's
    // first run on, every fire is app-2's.
    const first = await waitFor(
      'a run on app-2',
      () => seen.findIndex((s) => s.host === 'app-2') + 1,
      {
        timeoutMs: 20_000,
        intervalMs: 50,
      },
    );
    await waitFor('four more runs', () => seen.length >= first + 4, {
      timeoutMs: 20_000,
      intervalMs: 50,
    });
    const steady = seen.slice(first);
    expect(new Set(steady.map((s) => s.host))).toEqual(new Set(['app-2']));

    await schedulers.get('app-2')!.stop();
    const afterStop = seen.length;
    await waitFor('three runs after app-2 stopped', () => seen.length >= afterStop + 3, {
      timeoutMs: 20_000,
      intervalMs: 50,
    });
    const later = seen.slice(afterStop);
    for (const s of later) expect(['app-1', 'app-3']).toContain(s.host);
    const instants = seen.map((s) => s.at);
    expect(new Set(instants).size, 'once per instant').toBe(instants.length);
  });

  it('no eligible replica: the missed rows are the fleet’s fires, by the timing version in force, not the code’s schedule', async () => {
    const db = await createTestDatabase('placement_lib_versions', { migrated: true });
    // The fleet moved `moved` from every second to every 5 s an hour ago (its sftp runners had
    // that code); this replica's code still says every second. `steady` has no versions.
    const every = { schedule: '* * * * * *', timezone: 'UTC' };
    const fifth = { schedule: '*/5 * * * * *', timezone: 'UTC' };
    for (const [version, timing, at] of [
      [1, every, '1970-01-01 00:00:00'],
      [2, fifth, null],
    ] as const) {
      await db.query(
        `INSERT INTO baton_timings (namespace, job, version, print, schedule, timezone,
                                    effective_at, chosen_by, recorded_at, recorded_by, updated_at)
         VALUES ('placed', 'moved', ?, ?, ?, ?, COALESCE(?, NOW(3) - INTERVAL 1 HOUR),
                 'settle', NOW(3), 'sftp-1', NOW(3))`,
        [version, timingPrint(timing), timing.schedule, timing.timezone, at],
      );
    }
    await replicas(db, [{ host: 'web-1' }], (s) => {
      for (const job of ['moved', 'steady']) {
        s.job(job, { ...every, runOn: { tags: ['sftp'] } }, () => {
          throw new Error('placed elsewhere: never run here');
        });
      }
    });
    const missed = (job: string) =>
      db.query<{ at: number }>(
        `SELECT UNIX_TIMESTAMP(scheduled_at) AS at FROM baton_runs
          WHERE namespace = 'placed' AND job = ? AND reason_kind = 'no-eligible-runner'`,
        [job],
      );
    await waitFor(
      'missed rows of both jobs',
      async () => (await missed('steady')).length >= 8 && (await missed('moved')).length >= 1,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const moved = (await missed('moved')).map((r) => Number(r.at));
    expect(
      moved.filter((at) => at % 5 !== 0),
      'instants of the version in force only',
    ).toEqual([]);
  });

  it('refuses tags that are not tags, naming the option', async () => {
    const { createScheduler } = await import('../../src/index.js');
    const make = (tags: unknown) =>
      createScheduler({
        databaseUrl: 'mysql://root@127.0.0.1:1/none',
        host: 'x',
        tags: tags as string[],
        log: pino({ level: 'silent' }),
      });
    expect(() => make(['--database-url=mysql://x@127.0.0.1:1/y'])).toThrow(ConfigError);
    expect(() => make(['a b'])).toThrow(/tags: "a b" is not a tag/);
    // A string is not a list of tags (it was read as its letters: g, p, u).
    expect(() => make('gpu')).toThrow(/tags: expected a list of tags/);
    expect(() => make([''])).toThrow(/tags: "" is not a tag/);
    expect(() => make(['sftp', 'region=eu'])).not.toThrow();
  });
});
