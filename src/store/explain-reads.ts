/**
 * What `baton explain` reads about one fire, on one connection: the database's clock, the registry
 * judged at that instant, the job's pause, which fire (the one given, or the latest), the fire's
 * rows, the hosts of the job's rows just before it, and the job's timing versions; for a child job (`after:`), its chain rows
 * at the fire (baton_dependent_fires) and every row of its parents there.
 *
 * One missing-schema policy for all of it: a database or a table that does not exist yet reads as
 * empty — no database at all (nobody has started baton there: this host's clock, nothing else), no
 * registry or pauses table (a database from before migrations 0003 and 0004: nobody to name, no
 * pause), no chain table (before 0018: no child has a row), no history table. Any other error is
 * thrown.
 */
import { jobOfSubject } from '../schedule-keys.js';
import { talliesOfFireHour, type SkipTally } from './skip-tallies.js';
import type { DatabaseTarget } from '../config/database-url.js';
import { isMissingSchemaError, orEmpty } from '../errors.js';
import { openConnection } from './connect.js';
import {
  databaseNow,
  hostsBefore,
  jobHasRows,
  latestFire,
  runnersNow,
  type RunnerNow,
} from './fire-reads.js';
import { findPause, type Pause } from './pauses.js';
import { readTimings, type TimingRecord } from './timings.js';
import { fireRows } from './history-reads.js';
import type { Run } from './runs.js';
import type { Queryable } from './deadline.js';
import {
  dependentFiresAt,
  latestDependentFire,
  type DependentFire,
} from './dependent-fire-reads.js';

/** What the history holds of a child's fire's chain. */
export interface ChainFacts {
  /** The child's rows of baton_dependent_fires at the fire, generation by generation. */
  fires: DependentFire[];
  /** Every row of each parent at the fire (`fireRows`), by parent. */
  parentRows: ReadonlyMap<string, readonly Run[]>;
}

export interface FireQuery<Latest extends { fire: Date | null }> {
  namespace: string;
  job: string;
  /** `--gone-after`: how long without a heartbeat makes a registered runner gone. */
  goneAfterMs: number;
  /** The fire asked for; null for the latest, which `latest` chooses. */
  fire: Date | null;
  /**
   * Chooses the latest fire from the history's latest scheduled fire, the registry and the
   * database's clock (fleet/explain.ts:latestOf); called only when no fire is given and there is
   * a database.
   */
  latest: (
    inHistory: Date | null,
    runners: RunnerNow[],
    now: Date,
    timings: readonly TimingRecord[],
  ) => Latest;
  /** The job is known without the history (it is in the schedules file): do not ask it. */
  knownJob: boolean;
  /** The job's parents by the local schedules file (`after:`); empty when none are known. */
  parents?: readonly string[];
}

export interface FireFacts<Latest> {
  /** The database's clock; this host's when there is no database yet. */
  now: Date;
  runners: RunnerNow[];
  pause: Pause | null;
  /** What `latest` chose; null when a fire was given, or without a database. */
  latest: Latest | null;
  /** The fire to explain: the one given, or the latest's; null when there is none. */
  fire: Date | null;
  /** Every row of that fire. */
  rows: Run[];
  /** The hosts among the job's rows shortly before the fire (fire-reads.ts:hostsBefore). */
  hostsBefore: Set<string>;
  /** The history has rows of the job (true when `knownJob`, which is not asked). */
  known: boolean;
  /** The job's skip tallies of the fire's hour (`skips: tally`; store/skip-tallies.ts). */
  tallies: SkipTally[];
  /** A child's chain at the fire: when it has rows there, or `parents` were given; else null. */
  chain: ChainFacts | null;
  /** The job's timing versions (store/timings.ts), oldest first; empty when none. */
  timings: TimingRecord[];
}

export async function readFireFacts<Latest extends { fire: Date | null }>(
  target: DatabaseTarget,
  q: FireQuery<Latest>,
): Promise<FireFacts<Latest>> {
  const facts: FireFacts<Latest> = {
    now: new Date(),
    runners: [],
    pause: null,
    latest: null,
    fire: q.fire,
    rows: [],
    hostsBefore: new Set(),
    known: q.knownJob,
    tallies: [],
    chain: null,
    timings: [],
  };
  let conn;
  try {
    conn = await openConnection(target, { create: false });
  } catch (err) {
    if (isMissingSchemaError(err)) return facts;
    throw err;
  }
  try {
    facts.now = await databaseNow(conn);
    const registry = await orEmpty(runnersNow(conn, q.namespace, q.goneAfterMs), null);
    if (registry) ({ now: facts.now, runners: facts.runners } = registry);
    // A schedule created at run time (`<job>:<key>`) is paused by its own pause or its job's.
    facts.pause =
      (await orEmpty(findPause(conn, q.namespace, q.job), null)) ??
      (jobOfSubject(q.job) !== q.job
        ? await orEmpty(findPause(conn, q.namespace, jobOfSubject(q.job)), null)
        : null);
    // Before the timing versions (migration 0026), or a schedule created at run time: none.
    facts.timings =
      (await orEmpty(readTimings(conn, q.namespace, [q.job]), new Map())).get(q.job) ?? [];
    if (!q.fire) {
      // A child's latest instant is its chain's (its runs are `after`, not scheduled, fires).
      const scheduled = await orEmpty(latestFire(conn, q.namespace, q.job), null);
      const chained = await orEmpty(latestDependentFire(conn, q.namespace, q.job), null);
      const inHistory =
        scheduled && chained && chained > scheduled ? chained : (scheduled ?? chained);
      facts.latest = q.latest(inHistory, facts.runners, facts.now, facts.timings);
      facts.fire = facts.latest.fire;
    }
    if (facts.fire) {
      facts.rows = await orEmpty(fireRows(conn, q.namespace, q.job, facts.fire), []);
      facts.hostsBefore = await orEmpty(
        hostsBefore(conn, q.namespace, q.job, facts.fire),
        new Set<string>(),
      );
      facts.tallies = await orEmpty(talliesOfFireHour(conn, q.namespace, q.job, facts.fire), []);
      // A runner that tallied skips of the job before the fire took part in it, like one with rows.
      for (const t of facts.tallies) if (t.firstFire < facts.fire) facts.hostsBefore.add(t.host);
      facts.chain = await readChain(conn, q, facts.fire);
    }
    facts.known ||=
      facts.rows.length > 0 ||
      (facts.chain?.fires.length ?? 0) > 0 ||
      (await orEmpty(jobHasRows(conn, q.namespace, q.job), false));
    return facts;
  } finally {
    await conn.end().catch(() => {});
  }
}

/** A child's chain rows at `fire` and its parents' rows there (every parent named or known). */
async function readChain(
  conn: Queryable,
  q: Pick<FireQuery<never>, 'namespace' | 'job' | 'parents'>,
  fire: Date,
): Promise<ChainFacts | null> {
  const fires = await orEmpty(dependentFiresAt(conn, q.namespace, q.job, fire), []);
  const named = fires.flatMap((f) => Object.keys(f.parentRuns ?? {}));
  const parents = [...new Set([...(q.parents ?? []), ...named])];
  if (fires.length === 0 && parents.length === 0) return null;
  const parentRows = new Map<string, Run[]>();
  for (const parent of parents) {
    parentRows.set(parent, await orEmpty(fireRows(conn, q.namespace, parent, fire), []));
  }
  return { fires, parentRows };
}
