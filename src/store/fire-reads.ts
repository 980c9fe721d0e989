/**
 * Read-only questions about fires and about the fleet around them. Nothing here writes.
 *
 * Two kinds of askers:
 * - the fire protocol and the daemon's recovery, while they decide (coordination/fire-protocol.ts,
 *   fire-batches.ts, daemon/runner.ts): who holds a job's lock, which run that is, who won a
 *   fire, which fires have rows at all. These are on the hot path of every contended fire;
 * - `baton explain`, `baton show`, `baton pause` and the pause notes of `list` and `history`:
 *   the latest fire of a job, the hosts around it, the registry judged now.
 *
 * "Alive" is judged on the database's clock, never this host's: a runner is alive while its
 * registry heartbeat is recent (within the caller's `goneAfterMs` of `NOW(3)`: `--gone-after`,
 * shared with `baton status`) and, when it names a lock session, while that session still holds
 * its session lock — a runner killed with `kill -9` loses the lock at once, long before its
 * heartbeat goes stale.
 */
import type { RowDataPacket } from 'mysql2/promise';
import { sessionLockSql } from '../lock-names.js';
import type { Queryable } from './deadline.js';
import { toRunnerRecord, type RunnerRecord, type RunnerRow } from './runners.js';
import { COLUMNS, toRun, type Attempt, type Run, type RunRow } from './runs.js';
import { chunks } from '../chunks.js';

/** The database's clock. */
export async function databaseNow(db: Queryable): Promise<Date> {
  const [[row]] = await db.query<RowDataPacket[]>('SELECT NOW(3) AS now');
  return row!.now as Date;
}

/**
 * The latest fire of `job` that its schedule produced (rows triggered by `schedule` or `catchup`;
 * a manual run is not a fire of the schedule), or null when the history has none. It walks the
 * fire key `(namespace, job, scheduled_at, rerun, winner)` backwards and stops at the first such row —
 * usually the first it reads. The key is forced (it exists since migration 0001; 0012 put `rerun`
 * before `winner`, and the prefix walked here is unchanged): left to itself
 * MariaDB may walk `baton_runs_scheduled` backwards through every other job's newer rows, or
 * read the job's rows forwards and sort them. (Not MAX(): with `triggered_by` outside every key,
 * MAX reads the job's whole history.)
 */
export const LATEST_FIRE_SQL = `SELECT scheduled_at FROM baton_runs FORCE INDEX (baton_runs_fire)
  WHERE namespace = ? AND job = ? AND triggered_by IN ('schedule', 'catchup')
  ORDER BY scheduled_at DESC LIMIT 1`;

export async function latestFire(
  db: Queryable,
  namespace: string,
  job: string,
): Promise<Date | null> {
  const [[row]] = await db.query<RowDataPacket[]>(LATEST_FIRE_SQL, [namespace, job]);
  return (row?.scheduled_at as Date | undefined) ?? null;
}

/** How many of a job's rows before a fire `hostsBefore` looks at. */
export const HOSTS_BEFORE_ROWS = 1_000;

/**
 * The hosts among the job's last HOSTS_BEFORE_ROWS rows before `fire` (its recent attempts, of
 * every kind): the runners that took part in the job shortly before. Bounded, and read backwards
 * along the (forced, see LATEST_FIRE_SQL) fire key from the fire, so a long history costs no more.
 */
export const HOSTS_BEFORE_SQL = `SELECT host FROM baton_runs FORCE INDEX (baton_runs_fire)
  WHERE namespace = ? AND job = ? AND scheduled_at < ?
  ORDER BY scheduled_at DESC LIMIT ${HOSTS_BEFORE_ROWS}`;

export async function hostsBefore(
  db: Queryable,
  namespace: string,
  job: string,
  fire: Date,
): Promise<Set<string>> {
  const [rows] = await db.query<RowDataPacket[]>(HOSTS_BEFORE_SQL, [namespace, job, fire]);
  return new Set(rows.map((r) => r.host as string));
}

/** Whether the history has any row at all for `job` (any trigger). */
export async function jobHasRows(db: Queryable, namespace: string, job: string): Promise<boolean> {
  const [rows] = await db.query<RowDataPacket[]>(
    'SELECT 1 FROM baton_runs WHERE namespace = ? AND job = ? LIMIT 1',
    [namespace, job],
  );
  return rows.length > 0;
}

