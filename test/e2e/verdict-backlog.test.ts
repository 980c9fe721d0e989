/**
 * The backlog of verdicts the database could not take (src/fire/verdict-backlog.ts), against a
 * real database: written once each, in one pass, however many callers ask for it at once (the
 * reconnect, the reaper's tick and the stop do), and a verdict kept during a pass goes with it.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { VerdictBacklog } from '../../src/fire/verdict-backlog.js';
import type { Logger } from '../../src/log.js';
import { migrateDatabase } from '../../src/store/migrate.js';
import { createTestDatabase, plantRun, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('verdict_backlog');
  await migrateDatabase(parseDatabaseUrl(db.url));
});

afterAll(async () => {
  await db?.drop();
});

/** A logger whose lines are kept, parsed. */
function keptLog(): { log: Logger; lines: { msg: string; runId?: number; wrote?: boolean }[] } {
  const lines: { msg: string; runId?: number; wrote?: boolean }[] = [];
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
});
