/**
 * The outbox's claim under contention (src/daemon/notifier.ts, src/store/notifications.ts): four
 * deliverers, each with a pool of its own (so four sessions on the shared MariaDB), pass over the
 * same 60 pending rows at the same moment, again and again. Every row is delivered exactly once:
 * the notify lock serialises the decisions and the conditional claim gives a row to one
 * deliverer. Without them (the lock always "got", the claim unconditional) rows go out twice.
 * The runners' end-to-end view is notifications.test.ts; this is the race, made likely.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { Notifier } from '../../src/daemon/notifier.js';
import { openPool } from '../../src/store/connect.js';
import { DeadlinePool } from '../../src/store/deadline.js';
import { enqueueNotices } from '../../src/store/notifications.js';
import { pruneHistory } from '../../src/store/prune.js';
import { recordAction } from '../../src/store/audit.js';
import { createLogger } from '../../src/log.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('notify_claims', { migrated: true });
});
afterAll(() => db?.drop());

const config = parseConfig(
  '/tmp/schedules.yaml',
  `
namespace: claims
notify:
  ops: {webhook: {url: "http://127.0.0.1:9/unused"}}
jobs:
  j:
    schedule: "0 3 * * *"
    command: ["true"]
    notify: {to: [ops], throttle: 0s}
`,
);

const silent = createLogger({ level: 'silent' });
const deliverers = (cfg: typeof config, delivered: string[], n = 4) => {
  const pools = Array.from(
    { length: n },
    () => new DeadlinePool(openPool(parseDatabaseUrl(db.url)), 10_000),
  );
  const notifiers = pools.map(
    (pool, i) =>
      new Notifier({
        pool: () => pool,
        database: db.name,
        namespace: 'claims',
        host: `d${i}`,
        config: () => cfg,
        log: silent,
        deliver: async (_target, event) => {
          delivered.push(`${event.event} ${event.host ?? ''} ${event.fire ?? ''}`);
          await new Promise((resolve) => setTimeout(resolve, 2));
          return { ok: true, status: 204 };
        },
      }),
  );
  return { notifiers, end: () => Promise.all(pools.map((p) => p.end())) };
};

describe('four deliverers at once', () => {
  it('deliver each of 60 rows exactly once', async () => {
    const base = Date.UTC(2026, 0, 1);
    await enqueueNotices(
      db.conn,
      Array.from({ length: 60 }, (_, i) => ({
        namespace: 'claims',
        subject: 'j',
        fire: new Date(base + i * 60_000),
        event: 'failed' as const,
        targets: ['ops'],
        runId: null,
      })),
    );
    const delivered: string[] = [];
    const { notifiers, end } = deliverers(config, delivered);
    try {
      for (let round = 0; round < 6; round++) {
        await Promise.all(notifiers.map((n) => n.pass()));
      }
      const rows = await db.query<{ status: string }>('SELECT status FROM baton_notifications');
      expect(rows.every((r) => r.status === 'sent')).toBe(true);
      expect(delivered).toHaveLength(60);
      expect(new Set(delivered).size).toBe(60);
      // Retention's runs bound takes the outbox's finished rows with it; a held one stays.
      await db.conn.query(
        `UPDATE baton_notifications SET status = 'held' WHERE id = (SELECT MIN(id) FROM baton_notifications)`,
      );
      await recordAction(db.conn, {
        namespace: 'claims',
        action: 'pause',
        job: 'j',
        operator: 'alice',
        via: 'cli',
        host: 'ops-1',
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
      const pruned = await pruneHistory(db.conn, {
        namespace: 'claims',
        retention: { runsMs: 10, skipsMs: null },
      });
      expect(pruned.notifications).toBe(59);
      expect(pruned.actions).toBe(1);
      expect(await db.query('SELECT status FROM baton_notifications')).toEqual([
        { status: 'held' },
      ]);
    } finally {
      await end();
    }
  });

  it('tell a gone runner once, whichever of them evaluates, and not a stopped one', async () => {
    const gone = parseConfig(
      '/tmp/schedules.yaml',
      `
namespace: claims
notify:
  ops: {webhook: {url: "http://127.0.0.1:9/unused"}}
jobs:
  j:
    schedule: "0 3 * * *"
    command: ["true"]
    notify: {to: [ops], on: [runner-gone]}
`,
    );
    const plant = (host: string, stopped: boolean) =>
      db.conn.query(
        `INSERT INTO baton_runners (namespace, host, pid, version, started_at, last_seen_at,
           stopped_at, schedule)
         VALUES ('claims', ?, 1, 'x', NOW(3) - INTERVAL 1 HOUR, NOW(3) - INTERVAL 1 MINUTE, ?, '{}')`,
        [host, stopped ? new Date() : null],
      );
    await plant('crashed-1', false);
    await plant('drained-1', true);
    const delivered: string[] = [];
    const { notifiers, end } = deliverers(gone, delivered);
    try {
      for (let round = 0; round < 3; round++) await Promise.all(notifiers.map((n) => n.pass()));
      expect(delivered.filter((d) => d.startsWith('runner-gone'))).toEqual([
        expect.stringMatching(/^runner-gone crashed-1 /),
      ]);
    } finally {
      await end();
    }
  });

  it('tell a runner detached from the fleet once, and not one that is gone or with the fleet', async () => {
    const held = parseConfig(
      '/tmp/schedules.yaml',
      `
namespace: claims
notify:
  ops: {webhook: {url: "http://127.0.0.1:9/unused"}}
jobs:
  j:
    schedule: "0 3 * * *"
    command: ["true"]
    notify: {to: [ops], on: [detached]}
`,
    );
    const plant = (host: string, seenAgo: string, detached: string | null) =>
      db.conn.query(
        `INSERT INTO baton_runners (namespace, host, pid, version, started_at, last_seen_at,
           stopped_at, detached, schedule)
         VALUES ('claims', ?, 1, 'x', NOW(3) - INTERVAL 1 HOUR, NOW(3) - INTERVAL ${seenAgo}, NULL,
           ?, '{}')`,
        [host, detached],
      );
    const why = 'after a failover from server_id 2, none of the runners alive with it there …';
    await plant('held-1', '1 SECOND', why);
    await plant('held-gone', '1 MINUTE', why);
    await plant('fleet-1', '1 SECOND', null);
    const delivered: string[] = [];
    const { notifiers, end } = deliverers(held, delivered);
    try {
      for (let round = 0; round < 3; round++) await Promise.all(notifiers.map((n) => n.pass()));
      expect(delivered.filter((d) => d.startsWith('detached'))).toEqual([
        expect.stringMatching(/^detached held-1 /),
      ]);
    } finally {
      await end();
    }
  });
});
