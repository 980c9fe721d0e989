/**
 * `baton_runners`, the runner registry: one row per (namespace, host id), written when a runner
 * starts, refreshed by its heartbeat, and marked `stopped_at` by a graceful stop. Every write is
 * here, and the daemon is the only writer; nothing deletes a row (a restarted runner overwrites
 * its host's). Read here — the daemon's host-clash check (`registryOwner`), the fire protocol's
 * `hostsOfLockSessions`, `baton status` (`listRunners`) — and in fire-reads.ts (`runnersNow`, the
 * registry judged alive or not by the database's clock, for `baton explain` and the dashboard).
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { sessionLockSql } from '../lock-names.js';
import type { Queryable } from './deadline.js';

/** What a runner loaded for one job: its definition's fingerprint, and since when (ISO). */
export interface LoadedJob {
  fp: string;
  /**
   * When this runner loaded this definition (database time); null for a job it does not run:
   * disabled, or placed on other runners (`ineligible`).
   */
  since: string | null;
  /** Why this runner may not run it (`runOn`: "needs tag sftp"); absent when it may. */
  ineligible?: string;
  /** The names of the job's `secretEnv` variables; absent when it has none. */
  secretEnv?: string[];
  /**
   * The timing version (store/timings.ts) this runner's definition of the job is; absent while
   * not recorded, and in rows of older runners. Below the version in force: it holds the job.
   */
  tv?: number;
  /** Its next fires as this runner computes them (enabled jobs; rows of older runners: none). */
  next?: UpcomingFires;
}

/**
 * A job's first few fires after an anchor, as one runner computed them (schedule/upcoming.ts):
 * runners that count from the same anchor must list the same instants.
 */
export interface UpcomingFires {
  /** The anchor, ISO: the start of the UTC hour the runner counted from. */
  after: string;
  /** The instants, ISO, in order. */
  at: string[];
}

/** One job as a registry row says its runner loaded it, decoded (see `loadedJobs`). */
export interface LoadedDefinition {
  /** The fingerprint of the definition (src/config/fingerprint.ts). */
  fingerprint: string;
  /**
   * Since when the runner has had this definition (database time): when it loaded it, but never
   * before the runner registered (`startedAt`), which is also the answer for rows that do not say.
   */
  since: Date;
  /** The names of the job's `secretEnv` variables; absent when it has none (or does not say). */
  secretEnv?: readonly string[];
  /** Why the runner may not run it (`runOn`: "needs tag sftp"); absent when it may. */
  ineligible?: string;
  /** The runner loaded it disabled (`since` null, not `ineligible`): it does not run it. */
  disabled?: true;
  /** The job's next fires as the runner computed them; absent when the row does not say. */
  next?: UpcomingFires;
  /** The timing version of its definition (LoadedJob `tv`); absent when the row does not say. */
  timingVersion?: number;
}

export interface RunnerRecord {
  namespace: string;
  host: string;
  pid: number;
  version: string;
  startedAt: Date;
  lastSeenAt: Date;
  stoppedAt: Date | null;
  /** How far the runner's clock is ahead of the database's, in ms; null before it measured. */
  clockOffsetMs: number | null;
  lockConnectionId: number | null;
  /** The database server of its lock session (migration 0013); null/absent: not said. */
  dbServer?: string | null;
  /** Why it holds its fires, detached from the fleet (migration 0016); null: it is not. */
  detached?: string | null;
  /** Its tags (migration 0019, config/placement.ts); absent or empty: none. */
  tags?: readonly string[];
  /** Job name → the definition the runner loaded (the `schedule` column, decoded). */
  jobs: ReadonlyMap<string, LoadedDefinition>;
}

export interface RunnerHeartbeat {
  namespace: string;
  host: string;
  pid: number;
  version: string;
  clockOffsetMs: number | null;
  lockConnectionId: number | null;
  /** `ServerFacts.identity` of the server the lock session is on. */
  dbServer: string | null;
  /** Why the runner holds its fires, detached from the fleet (daemon/fleet-watch.ts); or null. */
  detached: string | null;
  schedule: Record<string, LoadedJob>;
  /** Its tags (config/placement.ts); written at registration (they change only with a restart). */
  tags?: readonly string[];
}

