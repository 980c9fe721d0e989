/**
 * A failover on semi-synchronous replication (MariaDB's built-in `rpl_semi_sync_*`), then a split
 * brain: two PRIVATE mariadbd, a primary (semi-sync master, AFTER_SYNC) and a replica (semi-sync
 * slave) following it by GTID, and two runners, each reaching "the primary" through its own TCP
 * proxy, so that the test can point one of them elsewhere (as a stale DNS cache would).
 *
 * 1. Replication runs up to the crash (no stop first: a semi-sync primary whose replica stops
 *    falls back to asynchronous after its timeout). The runners are cut off from the primary
 *    (frozen proxies) just before it is killed, so that they find their sessions lost only by the
 *    heartbeat's deadline, after the next fire T + 3, which nobody could attempt: it lies inside
 *    the failover window. After the promotion and the re-pointing, every fire that ran has its
 *    winner row on the new primary, nothing is in doubt — T + 3 is caught up, as semi-sync vouches
 *    that no row of it was lost (asynchronous replication would have left it in doubt) — and
 *    nothing ran twice by the ground truth (a file on this host, not replicated).
 * 2. The old primary comes back writable, and runner `ss-b`'s proxy is pointed at it while `ss-a`
 *    stays on the new primary. `ss-b` finds itself alone on a server the fleet has left: it holds
 *    its fires (none runs twice), logs it at error level, its metric says so, and `baton status`
 *    against the old primary is CRITICAL with the finding `detached`.
 * 3. On the old primary, semi-sync on with no replica: the sampler reads the fallback (status
 *    OFF, `Rpl_semi_sync_master_no_times` up), and nothing is vouched for.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { sampleSemiSync, SemiSyncSeries } from '../../src/daemon/semi-sync.js';
import { baton, startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { queryFresh, type RunRow } from '../helpers/db.js';
import { freePort, type PrivateServer } from '../helpers/private-server.js';
import { groundTruth, startReplicatedPair } from '../helpers/replication.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

const DB = 'baton_semisync';
const PERIOD_MS = 3_000;
/**
 * fleetWatch.detachGraceMs for the runners (default 10 s): how long a runner that failed over
 * waits for the fleet before it counts as detached. In part 1 the peers reconnect together and
 * heartbeat as they connect, within about a second of each other, well inside it; in part 2 it is
 * longer than a fire interval, so that the runner left on the old primary holds at least one fire
 * before it is detached (asserted).
 */
const DETACH_GRACE_MS = 4_500;
const TIMINGS = { fleetWatch: { detachGraceMs: DETACH_GRACE_MS } };

const SETTLED =
  'the database failed over: reconnected to another server; semi-sync acknowledged every ' +
  'commit on the old one up to the loss: no fire in doubt since then';
const IN_DOUBT =
  'the database failed over: reconnected to another server; fires up to the loss are in doubt';

const DETACHED = 'detached from the fleet: no fire runs on this server';
const HELD = 'fire not run: held after a failover until the fleet is seen on this server';

const servers: PrivateServer[] = [];
const runners: RunnerProcess[] = [];
const proxies: TcpProxy[] = [];

afterAll(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop('SIGKILL')));
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  await Promise.all(servers.splice(0).map((s) => s.destroy()));
});

async function statusVar(server: PrivateServer, name: string): Promise<string> {
  const [row] = await queryFresh<{ Value: string }>(
    server.url,
    `SHOW GLOBAL STATUS LIKE '${name}'`,
  );
  return String(row?.Value ?? '');
}

const metric = async (port: number, name: string) => {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[2];
};

