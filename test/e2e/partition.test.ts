/**
 * Guarantee 2 (no overlap) across a network partition, and the lock session's detection deadline.
 *
 * Runner `a` reaches a private MariaDB through a TCP proxy; `b` and `c` connect directly. `a` wins
 * a fire of a long job and is running it when the proxy freezes: from then on `a`'s packets go
 * nowhere, yet no socket closes — so the server still sees `a`'s lock session, and `a`'s job lock
 * stays held for `a` on the server. The lock session's heartbeat (1 s, deadline 3 s) must make `a`
 * give up — log 'lock session lost' and kill its job — BEFORE the server frees that lock for
 * anyone else. The test checks exactly that order: it observes the job process gone while the
 * server still names `a`'s session as the lock's holder, and only then cuts the proxy's upstream
 * side (the server drops `a`'s connections and frees its locks, as a real server eventually
 * does). `b`/`c` then win later fires; after the thaw `a` reconnects and its aborted run ends up
 * `lost` (its late verdict or `b`/`c`'s reaper). Finally, across every row of the job, in database
 * time: one winner per fire, one row per runner per fire, winner intervals [started_at,
 * finished_at] pairwise disjoint, and no winner of `b`/`c` before the cut. Every runner survives
 * the partition and exits 0 on SIGTERM.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobLockName } from '../../src/lock-names.js';
import { startRunner, type RunnerProcess } from '../helpers/cli.js';
import { allRuns, createTestDatabase, dbNow, runs, type TestDatabase } from '../helpers/db.js';
import { expectNoOverlapInHistory, expectOneWinnerPerFire } from '../helpers/fires.js';
import {
  expectHistoryMatchesJournal,
  expectNoOverlapInJournal,
  writeJournaledSchedule,
} from '../helpers/ground-truth.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { alive } from '../helpers/procfs.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

const NAMESPACE = 'partition';
const JOB = 'long';

let server: PrivateServer | undefined;
let proxy: TcpProxy | undefined;
let db: TestDatabase | undefined;
const runners: RunnerProcess[] = [];

beforeAll(async () => {
  server = await startPrivateServer();
  db = await createTestDatabase('partition', server.url);
  // The server may drop this connection when the test ends; never crash the file over it.
  db.conn.on('error', () => undefined);
  proxy = await startTcpProxy({ host: '127.0.0.1', port: server.port });
});

afterAll(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop('SIGKILL')));
  await db?.conn.destroy();
  await proxy?.close();
  await server?.destroy();
});

/** Time from `now` until 150 ms before the next fire of an every-2-seconds schedule. */
function msUntilBeforeFire(now: number): number {
  return (((2_000 - 150 - (now % 2_000)) % 2_000) + 2_000) % 2_000;
}

async function sessionIds(d: TestDatabase): Promise<number[]> {
  const rows = await d.query<{ id: number }>('SELECT ID AS id FROM information_schema.PROCESSLIST');
  return rows.map((r) => Number(r.id));
}

