/**
 * What the dashboard shows, as one JSON document (`GET api/overview`): every job of the runner's
 * schedules file with its schedule in words, pause, next fire, last outcome and a timeline of its
 * recent fires; the runners of the namespace with their clock offsets; the latest failures with
 * the end of their output. Read-only, and bounded whatever the history's size (see
 * src/store/dashboard-reads.ts for what each read costs).
 *
 * A fire on the timeline is one mark with one outcome — the winner's status (for a fan-out job the
 * most telling of its slots: still running, else the worst ending), `missed` when nobody attempted
 * it, `paused` when every runner skipped it because the job was paused, `upstream` when a child
 * job (`after:`) was skipped because of its parents, else `skipped` — and it
 * keeps every row behind it: the winners with their hosts, the skips with theirs and why.
 *
 * Text from jobs (output, errors) and from the history (hosts, reasons) is passed on as data; the
 * page renders it as text, never as markup.
 */
import { type PauseDocument, pauseDocument } from '../../actions/documents.js';
import { describeAfter } from '../../config/dependencies.js';
import { formatDuration } from '../../config/duration.js';
import { describePlacement } from '../../config/placement.js';
import type { Config, JobDefinition } from '../../config/schema.js';
import { errorMessage } from '../../errors.js';
import {
  currentRunners,
  DEFAULT_CLOCK_THRESHOLD_MS,
  DEFAULT_GONE_AFTER_MS,
  poolToJson,
  runnerState,
  type RunnerState,
} from '../../fleet/status.js';
import { readPoolStatus } from '../../fleet/pool-status.js';
import { describeSchedule } from '../../schedule/describe.js';
import {
  FAILURES_SHOWN,
  firesPerJob,
  OUTPUT_TAIL_CHARS,
  recentFailures,
  recentFireRows,
  type Failure,
  type FireRow,
} from '../../store/dashboard-reads.js';
import { runnersNow } from '../../store/fire-reads.js';
import { listPauses, type Pause } from '../../store/pauses.js';
import { listBlackouts } from '../../store/blackouts.js';
import { blackoutToJson, type BlackoutJson } from '../../fleet/blackouts.js';
import type { RunStatus, Trigger } from '../../run-status.js';
import type { Queryable } from '../../store/deadline.js';

export interface DashboardSource {
  /** null while the runner is not connected: the overview says so and shows the schedule only. */
  pool: Queryable | null;
  namespace: string;
  /** The runner's loaded schedules file (jobs incl. disabled ones). */
  config: Config;
  /** The runner serving the page. */
  host: string;
  /** Database time. */
  now: Date;
  /** By the runner's schedule; null for a disabled job (or one that never fires again). */
  nextFire(job: string): Date | null;
  /** The database's name: a pool's slots are named locks of it (fleet/pool-status.ts). */
  database: string;
}

export type FireOutcome =
  | 'done'
  | 'failed'
  | 'timeout'
  | 'lost'
  | 'interrupted'
  | 'killed'
  | 'running'
  | 'missed'
  | 'skipped'
  | 'paused'
  | 'upstream';

/** A run of the fire: its winner's row (one per worker slot of a fan-out job). */
export interface FireRun {
  runId: number;
  host: string;
  slot: number;
  status: RunStatus;
  exitCode: number | null;
  /** From start to finish; null while running. */
  durationMs: number | null;
  /** Why it did not end `done`, cut to one line's worth. */
  error: string | null;
  /** Told slow: past its warn (`duration.warn`). */
  slow: boolean;
  /** A success shorter than its job's `duration.min`. */
  tooShort: boolean;
}

/**
 * One fire of a job and what every row of it says. Kept lean — a thousand jobs send ten thousand
 * of these at every refresh — so a skip says who, and why only when nobody ran the fire.
 */
export interface FireMark {
  scheduledAt: string;
  outcome: FireOutcome;
  trigger: Trigger;
  runs: FireRun[];
  /** The runners that considered the fire and did not run it, in the order they wrote. */
  skippedBy: string[];
  /** For a fire nobody ran: the `missed` row's reason, or the first skip's. */
  reason: string | null;
}

export interface JobOverview {
  name: string;
  description: string | null;
  /** Null: no schedule of its own; it runs only after its parents (`after`). */
  schedule: string | null;
  timezone: string;
  /** The expression in words (in its time zone), and `after settle` for a job with parents. */
  scheduleWords: string;
  enabled: boolean;
  workers: number;
  /**
   * Where it may run, in words (`runOn`, `prefer`, `every`: config/placement.ts
   * `describePlacement`); null for a job any runner may run.
   */
  runsOn: string | null;
  pause: PauseDocument | null;
  nextFire: string | null;
  /**
   * The newest fire on the timeline that someone ran, that was missed, or that a child's parents
   * stopped (`upstream`) (a run going on now included); the newest fire when every fire shown was
   * skipped; null without history.
   */
  lastOutcome: FireMark | null;
  /** The latest fires, oldest first (at most `limits.firesPerJob`). */
  fires: FireMark[];
}

