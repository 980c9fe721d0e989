/**
 * `baton explain` as pure functions: from what the database holds about one fire (its rows, the
 * registry judged now, the job's pause; store/explain-reads.ts reads them) and the local
 * schedules file, which fire is "the latest", the one-line verdict, the notes, and why each
 * registered runner that was there for the fire left no row — judged now: gone (crashed or cut
 * off), stopped, alive without the job in its schedule, alive but not eligible for it (its
 * `runOn`: docs/placement.md), alive but given the job only after the
 * fire (a reload), or alive and lagging — and those restarted since the fire that took part in
 * the job before it (down, or still starting, at the fire).
 *
 * "The latest fire" is the latest of the history's and — for an enabled job of the local
 * schedules file — the schedule's own latest fire by the database's clock: a fire nobody
 * attempted leaves no row, and is exactly the one to explain.
 *
 * A child job's fire (`after:`) is judged from its chain row instead (fleet/explain-chain.ts):
 * waiting for a parent, started by which parent runs, or skipped as `upstream`.
 */
import { formatDuration } from '../config/duration.js';
import { describePlacement } from '../config/placement.js';
import { describeRetries, retryWaitMs } from '../config/retry-delay.js';
import type { JobDefinition } from '../config/schema.js';
import { parseSchedule, type Schedule } from '../schedule/cron.js';
import { scheduleByVersions } from '../schedule/timing-switch.js';
import type { TimingRecord } from '../store/timings.js';
import { restartedSince, runnersAtFire, type RunnerNow } from '../store/fire-reads.js';
import { pausedReason, type Pause } from '../store/pauses.js';
import type { Run } from '../store/runs.js';
import type { SkipTally } from '../store/skip-tallies.js';
import { formatInstant, oneLine } from '../text.js';
import { jobOfSubject } from '../schedule-keys.js';
import { lastFireAtOrBefore } from '../schedule/dead-man.js';
import type { ChainFacts } from '../store/explain-reads.js';
import { judgeChain, type ChainJudgement } from './explain-chain.js';
import { versionInForce } from './timing-status.js';
import { shortTiming } from '../schedule/calendar.js';

/** How recent a fire may be for an alive runner without a row to count as "still contending". */
const STILL_CONTENDING_MS = 5_000;

export type MissingState =
  'gone' | 'stopped' | 'no-job' | 'ineligible' | 'loaded-later' | 'lagging' | 'restarted';

export interface MissingRunner {
  host: string;
  pid: number;
  state: MissingState;
  alive: boolean;
  startedAt: string;
  lastSeenAt: string;
  stoppedAt: string | null;
  lockSessionHeld: boolean | null;
  detail: string;
}

/** `latestOf` when a fire was given, or there was no database to ask. */
export const NO_LATEST: LatestFire = { fire: null, fromSchedule: false, beforeAnyRunner: null };

/**
 * The verdict for a job that has no fire to explain yet (`latest.fire` is null), with its next
 * fire by the local schedules file when `job` is in it.
 */
export function notFiredVerdict(
  name: string,
  namespace: string,
  job: JobDefinition | null,
  latest: LatestFire,
  now: Date,
  timings: readonly TimingRecord[] = [],
): string {
  const next = job ? nextFire(job, now, timings) : null;
  const unloaded = latest.beforeAnyRunner;
  if (job?.after) {
    return (
      `${name} has not fired yet in namespace "${namespace}": it runs after ` +
      `${job.after.jobs.join(', ')}, and no instant of theirs has a chain row for it yet` +
      (!job.enabled ? '; it is disabled in the schedules file' : '')
    );
  }
  return (
    `${name} has not fired yet in namespace "${namespace}" (no scheduled fire in the history` +
    (unloaded
      ? `; its schedule's latest fire, ${formatInstant(unloaded)} UTC, came before any ` +
        'runner loaded it)'
      : ')') +
    (job && !job.enabled ? '; it is disabled in the schedules file' : '') +
    (next ? `; next fire ${formatInstant(next)} UTC` : '')
  );
}

