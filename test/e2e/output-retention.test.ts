/**
 * A run's output goes with its run when the history is pruned, and `retention: {output}` deletes
 * output older than it while the runs stay — one namespace's, never another's. Real MariaDB,
 * rows planted through the store's own writes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneHistory } from '../../src/store/prune.js';
import { insertOutput } from '../../src/store/run-output.js';
import { createTestDatabase, plantRun, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
const DAY = 86_400_000;

beforeAll(async () => {
  db = await createTestDatabase('output_retention', { migrated: true });
});
afterAll(() => db?.drop());

/** A run of `namespace` `ageDays` old with `chunks` chunks of output printed then. */
async function runWithOutput(namespace: string, ageDays: number, chunks: number) {
  const at = new Date(Date.now() - ageDays * DAY);
  const id = await plantRun(db, { namespace, job: 'settle', scheduledAt: at });
  await insertOutput(
    db.conn,
    Array.from({ length: chunks }, (_, seq) => ({
      runId: id,
      namespace,
      seq,
      attempt: 1,
      stream: 1 as const,
      offset: seq * 5,
      readAt: at,
      data: Buffer.from(`${seq}`.padEnd(5)),
    })),
  );
  return id;
}

const chunksOf = async (id: number) =>
  Number(
    (
      await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM baton_run_output WHERE run_id = ?', [
        id,
      ])
    )[0]!.n,
  );

describe('output retention', () => {
  it('deletes a pruned run with its output, in batches, and keeps the rest', async () => {
    const old = await runWithOutput('prune-a', 40, 2_500);
    const young = await runWithOutput('prune-a', 1, 3);
    // The latest success is always kept: a newer one makes `old` prunable.
    const result = await pruneHistory(db.conn, {
      namespace: 'prune-a',
      retention: { runsMs: 30 * DAY, skipsMs: null },
    });
    expect(result).toMatchObject({ runs: 1, outputChunks: 2_500 });
    expect(await chunksOf(old)).toBe(0);
    expect(await chunksOf(young)).toBe(3);
  });

  it('retention.output deletes old output of its namespace only; the runs stay', async () => {
    const old = await runWithOutput('prune-b', 20, 4);
    const young = await runWithOutput('prune-b', 2, 4);
    const otherNamespace = await runWithOutput('prune-c', 20, 4);
    const result = await pruneHistory(db.conn, {
      namespace: 'prune-b',
      retention: { runsMs: null, skipsMs: null, outputMs: 14 * DAY },
    });
    expect(result).toMatchObject({ runs: 0, outputChunks: 4 });
    expect(await chunksOf(old)).toBe(0);
    expect(await chunksOf(young)).toBe(4);
    expect(await chunksOf(otherNamespace)).toBe(4);
    const rows = await db.query('SELECT id FROM baton_runs WHERE id IN (?)', [[old, young]]);
    expect(rows).toHaveLength(2);
  });

  it('reads retention.output from schedules.yaml', async () => {
    const { parseConfig } = await import('../../src/config/load.js');
    const config = parseConfig(
      '/tmp/schedules.yaml',
      'jobs:\n  a:\n    schedule: "@daily"\n    command: ["true"]\nretention:\n  runs: 90d\n  output: 14d\n',
    );
    expect(config.retention).toEqual({ runsMs: 90 * DAY, skipsMs: null, outputMs: 14 * DAY });
  });
});