/** A registry row, judged now (database time). */
export interface RunnerNow extends RunnerRecord {
  /** The heartbeat is recent, the runner was not stopped, and its lock session (if any) lives. */
  alive: boolean;
  /** Whether the lock session it names still holds its session lock; null when it names none. */
  lockSessionHeld: boolean | null;
  /** How long ago, by the database's clock, its last heartbeat was. */
  lastSeenAgoMs: number;
}

interface RegistryRow extends RunnerRow {
  now: Date;
  session_held: number | null;
}

/**
 * The registry of the namespace with each runner judged alive or not at `NOW(3)` — gone after
 * `goneAfterMs` without a heartbeat; also returns that instant. The caller treats a missing
 * registry table (a database from before migration 0003) as no runners.
 */
export async function runnersNow(
  db: Queryable,
  namespace: string,
  goneAfterMs: number,
): Promise<{ now: Date; runners: RunnerNow[] }> {
  const [rows] = await db.query<RegistryRow[]>(
    `SELECT namespace, host, pid, version, started_at, last_seen_at, stopped_at, clock_offset_ms,
            lock_connection_id, db_server, tags, schedule, NOW(3) AS now,
            IF(lock_connection_id IS NULL, NULL,
               IS_USED_LOCK(${sessionLockSql('lock_connection_id')}) <=> lock_connection_id)
              AS session_held
       FROM baton_runners WHERE namespace = ? ORDER BY host`,
    [namespace],
  );
  const now = rows[0]?.now ?? (await databaseNow(db));
  return {
    now,
    runners: rows.map((r) => {
      const lastSeenAgoMs = now.getTime() - r.last_seen_at.getTime();
      const lockSessionHeld = r.session_held == null ? null : Number(r.session_held) === 1;
      return {
        ...toRunnerRecord(r),
        alive: r.stopped_at == null && lastSeenAgoMs <= goneAfterMs && lockSessionHeld !== false,
        lockSessionHeld,
        lastSeenAgoMs,
      };
    }),
  };
}

/**
 * Runners that were there for a fire: registered before it (`started_at <= scheduledAt`) and not
 * stopped before it. The registry keeps one row per host, so a host restarted since the fire
 * counts from its restart only: see `restartedSince` for those.
 */
export function runnersAtFire(runners: RunnerNow[], scheduledAt: Date): RunnerNow[] {
  const at = scheduledAt.getTime();
  return runners.filter(
    (r) => r.startedAt.getTime() <= at && (r.stoppedAt == null || r.stoppedAt.getTime() > at),
  );
}

/**
 * Runners registered after the fire (`started_at > scheduledAt`: restarted since, or new) whose
 * host took part in the job shortly before it (`hostsBefore`): most likely down, or still starting,
 * at the fire.
 */
export function restartedSince(
  runners: RunnerNow[],
  scheduledAt: Date,
  hostsBeforeFire: ReadonlySet<string>,
): RunnerNow[] {
  return runners.filter(
    (r) => r.startedAt.getTime() > scheduledAt.getTime() && hostsBeforeFire.has(r.host),
  );
}

/** The connection ids holding the named locks (null for a free one), in one statement. */
export async function lockHolders(
  db: Queryable,
  names: readonly string[],
): Promise<(number | null)[]> {
  const columns = names.map((_, i) => `IS_USED_LOCK(?) AS h${i}`);
  const [[row]] = await db.query<RowDataPacket[]>(`SELECT ${columns.join(', ')}`, [...names]);
  return names.map((_, i) => {
    const holder: unknown = row?.[`h${i}`];
    return holder == null ? null : Number(holder);
  });
}

/**
 * The instants in [from, to] at which the job has any row (an attempt, a skip, a missed mark).
 * `attemptable`: leaves out the `no-eligible-runner` marks (daemon/placement-watch.ts) — they
 * say that no runner that may run the job was alive, which to a runner that may, back now, is
 * what no row says: a fire it may catch up.
 */
export async function firesWithRows(
  db: Queryable,
  namespace: string,
  job: string,
  from: Date,
  to: Date,
  { attemptable = false }: { attemptable?: boolean } = {},
): Promise<Set<number>> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT DISTINCT scheduled_at FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at BETWEEN ? AND ?
        ${attemptable ? "AND NOT (status = 'missed' AND reason_kind <=> 'no-eligible-runner')" : ''}`,
    [namespace, job, from, to],
  );
  return new Set(rows.map((r) => (r.scheduled_at as Date).getTime()));
}

/**
 * The earliest fire the history knows for each of the jobs (absent: the job never fired), in one
 * statement: a runner with 1,000 jobs asks this at every start and reconnect.
 */
export async function firstFiresOf(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
): Promise<Map<string, Date>> {
  if (jobs.length === 0) return new Map();
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT job, MIN(scheduled_at) AS first FROM baton_runs
      WHERE namespace = ? AND job IN (?) GROUP BY job`,
    [namespace, [...jobs]],
  );
  return new Map(rows.map((r) => [String(r.job), r.first as Date]));
}