export interface FireInput {
  /** The job's name, and its definition in the local schedules file (null when not in it). */
  name: string;
  job: JobDefinition | null;
  fire: Date;
  /** Every row of the fire. */
  rows: Run[];
  /** The registry, judged at `now`. */
  runners: RunnerNow[];
  /** The hosts of the job's rows shortly before the fire. */
  hostsBefore: ReadonlySet<string>;
  /** The database's clock. */
  now: Date;
  goneAfterMs: number;
  pause: Pause | null;
  /** `latestOf`'s answer when the fire is the latest (NO_LATEST when it was given). */
  latest: LatestFire;
  /** The job's skip tallies of the fire's hour (`skips: tally`). */
  tallies?: SkipTally[];
  /** A child's (`after:`) rows of baton_dependent_fires at the fire, and its parents' rows there. */
  chain?: ChainFacts | null;
  /** The job's timing versions (store/timings.ts): which instants are its fires. */
  timings?: readonly TimingRecord[];
}

export interface FireJudgement {
  verdict: string;
  notes: string[];
  /** The runners that were there for the fire (or restarted since) and left no row, by host. */
  missing: MissingRunner[];
  /** The hosts that tallied skips around the fire (its hour, between their first and last). */
  tallied: string[];
  /**
   * A child job's fire (`after:` in the local file, or rows in baton_dependent_fires): where its
   * chain stands. Its verdict is the fire's, and no runner is listed as missing.
   */
  chain: ChainJudgement | null;
}

/** Everything `baton explain` says about one fire. */
export function judgeFire(input: FireInput): FireJudgement {
  const { name, job, fire, rows, runners, now } = input;
  const chain =
    job?.after != null || (input.chain?.fires.length ?? 0) > 0
      ? judgeChain({
          name,
          after: job?.after ?? null,
          now,
          fires: input.chain?.fires ?? [],
          parentRows: input.chain?.parentRows ?? new Map(),
          rows,
          runners,
          // The chain's verdict says what started the run.
          describeRun: (run) => winnerPhrase(run, now, null, false),
        })
      : null;
  if (chain) {
    const notes = [...chain.notes, ...notesFor(job, fire, rows, now, input.pause, null)];
    return { verdict: chain.verdict, notes, missing: [], tallied: [], chain };
  }
  const attemptHosts = new Set(rows.map((r) => r.host));
  // A runner that tallied skips of the job around this fire most likely skipped it too: not
  // judged as missing. Which fires its tally counted is not kept (docs/history.md).
  const around = (input.tallies ?? []).filter((t) => t.firstFire <= fire && fire <= t.lastFire);
  const tallied = [...new Set(around.map((t) => t.host))].filter((h) => !attemptHosts.has(h));
  const missing = [
    ...runnersAtFire(runners, fire),
    ...restartedSince(runners, fire, input.hostsBefore),
  ]
    .filter((r) => !attemptHosts.has(r.host) && !tallied.includes(r.host))
    .sort((a, b) => a.host.localeCompare(b.host))
    .map((r) => judgeMissing(r, name, fire, now, input.goneAfterMs));
  const notAFire = rows.length === 0 && job ? notAFireOf(job, fire, input.timings) : null;
  const verdict = verdictOf(rows, missing, fire, now, notAFire);
  const notes = notesFor(job, fire, rows, now, input.pause, notAFire);
  if (input.latest.fromSchedule && rows.length === 0) {
    const by = (input.timings ?? []).every((t) => job && isFileTiming(job, t))
      ? "the schedules file's schedule"
      : "the fleet's timing versions";
    notes.unshift(`the latest fire by ${by}; no runner wrote a row for it`);
  }
  if (input.tallies?.length) notes.push(tallyNote(input.tallies, fire, tallied));
  const placed = placementNote(name, job, runners, missing);
  if (placed) notes.push(placed);
  return { verdict, notes, missing, tallied: tallied.sort(), chain: null };
}