/** Registers (or re-registers, after a restart) this runner; `started_at` is now. */
export async function registerRunner(db: Queryable, r: RunnerHeartbeat): Promise<void> {
  await db.query(
    `INSERT INTO baton_runners (namespace, host, pid, version, started_at, last_seen_at,
       stopped_at, clock_offset_ms, lock_connection_id, db_server, detached, schedule, tags)
     VALUES (?, ?, ?, ?, NOW(3), NOW(3), NULL, ?, ?, ?, ?, ?, ?)
     ON DUPLICATE KEY UPDATE pid = VALUES(pid), version = VALUES(version),
       started_at = VALUES(started_at), last_seen_at = VALUES(last_seen_at), stopped_at = NULL,
       clock_offset_ms = VALUES(clock_offset_ms), lock_connection_id = VALUES(lock_connection_id),
       db_server = VALUES(db_server), detached = VALUES(detached), schedule = VALUES(schedule),
       tags = VALUES(tags)`,
    [
      r.namespace,
      r.host,
      r.pid,
      r.version,
      r.clockOffsetMs,
      r.lockConnectionId,
      r.dbServer,
      r.detached,
      JSON.stringify(r.schedule),
      r.tags && r.tags.length > 0 ? JSON.stringify(r.tags) : null,
    ],
  );
}

/**
 * The heartbeat: refreshes what can change while a runner lives (offset, lock session, a reloaded
 * schedule). Conditional on the pid, so a runner never refreshes a row a newer process of the
 * same host id has taken over. Returns false when the row is not this runner's any more.
 */
export async function heartbeatRunner(
  db: Queryable,
  r: RunnerHeartbeat,
  { withSchedule = true }: { withSchedule?: boolean } = {},
): Promise<boolean> {
  // The schedule (some 200 KB for a thousand jobs, with their next fires) is sent only when it
  // may have changed: at a reload, and when the hour its next fires count from changes.
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_runners SET last_seen_at = NOW(3), clock_offset_ms = ?, lock_connection_id = ?,
       db_server = ?, detached = ? ${withSchedule ? ', schedule = ?' : ''}
     WHERE namespace = ? AND host = ? AND pid = ?`,
    [
      r.clockOffsetMs,
      r.lockConnectionId,
      r.dbServer,
      r.detached,
      ...(withSchedule ? [JSON.stringify(r.schedule)] : []),
      r.namespace,
      r.host,
      r.pid,
    ],
  );
  return res.affectedRows === 1;
}

/**
 * Who holds a host id's registry row now, for a runner whose heartbeat found it taken. Alive means
 * a recent heartbeat and a lock session that still lives: a runner restarted right after a
 * `kill -9` (systemd's Restart=) finds its predecessor's session gone and is not in a clash.
 */
export async function registryOwner(
  db: Queryable,
  namespace: string,
  host: string,
): Promise<{
  pid: number;
  alive: boolean;
  lockConnectionId: number | null;
  /** How long ago (by the database's clock) the row's runner registered. */
  registeredMsAgo: number;
} | null> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT pid, lock_connection_id,
            TIMESTAMPDIFF(MICROSECOND, started_at, NOW(3)) DIV 1000 AS registered_ms_ago,
            stopped_at IS NULL AND last_seen_at > NOW(3) - INTERVAL ? SECOND
              AND (lock_connection_id IS NULL
                   OR IS_USED_LOCK(${sessionLockSql('lock_connection_id')})
                      <=> lock_connection_id) AS alive
       FROM baton_runners WHERE namespace = ? AND host = ?`,
    [OWNER_ALIVE_SECONDS, namespace, host],
  );
  const row = rows[0];
  if (!row) return null;
  const lockConnectionId = row.lock_connection_id == null ? null : Number(row.lock_connection_id);
  return {
    pid: Number(row.pid),
    alive: Number(row.alive) === 1,
    lockConnectionId,
    registeredMsAgo: Number(row.registered_ms_ago),
  };
}

/**
 * The hosts of the live registered runners whose lock sessions are `connectionIds`, by id.
 * Live only: connection ids start again with every server start, so a stopped or long-silent
 * runner's row may carry the same id as a session of today.
 */
