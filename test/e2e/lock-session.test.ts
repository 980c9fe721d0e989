/**
 * The lock session dies between fires (a DBA's KILL, a server-side timeout): the runner opens
 * exactly one new session however many jobs fire at once, keeps firing, and still stops cleanly.
 * (A session lost *under a running job* is the lost-lock handling's case, not this one.)
 */
import { describe, expect, it } from 'vitest';
import { LockSession } from '../../src/coordination/lock-session.js';
import { parseDatabaseUrl } from '../../src/store/database-url.js';
import { writeSchedule } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('session');

async function connectionsTo(database: string): Promise<number> {
  const [row] = await fleet.db.query<{ n: number }>(
    'SELECT COUNT(*) AS n FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()',
    [database],
  );
  return Number(row!.n);
}

describe('a killed lock session', () => {
  it('is replaced once, fires go on, and the runner stops cleanly', async () => {
    const config = writeSchedule(`
jobs:
  a: { schedule: "* * * * * *", command: ["true"] }
  b: { schedule: "* * * * * *", command: ["true"] }
  c: { schedule: "* * * * * *", command: ["true"] }
`);
    const db = fleet.db;
    const [runner] = await fleet.start(['solo'], { config });
    const started = runner!.lines.find((l) => l.msg === 'runner started')!;
    const sessionId = Number(started.lockConnectionId);
    // Kill it just after a fire's runs finished, so that it dies idle.
    await waitFor('a finished fire', async () =>
      (await db.query("SELECT id FROM baton_runs WHERE status = 'done'")).length >= 3
        ? true
        : undefined,
    );
    await db.query('KILL ?', [sessionId]);

    const reopened = await runner!.waitForLog('lock session reopened');
    const newSession = Number(reopened.lockConnectionId);
    expect(newSession).not.toBe(sessionId);
    await waitFor('fires won on the new session', async () => {
      const rows = await db.query<{ job: string }>(
        "SELECT DISTINCT job FROM baton_runs WHERE lock_connection_id = ? AND status = 'done'",
        [newSession],
      );
      return rows.length === 3;
    });
    expect(runner!.lines.filter((l) => l.msg === 'lock session reopened')).toHaveLength(1);

    expect(await runner!.stop('SIGTERM', 10_000)).toBe(0);
    // Nothing left behind: no session of this runner survives its exit.
    await waitFor('no connections left', async () => (await connectionsTo(db.name)) === 0, {
      timeoutMs: 5_000,
    });
  });
});

describe('a lock session under a flood of statements', () => {
  it('keeps its heartbeats on time: they go before the statements waiting for a turn', async () => {
    const session = await LockSession.open(parseDatabaseUrl(fleet.db.url));
    let lost: string | null = null;
    // A deadline far shorter than the flood takes to go through.
    session.watch({ intervalMs: 50, deadlineMs: 200, onLost: (reason) => (lost = reason) });
    try {
      const started = performance.now();
      // 10,000 statements queued at once (500 jobs firing on one second ask several each).
      const flood = Array.from({ length: 10_000 }, () => session.now());
      expect((await Promise.all(flood)).every((now) => now instanceof Date)).toBe(true);
      const floodMs = performance.now() - started;
      // Without the queue the heartbeats would have waited behind all of it: the test means
      // something only if the flood outlasted their deadline.
      expect(floodMs).toBeGreaterThan(200);
      expect(lost).toBeNull();
      expect(session.usable).toBe(true);
    } finally {
      await session.close();
    }
  });
});