describe('a failover on semi-synchronous replication, then a split brain', () => {
  it('loses no winner row, puts nothing in doubt, and holds the fires of a runner left on the old primary', async () => {
    const [primary, replica] = await startReplicatedPair({
      primary: [
        '--rpl-semi-sync-master-enabled=ON',
        '--rpl-semi-sync-master-wait-point=AFTER_SYNC',
        '--rpl-semi-sync-master-timeout=2000',
      ],
      replica: ['--rpl-semi-sync-slave-enabled=ON'],
    });
    servers.push(primary, replica);
    await waitFor(
      'the primary semi-sync acknowledged',
      async () =>
        (await statusVar(primary!, 'Rpl_semi_sync_master_status')) === 'ON' &&
        (await statusVar(primary!, 'Rpl_semi_sync_master_clients')) === '1',
    );
    const proxyA = await startTcpProxy({ host: '127.0.0.1', port: primary!.port });
    const proxyB = await startTcpProxy({ host: '127.0.0.1', port: primary!.port });
    proxies.push(proxyA, proxyB);

    const dir = mkdtempSync(join(tmpdir(), 'baton-semisync-'));
    const tickFile = join(dir, 'tick');
    const config = writeSchedule(`
namespace: semisync
jobs:
  tick:
    schedule: "*/3 * * * * *"
    command: ["sh", "-c", "echo $BATON_SCHEDULED_AT >> ${tickFile}"]
    catchUp: {window: 1m, fires: all}
`);
    const [portA, portB] = [await freePort(), await freePort()];
    const runnerA = startRunner({
      config,
      databaseUrl: proxyA.url(DB),
      host: 'ss-a',
      args: ['--http', `127.0.0.1:${portA}`],
      timings: TIMINGS,
    });
    const runnerB = startRunner({
      config,
      databaseUrl: proxyB.url(DB),
      host: 'ss-b',
      args: ['--http', `127.0.0.1:${portB}`],
      timings: TIMINGS,
    });
    runners.push(runnerA, runnerB);
    await Promise.all(runners.map((r) => r.ready()));
    const done = (server: PrivateServer) =>
      queryFresh<{ n: number }>(
        `${server.url}/${DB}`,
        "SELECT COUNT(*) AS n FROM baton_runs WHERE winner = 1 AND status = 'done'",
      ).then(([r]) => Number(r?.n ?? 0));
    await waitFor('four fires done', async () => (await done(primary!).catch(() => 0)) >= 4, {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    expect(await statusVar(primary!, 'Rpl_semi_sync_master_no_tx')).toBe('0');

    // Cut off and killed 0.2 s after a fire instant T, replication running. The heartbeat finds
    // the loss by T + 4.2 s; the names move (and the link heals) at T + 5.2 s.
    const fire = Math.ceil(Date.now() / PERIOD_MS) * PERIOD_MS;
    await sleep(fire + 200 - Date.now());
    // (The proxies let go of the primary first: a socket closing under a frozen proxy ends its
    // client's side too, which the runners would see at once.)
    for (const p of proxies) p.freeze();
    for (const p of proxies) p.cutUpstream();
    await primary!.kill();
    const killedAt = Date.now();
    await queryFresh(replica!.url, 'STOP SLAVE');
    await queryFresh(replica!.url, 'RESET SLAVE ALL');
    await sleep(fire + 5_200 - Date.now());
    for (const p of proxies) {
      p.retarget({ host: '127.0.0.1', port: replica!.port });
      p.thaw();
    }
    const thawedAt = Date.now();
    for (const r of runners) {
      const line = await r.waitForLog(SETTLED);
      expect(line, r.host).toMatchObject({ fromServer: 'server_id 1', toServer: 'server_id 2' });
    }
    expect(runners.flatMap((r) => r.lines).filter((l) => l.msg === IN_DOUBT)).toEqual([]);
    const onReplica = `${replica!.url}/${DB}`;
    // The recoveries are over: the fire of the failover window (T + 3) has a finished winner,
    // whatever its trigger (asserted below), and a regular fire after the thaw ran, which comes
    // after every runner's look-back (in-doubt rows are written at the reconnect, before it).
    await waitFor(
      'T + 3 decided and a regular fire after the thaw done',
      async () => {
        const done = await queryFresh<{ at: Date; triggered_by: string }>(
          onReplica,
          "SELECT scheduled_at AS at, triggered_by FROM baton_runs WHERE winner = 1 AND status = 'done'",
        );
        return (
          done.some((r) => r.at.getTime() === fire + PERIOD_MS) &&
          done.some((r) => r.triggered_by === 'schedule' && r.at.getTime() > thawedAt)
        );
      },
      { timeoutMs: 15_000, intervalMs: 100 },
    );

    const rows = await queryFresh<RunRow>(onReplica, 'SELECT * FROM baton_runs ORDER BY id');
    expect(rows.filter((r) => r.reason_kind === 'in-doubt')).toEqual([]);
    const truth = groundTruth(tickFile);
    expect(
      [...truth].filter(([, n]) => n > 1),
      'fires run twice',
    ).toEqual([]);
    // Every fire that ran before the kill has its winner row on the new primary.
    const ranBefore = [...truth.keys()].filter((at) => Date.parse(at) < killedAt);
    expect(ranBefore.length).toBeGreaterThanOrEqual(4);
    const winners = new Set(
      rows.filter((r) => r.winner === 1).map((r) => r.scheduled_at.toISOString()),
    );
    expect(
      ranBefore.filter((at) => !winners.has(at)),
      'winner rows lost',
    ).toEqual([]);
    // T + 3, in the failover window, nobody could attempt: caught up, not in doubt.
    expect(
      rows.filter((r) => r.scheduled_at.getTime() === fire + PERIOD_MS && r.winner === 1),
      'the fire of the failover window',
    ).toMatchObject([{ triggered_by: 'catchup', winner: 1, status: 'done' }]);
    for (const r of runners) {
      const line = r.lines.find((l) => l.msg === 'lock session lost')!;
      expect(new Date(line.time as string | number).getTime(), 'lost after T + 3').toBeGreaterThan(
        fire + PERIOD_MS,
      );
    }

    // 2. The old primary comes back, writable, with the rows it had; ss-b's name points at it.
    await primary!.start();
    // (No replica follows it: its commits would wait out the semi-sync timeout first.)
    await queryFresh(primary!.url, 'SET GLOBAL rpl_semi_sync_master_enabled = OFF');
    proxyB.retarget({ host: '127.0.0.1', port: primary!.port });
    proxyB.cutUpstream();
    const splitAt = Date.now();
    const arrived = await runnerB.waitForLog(IN_DOUBT, (l) => l.toServer === 'server_id 1');
    const detached = await runnerB.waitForLog(DETACHED, undefined, 20_000);
    expect(detached.level, 'logged at error level').toBe(50);
    const detachedAt = new Date(detached.time as string | number).getTime();
    // While it held, it was connected: its fires say they were held, not that it had no
    // connection (issue 34).
    const arrivedAt = new Date(arrived.time as string | number).getTime();
    const whileHolding = runnerB.lines.filter((l) => {
      const at = new Date(l.time as string | number).getTime();
      return l.msg.startsWith('fire not run') && at >= arrivedAt && at < detachedAt;
    });
    expect(whileHolding.length, 'fires held during the grace').toBeGreaterThan(0);
    expect(new Set(whileHolding.map((l) => l.msg))).toEqual(new Set([HELD]));
    // Held from its arrival (no fire of its own ran there), detached after the grace.
    expect(detachedAt - splitAt).toBeGreaterThanOrEqual(DETACH_GRACE_MS);
    expect(await metric(portB, 'baton_database_detached')).toBe('1');
    expect(await metric(portA, 'baton_database_detached')).toBe('0');
    expect(runnerA.lines.filter((l) => l.msg === DETACHED)).toEqual([]);

    // baton status against the old primary: CRITICAL, the runner detached.
    const onOld = `${primary!.url}/${DB}`;
    const status = await baton(['status', '--namespace', 'semisync', '--database-url', onOld]);
    expect(status.code, status.stdout + status.stderr).toBe(2);
    expect(status.stdout).toContain('runner ss-b (pid');
    expect(status.stdout).toContain('is detached from the fleet');
    // Against the new primary, where the fleet is, nobody is detached.
    const onNew = await baton(['status', '--namespace', 'semisync', '--database-url', onReplica]);
    expect(onNew.stdout).not.toContain('detached');

    // ss-a ran every fire since on the new primary; ss-b none on the old: nothing ran twice.
    const heldDetached = await runnerB.waitForLog('fire not run: held, detached from the fleet');
    // Every fire from the split up to the held one, each done, on ss-a: two or more (the grace
    // spans 4.5 s of them; with the default 10 s this asked for four fires in all).
    const heldAt = Date.parse(String(heldDetached.scheduledAt));
    const sinceSplit: number[] = [];
    for (let at = Math.ceil(splitAt / PERIOD_MS) * PERIOD_MS; at <= heldAt; at += PERIOD_MS) {
      sinceSplit.push(at);
    }
    expect(sinceSplit.length, 'fires from the split to the first held one').toBeGreaterThanOrEqual(
      2,
    );
    const oldWinners = await queryFresh<RunRow>(
      onOld,
      'SELECT * FROM baton_runs WHERE winner = 1 AND scheduled_at > ?',
      [new Date(killedAt)],
    );
    expect(oldWinners, 'winners on the old primary after its crash').toEqual([]);
    const newRows = await waitFor(
      'every fire since the split done on the new primary',
      async () => {
        const rows = await queryFresh<RunRow>(
          onReplica,
          "SELECT * FROM baton_runs WHERE winner = 1 AND status = 'done' AND scheduled_at > ?",
          [new Date(splitAt)],
        );
        const done = new Set(rows.map((r) => r.scheduled_at.getTime()));
        return sinceSplit.every((at) => done.has(at)) ? rows : null;
      },
    );
    expect(newRows.every((r) => r.host === 'ss-a')).toBe(true);
    // (Read once ss-a's run of the held fire is over: had ss-b run it too, the file says so.)
    const after = groundTruth(tickFile);
    expect(
      [...after].filter(([, n]) => n > 1),
      'fires run twice',
    ).toEqual([]);

    // 3. The fallback, read from a real server: semi-sync on the old primary again, with no
    // replica to answer, so its next commit waits out the timeout and it goes on asynchronously.
    // The sampler sees status OFF and the counter move, and the series vouches for nothing.
    const conn = await mysql.createConnection(primary!.url);
    try {
      await conn.query('SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC');
      await conn.query('SET GLOBAL rpl_semi_sync_master_timeout = 300');
      await conn.query('SET GLOBAL rpl_semi_sync_master_enabled = ON');
      const series = new SemiSyncSeries();
      const before = await sampleSemiSync(conn);
      series.note('server_id 1', before);
      await conn.query(`CREATE TABLE IF NOT EXISTS ${DB}.fallback (id INT PRIMARY KEY)`);
      const fellBack = await sampleSemiSync(conn);
      series.note('server_id 1', fellBack);
      expect(fellBack).toMatchObject({ enabled: true, afterSync: true, on: false });
      expect(fellBack.noTimes).toBeGreaterThan(before.noTimes);
      expect(series.vouchedSince('server_id 1', new Date(), 6_000)).toBeNull();
    } finally {
      await conn.end();
    }
  }, 90_000);
});
