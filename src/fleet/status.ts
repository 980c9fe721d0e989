/**
 * `baton status` as a pure function: from what the database holds (the runner registry, the runs
 * in progress, the pauses, each job's latest success) and the local schedules file, at one
 * instant of the database's clock, the report an operator or a monitor reads — and its warnings.
 *
 * Runner states: `alive` (heartbeat within `goneAfterMs`, not stopped), `stopped` (a graceful
 * stop set `stopped_at`: drained on purpose, no warning), `gone` (no heartbeat for longer than
 * `goneAfterMs` without a stop: crashed, killed or cut off — a warning). Registry rows not seen for
 * STALE_RUNNER_MS are history, not fleet, and are left out.
 *
 * Findings (`warnings`, for compatibility), one per cause, in this order, each with a severity
 * (severityOf) that makes the monitoring state (checkState):
 * - `no-runner` (critical): no runner of the namespace is alive, so no job runs at all. Then
 *   the file's jobs that no live runner loaded are not drift each — that is this one finding;
 * - `no-eligible-runner` (critical): an enabled job that runners are alive for, but that every
 *   live runner registered as one it may not run (its `runOn`: tags or hosts none of them has,
 *   docs/placement.md) — its fires are recorded `missed` (daemon/placement-watch.ts), none runs;
 * - `runner-gone`: a runner stopped heartbeating without stopping;
 * - `detached` (critical): a live runner holds its fires after a failover, as no other runner
 *   heartbeats on this server: the fleet has left it (daemon/fleet-watch.ts) — a split brain;
 * - `clock-offset`: a live runner's clock is off the database's by more than the threshold (fires
 *   still run on database time, but the host's logs and its jobs' own clocks are off);
 * - `schedule-drift`: live runners loaded different definitions of a job, or a job only some of
 *   them loaded ("we updated srv-01 and forgot srv-02"); and, when there is a local schedules
 *   file, a job whose definition there differs from what the live runners loaded, a job they
 *   loaded that is not in it, and an enabled job of it that no live runner loaded at all; and
 *   live runners of one definition whose registered next fires differ (time-zone data);
 * - `no-success`: the dead-man's switch (schedule/dead-man.ts) — an enabled job of the local schedules
 *   file with no successful run for longer than it should. It is judged from its last success,
 *   or, when it never succeeded, from when it first appeared: its first history row, or the
 *   earliest instant a live runner loaded its current definition (`since` in the registry; the
 *   runner's start for registry rows that do not say). A paused job gets `paused` instead;
 * - `failing` (warning): a job whose winner runs failed, timed out or were lost since its latest
 *   success (all of them when it never succeeded) — every failure until it succeeds again,
 *   however old: the next success clears it. Not for a paused job, nor one disabled in the file;
 * - `slow` (warning): a job with a run going on past its warn (`duration.warn`), by the row's
 *   `warn_at` (docs/configuration.md) — while it runs; its `slow` event and the history keep it;
 * - `paused` (informational; a warning with `warnPaused`): each paused job, since a pause is easy
 *   to forget;
 * - `blackout` (as `paused`): each blackout going on (fleet/blackouts.ts). A job it covers is
 *   not judged `no-success` meanwhile, as a paused one is not.
 * `no-runner`, `no-eligible-runner`, `no-success` and `detached` are critical; the others are
 * warnings.
 */
import { formatDuration } from '../config/duration.js';
import { deadManSource } from '../config/dependencies.js';
import type { Config, JobAfter } from '../config/schema.js';
import type { OutboxState } from '../store/notification-reads.js';
import { notifyWarnings } from './notify-warnings.js';
import type { Pause } from '../store/pauses.js';
import { coversJob, type Blackout } from '../store/blackouts.js';
import { blackoutState, blackoutToJson, blackoutWarnings } from './blackouts.js';
import {
  DEFAULT_GONE_AFTER_MS,
  runnerState,
  type RunnerRecord,
  type RunnerState,
} from '../store/runners.js';
import {
  FAILURE_COUNT_CAP,
  type JobHistoryFacts,
  type RecentFailures,
  type RunningRun,
} from '../store/fleet-reads.js';
import { parseSchedule } from '../schedule/cron.js';
import { expectation } from '../schedule/dead-man.js';
import { CHECK_EXIT_CODES, checkState, severityOf, type Warning } from './check-state.js';
import type { CheckState } from '../exit-codes.js';
import { driftWarnings } from './drift.js';
import { slotsInUse, type PoolStatus } from './pool-status.js';
import { timingWarnings } from './timing-status.js';
import type { TimingRecord } from '../store/timings.js';

