/**
 * The per-job timestamps of `/metrics` come from the history (store/outcome-reads.ts):
 *
 * - the read stays two index entries per job and status on a long history (150,000 rows), and
 *   gives each job's latest finish of each final status, across statement batches;
 * - a scrape never fails or hangs because of the database: with the server frozen (SIGSTOP: it
 *   accepts nothing and answers nothing) the scrape answers within the 2 s it waits for a read,
 *   with the values read before; with the server stopped too.
 */
import mysql from 'mysql2/promise';
import { afterEach, describe, expect, it } from 'vitest';
import { FINAL_STATUSES } from '../../src/run-status.js';
import { LATEST_FINISH_SQL, latestOutcomes } from '../../src/store/outcome-reads.js';
import { baton, startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { GENERATED_RUN_FIELDS, plantRun, plantRunsFrom } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort, startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { parseMetrics } from '../helpers/prometheus.js';
import { rowsRead } from '../helpers/query-cost.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('metrics-history');
/** The runner's pool statement deadline in the frozen-server test (default 10 s). */
const STATEMENT_DEADLINE_MS = 4_000;
/**
 * How long scrapes share a read of the history (metrics.readReuseMs, default 5 s): the test waits
 * it out twice so that the next scrape starts a read. A scrape's wait for a read (2 s) is the
 * default, which the test asserts.
 */
const READ_REUSE_MS = 1_000;

describe('the read behind the per-job timestamps', () => {
  it('reads two index entries per job and status on a long history, in batches', async () => {
    const db = fleet.db;
    const config = writeSchedule('namespace: big\njobs: {}\n');
    expect((await baton(['migrate', '--config', config, '--database-url', db.url])).code).toBe(0);
    // tick: 40,000 fires, done only at the start, a timeout every 1,000th, otherwise failed,
    // each with two skip rows; other: 25,000 successes (older); rare: 100 successes, then lost.
    const insert = (select: string) => plantRunsFrom(db, GENERATED_RUN_FIELDS, select);
    await insert(`SELECT 'big', 'tick', '2027-01-01' + INTERVAL seq SECOND, 1, 'schedule',
        CASE WHEN seq < 10 THEN 'done' WHEN seq % 1000 = 500 THEN 'timeout' ELSE 'failed' END,
        NULL, 'srv-01', 1, '2027-01-01' + INTERVAL seq SECOND,
        '2027-01-01' + INTERVAL seq SECOND + INTERVAL 0.5 SECOND, 1
      FROM seq_0_to_39999`);
    await insert(`SELECT 'big', 'tick', '2027-01-01' + INTERVAL seq SECOND, NULL, 'schedule',
        'skipped', 'busy', h.host, 1, '2027-01-01' + INTERVAL seq SECOND,
        '2027-01-01' + INTERVAL seq SECOND, 0
      FROM seq_0_to_39999, (SELECT 'srv-02' AS host UNION ALL SELECT 'srv-03') h`);
    await insert(`SELECT 'big', 'other', '2026-12-01' + INTERVAL seq SECOND, 1, 'schedule', 'done',
        NULL, 'srv-01', 1, '2026-12-01' + INTERVAL seq SECOND,
        '2026-12-01' + INTERVAL seq SECOND + INTERVAL 1 SECOND, 1
      FROM seq_0_to_24999`);
    await insert(`SELECT 'big', 'rare', '2026-11-01' + INTERVAL seq HOUR, 1, 'schedule',
        IF(seq = 100, 'lost', 'done'), NULL, 'srv-01', 1, '2026-11-01' + INTERVAL seq HOUR,
        '2026-11-01' + INTERVAL seq HOUR + INTERVAL 2 SECOND, 1
      FROM seq_0_to_100`);
    await db.query('ANALYZE TABLE baton_runs');

    for (const job of ['tick', 'other', 'rare', 'none']) {
      for (const status of FINAL_STATUSES) {
        const params = [job, status, 'big', job, status, 'big', job, status];
        expect(
          await rowsRead(db, LATEST_FINISH_SQL, params),
          `${job} ${status}`,
        ).toBeLessThanOrEqual(2);
      }
    }

    // 30 jobs: two statements (25 jobs each at most); jobs without rows get no times.
    const absent = Array.from({ length: 27 }, (_, i) => `absent-${i}`);
    const outcomes = await latestOutcomes(db.conn, 'big', ['tick', ...absent, 'other', 'rare']);
    expect(outcomes.get('tick')).toEqual({
      done: new Date('2027-01-01T00:00:09.500Z'),
      failed: new Date('2027-01-01T11:06:39.500Z'), // fire 39,999
      timeout: new Date('2027-01-01T10:58:20.500Z'), // fire 39,500
    });
    expect(outcomes.get('other')).toEqual({ done: new Date('2026-12-01T06:56:40.000Z') });
    expect(outcomes.get('rare')).toEqual({
      done: new Date('2026-11-05T03:00:02.000Z'), // fire 99
      lost: new Date('2026-11-05T04:00:02.000Z'),
    });
    expect(outcomes.get('absent-3')).toEqual({});
    expect(outcomes.size).toBe(30);
    // Another namespace's rows are not this one's.
    expect((await latestOutcomes(db.conn, 'default', ['tick'])).get('tick')).toEqual({});
  });
});

describe('a scrape while the database does not answer', () => {
  let server: PrivateServer | undefined;
  let runner: RunnerProcess | undefined;
  afterEach(async () => {
    await runner?.stop('SIGKILL');
    if (server?.pid) process.kill(server.pid, 'SIGCONT');
    await server?.destroy();
  });

  it('answers within seconds with the last values read', async () => {
    server = await startPrivateServer();
    const port = await freePort();
    // Nothing fires (a fire's GET_LOCK would give up on the frozen server within 3 s and end the
    // lock session), and the session's heartbeat outlives the freeze: the runner stays connected,
    // so the scrape's read goes to the frozen server. The job's success is planted.
    runner = startRunner({
      config: writeSchedule('jobs:\n  ok:\n    schedule: "0 0 1 1 *"\n    command: ["true"]\n'),
      databaseUrl: `${server.url}/test`,
      host: 'frozen-a',
      args: ['--http', `127.0.0.1:${port}`, '--heartbeat-deadline', '60s'],
      // The read's statement deadline (the pool's, default 10 s) is what the test waits out
      // after the frozen scrapes: 4 s is still past the 2 s a scrape waits for a read (and past
      // the 3.5 s bound on the frozen scrape below), so the scrapes end on their own wait, as
      // with the default, and the read fails later, in the background.
      timings: {
        link: { poolStatementDeadlineMs: STATEMENT_DEADLINE_MS },
        metrics: { readReuseMs: READ_REUSE_MS },
      },
    });
    await runner.ready();
    const conn = await mysql.createConnection({ uri: `${server.url}/test`, timezone: 'Z' });
    const finished = new Date('2026-12-01T10:00:00.250Z');
    try {
      await plantRun({ conn }, { namespace: 'default', job: 'ok', scheduledAt: finished });
    } finally {
      await conn.end();
    }
    const scrape = async () => {
      const started = performance.now();
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      const text = await res.text();
      const success = parseMetrics(text).find(
        (s) => s.name === 'baton_job_last_success_timestamp_seconds',
      );
      return { status: res.status, success: success?.value, ms: performance.now() - started };
    };
    const before = await waitFor('the planted success read', async () => {
      const s = await scrape();
      return s.success != null ? s : null;
    });
    expect(before.success).toBe(finished.getTime() / 1000);

    process.kill(server.pid!, 'SIGSTOP');
    // Past the 1 s a read is shared: the next scrape starts a read that gets no answer.
    await sleep(READ_REUSE_MS + 500);
    const frozen = await scrape();
    expect(frozen.status).toBe(200);
    // It waited for the read (the 2 s), not longer.
    expect(frozen.ms).toBeGreaterThan(1_500);
    expect(frozen.ms).toBeLessThan(3_500);
    expect(frozen.success).toBe(before.success);
    // A second scrape meanwhile shares the read in flight: it waits no longer.
    const again = await scrape();
    expect(again.ms).toBeLessThan(3_500);
    expect(again.success).toBe(frozen.success);

    // The read's statement deadline (4 s) passes: the runner says so, and keeps the values.
    await runner.waitForLog('metrics: could not read the history; serving the last values');

    process.kill(server.pid!, 'SIGCONT');
    await server.stop();
    // Past the 1 s a read is shared again (counted from the failed read's end): this scrape
    // would start a read, and the server is gone.
    await sleep(READ_REUSE_MS + 500);
    const stopped = await scrape();
    expect(stopped.status).toBe(200);
    expect(stopped.ms).toBeLessThan(3_500);
    expect(stopped.success).toBe(frozen.success);
  });
});
