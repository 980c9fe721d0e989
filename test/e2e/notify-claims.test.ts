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
import { migrateDatabase } from '../../src/store/migrate.js';
import { enqueueNotices } from '../../src/store/notifications.js';
import { createLogger } from '../../src/log.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('notify_claims');
  await migrateDatabase(parseDatabaseUrl(db.url));
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
    const pools = Array.from(
      { length: 4 },
      () => new DeadlinePool(openPool(parseDatabaseUrl(db.url)), 10_000),
    );
    const silent = createLogger({ level: 'silent' });
    const notifiers = pools.map(
      (pool, n) =>
        new Notifier({
          pool: () => pool,
          database: db.name,
          namespace: 'claims',
          host: `d${n}`,
          config: () => config,
          log: silent,
          deliver: async (_target, event) => {
            delivered.push(event.fire!);
            await new Promise((resolve) => setTimeout(resolve, 2));
            return { ok: true, status: 204 };
          },
        }),
    );
    try {
      for (let round = 0; round < 6; round++) {
        await Promise.all(notifiers.map((n) => n.pass()));
      }
      const rows = await db.query<{ status: string }>('SELECT status FROM baton_notifications');
      expect(rows.every((r) => r.status === 'sent')).toBe(true);
      expect(delivered).toHaveLength(60);
      expect(new Set(delivered).size).toBe(60);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });
});