export {
  CHECK_EXIT_CODES,
  checkState,
  severityOf,
  WARNING_KINDS,
  type Severity,
  type Warning,
  type WarningKind,
} from './check-state.js';

export { DEFAULT_GONE_AFTER_MS, runnerState, type RunnerState } from '../store/runners.js';
export const DEFAULT_CLOCK_THRESHOLD_MS = 1_000;

/** Durations in warnings: `1.5s`, `1m30s`, `1d5m`. */
const brief = (ms: number) => formatDuration(ms, 'brief');
/** Registry rows not seen for this long are left out of the report altogether. */
export const STALE_RUNNER_MS = 7 * 86_400_000;

export interface RunnerStatus {
  host: string;
  pid: number;
  version: string;
  state: RunnerState;
  alive: boolean;
  startedAt: Date;
  lastSeenAt: Date;
  stoppedAt: Date | null;
  /** How far the runner's clock is ahead of the database's (negative: behind); null = unknown. */
  clockOffsetMs: number | null;
  /** The jobs it loaded (enabled or not), by name. */
  jobs: string[];
  /** Its tags (`baton start --tag`, config/placement.ts); empty: none. */
  tags: string[];
}

export interface RunningStatus {
  runId: number;
  job: string;
  host: string;
  pid: number | null;
  trigger: string;
  scheduledAt: Date;
  startedAt: Date;
  runningForMs: number;
  attempts: number;
  /** When it becomes slow (`duration.warn`); null: its job has no warn. */
  warnAt: Date | null;
  /** Past its warn now (whether or not its `slow` has been told yet). */
  slow: boolean;
}

export interface JobStatus {
  name: string;
  /** In the local schedules file. */
  inConfig: boolean;
  /** From the local file; null when the job is not in it. */
  enabled: boolean | null;
  /** Null when the job is not in the file, or has no schedule of its own (`after:` alone). */
  schedule: string | null;
  timezone: string | null;
  /** The jobs it runs after, from the local file (docs/dependencies.md); null: none. */
  after: JobAfter | null;
  /** From the local file's schedule (database time); null without one or when disabled. */
  nextFire: Date | null;
  paused: boolean;
  pause: Pause | null;
  lastSuccessAt: Date | null;
  /** Failed, timed-out and lost runs since the last success; null when none. */
  failures: RecentFailures | null;
  /** The dead-man's deadline from the last success (or first appearance); null = not judged. */
  overdueAt: Date | null;
  expectMs: number | null;
  /** Live runners that loaded it. */
  loadedBy: string[];
  /**
   * Live runners that loaded it as one they may not run, with why (`runOn`: "needs tag sftp");
   * empty when every runner that loaded it may run it.
   */
  ineligibleOn: { host: string; why: string }[];
}

export interface StatusInput {
  /** The database's clock. */
  now: Date;
  namespace: string;
  runners: RunnerRecord[];
  running: RunningRun[];
  /** The local schedules file, if there is one (of this namespace). */
  config: Pick<Config, 'jobs' | 'file'> | null;
  pauses: Pause[];
  history: ReadonlyMap<string, JobHistoryFacts>;
  clockThresholdMs?: number;
  goneAfterMs?: number;
  /** `--warn-paused`: a paused job is a warning rather than informational. */
  warnPaused?: boolean;
  /** The notification outbox (given up in the last hour, waiting and retrying). */
  notifications?: OutboxState;
  /** The local file's pools, their slots and holders (fleet/pool-status.ts). */
  pools?: PoolStatus[];
  /** The fleet's timing versions by job (store/timings.ts); absent: not read. */
  timings?: ReadonlyMap<string, readonly TimingRecord[]>;
  /** The blackouts not over (going on and to come, store/blackouts.ts); absent: none. */
  blackouts?: readonly Blackout[];
}

