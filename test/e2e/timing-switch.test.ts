/**
 * A job's timing changed by a rolling deploy (issue 40; schedule/timing-switch.ts, docs/schedules.md
 * "Changing a job's time"), with real runner processes on the shared MariaDB: three runners fire
 * `tick` at second 0 of every 10; its schedule becomes second 5, and the runners are restarted
 * with the new file one by one, 15 s apart, the third left on the old file.
 *
 * Judged by the job's own journal (each run appends its instant and host): no instant runs
 * twice, none runs under both timings, and the instants run are exactly the documented rule's —
 * the old timing's before the effective instant the first restarted runner recorded, the new
 * one's from it — with none missing between the first and the last. The runner left on the old
 * file holds the job from that instant and says so, and `baton status` is CRITICAL `held`.
 *
 * Then the change the runbook warned of: a daily settlement moved from 03:00 to 04:00, on a
 * private server whose clock the test steps across the days (libfaketime): the day of the switch
 * runs it once, at 04:00.
 *
 * And a runner that cannot read the versions at connect (no grant on the table): it fires
 * nothing scheduled — its file may be a timing the fleet has not reached — until it can.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { createTestDatabase, dbNow, runs, type TestDatabase } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('timing_switch');
/** A short look for changed versions, so the runners hear of the new one within half a second. */
const timings = { timingWatch: { lookMs: 500 } };
const SETTLE_MS = 10_000;

function scheduleFile(schedule: string, journal: string, namespace = 'roll'): string {
  return writeSchedule(`
namespace: ${namespace}
scheduleChanges: {settle: ${SETTLE_MS / 1000}s}
jobs:
  tick:
    schedule: "${schedule}"
    command: [sh, -c, 'echo "$BATON_SCHEDULED_AT $BATON_HOST" >> ${journal}']
`);
}

/** The journal: each run's instant (ms) and host, in the order written. */
function readJournal(file: string): { at: number; host: string }[] {
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [at, host] = line.split(' ');
      return { at: Date.parse(at!), host: host! };
    });
}

/** Waits until the database's clock reaches `at` (ms). */
const until = (what: string, at: number) =>
  waitFor(what, async () => (await dbNow(fleet.db)).getTime() >= at, {
    timeoutMs: at - Date.now() + 60_000,
    intervalMs: 200,
  });

