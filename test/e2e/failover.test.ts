/**
 * A database failover on real replication: two PRIVATE mariadbd servers, a primary (binlog, ROW)
 * and a replica following it by GTID, and two runners that reach "the primary" through a TCP proxy
 * the test re-points, as a VIP or a DNS name would move. Replication is stopped before the primary
 * is killed, so the promoted replica lacks the rows of the last fires that ran: by its history they
 * never happened, and `catchUp: {fires: all}` alone would run them again.
 *
 * Each job appends its BATON_SCHEDULED_AT to a file on this host (the ground truth: not in the
 * database, not replicated). After the failover:
 * - `tick` (the default `onFailover: skip`): no fire ran twice; every fire whose rows were lost is
 *   recorded `missed` with the kind `in-doubt`, and `baton explain` says so; the fires of the
 *   outage itself (after the old primary died) are caught up as usual;
 * - `idem` (`onFailover: catchUp`): the lost fires are caught up, each exactly once more.
 * - Run ids name one run only: every row written on the new primary has a higher id than any the
 *   old primary handed out, those of the lost rows included (read from the old primary's data,
 *   restarted at the end alone); the first runner there moved them, once for the fleet.
 * And a restart of the same server (same `server_id`) is a reconnect, not a failover.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { baton, startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { queryFresh, type RunRow } from '../helpers/db.js';
import { freePort, startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { groundTruth, startReplicatedPair } from '../helpers/replication.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

const DB = 'baton_failover';
const PERIOD_MS = 3_000;

const servers: PrivateServer[] = [];
const runners: RunnerProcess[] = [];
let proxy: TcpProxy | undefined;

afterAll(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop('SIGKILL')));
  await proxy?.close();
  await Promise.all(servers.splice(0).map((s) => s.destroy()));
});

describe('a database failover with rows lost to replication lag', () => {
  it('records the lost fires in doubt and runs none twice (onFailover: catchUp runs them once)', async () => {
    const [primary, replica] = await startReplicatedPair();
    servers.push(primary, replica);
    proxy = await startTcpProxy({ host: '127.0.0.1', port: primary!.port });

    const dir = mkdtempSync(join(tmpdir(), 'baton-failover-'));
    const tickFile = join(dir, 'tick');
    const idemFile = join(dir, 'idem');
    // idem's runs by trigger: whether a lost fire's own run began before the primary died.
    const idemTriggersFile = join(dir, 'idem-triggers');
    const config = writeSchedule(`
namespace: failover
jobs:
  tick:
    schedule: "*/3 * * * * *"
    command: ["sh", "-c", "echo $BATON_SCHEDULED_AT >> ${tickFile}"]
    catchUp: {window: 1m, fires: all}
  idem:
    schedule: "*/3 * * * * *"
    command: ["sh", "-c", "echo $BATON_SCHEDULED_AT >> ${idemFile}; echo $BATON_SCHEDULED_AT $BATON_TRIGGER >> ${idemTriggersFile}"]
    catchUp: {window: 1m, fires: all}
    onFailover: catchUp