/**
 * Where the job may run, when runners that were there stood aside for it (`runOn`): "runs only on
 * runners tagged sftp: b" — the live runners that may run it now, by the registry.
 */
function placementNote(
  name: string,
  job: JobDefinition | null,
  runners: RunnerNow[],
  missing: MissingRunner[],
): string | null {
  if (!missing.some((m) => m.state === 'ineligible')) return null;
  const eligible = runners
    .filter((r) => {
      const loaded = r.jobs.get(name) ?? r.jobs.get(jobOfSubject(name));
      return r.alive && loaded != null && loaded.ineligible == null;
    })
    .map((r) => r.host)
    .sort();
  const where = job?.runOn
    ? describePlacement({ runOn: job.runOn }, (ms) => formatDuration(ms, 'brief'))
    : 'the runners its runOn names';
  return `runs only on ${where}: ${eligible.length > 0 ? eligible.join(', ') : 'none alive now'}`;
}

/** What the tallies of the fire's hour say, and what they cannot: which fire each skip was. */
function tallyNote(tallies: SkipTally[], fire: Date, tallied: string[]): string {
  const hour = new Date(Math.floor(fire.getTime() / 3_600_000) * 3_600_000);
  const hosts = [...new Set(tallies.map((t) => t.host))].sort();
  const each = hosts.map((h) => {
    const mine = tallies.filter((t) => t.host === h);
    const n = (x: number) => x.toLocaleString('en-US');
    const kinds = mine.map((t) => `${t.kind} ${n(t.skips)}`).join(', ');
    return `${h} ${n(mine.reduce((sum, t) => sum + t.skips, 0))} (${kinds})`;
  });
  const hhmm = (d: Date) => d.toISOString().slice(11, 16);
  return (
    `skips: tally — skips of this job counted in ${hhmm(hour)}–` +
    `${hhmm(new Date(hour.getTime() + 3_600_000))} UTC: ${each.join('; ')}` +
    (tallied.length ? `; ${tallied.join(', ')} most likely skipped this fire` : '') +
    ' (a tally does not say which fires it counted)'
  );
}

/**
 * The job's fires as the fleet fires them: each instant by the timing version in force then
 * (`timings`; the file's own schedule when none is recorded). Null for a job that runs only after
 * its parents (or a bad schedule).
 */
function scheduleOf(job: JobDefinition, timings: readonly TimingRecord[] = []): Schedule | null {
  if (job.schedule == null) return null;
  try {
    return scheduleByVersions(parseSchedule(job.schedule, job.timezone), timings);
  } catch {
    return null;
  }
}

export function nextFire(
  job: JobDefinition,
  after: Date,
  timings: readonly TimingRecord[] = [],
): Date | null {
  return scheduleOf(job, timings)?.nextAfter(after) ?? null;
}

export interface LatestFire {
  /** The fire to explain; null when there is none yet. */
  fire: Date | null;
  /** True when it is the schedule's fire, later than any fire in the history. */
  fromSchedule: boolean;
  /** The schedule's latest fire when it came before any runner had the job (and no history). */
  beforeAnyRunner: Date | null;
}

/**
 * The latest fire to explain: the later of the history's latest (`inHistory`) and, for an enabled
 * job of the local file, its schedule's latest fire at or before `now` (database time). A fire
 * that left no row at all is the one most worth explaining — but for a job without any history,
 * only when a registered runner had the job by then (`since` in the registry): before that, the
 * job "has not fired yet" as far as the fleet is concerned.
 */
export function latestOf(
  job: JobDefinition | null,
  inHistory: Date | null,
  runners: RunnerNow[],
  now: Date,
  timings: readonly TimingRecord[] = [],
): LatestFire {
  const schedule = job?.enabled ? scheduleOf(job, timings) : null;
  const last = schedule ? lastFireAtOrBefore(schedule, now) : null;
  if (!job || !last || (inHistory && last.getTime() <= inHistory.getTime())) {
    return { fire: inHistory, fromSchedule: false, beforeAnyRunner: null };
  }
  const hadIt = runnersAtFire(runners, last).some(
    (r) => (r.jobs.get(job.name)?.since.getTime() ?? Infinity) <= last.getTime(),
  );
  if (inHistory || hadIt) return { fire: last, fromSchedule: true, beforeAnyRunner: null };
  return { fire: null, fromSchedule: false, beforeAnyRunner: last };
}

