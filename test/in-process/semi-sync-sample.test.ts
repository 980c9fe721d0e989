/**
 * A runner samples its server's semi-sync state at its heartbeat's pace (daemon/semi-sync.ts). On
 * a server without semi-sync — the shared test server, like most — the sample is one statement:
 * its status would add nothing a sample can use, and an idle runner's statements are its cost to
 * the server. The enabled server's sample (status and counters too) is judged on real
 * replication in e2e/failover-semisync.test.ts.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { countStatements } from '../helpers/statements.js';
import { sampleSemiSync } from '../../src/daemon/semi-sync.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('semi_sync_sample');
});

afterAll(async () => {
  await db?.drop();
});

it('a server without semi-sync is sampled in one statement, and found not enabled', async () => {
  const [variable] = await db.query<{ Value: string }>(
    "SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync_master_enabled'",
  );
  expect(variable?.Value).toBe('OFF');
  const count = countStatements();
  const sample = await sampleSemiSync(db.conn).finally(() => count.stop());
  const sent = count.statements;
  expect(sample).toMatchObject({ enabled: false, on: false, noTimes: 0, noTx: 0 });
  expect(sent).toHaveLength(1);
  expect(sent[0]).toMatch(/SHOW GLOBAL VARIABLES/);
});
