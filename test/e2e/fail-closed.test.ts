/**
 * Fail closed (DESIGN.md "Fail closed", guarantees 1, 5 and 6): where baton cannot prove that it
 * coordinates, it refuses to start instead of running jobs — with an exit code that says whose
 * move it is, a message that says what is wrong, and no stack trace.
 *
 * - A Galera node (a real one: a private mariadbd bootstrapped as a one-node cluster with the
 *   galera-4 provider): GET_LOCK is per node, so `baton start` and `baton run` exit 78 (the
 *   deployment must change), naming Galera/wsrep.
 * - A `baton_runs` whose unique fire key was dropped (or recreated non-unique): one winner per
 *   fire is no longer enforced by the database, so both exit 69 naming `baton_runs_fire`.
 * - A schema newer than the code (a ledger row this code does not know): exit 69 for `start` and
 *   `run`, not only for `migrate`.
 * - Durations and policy keys in schedules.yaml: every problem in one run, with file:line and the
 *   key path, exit 78.
 * In each refused case no job ran and no history row was written.
 */
import { existsSync } from 'node:fs';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, writeSchedule, type CliResult } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort, startPrivateServer, type PrivateServer } from '../helpers/private-server.js';

const GALERA_PROVIDER = '/usr/lib/galera/libgalera_smm.so';

/** A marker file the job would create if it ever ran: no refused command may run it. */
function schedule(): { config: string; marker: string } {
  const config = writeSchedule(`
namespace: failclosed
jobs:
  x:
    schedule: "* * * * * *"
    command: ["sh", "-c", "touch ran"]
`);
  return { config, marker: config.replace(/schedules\.yaml$/, 'ran') };
}

function expectRefused(result: CliResult, code: number, message: RegExp): void {
  expect(result.code, result.stderr).toBe(code);
  expect(result.stderr).toMatch(message);
  expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
  expect(result.stderr).not.toMatch(/internal error/);
  expect(result.stdout).not.toContain('runner started');
  expect(result.stdout).not.toContain('fire won');
}

describe('a Galera node', () => {
  let server: PrivateServer | undefined;

  beforeAll(async () => {
    // Fail loudly rather than skip: this machine is expected to have galera-4.
    expect(existsSync(GALERA_PROVIDER), `${GALERA_PROVIDER} (apt-get install galera-4)`).toBe(true);
    const [gcomm, ist] = [await freePort(), await freePort()];
    server = await startPrivateServer({
      args: [
        '--wsrep-on=ON',
        `--wsrep-provider=${GALERA_PROVIDER}`,
        '--wsrep-cluster-address=gcomm://', // bootstrap a new cluster: this node alone
        '--wsrep-cluster-name=baton-test',
        '--wsrep-node-address=127.0.0.1',
        `--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:${gcomm};ist.recv_addr=127.0.0.1:${ist};gcache.size=8M`,
        '--wsrep-sst-method=rsync', // never used: a bootstrapped node receives no state transfer
        '--binlog-format=ROW',
        '--innodb-autoinc-lock-mode=2',
      ],
    });
  });

  afterAll(async () => {
    await server?.destroy();
  });

  function srv(): PrivateServer {
    if (!server) throw new Error('the Galera node did not start');
    return server;
  }

  it('is a real, synced one-node cluster', async () => {
    const conn = await mysql.createConnection({ uri: srv().url });
    try {
      const [vars] = await conn.query<mysql.RowDataPacket[]>(
        "SHOW GLOBAL VARIABLES WHERE Variable_name = 'wsrep_on'",
      );
      const [status] = await conn.query<mysql.RowDataPacket[]>(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_cluster_size', 'wsrep_local_state_comment')",
      );
      const facts = Object.fromEntries(
        [...vars, ...status].map((r) => [String(r.Variable_name), String(r.Value)]),
      );
      expect(facts).toEqual({
        wsrep_on: 'ON',
        wsrep_ready: 'ON',
        wsrep_cluster_size: '1',
        wsrep_local_state_comment: 'Synced',
      });
    } finally {
      await conn.end();
    }
  });

  it('`baton start` and `baton run` exit 78 naming Galera/wsrep, and run nothing', async () => {
    const { config, marker } = schedule();
    const url = `${srv().url}/baton_galera`;
    const galera = /Galera cluster node \(wsrep_on = ON\)/;

    const start = await baton(['start', '--config', config, '--database-url', url, '--host', 'g']);
    expectRefused(start, 78, galera);
    const run = await baton(['run', 'x', '--config', config, '--database-url', url, '--host', 'g']);
    expectRefused(run, 78, galera);

    expect(existsSync(marker), 'the job ran').toBe(false);
    const conn = await mysql.createConnection({ uri: srv().url });
    try {
      // Fail closed means writing nothing there: the check runs before any migration.
      const [tables] = await conn.query<mysql.RowDataPacket[]>(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'baton_galera'",
      );
      expect(tables).toEqual([]);
    } finally {
      await conn.end();
    }
  });
});