/**
 * Why a runner that was there for the fire (or restarted since, see `restartedSince`) left no
 * row, judged now; `goneAfterMs` is `--gone-after`.
 */
export function judgeMissing(
  r: RunnerNow,
  job: string,
  fire: Date,
  now: Date,
  goneAfterMs: number,
): MissingRunner {
  const base = {
    host: r.host,
    pid: r.pid,
    alive: r.alive,
    startedAt: r.startedAt.toISOString(),
    lastSeenAt: r.lastSeenAt.toISOString(),
    stoppedAt: r.stoppedAt?.toISOString() ?? null,
    lockSessionHeld: r.lockSessionHeld,
  };
  const seen = formatInstant(r.lastSeenAt);
  if (r.startedAt.getTime() > fire.getTime()) {
    const since = r.stoppedAt
      ? `; stopped at ${formatInstant(r.stoppedAt)}`
      : r.alive
        ? ''
        : `; gone since ${seen}`;
    return {
      ...base,
      state: 'restarted',
      detail: `restarted at ${formatInstant(r.startedAt)} — down or starting at the fire${since}`,
    };
  }
  if (r.stoppedAt) {
    return { ...base, state: 'stopped', detail: `stopped at ${formatInstant(r.stoppedAt)}` };
  }
  if (!r.alive) {
    const why =
      r.lastSeenAgoMs > goneAfterMs
        ? `no heartbeat for ${formatDuration(r.lastSeenAgoMs, 'table')}`
        : 'its lock session has ended';
    const already =
      r.lastSeenAt.getTime() + goneAfterMs < fire.getTime() ? ', before the fire' : '';
    return {
      ...base,
      state: 'gone',
      detail: `gone since ${seen}${already} (${why}: crashed, killed, or cut off from the database)`,
    };
  }
  // A schedule created at run time (`<job>:<key>`) is run by the runners that have its job.
  const loaded = r.jobs.get(job) ?? r.jobs.get(jobOfSubject(job));
  if (!loaded) {
    return {
      ...base,
      state: 'no-job',
      detail: `alive, but its schedule has no job "${job}" (a different schedules file?)`,
    };
  }
  if (loaded.ineligible != null) {
    // Placed elsewhere (`runOn`): by design it writes nothing for the job's fires.
    return { ...base, state: 'ineligible', detail: `not eligible here (${loaded.ineligible})` };
  }
  if (loaded.since.getTime() > fire.getTime()) {
    return {
      ...base,
      state: 'loaded-later',
      detail:
        `alive; it loaded its definition of "${job}" at ${formatInstant(loaded.since)}, after ` +
        'this fire (a reload added or changed the job)',
    };
  }
  const sinceFire = now.getTime() - fire.getTime();
  return {
    ...base,
    state: 'lagging',
    detail:
      sinceFire < 0
        ? 'alive; the fire has not come yet'
        : sinceFire < STILL_CONTENDING_MS
          ? `alive; has not written its attempt yet (the fire was ${formatDuration(Math.max(0, sinceFire), 'table')} ago)`
          : 'alive, but wrote nothing for this fire (lagging, or not connected to the database then: see its log)',
  };
}