describe('a rolling deploy of a new time, every 10 s', () => {
  it('switches the fleet at one instant; no fire runs twice or under both timings; a runner left behind holds', async () => {
    const journal = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-roll-')), 'journal');
    appendFileSync(journal, '');
    const before = scheduleFile('*/10 * * * * *', journal);
    const after = scheduleFile('5-59/10 * * * * *', journal);
    const db = fleet.db;
    const runners = await fleet.start(['t-1', 't-2', 't-3'], { config: before, timings });
    await waitFor('two runs by the old timing', async () => readJournal(journal).length >= 2, {
      timeoutMs: 40_000,
    });

    // The first server gets the new file: it records the new timing as version 2.
    await runners[0]!.stop('SIGTERM');
    const [first] = await fleet.start(['t-1'], { config: after, timings });
    const [v2] = await db.query<{ effective_at: Date; recorded_at: Date; recorded_by: string }>(
      `SELECT effective_at, recorded_at, recorded_by, chosen_by FROM baton_timings
      WHERE namespace = 'roll' AND job = 'tick' AND version = 2`,
    );
    expect(v2).toMatchObject({ recorded_by: 't-1', chosen_by: 'settle' });
    const switchAt = v2!.effective_at.getTime();
    // The rule: the first instant of either timing (every 5 s) at least the settle after the record.
    expect(switchAt).toBe(Math.ceil((v2!.recorded_at.getTime() + SETTLE_MS) / 5_000) * 5_000);
    expect(first!.lines.some((l) => l.msg === 'timing change recorded')).toBe(true);

    // The second server 15 s later; the third is forgotten.
    await until('15 s after the first restart', v2!.recorded_at.getTime() + 15_000);
    await runners[1]!.stop('SIGTERM');
    const [second] = await fleet.start(['t-2'], { config: after, timings });
    const behind = runners[2]!;
    const held = await behind.waitForLog('job held', (l) => l.job === 'tick', 60_000);
    expect(new Date(String(held.heldFrom)).getTime()).toBe(switchAt);

    // Two fires of the new timing, then the fleet is looked at and stopped.
    await until('two fires after the switch', switchAt + 16_000);
    const status = await baton([
      'status',
      '--config',
      after,
      '--database-url',
      db.url,
      '--gone-after',
      '30s',
    ]);
    expect(status.code, status.stdout).toBe(2);
    expect(status.stdout).toMatch(/^CRITICAL: .*"tick" held on t-3/);
    expect(status.stdout).toContain(
      'job "tick" is held on t-3: the fleet fires it by timing version 2',
    );
    await Promise.all([first!, second!, behind].map((r) => r.stop('SIGTERM')));

    const ran = readJournal(journal);
    const instants = ran.map((r) => r.at);
    // No fire twice.
    expect(new Set(instants).size).toBe(instants.length);
    // Every instant by the rule, none under both timings: second 0 before the switch, 5 from it.
    for (const at of instants) expect(at % 10_000).toBe(at < switchAt ? 0 : 5_000);
    // And none missing between the first and the last: every 10 s, then every 10 s from the switch.
    const sorted = [...instants].sort((a, b) => a - b);
    const expected: number[] = [];
    for (let at = sorted[0]!; at <= sorted.at(-1)!; at += 5_000) {
      if (at % 10_000 === (at < switchAt ? 0 : 5_000)) expected.push(at);
    }
    expect(sorted).toEqual(expected);
    expect(sorted.filter((at) => at >= switchAt).length).toBeGreaterThanOrEqual(2);
    // After the switch the runner with the old file ran nothing.
    expect(ran.filter((r) => r.at >= switchAt && r.host === 't-3')).toEqual([]);

    // The history says which version each run fired under.
    const winners = (await runs(db, 'tick')).filter((r) => (r.winner ?? 0) >= 1);
    for (const w of winners) {
      const version = (w as { timing_version?: number | null }).timing_version;
      expect(version).toBe(w.scheduled_at.getTime() < switchAt ? 1 : 2);
    }
  }, 150_000);
});

describe('a daily job moved from 03:00 to 04:00, the database clock stepped across the days', () => {
  let server: PrivateServer | undefined;
  let db: TestDatabase | undefined;
  const started: RunnerProcess[] = [];
  beforeAll(async () => {
    server = await startPrivateServer({ steppableClock: true });
    db = await createTestDatabase('timing_daily', server.url);
  });
  afterAll(async () => {
    await Promise.all(started.splice(0).map((r) => r.stop('SIGKILL')));
    await db?.conn.end().catch(() => undefined);
    await server?.destroy();
  });

  /** Steps the server's clock so that it reads `iso` now (to the second). */
  const setClock = (iso: string) =>
    server!.stepClock(Math.round((Date.parse(iso) - Date.now()) / 1_000));
  const start = async (host: string, config: string) => {
    const runner = startRunner({ config, databaseUrl: db!.url, host, timings });
    started.push(runner);
    await runner.ready();
    return runner;
  };
  const dbTime = async () => (await dbNow(db!)).getTime();

  it('runs once on the day of the switch, at 04:00, and says nothing ran twice', async () => {
    const journal = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-daily-')), 'journal');
    appendFileSync(journal, '');
    const daily = (hour: number) =>
      writeSchedule(`
namespace: daily
jobs:
  settle:
    schedule: "0 ${hour} * * *"
    command: [sh, -c, 'echo "$BATON_SCHEDULED_AT $BATON_HOST" >> ${journal}']
`);
    const at3 = daily(3);
    const at4 = daily(4);
    const ran = () => readJournal(journal).map((r) => new Date(r.at).toISOString());

    setClock('2027-03-01T02:59:45Z');
    const old = [await start('d-1', at3), await start('d-2', at3)];
    await waitFor('the 03:00 run of day 1', async () => ran().length === 1, { timeoutMs: 60_000 });

    // Noon: the new file is deployed to both servers.
    setClock('2027-03-01T12:00:00Z');
    await waitFor(
      'noon by the database',
      async () => (await dbTime()) >= Date.parse('2027-03-01T12:00:00Z'),
    );
    await Promise.all(old.map((r) => r.stop('SIGTERM')));
    await start('d-1', at4);
    await start('d-2', at4);
    const [v2] = await db!.query<{ effective_at: Date }>(
      `SELECT effective_at FROM baton_timings WHERE job = 'settle' AND version = 2`,
    );
    // The default instant: day 2's 03:00 (the old timing's next fire), which is the new timing's.
    expect(v2!.effective_at.toISOString()).toBe('2027-03-02T03:00:00.000Z');

    // Day 2: the runners live through 03:00 (the loop wakes at least every 30 s) …
    setClock('2027-03-02T02:59:45Z');
    await waitFor(
      '03:00:40 of day 2',
      async () => (await dbTime()) >= Date.parse('2027-03-02T03:00:40Z'),
      {
        timeoutMs: 90_000,
        intervalMs: 500,
      },
    );
    expect(ran()).toEqual(['2027-03-01T03:00:00.000Z']);
    // … and run it at 04:00.
    setClock('2027-03-02T03:59:45Z');
    await waitFor('the 04:00 run of day 2', async () => ran().length === 2, { timeoutMs: 90_000 });
    expect(ran()).toEqual(['2027-03-01T03:00:00.000Z', '2027-03-02T04:00:00.000Z']);
    // Nobody even contended for 03:00 of day 2: no row of that fire.
    const rows = await db!.query<{ id: number }>(
      'SELECT id FROM baton_runs WHERE scheduled_at = ?',
      [new Date('2027-03-02T03:00:00Z')],
    );
    expect(rows).toEqual([]);
  }, 300_000);
});

