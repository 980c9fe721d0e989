/**
 * The judgement of a child's fire (`after:`, docs/design.md "Dependencies") against a real server:
 * a judge that stalled past its lease — SIGSTOP at any instruction between its take and its
 * claim — may no longer act once it goes on. Another judge took the lapsed judgement and closed
 * the fire as `upstream`; the stalled one's renewal says it lost it, and its claim of the child's
 * fire is fenced in the claim's own transaction: no winner row, so no run. And a lease names one
 * judgement, not a host: two runners started with the same `--host` never share it.
 *
 * The stall is the test's own pause between the store calls a judge makes, in the order it makes
 * them (fire/dependents.ts), so the interleaving that SIGSTOP hits by chance is met every time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  expectDependents,
  judgeName,
  readDependent,
  renewDependent,
  takeDependent,
  type DependentKey,
} from '../../src/store/dependent-fires.js';
import { claimFires } from '../../src/store/fire-writes.js';
import { skipDependent } from '../../src/store/fire-writes.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

const LEASE_MS = 300;
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('chain_judgement', { migrated: true });
});
afterAll(async () => {
  await db.drop();
});

async function waitingRow(at: string): Promise<DependentKey> {
  const key = { namespace: 'fence', job: 'report', scheduledAt: new Date(at), rerun: 0 };
  await expectDependents(db.conn, [
    { key, checkAt: key.scheduledAt, deadline: new Date(key.scheduledAt.getTime() + 3_600_000) },
  ]);
  return key;
}

function chainClaim(key: DependentKey, host: string, judge: string) {
  return {
    attempt: {
      ...key,
      trigger: 'after' as const,
      host,
      pid: 1,
      chain: { judge, parentRuns: { settle: 1 } },
    },
    lockConnectionId: null,
  };
}

describe('a judge stalled past its lease', () => {
  it('claims nothing once another judge has taken the fire and closed it as upstream', async () => {
    const key = await waitingRow('2026-03-01T00:00:00Z');
    const stalled = judgeName('k1', 101);
    expect(await takeDependent(db.conn, key, stalled, LEASE_MS)).not.toBeNull();
    // ...judged `due`, then stopped. Its lease lapses; another runner takes the judgement.
    await waitFor(
      'the stalled judge’s lease lapsed',
      async () =>
        (
          await db.query<{ lapsed: number }>(
            "SELECT judged_until < NOW(3) AS lapsed FROM baton_dependent_fires WHERE job = 'report'",
          )
        )[0]?.lapsed === 1,
      { timeoutMs: 5_000, intervalMs: 20 },
    );
    const other = judgeName('k2', 202);
    expect(await takeDependent(db.conn, key, other, LEASE_MS)).not.toBeNull();
    const closed = await skipDependent(
      db.conn,
      key,
      {
        reason: 'settle failed (run 4)',
        parentRuns: { settle: 4 },
        parent: 'settle',
        parentStatus: 'failed',
        parentRunId: 4,
        targets: [],
      },
      { host: 'k2', pid: 202, judge: other },
      [],
    );
    expect(closed).toEqual([]);
    // SIGCONT: the stalled judge goes on with its renewal and its claim.
    expect(await renewDependent(db.conn, key, stalled, LEASE_MS)).toBe(false);
    expect(await claimFires(db.conn, [chainClaim(key, 'k1', stalled)])).toEqual(['fenced']);
    const rows = await db.query<{ status: string; reason_kind: string | null }>(
      "SELECT status, reason_kind FROM baton_runs WHERE job = 'report'",
    );
    expect(rows).toEqual([{ status: 'skipped', reason_kind: 'upstream' }]);
    expect((await readDependent(db.conn, key))?.status).toBe('skipped');
  });

  it('a judge that holds its lease claims, and the row is started with the run in the same transaction', async () => {
    const key = await waitingRow('2026-03-01T00:01:00Z');
    const judge = judgeName('k1', 101);
    expect(await takeDependent(db.conn, key, judge, 60_000)).not.toBeNull();
    const [claimed] = await claimFires(db.conn, [chainClaim(key, 'k1', judge)]);
    expect(claimed).toMatchObject({ runId: expect.any(Number) });
    const row = await readDependent(db.conn, key);
    expect(row).toMatchObject({ status: 'started', runId: (claimed as { runId: number }).runId });
  });
});

describe('two runners started with the same --host', () => {
  it('never hold one judgement: the lease names the judgement, not the host', async () => {
    const key = await waitingRow('2026-03-01T00:02:00Z');
    const first = judgeName('same', 101);
    const second = judgeName('same', 102);
    expect(await takeDependent(db.conn, key, first, 60_000)).not.toBeNull();
    expect(await takeDependent(db.conn, key, second, 60_000)).toBeNull();
    expect(await renewDependent(db.conn, key, second, 60_000)).toBe(false);
    expect(await claimFires(db.conn, [chainClaim(key, 'same', second)])).toEqual(['fenced']);
    expect(await renewDependent(db.conn, key, first, 60_000)).toBe(true);
  });
});