export interface StatusReport {
  namespace: string;
  now: Date;
  runners: RunnerStatus[];
  running: RunningStatus[];
  jobs: JobStatus[];
  warnings: Warning[];
  /** The worst severity among the warnings (checkState); never UNKNOWN: that is no report. */
  state: CheckState;
  warnPaused: boolean;
  /** The local file's pools (docs/pools.md); empty without any. */
  pools: PoolStatus[];
  /** The blackouts going on and to come, by start. */
  blackouts: Blackout[];
}

/** Every job name the report covers: the local file's, the live runners', paused and running. */
export function reportedJobs(
  config: StatusInput['config'],
  liveRunners: RunnerRecord[],
  pauses: Pause[],
  running: RunningRun[],
): string[] {
  const names = new Set<string>(config?.jobs.map((j) => j.name));
  for (const r of liveRunners) for (const job of r.jobs.keys()) names.add(job);
  for (const p of pauses) names.add(p.job);
  for (const r of running) names.add(r.job);
  return [...names].sort();
}

/** The registry rows worth reporting: seen within STALE_RUNNER_MS. */
export function currentRunners<R extends RunnerRecord>(runners: R[], now: Date): R[] {
  return runners.filter((r) => now.getTime() - r.lastSeenAt.getTime() <= STALE_RUNNER_MS);
}

