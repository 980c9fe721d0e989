/**
 * Whether the server a runner talks to acknowledges its commits on a replica (semi-synchronous
 * replication), so that a failover to that replica loses none of them: the link samples it with
 * every heartbeat tick and, at a failover, asks `vouchedSince` for the old server.
 *
 * A sample is good when the server has semi-sync on as a primary
 * (`rpl_semi_sync_master_enabled`), waits for the acknowledgement before the commit
 * (`rpl_semi_sync_master_wait_point = AFTER_SYNC`: with AFTER_COMMIT, other sessions can read a
 * row no replica has yet), and is acknowledged right now (status `Rpl_semi_sync_master_status`
 * ON: a primary whose replicas did not answer within `rpl_semi_sync_master_timeout` turns it OFF
 * and goes on asynchronously). Good samples one after another whose fallback counters
 * (`Rpl_semi_sync_master_no_times`: times it fell back; `Rpl_semi_sync_master_no_tx`: commits
 * not acknowledged) did not move make a *vouched series*: every commit between its first sample
 * and its last was acknowledged by a replica before it returned to baton. A bad sample, a moved
 * counter (a fallback and a recovery between two samples) or a restart (counters back to 0) ends
 * the series; the next good sample starts a new one. A sample that fails (the server is going)
 * is no sample: the series stands as it was, and ages.
 *
 * At a failover the old server's window counts as settled from the series' first sample, if the
 * series lasted to a sample at most `maxAgeMs` before the loss was found: the link's heartbeat
 * window (interval + deadline) plus two more intervals (6 s by default), as the heartbeat finds a
 * loss within one window of its last answer and the samples keep the heartbeat's pace. What this cannot
 * know: a fallback between the last sample and the crash (commits in that gap may be lost), and
 * whether the replica promoted is the one that acknowledged (with several replicas the failover
 * tool must promote the most advanced one, as orchestrator and MHA do). docs/runbook.md says so.
 */
import type { RowDataPacket } from 'mysql2/promise';
import { delay } from '../delay.js';
import type { KeepAlive } from '../keep-alive.js';

import type { Queryable } from '../store/deadline.js';

export interface SemiSyncSample {
  /** When taken (this host's clock). */
  at: Date;
  enabled: boolean;
  afterSync: boolean;
  /** Acknowledged right now (not fallen back to asynchronous). */
  on: boolean;
  noTimes: number;
  noTx: number;
}

/** Reads the server's semi-sync state (MariaDB's built-in names, and MySQL's source/master ones). */
export async function sampleSemiSync(db: Queryable, at = new Date()): Promise<SemiSyncSample> {
  const [vars] = await db.query<RowDataPacket[]>(
    `SHOW GLOBAL VARIABLES WHERE Variable_name IN
       ('rpl_semi_sync_master_enabled', 'rpl_semi_sync_master_wait_point',
        'rpl_semi_sync_source_enabled', 'rpl_semi_sync_source_wait_point')`,
  );
  // Not enabled (most servers): the status adds nothing a sample could use, so an idle runner
  // spends one statement a sample on it, not two.
  const enabledNow = vars.some(
    (r) =>
      /_enabled$/i.test(String(r.Variable_name)) &&
      ['ON', '1'].includes(String(r.Value ?? '').toUpperCase()),
  );
  const [rows] = enabledNow
    ? await db.query<RowDataPacket[]>(
        `SHOW GLOBAL STATUS WHERE Variable_name IN
           ('Rpl_semi_sync_master_status', 'Rpl_semi_sync_master_no_times',
            'Rpl_semi_sync_master_no_tx', 'Rpl_semi_sync_source_status',
            'Rpl_semi_sync_source_no_times', 'Rpl_semi_sync_source_no_tx')`,
      )
    : [[] as RowDataPacket[]];
  const all = new Map(
    [...rows, ...vars].map((r) => [
      String(r.Variable_name).toLowerCase().replace('_source_', '_master_'),
      String(r.Value ?? '').toUpperCase(),
    ]),
  );
  const get = (name: string) => all.get(`rpl_semi_sync_master_${name}`) ?? '';
  return {
    at,
    enabled: ['ON', '1'].includes(get('enabled')),
    afterSync: get('wait_point') === 'AFTER_SYNC',
    on: get('status') === 'ON',
    noTimes: Number(get('no_times') || 0),
    noTx: Number(get('no_tx') || 0),
  };
}

const good = (s: SemiSyncSample) => s.enabled && s.afterSync && s.on;

/** How much slower a server without semi-sync acknowledged is sampled (see `watchSemiSync`). */
const IDLE_FACTOR = 10;

/** The series of one server (see the header), fed with every sample in turn. */
export class SemiSyncSeries {
  private server: string | null = null;
  private since: Date | null = null;
  private last: SemiSyncSample | null = null;

  /** A sample of `server`. */
  note(server: string, sample: SemiSyncSample): void {
    const prev = this.server === server ? this.last : null;
    this.server = server;
    this.last = sample;
    if (!good(sample)) {
      this.since = null;
      return;
    }
    const unbroken =
      prev != null &&
      this.since != null &&
      good(prev) &&
      prev.noTimes === sample.noTimes &&
      prev.noTx === sample.noTx;
    if (!unbroken) this.since = sample.at;
  }

  /**
   * Since when every commit on `server` up to `lostAt` was acknowledged by a replica (this host's
   * clock); null when it cannot be vouched for.
   */
  vouchedSince(server: string, lostAt: Date, maxAgeMs: number): Date | null {
    if (this.server !== server || !this.last || !this.since) return null;
    if (lostAt.getTime() - this.last.at.getTime() > maxAgeMs) return null;
    return this.since;
  }

  /** The last sample of `server`, for the failover's log line. */
  lastOf(server: string): SemiSyncSample | null {
    return this.server === server ? this.last : null;
  }
}

/**
 * Samples `server` through `db` now (awaited: the series covers every commit of the session
 * from its start) and then every `everyMs` while `current()` says the session is the link's —
 * every IDLE_FACTOR × `everyMs` while the server is not semi-sync acknowledged (most servers:
 * there is no series to keep, and the next good sample starts one whenever it comes).
 */
export async function watchSemiSync(
  db: Queryable,
  server: string,
  series: SemiSyncSeries,
  everyMs: number,
  current: () => boolean,
  signal: AbortSignal,
  keepAlive?: KeepAlive,
): Promise<void> {
  let acknowledged = false;
  const once = () =>
    sampleSemiSync(db).then(
      (s) => {
        acknowledged = good(s);
        if (current()) series.note(server, s);
      },
      () => {},
    );
  await once();
  void (async () => {
    while (!signal.aborted && current()) {
      await delay(acknowledged ? everyMs : IDLE_FACTOR * everyMs, signal, keepAlive);
      if (!signal.aborted && current()) await once();
    }
  })();
}
