/**
 * The backlog of what the database could not take (src/fire/verdict-backlog.ts), against a
 * real database: verdicts written once each, in one pass, however many callers ask for it at once
 * (the reconnect, the reaper's tick and the stop do), and a verdict kept during a pass goes with
 * it; fires whose claim was not written get one `not-claimed` missed row, which yields to a
 * winner of the fire and to a missed row already there, and a claim that committed unseen is
 * closed instead.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VerdictBacklog, type UnrecordedFire } from '../../src/fire/verdict-backlog.js';
import type { Logger } from '../../src/log.js';
import { createTestDatabase, plantRun, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('verdict_backlog', { migrated: true });
});

afterAll(async () => {
  await db?.drop();
});

interface KeptLine {
  msg: string;
  runId?: number;
  job?: string;
  wrote?: boolean;
}

/** A logger whose lines are kept, parsed. */
function keptLog(): { log: Logger; lines: KeptLine[] } {
  const lines: KeptLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { log: pino({ level: 'info' }, stream) as unknown as Logger, lines };
}

describe('the verdict backlog', () => {
  it('writes each verdict once when written by several callers at once, and one kept meanwhile', async () => {
    const at = new Date(Date.UTC(2026, 11, 1, 3, 0));
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) {
      ids.push(
        await plantRun(db, {
          namespace: 'backlog',
          job: `j${i}`,
          scheduledAt: at,
          host: 'h1',
          status: 'running',
        }),
      );
    }
    const { log, lines } = keptLog();
    const backlog = new VerdictBacklog(log);
    const lost = { status: 'lost' as const, exitCode: null, outputTail: null };
    for (const id of ids.slice(0, 5)) backlog.keep(id, { ...lost, error: 'lost: the test' });
    const writes = [backlog.write(db.conn), backlog.write(db.conn)];
    backlog.keep(ids[5]!, { ...lost, error: 'lost: kept meanwhile' });
    await Promise.all([...writes, backlog.write(db.conn)]);
    await new Promise((resolve) => setImmediate(resolve));

    const written = lines.filter((l) => l.msg === 'late verdict written');
    expect(written.map((l) => l.runId).sort((a, b) => a! - b!)).toEqual(ids);
    expect(written.every((l) => l.wrote === true)).toBe(true);
    const rows = await db.query<{ status: string }>(
      `SELECT status FROM baton_runs WHERE id IN (${ids.join(', ')})`,
    );
    expect(rows.map((r) => r.status)).toEqual(ids.map(() => 'lost'));
    // Nothing left: a later write sends nothing.
    await backlog.write(db.conn);
    expect(lines.filter((l) => l.msg === 'late verdict written')).toHaveLength(6);
  });

  it('records a fire whose claim was not written once, and yields to what recorded it first', async () => {
    const at = new Date(Date.UTC(2026, 11, 1, 4, 0));
    const fire = (job: string, host: string, abandoned = true): UnrecordedFire => ({
      attempt: { namespace: 'backlog', job, scheduledAt: at, trigger: 'schedule', host, pid: 7 },
      lockConnectionId: 4242,
      abandoned,
      locked: true,
      reason: `claim not recorded: the database did not answer within 10 s (${host} held the lock)`,
    });
    // `alone`: nobody else recorded it. `twice`: two runners both failed to claim it (each held
    // the lock in turn). `won`: another runner won it after this one gave up. `missed`: the
    // look-back marked it first. `committed`: this runner's insert committed unseen, and its
    // closing failed too.
    await plantRun(db, { namespace: 'backlog', job: 'won', scheduledAt: at, host: 'h2' });
    await plantRun(db, {
      namespace: 'backlog',
      job: 'missed',
      scheduledAt: at,
      status: 'missed',
      reasonKind: 'not-run',
      reason: 'nobody attempted this fire',
    });
    const committed = await plantRun(db, {
      namespace: 'backlog',
      job: 'committed',
      scheduledAt: at,
      status: 'running',
      lockConnectionId: 4242,
    });
    const { log, lines } = keptLog();
    const backlog = new VerdictBacklog(log);
    backlog.keepUnrecordedFire(fire('alone', 'h1'));
    backlog.keepUnrecordedFire(fire('twice', 'h1'));
    backlog.keepUnrecordedFire(fire('twice', 'h2'));
    backlog.keepUnrecordedFire(fire('won', 'h1'));
    backlog.keepUnrecordedFire(fire('missed', 'h1'));
    backlog.keepUnrecordedFire(fire('committed', 'h1', false));
    await Promise.all([backlog.write(db.conn), backlog.write(db.conn)]);
    await backlog.write(db.conn);

    const rows = await db.query<{ job: string; status: string; winner: number; kind: string }>(
      `SELECT job, status, winner, reason_kind AS kind FROM baton_runs
        WHERE namespace = 'backlog' AND scheduled_at = ? ORDER BY job, id`,
      [at],
    );
    expect(rows.map((r) => [r.job, r.status, r.winner, r.kind])).toEqual([
      ['alone', 'missed', 0, 'not-claimed'],
      ['committed', 'failed', 1, null],
      ['missed', 'missed', 0, 'not-run'],
      ['twice', 'missed', 0, 'not-claimed'],
      ['won', 'done', 1, null],
    ]);
    const [closed] = await db.query<{ error: string }>(
      'SELECT error FROM baton_runs WHERE id = ?',
      [committed],
    );
    expect(closed!.error).toContain('baton could not confirm its claim of this fire: claim not');
    const written = lines.filter((l) => l.msg === 'late missed row written');
    expect(written.map((l) => [l.job, l.wrote])).toEqual([
      ['alone', true],
      ['twice', true],
      ['twice', false],
      ['won', false],
      ['missed', false],
      ['committed', false],
    ]);
  });
});
