/**
 * The naive design of the seed story, as one runner process of the `peers` scenario (started by
 * b-procs.ts, three of them, one with a skewed clock through libfaketime): cron by this host's
 * clock, and at every fire
 *
 *     SELECT GET_LOCK('<job>', 0)  → 0: another host runs it, skip
 *     run the job                  (~30 ms)
 *     SELECT RELEASE_LOCK('<job>') in finally
 *
 * — no fire key. The job's "effect" is a row in `naive_runs` naming the fire as this host's cron
 * computed it (`fire_at`, by its own clock) and the host, so the scenario can count the fires
 * that ran twice. It fires at the whole seconds `firstFireMs … + (fires − 1) s` of its own clock,
 * then prints `{ host, ran, skipped }` and exits.
 */
import mysql, { type RowDataPacket } from 'mysql2/promise';
import { goSignal, runWorker } from './b-procs.js';

export interface NaiveTask {
  url: string;
  host: string;
  lockName: string;
  /** The first fire, ms since the epoch on a whole second (read on this host's clock). */
  firstFireMs: number;
  fires: number;
  workMs: number;
}

export interface NaiveResult {
  host: string;
  ran: number;
  skipped: number;
  /** This host's clock − the database's, ms (the skew libfaketime gave it, seen from here). */
  clockOffsetMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(task: NaiveTask): Promise<NaiveResult> {
  // One connection: the lock belongs to it, as in the seed story's script.
  const conn = await mysql.createConnection({ uri: task.url, timezone: 'Z' });
  try {
    await conn.query("SET time_zone = '+00:00'");
    const [[row]] = await conn.query<RowDataPacket[]>(
      "SELECT DATE_FORMAT(NOW(3), '%Y-%m-%dT%H:%i:%s.%fZ') AS now",
    );
    const clockOffsetMs = Date.now() - Date.parse(String(row?.now));
    await goSignal();
    let ran = 0;
    let skipped = 0;
    for (let i = 0; i < task.fires; i++) {
      const fireAt = task.firstFireMs + i * 1000;
      // cron: sleep until the fire's instant by this host's clock.
      const wait = fireAt - Date.now();
      if (wait > 0) await sleep(wait);
      const [[lock]] = await conn.query<RowDataPacket[]>('SELECT GET_LOCK(?, 0) AS got', [
        task.lockName,
      ]);
      if (Number(lock?.got) !== 1) {
        skipped++;
        continue;
      }
      try {
        await conn.query(
          'INSERT INTO naive_runs (fire_at, host, started_at) VALUES (?, ?, NOW(3))',
          [new Date(fireAt), task.host],
        );
        await sleep(task.workMs);
        ran++;
      } finally {
        await conn.query('SELECT RELEASE_LOCK(?)', [task.lockName]);
      }
    }
    return { host: task.host, ran, skipped, clockOffsetMs };
  } finally {
    await conn.end();
  }
}

runWorker(main);
