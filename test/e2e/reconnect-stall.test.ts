/**
 * A reconnect whose connection goes silent is given up and tried again. After its lock session
 * is lost, a runner reopens it: a connection for the server check and the migrations ledger, one
 * more for the lock probe, and the lock session itself, each with a few statements. A link that
 * goes silent under one of them (a VIP moved to another server, a firewall dropping the old
 * connection's packets: no FIN, no RST, while new connections work) once left that statement
 * waiting for as long as the kernel kept retransmitting — a quarter of an hour — and the runner
 * ran no fire all that while, for no attempt came after it (CI at 12ff479 saw a runner make no
 * attempt for 40 s after a restart). Every statement of a reconnect now has a deadline.
 *
 * One runner reaches the shared server through a TCP proxy; its lock session is KILLed, and the
 * proxy blackholes the next connection that sends a given statement of the reconnect. The runner
 * must be back (its 'lock session reopened' line) and win a fire again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { createTestDatabase, sharedServerAddress, type TestDatabase } from '../helpers/db.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { waitFor } from '../helpers/wait.js';

const CHECK_DEADLINE_MS = 2_000;
let db: TestDatabase;
let proxy: TcpProxy;
let runner: RunnerProcess;

beforeAll(async () => {
  db = await createTestDatabase('reconnect_stall', { migrated: true });
  proxy = await startTcpProxy(sharedServerAddress());
  const config = writeSchedule(`
namespace: stall
jobs:
  tick: { schedule: "* * * * * *", command: ["true"] }
`);
  runner = startRunner({
    config,
    databaseUrl: proxy.url(db.name),
    host: 'stall-1',
    // The server check's deadline (10 s by default) shortened: each case waits it out once.
    timings: { link: { poolStatementDeadlineMs: CHECK_DEADLINE_MS } },
  });
  await runner.ready();
}, 60_000);

afterAll(async () => {
  await runner?.stop('SIGKILL');
  await proxy?.close();
  await db?.drop();
});

/** The runner's lock session on the server, as its registry row names it. */
async function lockSession(): Promise<number> {
  const [row] = await waitFor(
    'the runner registered with a lock session',
    async () => {
      const rows = await db.query<{ id: number }>(
        `SELECT lock_connection_id AS id FROM baton_runners
          WHERE host = 'stall-1' AND lock_connection_id IS NOT NULL`,
      );
      return rows.length > 0 ? rows : null;
    },
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  return Number(row!.id);
}

describe('a reconnect whose connection goes silent', () => {
  it.each([
    ['the server check', 'group_replication_group_name'],
    ['the lock probe', '@@version_comment'],
    ['the migrations ledger', 'FROM baton_migrations'],
    ["the lock session's set-up", 'wait_timeout'],
  ])(
    'under %s is given up and tried again: the runner is back',
    async (_step, statement) => {
      const session = await lockSession();
      proxy.blackholeNext(statement);
      const killedAt = Date.now();
      await db.query('KILL CONNECTION ?', [session]);
      await runner.waitForLog('lock session lost', (l) => Date.parse(String(l.time)) >= killedAt);
      const reopened = await runner.waitForLog(
        'lock session reopened',
        (l) => Date.parse(String(l.time)) >= killedAt,
        30_000,
      );
      // The silent connection was the reconnect's: an attempt failed before the one that worked.
      expect(Number(reopened.attempts)).toBeGreaterThan(1);
      const since = new Date(Date.parse(String(reopened.time)));
      await waitFor(
        'a fire won after the reconnect',
        async () =>
          (
            await db.query(
              `SELECT id FROM baton_runs WHERE winner = 1 AND started_at > ? AND host = 'stall-1'`,
              [since],
            )
          ).length > 0,
        { timeoutMs: 20_000, intervalMs: 100 },
      );
      expect(runner.stderr).toBe('');
    },
    60_000,
  );
});