/** The one-line answer: who ran it (and how it ended), or why nobody did; then what is missing. */
export function verdictOf(
  rows: Run[],
  missing: MissingRunner[],
  fire: Date,
  now: Date,
  notAFire: string | null = null,
): string {
  // A fan-out fire (`workers: N`) has a winner per slot, a re-run fire one per generation
  // (rows come generation by generation): every one is named.
  const winners = rows.filter((r) => r.winner);
  const slotted = (w: Run) => winners.filter((o) => o.rerun === w.rerun).length > 1;
  const missed = rows.find((r) => r.status === 'missed');
  const skips = rows.filter((r) => r.status === 'skipped');
  const parts: string[] = [];
  if (winners.length > 0) {
    parts.push(
      winners.map((w) => winnerPhrase(w, now, slotted(w) ? w.workerSlot : null)).join(', '),
    );
    if (skips.length > 0) parts.push(`${count(skips.length, 'runner')} skipped`);
  } else if (missed?.reasonKind === 'in-doubt') {
    // The reason names the servers; the point must survive the 160-character cut.
    parts.push(
      'in doubt: the database failed over after this fire and the new primary has no row of ' +
        'it, so it may have run on the old primary; not caught up (onFailover: skip)' +
        (missed.reason ? ` (${oneLine(missed.reason.replace(/^in doubt: /, ''), 160)})` : ''),
    );
  } else if (missed?.reasonKind === 'not-claimed') {
    // A runner held the lock for it and could not record its claim: not "nobody attempted it".
    parts.push(`nobody ran it: ${oneLine(missed.reason ?? 'claim not recorded', 160)}`);
  } else if (missed) {
    parts.push(`nobody ran it: missed${missed.reason ? ` (${oneLine(missed.reason, 160)})` : ''}`);
  } else if (skips.length > 0) {
    const reasons = new Set(skips.map((s) => s.reason ?? ''));
    const [only] = reasons;
    parts.push(
      `nobody ran it: ${count(skips.length, 'runner')} skipped it` +
        (reasons.size === 1 && only ? ` (${oneLine(only, 160)})` : ' (reasons below)'),
    );
  } else if (fire.getTime() > now.getTime()) {
    parts.push('nobody attempted it: this fire has not come yet');
  } else if (notAFire) {
    parts.push(`nobody attempted it: ${notAFire}`);
  } else if (now.getTime() - fire.getTime() < STILL_CONTENDING_MS) {
    parts.push(
      `nobody attempted it yet: the fire was ${formatDuration(now.getTime() - fire.getTime(), 'table')} ago`,
    );
  } else {
    parts.push(
      'nobody attempted it: no runner wrote a row for this fire' +
        (missing.length === 0 ? ', and no registered runner was running then' : ''),
    );
  }
  // For an instant that is no fire at all, the runners' silence says nothing (they are listed).
  const recent = now.getTime() - fire.getTime() < STILL_CONTENDING_MS;
  for (const m of notAFire ? [] : missing) {
    const state =
      m.state === 'gone'
        ? `gone since ${formatInstant(new Date(m.lastSeenAt))}`
        : m.state === 'stopped'
          ? `stopped at ${formatInstant(m.stoppedAt ? new Date(m.stoppedAt) : null)}`
          : m.state === 'no-job'
            ? 'alive, without this job in its schedule'
            : m.state === 'ineligible'
              ? null
              : m.state === 'loaded-later'
                ? 'alive, given the job only after this fire'
                : m.state === 'restarted'
                  ? `restarted at ${formatInstant(new Date(m.startedAt))}: down or starting at the fire`
                  : recent
                    ? 'alive: its attempt is not written yet'
                    : 'alive now: lagging, or it was not connected then';
    parts.push(state == null ? `${m.host}: ${m.detail}` : `${m.host} left no attempt (${state})`);
  }
  return parts.join('; ');
}

function winnerPhrase(w: Run, now: Date, slot: number | null = null, showTrigger = true): string {
  const how =
    (w.trigger === 'schedule' || !showTrigger ? '' : ` (${w.trigger})`) +
    (w.rerun > 0 ? ` [generation ${w.rerun}]` : '') +
    (slot != null ? ` [slot ${slot}]` : '');
  const tries = w.attempts > 1 ? `, ${w.attempts} attempts` : '';
  if (w.status === 'running') {
    return `running on ${w.host}${how} since ${formatInstant(w.startedAt)} (for ${formatDuration(now.getTime() - w.startedAt.getTime(), 'table')}${tries})`;
  }
  const took = w.finishedAt
    ? formatDuration(w.finishedAt.getTime() - w.startedAt.getTime(), 'table')
    : '';
  if (w.status === 'done') return `ran on ${w.host}${how} (done${took && ` in ${took}`}${tries})`;
  const error = w.error ? `: ${oneLine(w.error, 160)}` : '';
  return `ran on ${w.host}${how} (${w.status}${took && ` after ${took}`}${tries}${error})`;
}

