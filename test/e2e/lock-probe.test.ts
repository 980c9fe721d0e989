/**
 * Where baton may run (issue 34): the capability probe at every connect
 * (src/coordination/lock-probe.ts) refuses a server whose named locks exclude no one and says
 * what is degraded where they exclude but cannot name their holder. The engines are stand-ins —
 * none of TiDB, ProxySQL, Vitess, OceanBase or MySQL 8 could be installed here:
 * test/helpers/stand-in-server.ts (mysql2 serving the protocol, answering the start-up check as
 * each engine documents) and test/helpers/proxysql-stand-in.ts (a proxy in front of the real
 * MariaDB that answers CONNECTION_ID() itself, for runners that run). The real MariaDB passes
 * the probe in every other test of the suite; here it must too, with no warning.
 */
import { existsSync } from 'node:fs';
import mysql from 'mysql2/promise';
import { afterEach, describe, expect, it } from 'vitest';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { jobsOutlivingLocks, probeLocks } from '../../src/coordination/lock-probe.js';
import { UnsupportedServerError } from '../../src/store/server-check.js';
import { migrateDatabase } from '../../src/store/migrate.js';
import { findOrphanRuns } from '../../src/store/run-verdicts.js';
import { sessionLockName } from '../../src/lock-names.js';
import { openConnection } from '../../src/store/connect.js';
import { baton, writeSchedule, type CliResult } from '../helpers/cli.js';
import { createTestDatabase, sharedServerAddress } from '../helpers/db.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { startProxySqlStandIn } from '../helpers/proxysql-stand-in.js';
import { waitFor } from '../helpers/wait.js';
import {
  ENGINES,
  startStandIn,
  type Engine,
  type StandInServer,
} from '../helpers/stand-in-server.js';

let server: StandInServer | null = null;
afterEach(async () => {
  await server?.close();
  server = null;
});

async function standIn(engine: Engine): Promise<StandInServer> {
  server = await startStandIn(engine);
  return server;
}

/** The probe in this process, with a connection of its own as session A. */
async function probe(url: string) {
  const target = parseDatabaseUrl(url);
  const a = await openConnection(target);
  try {
    return await probeLocks(a, target);
  } finally {
    a.destroy();
  }
}

function expectRefused(result: CliResult, message: RegExp): void {
  expect(result.code, result.stderr).toBe(78);
  expect(result.stderr).toMatch(message);
  expect(result.stderr).toMatch(/Where baton may run/);
  expect(result.stderr).not.toMatch(/\n\s+at |internal error/);
  expect(result.stdout).not.toContain('runner started');
  expect(result.stdout).not.toContain('fire won');
}