describe('a runner that cannot read the timing versions', () => {
  const user = `baton_tv_${randomBytes(3).toString('hex')}`;
  const password = `pw-${randomBytes(8).toString('hex')}`;
  afterAll(async () => {
    await fleet.db.query('DROP USER IF EXISTS ?@?', [user, '%']);
  });

  it('fires nothing scheduled until it can, then fires by them', async () => {
    const db = fleet.db;
    // Every baton table but baton_timings: the runner's read of the versions is refused.
    const migrations = new URL('../../src/store/migrations/', import.meta.url);
    const tables = readdirSync(migrations)
      .flatMap((f) => [
        ...readFileSync(new URL(f, migrations), 'utf8').matchAll(/CREATE TABLE (\w+)/g),
      ])
      .map((m) => m[1]!)
      .filter((t) => t !== 'baton_timings');
    await db.query('CREATE USER ?@? IDENTIFIED BY ?', [user, '%', password]);
    for (const table of [...tables, 'baton_migrations']) {
      await db.query('GRANT SELECT, INSERT, UPDATE, DELETE ON ??.?? TO ?@?', [
        db.name,
        table,
        user,
        '%',
      ]);
    }
    const journal = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-unread-')), 'journal');
    appendFileSync(journal, '');
    const config = scheduleFile('* * * * * *', journal, 'unread');
    const runner = startRunner({
      config,
      databaseUrl: `mysql://${user}:${password}@127.0.0.1:3306/${db.name}`,
      host: 'u-1',
      timings,
    });
    try {
      await runner.ready();
      const refused = await runner.waitForLog('could not record or read the timing versions');
      expect(refused).toMatchObject({ heldUntilRead: true });
      // Three instants by the database's clock, and not one run: the runner holds.
      const from = (await dbNow(db)).getTime();
      await until('three instants later', from + 3_000);
      expect(readJournal(journal)).toEqual([]);
      // The grant comes: the watch reads the versions (one of its looks), and the job runs.
      await db.query('GRANT SELECT ON ??.baton_timings TO ?@?', [db.name, user, '%']);
      await waitFor('a run after the grant', async () => readJournal(journal).length > 0, {
        timeoutMs: 30_000,
      });
    } finally {
      await runner.stop('SIGTERM');
    }
  });
});