export function buildStatus(input: StatusInput): StatusReport {
  const { now } = input;
  const threshold = input.clockThresholdMs ?? DEFAULT_CLOCK_THRESHOLD_MS;
  const goneAfter = input.goneAfterMs ?? DEFAULT_GONE_AFTER_MS;

  const runners: RunnerStatus[] = currentRunners(input.runners, now).map((r) => {
    const state = runnerState(r, now, goneAfter);
    return {
      host: r.host,
      pid: r.pid,
      version: r.version,
      state,
      alive: state === 'alive',
      startedAt: r.startedAt,
      lastSeenAt: r.lastSeenAt,
      stoppedAt: r.stoppedAt,
      clockOffsetMs: r.clockOffsetMs,
      jobs: [...r.jobs.keys()].sort(),
      tags: [...(r.tags ?? [])],
    };
  });
  const liveRecords = currentRunners(input.runners, now).filter(
    (r) => runnerState(r, now, goneAfter) === 'alive',
  );

  const running: RunningStatus[] = input.running.map((r) => ({
    runId: r.id,
    job: r.job,
    host: r.host,
    pid: r.pid,
    trigger: r.trigger,
    scheduledAt: r.scheduledAt,
    startedAt: r.startedAt,
    runningForMs: Math.max(0, now.getTime() - r.startedAt.getTime()),
    attempts: r.attempts,
    warnAt: r.warnAt ?? null,
    slow: r.warnAt != null && r.warnAt.getTime() <= now.getTime(),
  }));

  const warnings: Warning[] = [];
  if (liveRecords.length === 0) warnings.push(noRunnerWarning(input.namespace, runners, now));
  for (const r of runners.filter((x) => x.state === 'gone')) warnings.push(goneWarning(r, now));
  for (const r of liveRecords.filter((x) => x.detached)) {
    const message = `runner ${r.host} (pid ${r.pid}) is detached from the fleet: ${r.detached}`;
    warnings.push({ kind: 'detached', message, hosts: [r.host] });
  }
  for (const r of runners) {
    if (r.alive && r.clockOffsetMs != null && Math.abs(r.clockOffsetMs) > threshold) {
      warnings.push(clockWarning(r, threshold));
    }
  }
  // With no runner alive, every enabled job of the file is one nobody loaded: no-runner says it.
  if (liveRecords.length > 0) warnings.push(...driftWarnings(liveRecords, input.config));
  if (input.timings) warnings.push(...timingWarnings(liveRecords, input.timings, now));

  const pauses = new Map(input.pauses.map((p) => [p.job, p]));
  const blackouts = [...(input.blackouts ?? [])];
  const blackedOut = (job: string) =>
    blackouts.some((b) => blackoutState(b, now) === 'active' && coversJob(b, job));
  const definitions = new Map(input.config?.jobs.map((j) => [j.name, j]));
  const jobs: JobStatus[] = [];
  const deadMan: Warning[] = [];
  const unplaced: Warning[] = [];
  const failing: Warning[] = [];
  for (const name of reportedJobs(input.config, liveRecords, input.pauses, input.running)) {
    const def = definitions.get(name);
    const own = def?.schedule != null ? parseSchedule(def.schedule, def.timezone) : null;
    // A child without a schedule of its own is expected at its parents' instants (the dead-man's
    // default window, unless it runs on their failures); it has no next fire of its own.
    const source = def && !own ? deadManSource(input.config!.jobs, name) : null;
    const schedule =
      own ?? (source?.schedule != null ? parseSchedule(source.schedule, source.timezone) : null);
    const pause = pauses.get(name) ?? null;
    const facts = input.history.get(name);
    const loadedBy = liveRecords.filter((r) => r.jobs.has(name));
    const lastSuccessAt = facts?.lastSuccessAt ?? null;
    const failures = facts?.failures ?? null;
    // Judged only with a definition: enabled in the local file (the expectation needs the
    // schedule or the job's `expect`, which the registry does not carry).
    const since = lastSuccessAt ?? firstAppearance(name, facts?.firstSeenAt ?? null, loadedBy);
    const judged = def?.enabled === true && since != null;
    const expected = judged ? expectation({ expectMs: def.expectMs, schedule }, since) : null;
    jobs.push({
      name,
      inConfig: def != null,
      enabled: def?.enabled ?? null,
      schedule: def?.schedule ?? null,
      timezone: def?.timezone ?? null,
      after: def?.after ?? null,
      nextFire: def?.enabled && own ? own.nextAfter(now) : null,
      paused: pause != null,
      pause,
      lastSuccessAt,
      failures,
      overdueAt: expected?.overdueAt ?? null,
      expectMs: expected?.expectMs ?? null,
      loadedBy: loadedBy.map((r) => r.host),
      ineligibleOn: loadedBy.flatMap((r) => {
        const why = r.jobs.get(name)?.ineligible;
        return why != null ? [{ host: r.host, why }] : [];
      }),
    });
    const placed = noEligibleWarning(name, def?.enabled ?? null, liveRecords);
    if (placed) unplaced.push(placed);
    if (expected && !pause && !blackedOut(name) && now.getTime() > expected.overdueAt.getTime()) {
      deadMan.push(noSuccessWarning(name, lastSuccessAt, since!, expected.expectMs, now));
    }
    if (failures && !pause && def?.enabled !== false) {
      failing.push(failingWarning(name, lastSuccessAt, failures));
    }
  }
  warnings.push(...unplaced, ...deadMan, ...failing, ...slowWarnings(running));
  for (const p of input.pauses) warnings.push(pausedWarning(p));
  warnings.push(...blackoutWarnings(blackouts, now));
  if (input.notifications) warnings.push(...notifyWarnings(input.notifications));

  const warnPaused = input.warnPaused ?? false;
  const state = checkState(warnings, { warnPaused });
  const pools = input.pools ?? [];
  return {
    namespace: input.namespace,
    now,
    runners,
    running,
    jobs,
    warnings,
    state,
    warnPaused,
    pools,
    blackouts,
  };
}

/**
 * When a job that never succeeded first existed: its first row, or the earliest instant a live
 * runner loaded its current definition — not the runner's start: a job added by a reload
 * (SIGHUP) to a runner up for a week has existed since the reload.
 */
function firstAppearance(
  job: string,
  firstSeenAt: Date | null,
  loadedBy: RunnerRecord[],
): Date | null {
  const candidates = [firstSeenAt, ...loadedBy.map((r) => r.jobs.get(job)?.since)].filter(
    (d): d is Date => d != null,
  );
  if (candidates.length === 0) return null;
  return new Date(Math.min(...candidates.map((d) => d.getTime())));
}

/**
 * `no-eligible-runner`: live runners registered the job as one they may not run, and none of
 * them runs it (none loaded it as eligible and enabled). Not for a job the local file disables.
 */
