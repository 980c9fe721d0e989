/**
 * A runner fires by the job's schedule as the database has it, not only as it last read it
 * (found by an adversarial review of issue 40: a database stalled past a switch, a runner paused
 * across it, a removal a replica could not read):
 *
 * - the claim of a scheduled fire is fenced by the timing version in force at the instant
 *   (store/fire-writes.ts `definitionFence`): a runner whose read of `baton_timings` is stale
 *   claims nothing of the timing the fleet has left;
 * - a due fire that is no fire of the schedule in force now is dropped before it is contended
 *   (daemon/dispatcher.ts): the fires a paused runner finds due when it wakes are its old
 *   schedule's;
 * - a schedule created at run time that was removed (or changed) is fenced the same way, by its
 *   row in `baton_schedules`;
 * - `baton run --fire` and `baton backfill` name the fleet's past fires, by the versions;
 * - a reload that records many changed timings, one after another, fires each job by its new
 *   version from that version's instant, while the later jobs are still being recorded (found by
 *   an attacker: 1,500 changed jobs took 17 s to record, and the fires between each version's
 *   instant and the end of the recording were lost).
 *
 * Judged by the jobs' own journal (and the handlers' own list), not only by baton's rows.
 */
import mysql from 'mysql2/promise';
import pino from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { Dispatcher } from '../../src/daemon/dispatcher.js';
import { timingPrint } from '../../src/config/fingerprint.js';
import { writeSchedule, type CliResult } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { createTestDatabase, dbNow, type TestDatabase } from '../helpers/db.js';
import { writeJournaledSchedule } from '../helpers/ground-truth.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('definition_fence', { perTest: true });

const EVERY_SECOND = { schedule: '* * * * * *', timezone: 'UTC' };
const EVERY_FIFTH = { schedule: '*/5 * * * * *', timezone: 'UTC' };

/** Records a timing version as another runner (or an operator) would. */
async function recordVersion(
  db: TestDatabase,
  ns: string,
  job: string,
  version: number,
  timing: { schedule: string; timezone: string },
  effectiveAt: Date,
): Promise<void> {
  await db.query(
    `INSERT INTO baton_timings (namespace, job, version, print, schedule, timezone, effective_at,
                                chosen_by, recorded_at, recorded_by, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, 'settle', NOW(3), 'srv-new', NOW(3))`,
    [ns, job, version, timingPrint(timing), timing.schedule, timing.timezone, effectiveAt],
  );
}

/** A whole second at least `aheadMs` after the database's clock. */
async function secondAhead(db: TestDatabase, aheadMs: number): Promise<Date> {
  return new Date(Math.ceil(((await dbNow(db)).getTime() + aheadMs) / 1_000) * 1_000);
}