export interface RunnerOverview {
  host: string;
  pid: number;
  version: string;
  state: RunnerState;
  /** How far its clock is ahead of the database's (negative: behind), in ms; null = unknown. */
  clockOffsetMs: number | null;
  startedAt: string;
  lastSeenAt: string;
  lastSeenAgoMs: number;
  stoppedAt: string | null;
  /** Whether the lock session it registered still holds its session lock; null = it named none. */
  lockSessionHeld: boolean | null;
  /** Its tags (`baton start --tag`); empty: none. */
  tags: string[];
  /** The runner serving this page. */
  self: boolean;
}

export interface FailureOverview {
  runId: number;
  job: string;
  scheduledAt: string;
  trigger: Trigger;
  status: Failure['status'];
  host: string;
  startedAt: string;
  finishedAt: string | null;
  exitCode: number | null;
  attempts: number;
  error: string | null;
  /** The end of its stdout and stderr; starts with '…' when cut. */
  outputTail: string | null;
}

export interface Overview {
  namespace: string;
  /** The runner serving the page. */
  host: string;
  /** Database time of this overview. */
  now: string;
  database: {
    /** Whether history, runners and failures could be read. */
    connected: boolean;
    /** Why not, in words; null when connected. */
    problem: string | null;
  };
  limits: {
    /** Fires on each job's timeline at most (fewer with many jobs: see firesPerJob). */
    firesPerJob: number;
    failures: number;
    outputTailChars: number;
    /** A clock offset beyond this is flagged (as `baton status` warns, by default). */
    clockWarnMs: number;
  };
  jobs: JobOverview[];
  runners: RunnerOverview[];
  failures: FailureOverview[];
  /** The schedule's pools, their slots and holders (per live host for a host pool). */
  pools: ReturnType<typeof poolToJson>[];
  /** The blackouts going on and to come (`baton blackout`), by start. */
  blackouts: BlackoutJson[];
}

export async function buildOverview(source: DashboardSource): Promise<Overview> {
  const jobs = [...source.config.jobs].sort((a, b) => (a.name < b.name ? -1 : 1));
  const fires = firesPerJob(jobs.length);
  const base = {
    namespace: source.namespace,
    host: source.host,
    now: source.now.toISOString(),
    limits: {
      firesPerJob: fires,
      failures: FAILURES_SHOWN,
      outputTailChars: OUTPUT_TAIL_CHARS,
      clockWarnMs: DEFAULT_CLOCK_THRESHOLD_MS,
    },
  };
  const scheduleOnly = (problem: string): Overview => ({
    ...base,
    database: { connected: false, problem },
    jobs: jobs.map((job) => jobOverview(job, source, null, [])),
    runners: [],
    failures: [],
    pools: [],
    blackouts: [],
  });
  if (!source.pool) {
    return scheduleOnly(
      'this runner is not connected to the database: history, runners and failures show once ' +
        'it reconnects',
    );
  }
  const history = await readHistory(source.pool, source, jobs, fires).catch((err: unknown) => {
    // A database that stops answering is a state to show, not a page that breaks; anything else
    // is a bug and goes to the server.
    if (!hasCode(err)) throw err;
    return `the database did not answer (${err.code}): ${errorMessage(err)}`;
  });
  if (typeof history === 'string') return scheduleOnly(history);
  const pauses = new Map(history.pauses.map((p) => [p.job, p]));
  return {
    ...base,
    database: { connected: true, problem: null },
    jobs: jobs.map((job) =>
      jobOverview(job, source, pauses.get(job.name) ?? null, history.fires.get(job.name) ?? []),
    ),
    runners: history.runners,
    failures: history.failures.map(failureOverview),
    pools: history.pools.map(poolToJson),
    blackouts: history.blackouts.map((b) => blackoutToJson(b, source.now)),
  };
}

async function readHistory(
  db: Queryable,
  source: DashboardSource,
  jobs: JobDefinition[],
  firesShown: number,
) {
  const names = jobs.map((j) => j.name);
  const pauses = await listPauses(db, source.namespace);
  const registry = await runnersNow(db, source.namespace, DEFAULT_GONE_AFTER_MS);
  const fires = await recentFireRows(db, source.namespace, names, firesShown);
  const failures = await recentFailures(db, source.namespace, names);
  const now = registry.now;
  // Registry rows not seen for a week are history, not fleet (as `baton status` leaves them out).
  const runners: RunnerOverview[] = currentRunners(registry.runners, now).map((r) => {
    const byHeartbeat = runnerState(r, now, DEFAULT_GONE_AFTER_MS);
    return {
      host: r.host,
      pid: r.pid,
      version: r.version,
      // A runner whose lock session is gone (kill -9) is gone before its heartbeat goes stale.
      state: byHeartbeat === 'alive' && !r.alive ? 'gone' : byHeartbeat,
      clockOffsetMs: r.clockOffsetMs,
      startedAt: r.startedAt.toISOString(),
      lastSeenAt: r.lastSeenAt.toISOString(),
      lastSeenAgoMs: r.lastSeenAgoMs,
      stoppedAt: r.stoppedAt?.toISOString() ?? null,
      lockSessionHeld: r.lockSessionHeld,
      tags: [...(r.tags ?? [])],
      self: r.host === source.host,
    };
  });
  const hosts = runners.filter((r) => r.state === 'alive').map((r) => r.host);
  const where = { database: source.database, namespace: source.namespace };
  const pools = await readPoolStatus(db, where, Object.values(source.config.pools), hosts);
  const blackouts = await listBlackouts(db, source.namespace);
  return { pauses, runners, fires, failures, pools, blackouts };
}