function noEligibleWarning(
  job: string,
  enabledInFile: boolean | null,
  live: RunnerRecord[],
): Warning | null {
  if (enabledInFile === false || live.length === 0) return null;
  const loaded = live.map((r) => ({ host: r.host, def: r.jobs.get(job) }));
  const ineligible = loaded.filter((l) => l.def?.ineligible != null);
  if (ineligible.length === 0) return null;
  if (loaded.some((l) => l.def && l.def.ineligible == null && !l.def.disabled)) return null;
  const whys = [...new Set(ineligible.map((l) => l.def!.ineligible!))];
  const hosts = live.map((r) => r.host);
  const tagged = (r: RunnerRecord) =>
    r.tags && r.tags.length > 0 ? `${r.host} [${r.tags.join(', ')}]` : r.host;
  return {
    kind: 'no-eligible-runner',
    message:
      `job "${job}" has no eligible runner: ${whys.join('; ')}; live runners: ` +
      `${live.map(tagged).join(', ')} — none of them may run it, its fires are recorded missed`,
    job,
    hosts,
  };
}

function noRunnerWarning(namespace: string, runners: RunnerStatus[], now: Date): Warning {
  const hosts = (state: RunnerState) => runners.filter((r) => r.state === state).map((r) => r.host);
  const [stopped, gone] = [hosts('stopped'), hosts('gone')];
  const latest = Math.max(...runners.map((r) => r.lastSeenAt.getTime()));
  const known = [
    stopped.length > 0 ? `stopped: ${stopped.join(', ')}` : null,
    gone.length > 0 ? `gone: ${gone.join(', ')}` : null,
  ].filter((part) => part != null);
  const seen =
    runners.length === 0
      ? `no runner has registered in it for ${brief(STALE_RUNNER_MS)}`
      : `${known.join('; ')}; the last one was seen ${brief(now.getTime() - latest)} ago`;
  return {
    kind: 'no-runner',
    message: `no runner alive in namespace "${namespace}": ${seen}; no job runs until one starts`,
    hosts: runners.map((r) => r.host),
  };
}

function goneWarning(r: RunnerStatus, now: Date): Warning {
  const ago = now.getTime() - r.lastSeenAt.getTime();
  return {
    kind: 'runner-gone',
    message:
      `runner ${r.host} (pid ${r.pid}) stopped heartbeating: last seen ${brief(ago)} ago, at ` +
      `${r.lastSeenAt.toISOString()}, without a graceful stop (crashed, killed or cut off from ` +
      'the database)',
    hosts: [r.host],
  };
}

function clockWarning(r: RunnerStatus, threshold: number): Warning {
  const offset = r.clockOffsetMs!;
  return {
    kind: 'clock-offset',
    message:
      `runner ${r.host}'s clock is ${brief(Math.abs(offset))} ${offset > 0 ? 'ahead of' : 'behind'} ` +
      `the database's (threshold ${brief(threshold)}): its fires still run on database time, ` +
      'but fix its time sync (NTP)',
    hosts: [r.host],
  };
}

function noSuccessWarning(
  job: string,
  lastSuccessAt: Date | null,
  since: Date,
  expectMs: number,
  now: Date,
): Warning {
  const silence = brief(now.getTime() - since.getTime());
  const message = lastSuccessAt
    ? `job "${job}" has had no successful run for ${silence} (last success ` +
      `${lastSuccessAt.toISOString()}; expected one within ${brief(expectMs)})`
    : `job "${job}" has never run successfully in the ${silence} since it appeared ` +
      `(${since.toISOString()}; expected a success within ${brief(expectMs)})`;
  return { kind: 'no-success', message, job };
}

function failingWarning(
  job: string,
  lastSuccessAt: Date | null,
  failures: RecentFailures,
): Warning {
  const { count, latest } = failures;
  const runs =
    count >= FAILURE_COUNT_CAP ? `at least ${count} runs` : `${count} run${count === 1 ? '' : 's'}`;
  const since = lastSuccessAt
    ? `since its last success (${lastSuccessAt.toISOString()})`
    : 'and it has never run successfully';
  return {
    kind: 'failing',
    message:
      `job "${job}" is failing: ${runs} failed, timed out or were lost ${since}; the latest, ` +
      `the fire of ${latest.scheduledAt.toISOString()}, ended ${latest.status}`,
    job,
  };
}