describe('the timing versions at the claim', () => {
  it('a runner whose read of the versions is stale claims nothing after the switch', async () => {
    const ns = 'fence-stale';
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: ${ns}
jobs:
  tick:
    schedule: "* * * * * *"
    command: ${j.yaml()}
`,
    );
    // Its look for new versions never comes again after the first: as if the database had
    // stalled every read of baton_timings since.
    const [runner] = await fleet.start(['stale-1'], {
      config,
      runner: { timings: { timingWatch: { lookMs: 3_600_000 } } },
    });
    await waitFor('the first runs', () => journal.attempts('tick').length >= 2, {
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    // Another runner records every-fifth-second, effective E; this one never reads it.
    const switchAt = await secondAhead(fleet.db, 2_000);
    await recordVersion(fleet.db, ns, 'tick', 2, EVERY_FIFTH, switchAt);
    const refused: Date[] = [];
    runner!.runner.events.on(
      'fire:notAttempted',
      (e: { fire: { scheduledAt: Date }; cause: string }) => {
        if (e.cause === 'stale-schedule') refused.push(e.fire.scheduledAt);
      },
    );
    await waitFor('six fires refused at their claim', () => refused.length >= 6, {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    // Not one run of the job at or after E: each was a fire of the timing the fleet had left
    // (or, at a fifth second, fired by the stale version's stamp).
    const after = journal.attempts('tick').filter((a) => a.fire >= switchAt.getTime());
    expect(after.map((a) => new Date(a.fire).toISOString())).toEqual([]);
    expect(refused.every((at) => at >= switchAt)).toBe(true);
    // A refusal is no skip of a fire: it writes no row.
    const rows = await fleet.db.query(
      `SELECT id FROM baton_runs WHERE namespace = ? AND scheduled_at >= ?`,
      [ns, switchAt],
    );
    expect(rows).toEqual([]);
  });

  it('a due fire of the old timing is dropped once the versions are read again', async () => {
    const ns = 'fence-drop';
    const config = writeSchedule(`
namespace: ${ns}
jobs:
  tick:
    schedule: "0 0 1 1 *"
    command: ["true"]
`);
    const [runner] = await fleet.start(['paused-1'], {
      config,
      runner: { timings: { timingWatch: { lookMs: 200 } } },
    });
    // Version 2, yearly on February 1, since 2020: January's instants after it are no fires.
    const switchAt = new Date('2020-01-01T00:00:00Z');
    const yearly = new Date('2021-01-01T00:00:00Z');
    await recordVersion(
      fleet.db,
      ns,
      'tick',
      2,
      { schedule: '0 0 1 2 *', timezone: 'UTC' },
      switchAt,
    );
    const dropped: Date[] = [];
    runner!.runner.events.on('fire:notInForce', (e: { scheduledAt: Date }) =>
      dropped.push(e.scheduledAt),
    );
    const dispatcher = (runner!.runner as unknown as { dispatcher: Dispatcher }).dispatcher;
    // Read once the runner's look has found version 2: its file is older, so it holds the job
    // from the switch on (no next fire), where it had January's.
    await waitFor('version 2 read', () => runner!.runner.nextFire('tick') === null, {
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    // What a runner paused across the switch finds due when it wakes: its old schedule's fire.
    await dispatcher.dispatch({ job: 'tick', scheduledAt: yearly, lateMs: 0 }, 'schedule');
    expect(dropped).toEqual([yearly]);
    const rows = await fleet.db.query(`SELECT id FROM baton_runs WHERE namespace = ?`, [ns]);
    expect(rows).toEqual([]);
  });
});

describe('a schedule created at run time, at the claim', () => {
  it('removed where the replica cannot see it, fires no more', async () => {
    const db = await createTestDatabase('definition_fence_dyn', { migrated: true });
    const { createScheduler } = await import('../../src/index.js');
    const ran: { key: string; at: number }[] = [];
    const s = createScheduler({
      databaseUrl: db.url,
      host: 'app-1',
      namespace: 'tenants',
      log: pino({ level: 'silent' }),
    });
    s.job('report', {}, (ctx) => {
      ran.push({ key: ctx.key!, at: ctx.scheduledAt.getTime() });
    });
    await s.start();
    onTestFinished(async () => {
      await s.stop();
      await db.drop();
    });
    await s.schedules.upsert('report', 'k1', EVERY_SECOND);
    await waitFor('two runs of k1', () => ran.length >= 2, { timeoutMs: 20_000, intervalMs: 100 });
    // Removed where the replica cannot read it: the namespace's revision moves (as every change
    // moves it), but the row's own does not, so the replica's read of the rows changed since
    // finds nothing — as when its reads fail — and it goes on firing k1 by what it read.
    await db.query(
      `UPDATE baton_schedules SET removed_at = NOW(3) WHERE namespace = 'tenants' AND schedule_key = 'k1'`,
    );
    await db.query(
      `UPDATE baton_schedule_revisions SET revision = revision + 1 WHERE namespace = 'tenants'`,
    );
    const removedAt = (await dbNow(db)).getTime();
    const refused: number[] = [];
    s.events.on(
      'fire:notAttempted',
      (e: { fire: { job: string; scheduledAt: Date }; cause: string }) => {
        if (e.cause === 'stale-schedule' && e.fire.job === 'report:k1') {
          refused.push(e.fire.scheduledAt.getTime());
        }
      },
    );
    await waitFor('three fires of k1 refused', () => refused.length >= 3, {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    // Nothing of k1 ran for an instant after the removal (one at its very second may have).
    expect(ran.filter((r) => r.at > removedAt + 1_000)).toEqual([]);
  });
});

describe('baton run --fire and baton backfill', () => {
  it('name the fleet’s past fires, by the version in force at each', async () => {
    const ns = 'fence-past';
    // The fleet moved settle from 03:00 to 04:00 on 2026-01-01; this host still has 03:00.
    await recordVersion(
      fleet.db,
      ns,
      'settle',
      1,
      { schedule: '0 3 * * *', timezone: 'UTC' },
      new Date(0),
    );
    await recordVersion(
      fleet.db,
      ns,
      'settle',
      2,
      { schedule: '0 4 * * *', timezone: 'UTC' },
      new Date('2026-01-01T00:00:00Z'),
    );
    const config = writeSchedule(`
namespace: ${ns}
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ["true"]
`);
    const cli = (...args: string[]): Promise<CliResult> =>
      baton([...args, '--config', config, '--database-url', fleet.db.url]);
    const planned = await cli(
      'backfill',
      'settle',
      '--from',
      '2025-12-30T00:00:00Z',
      '--to',
      '2026-01-02T23:00:00Z',
      '--dry-run',
      '--json',
    );
    expect(planned.code, planned.stderr).toBe(0);
    expect(planned.stdout).toContain('2025-12-31T03:00:00.000Z');
    expect(planned.stdout).toContain('2026-01-01T04:00:00.000Z');
    expect(planned.stdout).toContain('2026-01-02T04:00:00.000Z');
    expect(planned.stdout).not.toContain('2026-01-01T03:00:00.000Z');
    expect(planned.stdout).not.toContain('2026-01-02T03:00:00.000Z');

    const refused = await cli('run', 'settle', '--fire', '2026-01-01T03:00:00Z');
    expect(refused.code).toBe(64);
    expect(refused.stderr).toContain(
      '2026-01-01T03:00:00.000Z is not a fire of settle (timing version 2, "0 4 * * *", UTC); ' +
        'the nearest fires are 2025-12-31T03:00:00.000Z and 2026-01-01T04:00:00.000Z',
    );
  });
});

describe('a reload with many changed timings', () => {
  it('fires each job by its new version from its instant while the later ones are still being recorded', async () => {
    const ns = 'record-stall';
    const jobs = Array.from({ length: 8 }, (_, i) => `j${i}`);
    const file = (schedule: string) =>
      writeSchedule(
        `namespace: ${ns}\njobs:\n` +
          jobs.map((j) => `  ${j}:\n    schedule: "${schedule}"\n    command: ["true"]\n`).join(''),
      );
    const before = file('0 0 1 1 *');
    const after = file('* * * * * *');
    const [runner] = await fleet.start(['srv-1'], {
      config: before,
      // A look every 3 s: each new version takes effect at least 4 s after its record, which
      // leaves this runner's apply (within 0.5 s) room on a loaded machine.
      runner: { timings: { timingWatch: { lookMs: 3_000 } } },
    });
    const versions = (version: number) =>
      fleet.db.query<{ job: string; effective_at: Date }>(
        'SELECT job, effective_at FROM baton_timings WHERE namespace = ? AND version = ? ORDER BY job',
        [ns, version],
      );
    await waitFor('every first version recorded', async () => (await versions(1)).length === 8);

    // The last job's recording stalls: another session has inserted its version 2 and not
    // committed, so the runner's insert waits on that key (its own read does not see the row).
    const blocker = await mysql.createConnection({ uri: fleet.db.url, timezone: 'Z' });
    onTestFinished(() => blocker.end().catch(() => {}));
    await blocker.beginTransaction();
    await blocker.query(
      `INSERT INTO baton_timings (namespace, job, version, print, schedule, timezone, effective_at,
                                  chosen_by, recorded_at, recorded_by, updated_at)
       VALUES (?, 'j7', 2, 'stall', '* * * * * *', 'UTC', NOW(3), 'settle', NOW(3), 'blocker', NOW(3))`,
      [ns],
    );
    runner!.runner.reload(loadConfig(after));
    const recorded = await waitFor(
      'j0–j6 recorded while j7 waits',
      async () => {
        const rows = await versions(2);
        return rows.length === 7 ? rows : null;
      },
      { timeoutMs: 8_000 },
    );
    expect(recorded.map((r) => r.job)).toEqual(jobs.slice(0, 7));
    // Two fires of every recorded job's new timing pass while j7's recording still waits.
    const last = Math.max(...recorded.map((r) => r.effective_at.getTime()));
    await waitFor(
      'two fires past the last switch',
      async () => (await dbNow(fleet.db)).getTime() > last + 2_000,
    );
    expect(await versions(2)).toHaveLength(7);
    await blocker.rollback();

    // Each of them ran at its version's instant, and the second after was attempted too (run, or
    // skipped while that run still went on: a loaded machine), by the jobs' rows. Without the
    // versions applied while recording, neither fire has any row.
    for (const { job, effective_at: at } of recorded) {
      const fires = [at, new Date(at.getTime() + 1_000)];
      const ran = () =>
        fleet.db.query<{ scheduled_at: Date; status: string; winner: number | null }>(
          `SELECT scheduled_at, status, winner FROM baton_runs
            WHERE namespace = ? AND job = ? AND scheduled_at IN (?)`,
          [ns, job, fires],
        );
      try {
        await waitFor(
          `${job} ran at ${at.toISOString()}, and contended a second later`,
          async () => {
            const rows = await ran();
            const first = rows.find((r) => r.scheduled_at.getTime() === at.getTime());
            const second = rows.find((r) => r.scheduled_at.getTime() === fires[1]!.getTime());
            return (
              first?.winner === 1 &&
              first.status === 'done' &&
              (second?.status === 'done' || second?.status === 'skipped')
            );
          },
        );
      } catch (err) {
        // What the runner saw of the switch, for the next engineer.
        console.error(
          JSON.stringify({ rows: await ran(), recorded, now: await dbNow(fleet.db) }),
          runner!.lines
            .filter((l) => /timing|fire|version|sched/i.test(String(l.msg)))
            .slice(-40)
            .map((l) => JSON.stringify(l))
            .join('\n'),
        );
        throw err;
      }
    }
    // And j7, recorded once the other session let go, is version 2 too.
    await waitFor('j7 recorded', async () => (await versions(2)).length === 8);
  });
});