function hasCode(err: unknown): err is Error & { code: string } {
  return err instanceof Error && typeof (err as { code?: unknown }).code === 'string';
}

function jobOverview(
  job: JobDefinition,
  source: DashboardSource,
  pause: Pause | null,
  rows: FireRow[],
): JobOverview {
  const fires = fireMarks(rows);
  const ran = [...fires].reverse().find((f) => f.outcome !== 'skipped' && f.outcome !== 'paused');
  return {
    name: job.name,
    description: job.description ?? null,
    schedule: job.schedule,
    timezone: job.timezone,
    scheduleWords: [
      job.schedule != null ? scheduleWords(job.schedule) : null,
      job.after ? describeAfter(job.after) : null,
    ]
      .filter((w) => w != null)
      .join(', and '),
    enabled: job.enabled,
    workers: job.workers,
    runsOn:
      job.runOn || job.prefer || job.every
        ? describePlacement(job, (ms) => formatDuration(ms, 'compact'))
        : null,
    pause: pauseDocument(pause),
    nextFire: source.nextFire(job.name)?.toISOString() ?? null,
    lastOutcome: ran ?? fires[fires.length - 1] ?? null,
    fires,
  };
}

/** The rows of a job's fires (newest first) as marks, oldest first. */
function fireMarks(rows: FireRow[]): FireMark[] {
  const byFire = new Map<number, FireRow[]>();
  for (const r of rows) {
    const at = r.scheduledAt.getTime();
    const list = byFire.get(at);
    if (list) list.push(r);
    else byFire.set(at, [r]);
  }
  return [...byFire.entries()].sort(([a], [b]) => a - b).map(([, fireRows]) => fireMark(fireRows));
}

/** Which status a fan-out fire shows: one still running, else the worst ending. */
const SHOWN_FIRST: readonly RunStatus[] = [
  'running',
  'lost',
  'timeout',
  'failed',
  'killed',
  'interrupted',
  'done',
];

function fireMark(rows: FireRow[]): FireMark {
  // A re-run fire shows what its latest generation came to (a failure re-run with success is done).
  const generation = Math.max(0, ...rows.filter((r) => (r.winner ?? 0) >= 1).map((r) => r.rerun));
  const winners = rows
    .filter((r) => r.winner != null && r.winner >= 1 && r.rerun === generation)
    .sort((a, b) => a.winner! - b.winner!);
  const missed = rows.find((r) => r.winner === 0) ?? null;
  const skips = rows.filter((r) => r.winner == null).sort((a, b) => a.id - b.id);
  let outcome: FireOutcome;
  if (winners.length > 0) {
    const rank = (s: RunStatus) => {
      const i = SHOWN_FIRST.indexOf(s);
      return i < 0 ? SHOWN_FIRST.length : i;
    };
    outcome = [...winners].sort((a, b) => rank(a.status) - rank(b.status))[0]!
      .status as FireOutcome;
  } else if (missed) {
    outcome = 'missed';
  } else {
    outcome = skips.every((s) => s.reason?.startsWith('paused') === true)
      ? 'paused'
      : skips.some((s) => s.reasonKind === 'upstream')
        ? 'upstream'
        : 'skipped';
  }
  const first = winners[0] ?? missed ?? skips[0]!;
  return {
    scheduledAt: first.scheduledAt.toISOString(),
    outcome,
    trigger: first.trigger,
    runs: winners.map((w) => ({
      runId: w.id,
      host: w.host,
      slot: w.winner!,
      status: w.status,
      exitCode: w.exitCode,
      durationMs: w.durationMs,
      error: w.error,
      slow: w.slow,
      tooShort: w.tooShort,
    })),
    skippedBy: skips.map((s) => s.host),
    reason: winners.length > 0 ? null : (missed ?? skips[0]!).reason,
  };
}

function failureOverview(f: Failure): FailureOverview {
  return {
    runId: f.id,
    job: f.job,
    scheduledAt: f.scheduledAt.toISOString(),
    trigger: f.trigger,
    status: f.status,
    host: f.host,
    startedAt: f.startedAt.toISOString(),
    finishedAt: f.finishedAt?.toISOString() ?? null,
    exitCode: f.exitCode,
    attempts: f.attempts,
    error: f.error,
    outputTail: f.outputTail,
  };
}

/** describeSchedule for every job at every refresh adds up: the words of an expression stay. */
const wordsCache = new Map<string, string>();
function scheduleWords(expression: string): string {
  let words = wordsCache.get(expression);
  if (words == null) {
    if (wordsCache.size >= 10_000) wordsCache.clear();
    words = describeSchedule(expression);
    wordsCache.set(expression, words);
  }
  return words;
}
