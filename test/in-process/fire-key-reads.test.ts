/**
 * `winnersOfFires` (store/fire-reads.ts), the read every claim batch and every holder look-up
 * makes: exactly the fires asked for, whatever mix of jobs and instants a batch holds, and in
 * statements the server plans cheaply.
 *
 * Why the shape is asserted: the read used to be one row constructor `(job, scheduled_at) IN
 * (…)`. MariaDB plans such a list in time that grows with the square of its pairs (39 ms for the
 * 250 pairs of one claim batch, 156 ms for 500; the read itself takes 1 ms), and in a storm of
 * 10,000 dynamic schedules at one instant that planning was most of the server's CPU
 * (bench `dynamic-schedules`, performance_schema's digest summary). The test sees every statement
 * the read sends and fails on that shape, and on one OR'd term per fire (quadratic too).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, plantRun, type TestDatabase } from '../helpers/db.js';
import { countStatements } from '../helpers/statements.js';
import { winnersOfFires } from '../../src/store/fire-reads.js';

const NS = 'keys';
const T0 = new Date('2026-03-01T00:00:00.000Z');
const at = (minute: number) => new Date(T0.getTime() + minute * 60_000);

let db: TestDatabase;
/** The statements the last `read` sent (helpers/statements.ts: mysql2's tracing channel). */
let sent: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('fire_key_reads', { migrated: true });
  // 40 jobs × 3 minutes: a winner and a skip at every fire, and a pool skip at minute 2 of j0.
  for (let j = 0; j < 40; j++) {
    for (let m = 0; m < 3; m++) {
      await plantRun(db, { namespace: NS, job: `j${j}`, scheduledAt: at(m) });
      await plantRun(db, {
        namespace: NS,
        job: `j${j}`,
        scheduledAt: at(m),
        status: 'skipped',
        host: 'h2',
      });
    }
  }
  // 20 jobs each at an instant of its own: as many groups by job as by instant.
  for (let d = 0; d < 20; d++)
    await plantRun(db, { namespace: NS, job: `d${d}`, scheduledAt: at(10 + d) });
  await plantRun(db, {
    namespace: NS,
    job: 'p0',
    scheduledAt: at(2),
    status: 'skipped',
    reasonKind: 'pool',
  });
  // Another namespace's winners of the same fire keys: never read.
  await plantRun(db, { namespace: 'other', job: 'j1', scheduledAt: at(0) });
}, 60_000);

afterAll(async () => {
  await db?.drop();
});

const keysOf = (runs: { job: string; scheduledAt: Date }[]) =>
  runs.map((r) => `${r.job}@${r.scheduledAt.getTime() - T0.getTime()}`).sort();

async function read(fires: { job: string; scheduledAt: Date }[], poolSkips = false) {
  const count = countStatements();
  try {
    return await winnersOfFires(db.conn, NS, fires, { poolSkips });
  } finally {
    count.stop();
    sent = count.statements;
  }
}

describe('winnersOfFires', () => {
  it('reads the winners of exactly the fires asked, one instant of many jobs, in one statement', async () => {
    const fires = Array.from({ length: 40 }, (_, j) => ({ job: `j${j}`, scheduledAt: at(1) }));
    const runs = await read(fires);
    expect(keysOf(runs)).toEqual(keysOf(fires));
    expect(runs.every((r) => r.workerSlot === 1 && r.status === 'done')).toBe(true);
    expect(sent).toHaveLength(1);
  });

  it('a mix of jobs and instants: not the jobs × instants around them', async () => {
    // j0 at minutes 0 and 2, j1 at minute 1, j2 at 0: the cross product would add j0@1, j1@0,
    // j1@2, j2@1 and j2@2, all of which have winners.
    const fires = [
      { job: 'j0', scheduledAt: at(0) },
      { job: 'j0', scheduledAt: at(2) },
      { job: 'j1', scheduledAt: at(1) },
      { job: 'j2', scheduledAt: at(0) },
    ];
    expect(keysOf(await read(fires))).toEqual(keysOf(fires));
  });

  it('one job at many instants (a catch-up), and more groups than one statement takes', async () => {
    const catchUp = [0, 1, 2].map((m) => ({ job: 'j7', scheduledAt: at(m) }));
    expect(keysOf(await read(catchUp))).toEqual(keysOf(catchUp));
    expect(sent).toHaveLength(1);

    // 40 jobs at minute (j mod 3): three groups by instant, one statement.
    const spread = Array.from({ length: 40 }, (_, j) => ({ job: `j${j}`, scheduledAt: at(j % 3) }));
    expect(keysOf(await read(spread))).toEqual(keysOf(spread));
    expect(sent).toHaveLength(1);
    // 20 jobs each at its own instant: 20 groups either way, more than one statement takes.
    const diagonal = Array.from({ length: 20 }, (_, d) => ({
      job: `d${d}`,
      scheduledAt: at(10 + d),
    }));
    expect(keysOf(await read(diagonal))).toEqual(keysOf(diagonal));
    expect(sent).toHaveLength(2);
  });

  it('with poolSkips, a fire decided by a full pool too', async () => {
    const fires = [
      { job: 'p0', scheduledAt: at(2) },
      { job: 'j3', scheduledAt: at(2) },
    ];
    expect(keysOf(await read(fires, false))).toEqual(['j3@120000']);
    expect(keysOf(await read(fires, true))).toEqual(keysOf(fires));
  });

  it('asks in IN lists of scalars: no row constructor, no OR’d term per fire', async () => {
    const fires = Array.from({ length: 40 }, (_, j) =>
      [0, 1, 2].map((m) => ({ job: `j${j}`, scheduledAt: at(m) })),
    ).flat();
    expect(keysOf(await read(fires))).toEqual(keysOf(fires));
    for (const sql of sent) {
      expect(sql).not.toMatch(/\(\s*job\s*,\s*scheduled_at\s*\)\s*IN/i);
      expect(sql.match(/ OR /g)?.length ?? 0).toBeLessThanOrEqual(16);
    }
  });
});