describe('an engine whose named locks exclude no one is refused, exit 78', () => {
  const cases: [string, Engine, RegExp][] = [
    [
      'TiDB < 6.1, no-op lock functions (GET_LOCK always 1)',
      ENGINES.tidbNoop,
      /gave one named lock to two sessions at once/,
    ],
    [
      'TiDB < 6.1 without tidb_enable_noop_functions (GET_LOCK an error)',
      ENGINES.tidbNoopOff,
      /refused GET_LOCK \(function GET_LOCK has only noop implementation/,
    ],
    ['OceanBase < 4.2 (no GET_LOCK)', ENGINES.oceanbase, /refused GET_LOCK \(FUNCTION GET_LOCK/],
    ['Vitess (lock functions only FROM dual)', ENGINES.vitess, /refused GET_LOCK \(get_lock is/],
  ];

  for (const [name, engine, message] of cases) {
    it(`${name}: \`baton start\` and \`baton run\` refuse, run nothing, write nothing`, async () => {
      const srv = await standIn(engine);
      const config = writeSchedule(`
namespace: probe
jobs:
  x:
    schedule: "* * * * * *"
    command: ["sh", "-c", "touch ran"]
`);
      const common = ['--config', config, '--database-url', `${srv.url}/baton`, '--host', 'p'];
      expectRefused(await baton(['start', ...common]), message);
      expectRefused(await baton(['run', 'x', ...common]), message);
      expect(existsSync(config.replace(/schedules\.yaml$/, 'ran')), 'the job ran').toBe(false);
      // Refused before the migrations: nothing was created there.
      expect(srv.statements.filter((s) => /^\s*(CREATE|INSERT|ALTER)/i.test(s))).toEqual([]);
    });
  }

  it('library mode: start() rejects with the same refusal', async () => {
    const srv = await standIn(ENGINES.tidbNoop);
    const { createScheduler } = await import('../../src/index.js');
    const scheduler = createScheduler({
      databaseUrl: `${srv.url}/baton`,
      host: 'lib',
      namespace: 'probe',
      log: (await import('../../src/log.js')).createLogger({ level: 'silent' }),
      keepAlive: false,
    });
    scheduler.job('x', { schedule: '* * * * * *' }, () => {});
    const refused = await scheduler.start().then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(UnsupportedServerError);
    expect((refused as UnsupportedServerError).exitCode).toBe(78);
    expect(String(refused)).toMatch(/gave one named lock to two sessions at once/);
    await scheduler.stop();
  });
});

/** The probe's warning of a slow refusal, which a busy machine can cause on any engine. */
const SLOW = /took \d+ ms to refuse a held lock/;

describe('an engine whose locks exclude but cannot name their holder: warned, what is degraded', () => {
  it('TiDB 6.1+: IS_USED_LOCK answers 1, a refusal waits 1 s, a lock expires after max-txn-ttl', async () => {
    const srv = await standIn(ENGINES.tidb);
    const locks = await probe(`${srv.url}/baton`);
    expect(locks.holderNamed).toBe(false);
    expect(locks.lockTtlMs).toBe(60 * 60 * 1000);
    expect(locks.refusalMs).toBeGreaterThanOrEqual(ENGINES.tidb.refusalDelayMs);
    expect(locks.warnings).toEqual([
      expect.stringMatching(
        /IS_USED_LOCK from another session answers 1, not the holder's.*reaper/,
      ),
      expect.stringMatching(/GET_LOCK\(name, 0\) took \d+ ms to refuse a held lock/),
    ]);
    // The jobs the runner names at start: no timeout, or one the lock would not outlast.
    const minutes = (n: number) => n * 60 * 1000;
    const jobs = [
      { name: 'no-timeout', timeoutMs: null, retries: 0, retryDelayMs: 0 },
      { name: 'an-hour', timeoutMs: minutes(60), retries: 0, retryDelayMs: 0 },
      { name: 'ten-minutes', timeoutMs: minutes(10), retries: 0, retryDelayMs: 0 },
      // Retries keep the lock: 3 × 19 min + 2 × 2 min = 61 min under one lock.
      { name: 'retried', timeoutMs: minutes(19), retries: 2, retryDelayMs: minutes(2) },
    ];
    expect(jobsOutlivingLocks(jobs, locks.lockTtlMs!)).toEqual([
      'no-timeout',
      'an-hour',
      'retried',
    ]);
    // The probe's lock was given back: nothing of it stays on the server.
    expect(srv.statements.at(-1)).toMatch(/^SELECT RELEASE_LOCK\('baton-probe:/);
  });

  it("MySQL behind ProxySQL: CONNECTION_ID() is the proxy's, IS_USED_LOCK the backend's", async () => {
    const srv = await standIn(ENGINES.proxysql);
    const locks = await probe(`${srv.url}/baton`);
    expect(locks).toMatchObject({ holderNamed: false, lockTtlMs: null });
    // A slow refusal's warning is left aside: on a busy machine any refusal may take long.
    expect(locks.warnings.filter((w) => !SLOW.test(w))).toEqual([
      expect.stringMatching(/not the holder's CONNECTION_ID\(\) \d+ \(.*ProxySQL/),
    ]);
  });

  it('MySQL (stand-in) and the real MariaDB pass with no warning', async () => {
    const srv = await standIn(ENGINES.mysql);
    const mysql8 = await probe(`${srv.url}/baton`);
    expect(mysql8.holderNamed).toBe(true);
    expect(mysql8.warnings.filter((w) => !SLOW.test(w))).toEqual([]);
    const db = await createTestDatabase('lock_probe');
    try {
      const real = await probe(db.url);
      expect(real).toMatchObject({ holderNamed: true, lockTtlMs: null });
      expect(real.engine).toMatch(/MariaDB/);
      expect(real.warnings.filter((w) => !SLOW.test(w))).toEqual([]);
    } finally {
      await db.drop();
    }
  });
});

describe('the reaper where IS_USED_LOCK cannot name the holder (real MariaDB)', () => {
  it('falls back to the registry heartbeat: a live run is not reaped, a silent or freed one is', async () => {
    // What a runner behind ProxySQL leaves: its session lock is named after the id the proxy
    // answered, and held by a backend connection with another id.
    const db = await createTestDatabase('reaper_fallback');
    const holder = await mysql.createConnection({ uri: db.url });
    try {
      await migrateDatabase(parseDatabaseUrl(db.url));
      const proxyId = 900_000_000 + Math.floor(Math.random() * 1_000_000);
      const [[took]] = await holder.query<mysql.RowDataPacket[]>('SELECT GET_LOCK(?, 0) AS got', [
        sessionLockName(proxyId),
      ]);
      expect(took?.got).toBe(1);
      await db.conn.query(
        `INSERT INTO baton_runs (namespace, job, scheduled_at, winner, triggered_by, status, host,
           pid, lock_connection_id, started_at, attempts)
         VALUES ('probe', 'j', NOW(3), 1, 'schedule', 'running', 'h1', 1, ?, NOW(3), 1)`,
        [proxyId],
      );
      await db.conn.query(
        `INSERT INTO baton_runners (namespace, host, pid, version, started_at, last_seen_at,
           lock_connection_id, schedule)
         VALUES ('probe', 'h1', 1, 'x', NOW(3), NOW(3), ?, '{}')`,
        [proxyId],
      );
      const orphans = () => findOrphanRuns(db.conn, 'probe', new Date(0));
      expect(await orphans(), 'a live run taken for an orphan').toEqual([]);
      // Its runner stops heartbeating: gone.
      await db.conn.query(
        `UPDATE baton_runners SET last_seen_at = NOW(3) - INTERVAL 1 MINUTE WHERE host = 'h1'`,
      );
      expect((await orphans()).map((o) => o.host)).toEqual(['h1']);
      // Heartbeating again, but its session lock is free: gone, whatever the registry says.
      await db.conn.query(`UPDATE baton_runners SET last_seen_at = NOW(3) WHERE host = 'h1'`);
      expect(await orphans()).toEqual([]);
      await holder.query('SELECT RELEASE_LOCK(?)', [sessionLockName(proxyId)]);
      expect((await orphans()).map((o) => o.host)).toEqual(['h1']);
    } finally {
      await holder.end();
      await db.drop();
    }
  });
});

describe('runners behind a ProxySQL stand-in (CONNECTION_ID() answered by the proxy)', () => {
  const fleet = useFleet('probe_proxysql');

  it('warn of what is degraded, and run every fire once: no live run is marked lost', async () => {
    const proxy = await startProxySqlStandIn(sharedServerAddress());
    try {
      // Each run lasts across several reaper passes (every 300 ms): before the registry
      // fallback, the first pass took each live run for an orphan and marked it lost.
      const config = writeSchedule(`
namespace: proxied
jobs:
  slow:
    schedule: "*/3 * * * * *"
    command: ["sleep", "1.5"]
`);
      const runners = await fleet.start(['p1', 'p2'], {
        config,
        databaseUrl: proxy.url(fleet.db.name),
        args: ['--reaper-interval', '300ms'],
      });
      for (const r of runners) {
        const warned = await r.waitForLog('database server: coordination degraded');
        expect(String(warned.warning)).toMatch(
          /not the holder's CONNECTION_ID\(\) 2\d{9} .*ProxySQL/,
        );
      }
      const finished = async () =>
        fleet.db.query<{ status: string; n: number }>(
          `SELECT status, COUNT(*) AS n FROM baton_runs WHERE namespace = 'proxied' AND winner = 1 AND status <> 'running'
            GROUP BY status`,
        );
      await waitFor(
        'three finished runs',
        async () => (await finished()).reduce((sum, r) => sum + Number(r.n), 0) >= 3 || undefined,
        { timeoutMs: 30_000 },
      );
      expect((await finished()).filter((r) => r.status !== 'done')).toEqual([]);
      const winners = await fleet.db.query<{ n: number }>(
        `SELECT COUNT(*) AS n FROM baton_runs WHERE namespace = 'proxied' AND winner = 1
          GROUP BY scheduled_at HAVING n > 1`,
      );
      expect(winners).toEqual([]);
      await Promise.all(runners.map((r) => r.stop('SIGTERM')));
      expectQuiet(runners);
    } finally {
      await proxy.close();
    }
  });

  it('on TiDB, names at start the jobs whose timeout could outlive a lock (max-txn-ttl)', async () => {
    // The engine's name is what the rule hangs on: the proxy answers VERSION() as TiDB does.
    const proxy = await startProxySqlStandIn(sharedServerAddress(), {
      version: '8.0.11-TiDB-v7.5.0',
    });
    try {
      const config = writeSchedule(`
namespace: tidb
jobs:
  unbounded:
    schedule: "0 3 * * *"
    command: ["true"]
  hours:
    schedule: "0 4 * * *"
    command: ["true"]
    timeout: 2h
  bounded:
    schedule: "0 5 * * *"
    command: ["true"]
    timeout: 50m
`);
      const [runner] = await fleet.start(['t1'], { config, databaseUrl: proxy.url(fleet.db.name) });
      const line = await runner!.waitForLog(
        'database server releases locks held longer than lockTtlMs: a run of these jobs (no ' +
          'timeout, or attempts at least as long) may overlap the next; give them a shorter timeout',
      );
      expect(line).toMatchObject({ jobs: ['unbounded', 'hours'], lockTtlMs: 3_600_000 });
      await runner!.stop('SIGTERM');
    } finally {
      await proxy.close();
    }
  });
});