describe('a database baton cannot trust (shared server)', () => {
  const fleet = useFleet('failclosed', { perTest: true, migrated: false });

  async function migrated(): Promise<void> {
    const result = await baton(['migrate', '--database-url', fleet.db.url]);
    expect(result.code, result.stderr).toBe(0);
  }

  async function startAndRun(): Promise<{ start: CliResult; run: CliResult; marker: string }> {
    const { config, marker } = schedule();
    const common = ['--config', config, '--database-url', fleet.db.url, '--host', 'h'];
    const start = await baton(['start', ...common]);
    const run = await baton(['run', 'x', ...common]);
    return { start, run, marker };
  }

  async function expectNoHistory(marker: string): Promise<void> {
    expect(existsSync(marker), 'the job ran').toBe(false);
    expect(await fleet.db.query('SELECT id FROM baton_runs')).toEqual([]);
  }

  it('without its unique fire key: start and run exit 69 naming baton_runs_fire', async () => {
    await migrated();
    await fleet.db.query('ALTER TABLE baton_runs DROP INDEX baton_runs_fire');
    const { start, run, marker } = await startAndRun();
    const message = /baton_runs has lost its unique fire key baton_runs_fire/;
    expectRefused(start, 69, message);
    expectRefused(run, 69, message);
    await expectNoHistory(marker);
  });

  it('with the fire key recreated as a plain (non-unique) index: refused the same way', async () => {
    await migrated();
    await fleet.db.query(
      `ALTER TABLE baton_runs DROP INDEX baton_runs_fire,
         ADD INDEX baton_runs_fire (namespace, job, scheduled_at, winner)`,
    );
    const { start, run, marker } = await startAndRun();
    expectRefused(start, 69, /baton_runs_fire/);
    expectRefused(run, 69, /baton_runs_fire/);
    await expectNoHistory(marker);
  });

  it('with a schema newer than the code: start and run exit 69 naming the migration', async () => {
    await migrated();
    await fleet.db.query(
      "INSERT INTO baton_migrations (version, name, checksum) VALUES (9999, '9999_from_the_future', REPEAT('0', 64))",
    );
    const { start, run, marker } = await startAndRun();
    const message = /the database has migration 9999_from_the_future, which this version of baton/;
    expectRefused(start, 69, message);
    expectRefused(run, 69, message);
    await expectNoHistory(marker);
    // Refused, not "repaired": the ledger is as it was.
    const ledger = await fleet.db.query<{ version: number }>(
      'SELECT version FROM baton_migrations WHERE version = 9999',
    );
    expect(ledger).toHaveLength(1);
  });
});

describe('durations and policy keys', () => {
  it('every bad value is reported in one run with file:line and its key path, exit 78', async () => {
    const file = writeSchedule(
      [
        'defaults:', //                         1
        '  catchUp: 10', //                     2
        'jobs:', //                             3
        '  x:', //                              4
        '    schedule: "* * * * *"', //         5
        '    command: ["true"]', //             6
        '    timeout: 90', //                   7
        '    retryDelay: "soon"', //            8
        '    overlap: sometimes', //            9
        '    retries: -1', //                   10
        '',
      ].join('\n'),
    );
    const expected: [number, RegExp][] = [
      [2, /defaults\.catchUp: expected a duration, got 10: write a number with a unit/],
      [7, /jobs\.x\.timeout: expected a duration, got 90: write a number with a unit/],
      [8, /jobs\.x\.retryDelay: expected a duration, got "soon"/],
      [9, /jobs\.x\.overlap: .*"skip"\|"queue"\|"allow"/],
      [10, /jobs\.x\.retries: retries must be 0 or more/],
    ];
    for (const command of ['validate', 'start']) {
      const result = await baton([
        command,
        '--config',
        file,
        '--database-url',
        'mysql://nobody@127.0.0.1:1/never',
      ]);
      expect(result.code, `${command}: ${result.stderr}`).toBe(78);
      expect(result.stderr).toContain(`invalid configuration (${expected.length} problems)`);
      const lines = result.stderr.split('\n');
      for (const [line, message] of expected) {
        const found = lines.filter((l) => l.includes(`${file}:${line}:`));
        expect(found, `${command}: line ${line}`).toHaveLength(1);
        expect(found[0]).toMatch(message);
      }
      expect(result.stderr).not.toMatch(/\n\s+at /);
      expect(result.stdout).toBe('');
    }
  });
});
