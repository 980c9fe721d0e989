/**
 * A pause and a resume of one job at the same time, from two sessions (as the CLI on one host
 * and the write API on a runner would): actions/pause.ts runs each as several statements, so a
 * resume can lift the pause between the pause's write and its read-back. Whatever the order,
 * what each says must be true: a pause that answers "paused" shows the pause it made, one that
 * a resume undid at once says so (and its audit row too), and nobody's answer leaves the job
 * paused or not paused behind their backs.
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pause, pauseOutcomeDocument, resume } from '../../src/actions/pause.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const ROUNDS = 60;
let db: TestDatabase;
let sessions: mysql.Connection[];

beforeAll(async () => {
  db = await createTestDatabase('pause_race', { migrated: true });
  sessions = await Promise.all([1, 2].map(() => mysql.createConnection({ uri: db.url })));
});

afterAll(async () => {
  await Promise.all(sessions.map((s) => s.end()));
  await db.drop();
});

it('each answer and audit row says what happened, whichever statement came first', async () => {
  const cli = { operator: 'alice', host: 'ops-1', via: 'cli' as const, reason: 'window' };
  const api = { operator: 'bob', host: 'srv-1', via: 'api' as const, reason: null };
  const seen = { liftedAtOnce: 0 };
  for (let round = 0; round < ROUNDS; round++) {
    // Every other round the job was paused before, so the pause renews it.
    if (round % 2 === 1) await pause(db.conn, 'race', 'settle', cli);
    const [paused, resumed] = await Promise.all([
      pause(sessions[0]!, 'race', 'settle', cli),
      resume(sessions[1]!, 'race', 'settle', api),
    ]);
    const doc = pauseOutcomeDocument(paused);
    const [row] = await db.query<{ job: string }>(
      "SELECT job FROM baton_pauses WHERE namespace = 'race' AND job = 'settle'",
    );
    const [audit] = await db.query<{ outcome: string }>(
      'SELECT outcome FROM baton_audit WHERE id = ?',
      [paused.auditId],
    );
    // The answer shows the pause it claims, and the audit agrees with the answer.
    expect(doc.paused).toBe(doc.pause != null);
    if (!doc.paused) {
      seen.liftedAtOnce++;
      expect(audit!.outcome).toBe('paused, then lifted by a resume at the same time');
      expect(resumed.resumed, 'only a resume lifts it').toBe(true);
      expect(row, 'lifted: not paused now').toBeUndefined();
    } else {
      expect(audit!.outcome).toBe(doc.renewed ? 'renewed the pause' : 'paused');
    }
    // A resume that lifted nothing came first, or found nothing: the pause stands.
    if (doc.paused && !resumed.resumed) expect(row).toBeDefined();
    await resume(db.conn, 'race', 'settle', api);
  }
  console.log(`pause-race: ${seen.liftedAtOnce} of ${ROUNDS} pauses lifted at once by the resume`);
});