/**
 * The winning row of one fire, if any runner claimed it: of the given worker slot, or of the
 * first slot taken; of the given generation (`rerun`), or of any — then the latest generation's,
 * which says best what became of the fire (a failed run re-run with success has run).
 */
export async function findWinner(
  db: Queryable,
  namespace: string,
  job: string,
  scheduledAt: Date,
  slot?: number,
  rerun?: number,
): Promise<Run | null> {
  const params: unknown[] = [namespace, job, scheduledAt];
  if (slot != null) params.push(slot);
  if (rerun != null) params.push(rerun);
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at = ?
        AND ${slot == null ? 'winner >= 1' : 'winner = ?'}${rerun == null ? '' : ' AND rerun = ?'}
      ORDER BY rerun DESC, winner LIMIT 1`,
    params,
  );
  return rows[0] ? toRun(rows[0]) : null;
}

/** The winning row of the generation an attempt contends (its slot's, when given). */
export function findAttemptWinner(
  db: Queryable,
  namespace: string,
  a: { job: string; scheduledAt: Date; rerun?: number },
  slot?: number,
): Promise<Run | null> {
  return findWinner(db, namespace, a.job, a.scheduledAt, slot, a.rerun ?? 0);
}

/** Every winning row of one fire, all generations and slots, oldest generation first. */
export async function winnersOfFire(
  db: Queryable,
  namespace: string,
  job: string,
  scheduledAt: Date,
): Promise<Run[]> {
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND winner >= 1
      ORDER BY rerun, winner`,
    [namespace, job, scheduledAt],
  );
  return rows.map(toRun);
}

/**
 * The generation a re-run with `--again` claims: at least the one it planned, and after every
 * generation of the fire that has a winner.
 */
export async function nextGeneration(
  db: Queryable,
  namespace: string,
  a: Pick<Attempt, 'job' | 'scheduledAt' | 'rerun'>,
): Promise<number> {
  const [[row]] = await db.query<RowDataPacket[]>(
    `SELECT MAX(rerun) AS latest FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND winner >= 1`,
    [namespace, a.job, a.scheduledAt],
  );
  const latest = row?.latest == null ? -1 : Number(row.latest);
  return Math.max(a.rerun ?? 0, latest + 1);
}

/** The slot of one fire (of generation `rerun`) that `host` won, if it won one. */
export async function findWinnerOnHost(
  db: Queryable,
  namespace: string,
  job: string,
  scheduledAt: Date,
  host: string,
  rerun = 0,
): Promise<Run | null> {
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at = ? AND rerun = ? AND winner >= 1
        AND host = ?
      LIMIT 1`,
    [namespace, job, scheduledAt, rerun, host],
  );
  return rows[0] ? toRun(rows[0]) : null;
}

/**
 * The `running` rows of `jobs` claimed by the lock sessions `connectionIds`. By the key of a
 * job's rows by status: the key of running rows by session would read every running row of those
 * sessions — thousands while a runner is behind a storm's verdicts — and the server's statistics
 * of how few rows are running usually make it pick that one.
 */
export async function runsOfLockSessions(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
  connectionIds: readonly number[],
): Promise<Run[]> {
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs FORCE INDEX (baton_runs_job_status)
      WHERE namespace = ? AND status = 'running' AND lock_connection_id IN (?) AND job IN (?)`,
    [namespace, connectionIds, jobs],
  );
  return rows.map(toRun);
}

/**
 * The winning rows (every slot and generation: callers pick the one they contend) of fires; with
 * `poolSkips`, also their skips of kind `pool` — a fire whose pool was full when a runner took its
 * lock is decided, skipped, as surely as one with a winner is run (coordination/pool-slots.ts).
 */
export async function winnersOfFires(
  db: Queryable,
  namespace: string,
  fires: readonly { job: string; scheduledAt: Date }[],
  { poolSkips = false }: { poolSkips?: boolean } = {},
): Promise<Run[]> {
  const decided = poolSkips ? `(winner >= 1 OR reason_kind = 'pool')` : 'winner >= 1';
  const rows: RunRow[] = [];
  for (const groups of chunks(fireKeyGroups(fires), FIRE_GROUPS_PER_READ)) {
    const [part] = await db.query<RunRow[]>(
      `SELECT ${COLUMNS} FROM baton_runs FORCE INDEX (baton_runs_fire)
        WHERE namespace = ? AND (${groups.map((g) => g.sql).join(' OR ')}) AND ${decided}`,
      [namespace, ...groups.flatMap((g) => g.values)],
    );
    rows.push(...part);
  }
  return rows.map(toRun);
}