`);
    const url = proxy.url(DB);
    const metricsPort = await freePort();
    runners.push(
      startRunner({
        config,
        databaseUrl: url,
        host: 'fo-a',
        args: ['--http', `127.0.0.1:${metricsPort}`],
      }),
      startRunner({ config, databaseUrl: url, host: 'fo-b' }),
    );
    await Promise.all(runners.map((r) => r.ready()));
    const done = (server: PrivateServer) =>
      queryFresh<{ n: number }>(
        `${server.url}/${DB}`,
        "SELECT COUNT(*) AS n FROM baton_runs WHERE winner = 1 AND status = 'done'",
      ).then(([r]) => Number(r?.n ?? 0));
    await waitFor(
      'two fires of each job done, and on the replica',
      async () => {
        const n = await done(primary!).catch(() => 0);
        return n >= 4 && (await done(replica!).catch(() => -1)) === n;
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );

    // The replica stops following: the next fires' rows exist on the primary only.
    await queryFresh(replica!.url, 'STOP SLAVE');
    // The highest run id the future primary has: its AUTO_INCREMENT would go on from there.
    const replicatedTop = Number(
      (
        await queryFresh<{ top: number }>(
          `${replica!.url}/${DB}`,
          'SELECT MAX(id) AS top FROM baton_runs',
        )
      )[0]!.top,
    );
    // The newest fire of each job the replica (the future primary) has any row of.
    const replicated = new Map(
      (
        await queryFresh<{ job: string; last: Date }>(
          `${replica!.url}/${DB}`,
          'SELECT job, MAX(scheduled_at) AS last FROM baton_runs GROUP BY job',
        )
      ).map((r) => [r.job, r.last.getTime()]),
    );
    /** The fires that ran (by the ground truth) and whose rows the replica never got. */
    const lostOf = (job: string, truth: Map<string, number>) =>
      [...truth.keys()].filter(
        (at) => Date.parse(at) > replicated.get(job)! && Date.parse(at) < killedAt,
      );
    const before = await done(primary!);
    await waitFor(
      'two more fires of each job done on the primary only',
      async () => (await done(primary!)) >= before + 4,
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    // Killed 0.2 s after a fire instant T; the name moves at T + 3.3 s, so that the fire at T + 3
    // finds no database at all, and the runners are back (within ~1 s) before T + 6, the next
    // regular fire, until which the catch-up walk may run.
    const fire = Math.ceil(Date.now() / PERIOD_MS) * PERIOD_MS;
    await sleep(fire + 200 - Date.now());
    await primary!.kill();
    const killedAt = Date.now();

    // The failover: the replica is promoted, then the name moves to it.
    await queryFresh(replica!.url, 'STOP SLAVE');
    await queryFresh(replica!.url, 'RESET SLAVE ALL');
    await queryFresh(replica!.url, 'SET GLOBAL read_only = 0');
    await sleep(fire + PERIOD_MS + 300 - Date.now());
    proxy.retarget({ host: '127.0.0.1', port: replica!.port });
    const movedAt = Date.now();
    for (const r of runners) {
      await r.waitForLog(
        'the database failed over: reconnected to another server; fires up to the loss are in doubt',
      );
    }
    const failoverLine = runners[0]!.lines.find((l) =>
      String(l.msg).startsWith('the database failed over'),
    )!;
    expect(failoverLine).toMatchObject({ fromServer: 'server_id 1', toServer: 'server_id 2' });
    const onReplica = `${replica!.url}/${DB}`;
    // The in-doubt rows are written at the reconnect and the catch-ups start at once; a walk runs
    // its fires one after another and stops at the job's next regular fire. So once a regular
    // fire of each job after the move is done, both runners' recoveries are over (it waited a
    // fixed 3.5 s before, which ended later than this).
    await waitFor(
      'a regular fire of each job done after the move',
      async () =>
        (
          await queryFresh<{ job: string }>(
            onReplica,
            `SELECT DISTINCT job FROM baton_runs WHERE winner = 1 AND status = 'done'
               AND triggered_by = 'schedule' AND scheduled_at > ?`,
            [new Date(movedAt)],
          )
        ).length === 2,
      { timeoutMs: 15_000, intervalMs: 100 },
    );

    const rows = await queryFresh<RunRow>(
      onReplica,
      'SELECT * FROM baton_runs ORDER BY scheduled_at, id',
    );
    const iso = (d: Date) => d.toISOString();
    const rowsOf = (job: string, at: string) =>
      rows.filter((r) => r.job === job && iso(r.scheduled_at) === at);

    // tick: by the ground truth no fire ran twice, old primary and new together.
    const tick = groundTruth(tickFile);
    expect(
      [...tick].filter(([, n]) => n > 1),
      'tick fires run twice',
    ).toEqual([]);
    // The fires lost with the replica's lag: they ran (on the old primary), and the new primary
    // has no winner of them. Each is recorded in doubt, once.
    const lost = lostOf('tick', tick);
    expect(lost.length, 'tick fires lost from the new primary').toBeGreaterThanOrEqual(2);
    for (const at of lost) {
      expect(rowsOf('tick', at), at).toMatchObject([
        { status: 'missed', winner: 0, reason_kind: 'in-doubt' },
      ]);
    }
    // The fires of the outage (after the old primary died) are caught up, as without a failover.
    // (A catch-up at the runners' start, of a fire due before their first connect, may be there too.)
    const outage = rows.filter(
      (r) =>
        r.job === 'tick' &&
        r.triggered_by === 'catchup' &&
        r.winner === 1 &&
        r.scheduled_at.getTime() > killedAt,
    );
    expect(outage.length, 'outage fires caught up').toBeGreaterThanOrEqual(1);

    // idem (onFailover: catchUp): every fire lost from the new primary is caught up, so it ran
    // twice in all (the job says that is fine), and never a third time; nothing is in doubt. The
    // fire just before the kill (0.2 s) may have been claimed on the old primary and cut off
    // with its lock session before its job began: that one runs once, by the catch-up.
    const idem = groundTruth(idemFile);
    const idemScheduled = new Set(
      [...groundTruth(idemTriggersFile).keys()]
        .filter((line) => line.endsWith(' schedule'))
        .map((line) => line.split(' ')[0]!),
    );
    const idemLost = lostOf('idem', idem);
    const idemLostThatRan = idemLost.filter((at) => idemScheduled.has(at));
    expect(
      idemLostThatRan.length,
      'idem fires run, then lost from the new primary',
    ).toBeGreaterThanOrEqual(2);
    for (const at of idemLost) {
      expect(
        rowsOf('idem', at).filter((r) => r.winner === 1),
        at,
      ).toMatchObject([{ triggered_by: 'catchup', status: 'done' }]);
    }
    for (const at of [...idem.keys()].filter((t) => Date.parse(t) < killedAt - PERIOD_MS)) {
      expect(
        rowsOf('idem', at).filter((r) => r.winner === 1),
        at,
      ).toHaveLength(1);
    }
    for (const at of idemLost) {
      expect(idem.get(at), at).toBe(idemScheduled.has(at) ? 2 : 1);
    }
    // Only the last fire before the kill can have been cut off before its job began.
    expect(
      idemLost.filter((at) => !idemScheduled.has(at) && Date.parse(at) < killedAt - PERIOD_MS),
      'idem fires lost before their job began, other than the last before the kill',
    ).toEqual([]);
    expect([...idem].filter(([, n]) => n > 2)).toEqual([]);
    expect(rows.filter((r) => r.job === 'idem' && r.reason_kind === 'in-doubt')).toEqual([]);

    // explain says why the lost fire did not run again.
    const explained = await baton([
      'explain',
      'tick',
      lost[0]!,
      '--namespace',
      'failover',
      '--database-url',
      onReplica,
    ]);
    expect(explained.code, explained.stderr).toBe(0);
    expect(explained.stdout).toContain('in doubt: the database failed over after this fire');

    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^baton_database_failovers_total(\{[^}]*\})? 1$/m);

    // The registry says which server each runner is on now.
    const registry = await queryFresh<{ host: string; db_server: string }>(
      onReplica,
      'SELECT host, db_server FROM baton_runners ORDER BY host',
    );
    expect(registry).toEqual([
      { host: 'fo-a', db_server: 'server_id 2' },
      { host: 'fo-b', db_server: 'server_id 2' },
    ]);

    // Run ids: the old primary's data, as it was at the kill (restarted alone: no runner reaches
    // it), holds every id it handed out, those of the rows the new primary lacks too.
    await primary!.start();
    const oldTop = Number(
      (
        await queryFresh<{ top: number }>(
          `${primary!.url}/${DB}`,
          'SELECT MAX(id) AS top FROM baton_runs',
        )
      )[0]!.top,
    );
    expect(oldTop, 'ids handed out on the old primary only').toBeGreaterThan(replicatedTop);
    const newIds = (
      await queryFresh<{ id: number }>(
        onReplica,
        'SELECT id FROM baton_runs WHERE id > ? ORDER BY id',
        [replicatedTop],
      )
    ).map((r) => Number(r.id));
    expect(newIds.length, 'rows written on the new primary').toBeGreaterThan(0);
    expect(
      newIds.filter((id) => id <= oldTop),
      `ids on the new primary that the old one handed out (up to ${oldTop})`,
    ).toEqual([]);
    // Moved once for the fleet (by whichever runner came first), before any row was written.
    const moves = await queryFresh<Record<string, unknown>>(
      onReplica,
      'SELECT server, from_server, host, runs_id_before, runs_id_floor FROM baton_failovers',
    );
    expect(moves).toEqual([
      {
        server: 'server_id 2',
        from_server: 'server_id 1',
        host: expect.stringMatching(/^fo-[ab]$/),
        runs_id_before: replicatedTop,
        runs_id_floor: replicatedTop + 1_000_000_000,
      },
    ]);
    expect(newIds[0]).toBeGreaterThan(replicatedTop + 1_000_000_000);
  }, 60_000);

  it('is not what a restart of the same server is', async () => {
    const server = await startPrivateServer({ args: ['--server-id=7'] });
    servers.push(server);
    const config = writeSchedule(`
namespace: restart
jobs:
  tick:
    schedule: "*/2 * * * * *"
    command: ["true"]
    catchUp: {window: 1m, fires: all}
`);
    const port = await freePort();
    const runner = startRunner({
      config,
      databaseUrl: `${server.url}/baton_restart`,
      host: 'rs-a',
      args: ['--http', `127.0.0.1:${port}`],
    });
    runners.push(runner);
    await runner.ready();
    await runner.waitForLog('database server checked', (l) => l.serverIdentity === 'server_id 7');
    await server.kill();
    await server.start();
    await runner.waitForLog('lock session reopened');
    await sleep(500);
    expect(
      runner.lines.filter((l) => String(l.msg).startsWith('the database failed over')),
    ).toEqual([]);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toMatch(/^baton_database_failovers_total(\{[^}]*\})? 0$/m);
    expect(
      await queryFresh(
        `${server.url}/baton_restart`,
        "SELECT id FROM baton_runs WHERE reason_kind = 'in-doubt'",
      ),
    ).toEqual([]);
    // Nor are the run ids moved: the server kept every row it handed out an id for.
    expect(
      await queryFresh(`${server.url}/baton_restart`, 'SELECT * FROM baton_failovers'),
    ).toEqual([]);
  }, 30_000);
});