/**
 * `slow`: a job with runs going on past their warn (`duration.warn`, judged by each row's
 * `warn_at` against the database's clock, whichever runner runs it): one finding per job.
 */
function slowWarnings(running: readonly RunningStatus[]): Warning[] {
  const byJob = new Map<string, RunningStatus[]>();
  for (const r of running.filter((x) => x.slow)) byJob.set(r.job, [...(byJob.get(r.job) ?? []), r]);
  return [...byJob.entries()].map(([job, runs]) => {
    const said = runs.map(
      (r) =>
        `run ${r.runId} on ${r.host} has been running for ${brief(r.runningForMs)}, past its ` +
        `warn of ${brief(r.warnAt!.getTime() - r.startedAt.getTime())}`,
    );
    return { kind: 'slow', message: `job "${job}" is slow: ${said.join('; ')}`, job };
  });
}

function pausedWarning(p: Pause): Warning {
  return {
    kind: 'paused',
    message:
      `job "${p.job}" is paused by ${p.pausedBy} since ${p.pausedAt.toISOString()}` +
      `${p.reason ? `: ${p.reason}` : ''}; every runner skips its fires until "baton resume ${p.job}"`,
    job: p.job,
  };
}

/** The stable JSON shape of `baton status --json` (documented in `baton status --help`). */
export function statusToJson(report: StatusReport) {
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  return {
    namespace: report.namespace,
    now: report.now.toISOString(),
    state: report.state,
    exitCode: CHECK_EXIT_CODES[report.state],
    /** True when the exit code is 0 (informational findings only, or none). */
    healthy: report.state === 'OK',
    runners: report.runners.map((r) => ({
      host: r.host,
      pid: r.pid,
      version: r.version,
      state: r.state,
      alive: r.alive,
      clockOffsetMs: r.clockOffsetMs,
      startedAt: r.startedAt.toISOString(),
      lastSeenAt: r.lastSeenAt.toISOString(),
      lastSeenAgoMs: report.now.getTime() - r.lastSeenAt.getTime(),
      stoppedAt: iso(r.stoppedAt),
      jobs: r.jobs,
      tags: r.tags,
    })),
    running: report.running.map((r) => ({
      runId: r.runId,
      job: r.job,
      host: r.host,
      pid: r.pid,
      trigger: r.trigger,
      scheduledAt: r.scheduledAt.toISOString(),
      startedAt: r.startedAt.toISOString(),
      runningForMs: r.runningForMs,
      attempts: r.attempts,
      warnAt: iso(r.warnAt),
      slow: r.slow,
    })),
    jobs: report.jobs.map((j) => ({
      name: j.name,
      inConfig: j.inConfig,
      enabled: j.enabled,
      schedule: j.schedule,
      timezone: j.timezone,
      after: j.after,
      nextFire: iso(j.nextFire),
      paused: j.paused,
      pause: j.pause
        ? { by: j.pause.pausedBy, at: j.pause.pausedAt.toISOString(), reason: j.pause.reason }
        : null,
      lastSuccessAt: iso(j.lastSuccessAt),
      failuresSinceSuccess: j.failures?.count ?? 0,
      lastFailure: j.failures
        ? {
            status: j.failures.latest.status,
            scheduledAt: j.failures.latest.scheduledAt.toISOString(),
          }
        : null,
      expectMs: j.expectMs,
      overdueAt: iso(j.overdueAt),
      loadedBy: j.loadedBy,
      ineligibleOn: j.ineligibleOn,
    })),
    warnings: report.warnings.map((w) => ({
      ...w,
      severity: severityOf(w.kind, { warnPaused: report.warnPaused }),
    })),
    pools: report.pools.map(poolToJson),
    blackouts: report.blackouts.map((b) => blackoutToJson(b, report.now)),
  };
}

/** A pool in `baton status --json` and the dashboard's overview. */
export function poolToJson(p: PoolStatus) {
  return {
    name: p.name,
    slots: p.slots,
    scope: p.scope,
    inUse: slotsInUse(p),
    places: p.places,
    holders: p.runs.map((r) => ({
      runId: r.id,
      job: r.job,
      host: r.host,
      startedAt: r.startedAt.toISOString(),
    })),
    claiming: p.claiming,
  };
}
