/**
 * The floors a fire cannot beat on this machine, measured in the same run: one database round
 * trip (`SELECT 1` on an open connection), one commit (an autocommit INSERT into an InnoDB
 * table: with innodb_flush_log_at_trx_commit = 1 that includes the redo log flush), and one
 * process spawn (`true`, until the 'spawn' event and until it exited).
 */
import { spawn } from 'node:child_process';
import mysql from 'mysql2/promise';
import { countHarnessStatements } from './database.js';
import { percentiles, type Distribution } from './stats.js';

export interface Floors {
  /** SELECT 1 on an open connection. */
  rtt: Distribution;
  /** One autocommit INSERT into an InnoDB table. */
  commit: Distribution;
  /** spawn('true') until Node's 'spawn' event (the child has exec'd). */
  spawn: Distribution;
  /** spawn('true') until it exited. */
  spawnExit: Distribution;
}

/** Measures the floors on `databaseUrl` (creates and drops a small table there). */
export async function measureFloors(
  databaseUrl: string,
  { queries = 300, spawns = 60 } = {},
): Promise<Floors> {
  const conn = await mysql.createConnection({ uri: databaseUrl });
  const ms = (from: bigint) => Number(process.hrtime.bigint() - from) / 1e6;
  try {
    await conn.query(
      'CREATE TABLE bench_floor (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB',
    );
    const rtt: number[] = [];
    const commit: number[] = [];
    // Warm-up: the first statements pay for caches and plans.
    for (let i = 0; i < 20; i++) {
      await conn.query('SELECT 1');
      await conn.query('INSERT INTO bench_floor (v) VALUES (?)', [i]);
    }
    for (let i = 0; i < queries; i++) {
      let t = process.hrtime.bigint();
      await conn.query('SELECT 1');
      rtt.push(ms(t));
      t = process.hrtime.bigint();
      await conn.query('INSERT INTO bench_floor (v) VALUES (?)', [i]);
      commit.push(ms(t));
    }
    await conn.query('DROP TABLE bench_floor');
    countHarnessStatements(2 + 40 + 2 * queries);
    const spawned: number[] = [];
    const exited: number[] = [];
    for (let i = 0; i < spawns + 5; i++) {
      const t = process.hrtime.bigint();
      await new Promise<void>((resolve, reject) => {
        const child = spawn('true', [], { stdio: 'ignore' });
        child.once('error', reject);
        child.once('spawn', () => {
          if (i >= 5) spawned.push(ms(t));
        });
        child.once('exit', () => {
          if (i >= 5) exited.push(ms(t));
          resolve();
        });
      });
    }
    return {
      rtt: percentiles(rtt),
      commit: percentiles(commit),
      spawn: percentiles(spawned),
      spawnExit: percentiles(exited),
    };
  } finally {
    await conn.end().catch(() => {});
  }
}