describe('a runner cut off from the database by a network partition', () => {
  it('aborts its run before the server frees its lock; no two runs ever overlap', async () => {
    const d = db!;
    const px = proxy!;
    // `a` runs the job for 20 s (longer than the whole partition), `b` and `c` for 3 s.
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: ${NAMESPACE}
jobs:
  ${JOB}:
    schedule: "*/2 * * * * *"
    command: ${j.yaml({ work: 'sleep $JOB_SECONDS' })}
    overlap: skip
`,
    );
    const args = [
      '--heartbeat',
      '1000ms',
      '--heartbeat-deadline',
      '3000ms',
      '--reaper-interval',
      '2000ms',
      '--grace',
      '5',
    ];
    const start = (host: string, databaseUrl: string, seconds: number) => {
      const r = startRunner({
        config,
        databaseUrl,
        host,
        args,
        env: { JOB_SECONDS: String(seconds) },
      });
      runners.push(r);
      return r;
    };

    // `a` alone first, so that it is the one running when the partition comes.
    const a = start('a', px.url(d.name), 20);
    const aStarted = await a.ready();
    const aSession = Number(aStarted.lockConnectionId);
    const won = await a.waitForLog('fire won: running', () => true, 15_000);
    const runId = Number(won.runId);
    const jobPid = Number(won.jobPid);
    expect(jobPid).toBeGreaterThan(0);

    const b = start('b', d.url, 3);
    const c = start('c', d.url, 3);
    await Promise.all([b.ready(), c.ready()]);
    // Both contend, and both see `a`'s run.
    for (const r of [b, c]) {
      await r.waitForLog('fire skipped', (l) => /running on a /.test(String(l.reason)), 15_000);
    }

    // The state just before the partition: `a`'s job runs, `a`'s session holds the job's lock.
    const lockName = jobLockName(d.name, NAMESPACE, JOB);
    const [beforeRow] = await d.query<{ status: string; host: string }>(
      'SELECT status, host FROM baton_runs WHERE id = ?',
      [runId],
    );
    expect(beforeRow).toEqual({ status: 'running', host: 'a' });
    const [holderBefore] = await d.query<{ holder: number | null }>(
      'SELECT IS_USED_LOCK(?) AS holder',
      [lockName],
    );
    expect(Number(holderBefore!.holder)).toBe(aSession);
    expect(alive(jobPid), 'the job runs when the partition starts').toBe(true);

    px.freeze();
    const frozeAt = Date.now();

    // Detection: heartbeat every 1 s, deadline 3 s, so ~4 s; the bound here is generous (a loaded
    // 2-core machine) but far below anything the server would do by itself (wait_timeout is days).
    const lost = await a.waitForLog('lock session lost', () => true, 15_000);
    expect(lost.aborting).toEqual([JOB]);
    expect(lost.lockConnectionId).toBe(aSession);
    await waitFor('the job process of a to be gone', () => !alive(jobPid), {
      timeoutMs: 10_000,
      intervalMs: 20,
    });
    const goneAt = Date.now();
    const goneDb = await dbNow(d);
    console.log(
      `partition: lost after ${Date.parse(String(lost.time)) - frozeAt} ms, ` +
        `job gone after ${goneAt - frozeAt} ms`,
    );

    // The cut will come just before a fire (fires are at even seconds; the test shares the
    // server's clock), so that `b` or `c` take over at once — before any reaper looked at `a`'s
    // row: the history must be right without the reaper's help.
    await sleep(msUntilBeforeFire(Date.now()));

    // The server knows nothing of it yet: `a`'s session still holds the job's lock there, and
    // its row is still `running` (nobody could have taken over). This is the point of the
    // client-side deadline: `a` stopped its job while the lock still kept everyone else out.
    const [holderAtCut] = await d.query<{ holder: number | null }>(
      'SELECT IS_USED_LOCK(?) AS holder',
      [lockName],
    );
    expect(Number(holderAtCut!.holder), 'the server still holds the lock for a').toBe(aSession);
    expect(await sessionIds(d)).toContain(aSession);
    const winnersBeforeCut = await d.query<{ id: number; status: string }>(
      'SELECT id, status FROM baton_runs WHERE job = ? AND winner = 1',
      [JOB],
    );
    expect(winnersBeforeCut).toEqual([{ id: runId, status: 'running' }]);

    // The server finally drops the dead peer: its connections end, its locks are freed.
    const cutDb = await dbNow(d);
    px.cutUpstream();
    const cutAt = Date.now();
    expect(goneAt).toBeLessThan(cutAt);
    expect(goneDb.getTime()).toBeLessThanOrEqual(cutDb.getTime());
    await waitFor(
      "the server to drop a's lock session",
      async () => !(await sessionIds(d)).includes(aSession),
    );

    // `b` or `c` take over at a later fire.
    const takeover = await waitFor(
      'a winner on b or c',
      async () => (await runs(d, JOB)).find((r) => r.winner === 1 && r.host !== 'a'),
      { timeoutMs: 20_000 },
    );
    expect(takeover.started_at.getTime()).toBeGreaterThanOrEqual(cutDb.getTime());

    // The partition heals: `a` reconnects, and its aborted run is `lost`.
    px.thaw();
    const reopened = await a.waitForLog('lock session reopened', () => true, 40_000);
    expect(Number(reopened.lockConnectionId)).not.toBe(aSession);
    const aborted = await waitFor(
      "a's aborted run to get its verdict",
      async () => {
        const [row] = await d.query<{ status: string; error: string | null }>(
          'SELECT status, error FROM baton_runs WHERE id = ?',
          [runId],
        );
        return row && row.status !== 'running' ? row : undefined;
      },
      { timeoutMs: 20_000 },
    );
    expect(aborted.status).toBe('lost');
    expect(aborted.error).toMatch(/^lost: /);
    // `a` takes part in fires again after the partition.
    const reopenedDb = await dbNow(d);
    await waitFor(
      'a row of a for a fire after it reconnected',
      async () =>
        (await runs(d, JOB)).some(
          (r) => r.host === 'a' && r.scheduled_at.getTime() > reopenedDb.getTime(),
        ),
      { timeoutMs: 20_000 },
    );
    await waitFor(
      'a finished run of b or c',
      async () =>
        (await runs(d, JOB)).some((r) => r.winner === 1 && r.host !== 'a' && r.status === 'done'),
      { timeoutMs: 20_000 },
    );

    // Nobody died of the partition; everybody stops cleanly.
    for (const r of [a, b, c]) expect(r.child.exitCode, `${r.host} still running`).toBeNull();
    expect(await Promise.all([a, b, c].map((r) => r.stop('SIGTERM')))).toEqual([0, 0, 0]);

    const rows = await allRuns(d, JOB);
    expect(rows.filter((r) => r.status === 'running')).toEqual([]);
    // (A fire before `a` first connected has only a `missed` row; none after that.)
    const firstWin = Date.parse(String(won.scheduledAt));
    expect(
      rows.filter((r) => r.status === 'missed' && r.scheduled_at.getTime() >= firstWin),
    ).toEqual([]);
    expectOneWinnerPerFire(rows, JOB, { noWinner: ['overlap', 'lock-being-released'] });
    // Every fire `b` and `c` saw while `a`'s dead session still held the lock was skipped
    // because of `a`'s run — never won.
    for (const r of rows) {
      if (r.host === 'a' || r.started_at.getTime() >= cutDb.getTime()) continue;
      expect(r.winner, `${r.host} ${r.scheduled_at.toISOString()}`).toBeNull();
      expect(r.reason).toMatch(/running on a /);
    }
    const winners = rows
      .filter((r) => r.winner === 1)
      .sort((x, y) => x.started_at.getTime() - y.started_at.getTime());
    expect(winners[0]!.id).toBe(runId);
    for (const w of winners.slice(1)) {
      expect(w.started_at.getTime(), `run ${w.id} on ${w.host}`).toBeGreaterThanOrEqual(
        cutDb.getTime(),
      );
    }
    // No overlap, in database time and by the job's own account (its lock is held until the
    // last of its processes is gone), over the whole history of the job.
    expectNoOverlapInHistory(rows, JOB);
    const attempts = journal.attempts(JOB);
    expectNoOverlapInJournal(attempts, JOB);
    expectHistoryMatchesJournal(rows, attempts, JOB);
  });
});