export async function hostsOfLockSessions(
  db: Queryable,
  namespace: string,
  connectionIds: readonly number[],
): Promise<Map<number, string>> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT host, lock_connection_id FROM baton_runners
      WHERE namespace = ? AND lock_connection_id IN (?) AND stopped_at IS NULL
        AND last_seen_at > NOW(3) - INTERVAL ? SECOND`,
    [namespace, connectionIds, OWNER_ALIVE_SECONDS],
  );
  return new Map(rows.map((r) => [Number(r.lock_connection_id), String(r.host)]));
}

/** A row refreshed this recently belongs to a live runner (three default heartbeats). */
export const OWNER_ALIVE_SECONDS = 15;

/** A graceful stop: the runner is not gone, it was stopped. */
export async function markRunnerStopped(
  db: Queryable,
  namespace: string,
  host: string,
  pid: number,
): Promise<void> {
  await db.query(
    `UPDATE baton_runners SET stopped_at = NOW(3), last_seen_at = NOW(3)
      WHERE namespace = ? AND host = ? AND pid = ?`,
    [namespace, host, pid],
  );
}

/** A `baton_runners` row as mysql2 reads it. */
export interface RunnerRow extends RowDataPacket {
  namespace: string;
  host: string;
  pid: number;
  version: string;
  started_at: Date;
  last_seen_at: Date;
  stopped_at: Date | null;
  clock_offset_ms: number | null;
  lock_connection_id: number | null;
  db_server?: string | null;
  detached?: string | null;
  tags?: string | null;
  schedule: string;
}

/** Every registered runner of the namespace, by host. */
export async function listRunners(db: Queryable, namespace: string): Promise<RunnerRecord[]> {
  const [rows] = await db.query<RunnerRow[]>(
    `SELECT namespace, host, pid, version, started_at, last_seen_at, stopped_at, clock_offset_ms,
            lock_connection_id, db_server, detached, tags, schedule
       FROM baton_runners WHERE namespace = ? ORDER BY host`,
    [namespace],
  );
  return rows.map(toRunnerRecord);
}

/** The runners of the namespace alive now (by the server's clock) other than `host`. */
export async function otherLiveRunners(
  db: Queryable,
  namespace: string,
  host: string,
): Promise<RunnerRecord[]> {
  const [rows] = await db.query<RunnerRow[]>(
    `SELECT namespace, host, pid, version, started_at, last_seen_at, stopped_at, clock_offset_ms,
            lock_connection_id, db_server, detached, tags, schedule
       FROM baton_runners
      WHERE namespace = ? AND host <> ? AND stopped_at IS NULL
        AND last_seen_at > NOW(3) - INTERVAL ? SECOND
      ORDER BY host`,
    [namespace, host, OWNER_ALIVE_SECONDS],
  );
  return rows.map(toRunnerRecord);
}

export function toRunnerRecord(r: RunnerRow): RunnerRecord {
  return {
    namespace: r.namespace,
    host: r.host,
    pid: Number(r.pid),
    version: r.version,
    startedAt: r.started_at,
    lastSeenAt: r.last_seen_at,
    stoppedAt: r.stopped_at,
    clockOffsetMs: r.clock_offset_ms == null ? null : Number(r.clock_offset_ms),
    lockConnectionId: r.lock_connection_id == null ? null : Number(r.lock_connection_id),
    dbServer: r.db_server ?? null,
    detached: r.detached ?? null,
    tags: tagsOf(r.tags),
    jobs: loadedJobs({ schedule: parseJson(r.schedule), startedAt: r.started_at }),
  };
}

/** The `tags` column: a JSON array of strings, or NULL; anything else reads as none. */
function tagsOf(column: string | null | undefined): string[] {
  if (column == null) return [];
  try {
    const value = JSON.parse(column) as unknown;
    return Array.isArray(value) ? value.filter((t): t is string => typeof t === 'string') : [];
  } catch {
    return [];
  }
}

function parseJson(text: string): Readonly<Record<string, unknown>> {
  try {
    const value = JSON.parse(text) as unknown;
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * The jobs a registry row says its runner loaded. The `schedule` column has two shapes: `{job:
 * fingerprint}` (runners that do not say since when) and `{job: {fp, since, next?, secretEnv?,
 * ineligible?, tv?}}` with `since` an ISO instant (or a Date), null for a job it does not run, `next`
 * its next fires (UpcomingFires), `secretEnv` the names of its secret variables and `ineligible`
 * why it may not run it (`runOn`), `tv` its definition's timing version. Entries of any other shape
 * are left out.
 */
export function loadedJobs(r: {
  schedule: Readonly<Record<string, unknown>>;
  startedAt: Date;
}): Map<string, LoadedDefinition> {
  const jobs = new Map<string, LoadedDefinition>();
  const start = r.startedAt.getTime();
  for (const [job, entry] of Object.entries(r.schedule)) {
    if (typeof entry === 'string') {
      jobs.set(job, { fingerprint: entry, since: r.startedAt });
      continue;
    }
    if (entry == null || typeof entry !== 'object') continue;
    const { fp, since, next, secretEnv, ineligible, tv } = entry as {
      fp?: unknown;
      since?: unknown;
      next?: unknown;
      secretEnv?: unknown;
      ineligible?: unknown;
      tv?: unknown;
    };
    if (typeof fp !== 'string') continue;
    const at =
      since instanceof Date ? since.getTime() : typeof since === 'string' ? Date.parse(since) : NaN;
    const upcoming = upcomingFires(next);
    jobs.set(job, {
      fingerprint: fp,
      since: Number.isFinite(at) && at > start ? new Date(at) : r.startedAt,
      ...(Array.isArray(secretEnv) && secretEnv.length > 0
        ? { secretEnv: secretEnv.filter((n): n is string => typeof n === 'string') }
        : {}),
      ...(typeof ineligible === 'string'
        ? { ineligible }
        : since === null
          ? { disabled: true }
          : {}),
      ...(upcoming && { next: upcoming }),
      ...(Number.isSafeInteger(tv) && (tv as number) > 0 ? { timingVersion: tv as number } : {}),
    });
  }
  return jobs;
}

/** A registered `next` (see UpcomingFires), or null when it is not of that shape. */
function upcomingFires(value: unknown): UpcomingFires | null {
  if (value == null || typeof value !== 'object') return null;
  const { after, at } = value as { after?: unknown; at?: unknown };
  if (typeof after !== 'string' || !Array.isArray(at)) return null;
  if (!at.every((x): x is string => typeof x === 'string')) return null;
  return { after, at };
}

/** The registry heartbeat is every 5 s; three missed ones make a runner gone. */
export const DEFAULT_GONE_AFTER_MS = 15_000;

/**
 * `alive` (heartbeat within `goneAfterMs`, not stopped), `stopped` (a graceful stop set
 * `stopped_at`), `gone` (no heartbeat for longer without a stop: crashed, killed or cut off).
 */
export type RunnerState = 'alive' | 'stopped' | 'gone';

export function runnerState(r: RunnerRecord, now: Date, goneAfterMs: number): RunnerState {
  if (r.stoppedAt) return 'stopped';
  return now.getTime() - r.lastSeenAt.getTime() <= goneAfterMs ? 'alive' : 'gone';
}

/** Another runner of the fleet, as fleet-watch.ts sees it. */
export interface FleetPeer {
  host: string;
  /** How long ago it heartbeated, by the server's clock (no host clock enters it). */
  agoMs: number;
  /** A digest of the schedule it registered: its jobs are read again only when this changes. */
  scheduleDigest: string;
}

/**
 * The other runners of the namespace this server knows as members of the fleet: not stopped
 * gracefully, seen within the last hour. For daemon/fleet-watch.ts.
 */
export async function fleetPeers(
  db: Queryable,
  namespace: string,
  host: string,
): Promise<FleetPeer[]> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT host, TIMESTAMPDIFF(MICROSECOND, last_seen_at, NOW(3)) DIV 1000 AS ago_ms,
            MD5(schedule) AS schedule_digest
       FROM baton_runners
      WHERE namespace = ? AND host <> ? AND stopped_at IS NULL
        AND last_seen_at > NOW(3) - INTERVAL 1 HOUR`,
    [namespace, host],
  );
  return rows.map((r) => ({
    host: String(r.host),
    agoMs: Number(r.ago_ms),
    scheduleDigest: String(r.schedule_digest),
  }));
}

/**
 * The names of the jobs each of `hosts` runs: the keys of its `schedule` column (in either of its
 * shapes: see loadedJobs) but those it registered disabled (`since` null), which it never
 * contends for. Read only when a runner's schedule digest changed (daemon/fleet-watch.ts): a few
 * dozen bytes a job, once per reload.
 */
export async function jobsOfRunners(
  db: Queryable,
  namespace: string,
  hosts: readonly string[],
): Promise<Map<string, string[]>> {
  const jobs = new Map<string, string[]>();
  if (hosts.length === 0) return jobs;
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT host, schedule FROM baton_runners WHERE namespace = ? AND host IN (?)`,
    [namespace, hosts],
  );
  for (const r of rows) {
    // Unreadable JSON reads as no jobs, as for loadedJobs: one bad row must not fail the look.
    const entries = Object.entries(
      typeof r.schedule === 'string' ? parseJson(r.schedule) : (r.schedule ?? {}),
    );
    const disabled = (entry: unknown) =>
      entry != null && typeof entry === 'object' && (entry as { since?: unknown }).since === null;
    jobs.set(
      String(r.host),
      entries.filter(([, entry]) => !disabled(entry)).map(([job]) => job),
    );
  }
  return jobs;
}