export function notesFor(
  job: JobDefinition | null,
  fire: Date,
  rows: Run[],
  now: Date,
  pause: Pause | null,
  notAFire: string | null,
): string[] {
  const notes: string[] = [];
  if (notAFire) notes.push(notAFire);
  if (job && rows.length === 0 && !job.enabled) {
    notes.push(`${job.name} is disabled in the schedules file`);
  }
  if (fire.getTime() > now.getTime()) notes.push('this fire is in the future (database time)');
  if (pause) notes.push(`${pause.job} is ${pausedReason(pause)} (now)`);
  const retried = job ? rows.find((r) => r.winner && r.attempts > 1) : undefined;
  if (job && retried) notes.push(retryNote(job, retried));
  return notes;
}

/**
 * A retried run's waits, as its winner computed them (the same on every runner:
 * config/retry-delay.ts): "retries: 3 retries, from 1s, ×2 up to 10m, ±10%; this fire waited
 * 0.9s, 2s before attempts 2–3".
 */
function retryNote(job: JobDefinition, run: Run): string {
  const attempts = Array.from({ length: Math.min(run.attempts - 1, 8) }, (_, i) => i + 2);
  const waits = attempts.map((a) =>
    formatDuration(retryWaitMs(run.namespace, job, run.scheduledAt, a), 'brief'),
  );
  const more = run.attempts - 1 > attempts.length ? ', …' : '';
  const which = run.attempts === 2 ? 'attempt 2' : `attempts 2–${run.attempts}`;
  return (
    `retries: ${describeRetries(job)}; this fire waited ${waits.join(', ')}${more} ` +
    `before ${which} (by the schedules file here)`
  );
}

/** Why an instant with no rows is no fire at all of the job's schedule; null when it is one. */
export function notAFireOf(
  job: JobDefinition,
  at: Date,
  timings: readonly TimingRecord[] = [],
): string | null {
  const next = nextFire(job, new Date(at.getTime() - 1), timings);
  if (next?.getTime() === at.getTime()) return null;
  // An instant of the schedule its calendars skip: said so, and where it went.
  const [skip] = scheduleOf(job, timings)?.calendarSkips?.(new Date(at.getTime() - 1), at, 1) ?? [];
  if (skip?.at.getTime() === at.getTime()) {
    const calendar =
      skip.why === 'only'
        ? `on none of its calendars ${skip.calendar}`
        : `on calendar ${skip.calendar}`;
    return (
      `${formatInstant(at)} is ${calendar}: no fire` +
      (skip.movedTo ? `; moved to ${formatInstant(skip.movedTo)} UTC (shift)` : ' (skipped)')
    );
  }
  if (!next) return null;
  // The timing in force at the instant is what it is not a fire of, named where it is not the
  // file's.
  const inForce = versionInForce(timings, at);
  const timing =
    inForce && !isFileTiming(job, inForce)
      ? `timing version ${inForce.version}, "${shortTiming(inForce.schedule)}" (${inForce.timezone})`
      : `"${job.schedule != null ? shortTiming(job.schedule) : 'none'}" (${job.timezone})`;
  return (
    `${formatInstant(at)} is not a fire of ${timing}; ` +
    `the next fire after it is ${formatInstant(next)} UTC`
  );
}

/** Whether a timing version is the local file's timing of `job`. */
function isFileTiming(job: JobDefinition, t: Pick<TimingRecord, 'schedule' | 'timezone'>): boolean {
  return t.schedule === job.schedule && t.timezone === job.timezone;
}

function count(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`;
}