/**
 * Disjuncts of one read, at most: a few groups of a batch of fires (see fireKeyGroups) are one
 * statement; more are several, each still cheap to plan.
 */
const FIRE_GROUPS_PER_READ = 16;

/**
 * The exact (job, instant) pairs of `fires` as a few conditions on the fire key, each an `IN`
 * list of scalars under one fixed column: the fires of one instant (a batch of many jobs due
 * together), or one job's instants (a catch-up) — whichever makes fewer groups.
 *
 * Not a row constructor `(job, scheduled_at) IN (…)`, nor one OR'd term per pair: either costs
 * the server's range optimizer time that grows with the square of the pairs (MariaDB 10.11:
 * 39 ms to plan 250 pairs, 156 ms for 500, for a read that then takes 1 ms; 250 OR'd pairs,
 * 18 ms). A storm of 10,000 fires at one instant spent most of the server's time planning these.
 * The read names the fire key's index: in a storm the key of rows by instant looks as cheap to
 * the optimizer (its statistics lag the thousands of rows just written at that instant) and reads
 * all of them.
 */
export function fireKeyGroups(
  fires: readonly { job: string; scheduledAt: Date }[],
): { sql: string; values: unknown[] }[] {
  const byInstant = new Map<number, Set<string>>();
  const byJob = new Map<string, Set<number>>();
  for (const f of fires) {
    const at = f.scheduledAt.getTime();
    let jobs = byInstant.get(at);
    if (!jobs) byInstant.set(at, (jobs = new Set()));
    jobs.add(f.job);
    let instants = byJob.get(f.job);
    if (!instants) byJob.set(f.job, (instants = new Set()));
    instants.add(at);
  }
  return byInstant.size <= byJob.size
    ? [...byInstant].map(([at, jobs]) => ({
        sql: '(scheduled_at = ? AND job IN (?))',
        values: [new Date(at), [...jobs]],
      }))
    : [...byJob].map(([job, instants]) => ({
        sql: '(job = ? AND scheduled_at IN (?))',
        values: [job, [...instants].map((at) => new Date(at))],
      }));
}

/**
 * The winning rows (every generation) of one job's fires in [from, to]: a backfill's preview of
 * its range (actions/backfill.ts) in one range read of the fire key, however many fires.
 */
export async function winnersOfJobBetween(
  db: Queryable,
  namespace: string,
  job: string,
  from: Date,
  to: Date,
): Promise<Run[]> {
  const [rows] = await db.query<RunRow[]>(
    `SELECT ${COLUMNS} FROM baton_runs
      WHERE namespace = ? AND job = ? AND scheduled_at BETWEEN ? AND ? AND winner >= 1`,
    [namespace, job, from, to],
  );
  return rows.map(toRun);
}

/** The first fire of an episode of a job no live runner may run (daemon/notifier.ts). */
export interface UnplacedEpisode {
  /** Its `missed` row. */
  runId: number;
  scheduledAt: Date;
  reason: string | null;
}

/**
 * The first `missed` row of kind `no-eligible-runner` (daemon/placement-watch.ts) of `job` after
 * the latest fire that had a winner: the episode that goes on, or the last one, since the job
 * last ran. Every runner that asks gets the same row, so the notification keyed by its instant
 * is one per episode. Null: none since the job last ran.
 */
export async function unplacedEpisode(
  db: Queryable,
  namespace: string,
  job: string,
): Promise<UnplacedEpisode | null> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, scheduled_at, reason FROM baton_runs
      WHERE namespace = ? AND job = ? AND winner = 0 AND reason_kind = 'no-eligible-runner'
        AND scheduled_at > COALESCE((SELECT MAX(w.scheduled_at) FROM baton_runs AS w
              WHERE w.namespace = ? AND w.job = ? AND w.winner >= 1), '1000-01-01')
      ORDER BY scheduled_at LIMIT 1`,
    [namespace, job, namespace, job],
  );
  const r = rows[0];
  if (!r) return null;
  return {
    runId: Number(r.id),
    scheduledAt: r.scheduled_at as Date,
    reason: (r.reason as string | null) ?? null,
  };
}
