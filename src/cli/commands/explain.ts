/**
 * `baton explain <job> [fire-time]`: why did a fire run where it did, or not at all. One verdict
 * line first, then every runner's attempt for the fire, then the registered runners that were there
 * for it and left no row at all — each judged now: gone (crashed or cut off), stopped, alive
 * without the job in its schedule, alive but given the job only after the fire (a reload), or
 * alive and lagging — and those restarted since the fire that took part in the job before it
 * (down, or still starting, at the fire).
 *
 * "The latest fire" is the latest of the history's and — for an enabled job of the local
 * schedules file — the schedule's own latest fire by the database's clock: a fire nobody
 * attempted leaves no row, and is exactly the one to explain.
 */
import { existsSync } from 'node:fs';
import type { CommandModule } from 'yargs';
import { loadConfig } from '../../config/load.js';
import type { Config, JobDefinition } from '../../config/schema.js';
import { jobNameSchema } from '../../config/schema.js';
import { lastFireAtOrBefore } from '../../fleet/dead-man.js';
import { loadedJobs } from '../../fleet/status.js';
import { UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { parseSchedule, type Schedule } from '../../schedule/cron.js';
import { openConnection } from '../../store/connect.js';
import {
  databaseNow,
  hostsBefore,
  isMissingSchema,
  jobHasRows,
  latestFire,
  restartedSince,
  runnersAtFire,
  runnersNow,
  type RunnerNow,
} from '../../store/fire-reads.js';
import { findPause, pausedReason, type Pause } from '../../store/pauses.js';
import { fireRows } from '../../store/history-reads.js';
import type { Run } from '../../store/runs.js';
import { action } from '../action.js';
import { formatDuration, formatInstant, table, winnerCell } from '../format.js';
import { configPath, resolveDatabase, withCommonOptions, type CommonArgs } from '../options.js';
import { resolveNamespace } from '../config-options.js';
import { runToJson } from './history.js';
import { parseFrom } from './list.js';
import { GONE_AFTER_OPTION, goneAfterMs } from './status.js';

interface ExplainArgs extends CommonArgs {
  job: string;
  fire?: string;
  json: boolean;
  namespace?: string;
  goneAfter: string;
}

/** How recent a fire may be for an alive runner without a row to count as "still contending". */
const STILL_CONTENDING_MS = 5_000;

export type MissingState = 'gone' | 'stopped' | 'no-job' | 'loaded-later' | 'lagging' | 'restarted';

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

/** The schedules file when there is one (an invalid one is an error, as everywhere). */
export function optionalConfig(args: CommonArgs): Config | null {
  const file = configPath(args);
  return existsSync(file) ? loadConfig(file, { connectionVariables: 'ignore' }) : null;
}

/**
 * A fire time: ISO-8601 with `Z` or an offset, or without one — then read as UTC, the way
 * `baton history` prints fires (`2026-11-30 03:00:00.000`), never in this host's zone.
 */
export function parseFireTime(value: string): Date {
  const noZone = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?$/i.test(value.trim());
  try {
    return parseFrom(noZone ? `${value.trim()}Z` : value.trim());
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    throw new UsageError(
      `fire time "${value}" is not an ISO-8601 instant: expected e.g. 2026-11-30T03:00:00Z, ` +
        '2026-11-30T04:00:00+01:00, or 2026-11-30 03:00:00.000 (UTC, as history prints it)',
    );
  }
}

export const explainCommand: CommandModule<object, ExplainArgs> = {
  command: 'explain <job> [fire]',
  describe:
    'Why did a fire run where it did, or not at all: every attempt and the runners that left none',
  builder: (y) =>
    withCommonOptions(y)
      .positional('job', { type: 'string', demandOption: true, describe: 'job name' })
      .positional('fire', {
        type: 'string',
        describe:
          'the fire (ISO-8601; without an offset: UTC, as history prints it); default the latest',
      })
      .option('json', { type: 'boolean', default: false, describe: 'print JSON' })
      .option('namespace', {
        type: 'string',
        describe: "namespace to read (env BATON_NAMESPACE; default the schedules file's)",
      })
      .option('gone-after', GONE_AFTER_OPTION) as never,
  handler: action(async (args: ExplainArgs) => {
    const name = String(args.job);
    const nameCheck = jobNameSchema.safeParse(name);
    if (!nameCheck.success) {
      throw new UsageError(`"${name}": ${nameCheck.error.issues[0]?.message}`);
    }
    const given = args.fire != null ? parseFireTime(String(args.fire)) : null;
    const goneAfter = goneAfterMs(args);
    const namespace = resolveNamespace(args);
    const config = optionalConfig(args);
    const job =
      config && config.namespace === namespace
        ? (config.jobs.find((j) => j.name === name) ?? null)
        : null;
    const target = resolveDatabase(args);

    let fire: Date | null = given;
    let latest: LatestFire = { fire: null, fromSchedule: false, beforeAnyRunner: null };
    let rows: Run[] = [];
    let runners: RunnerNow[] = [];
    let before = new Set<string>();
    let now = new Date();
    let known = job != null;
    let pause: Pause | null = null;
    let conn;
    try {
      conn = await openConnection(target, { create: false });
      now = await databaseNow(conn);
      try {
        ({ now, runners } = await runnersNow(conn, namespace, goneAfter));
        pause = await findPause(conn, namespace, name);
      } catch (err) {
        // A database from before the registry (migration 0003): nobody to name.
        if (!isMissingSchema(err)) throw err;
      }
      let inHistory: Date | null = null;
      try {
        if (!given) inHistory = await latestFire(conn, namespace, name);
      } catch (err) {
        if (!isMissingSchema(err)) throw err;
      }
      if (!given) {
        latest = latestOf(job, inHistory, runners, now);
        fire = latest.fire;
      }
      try {
        if (fire) {
          rows = await fireRows(conn, namespace, name, fire);
          before = await hostsBefore(conn, namespace, name, fire);
        }
        known ||= rows.length > 0 || (await jobHasRows(conn, namespace, name));
      } catch (err) {
        if (!isMissingSchema(err)) throw err;
      }
    } catch (err) {
      // A database nobody has started baton on yet: no rows, no runners.
      if (!isMissingSchema(err)) throw err;
    } finally {
      await conn?.end().catch(() => {});
    }

    if (!known) {
      const where = config ? ` and not in ${config.file}` : '';
      throw new UsageError(
        `unknown job "${name}": no rows in the history of namespace "${namespace}"${where}`,
      );
    }

    if (!fire) {
      const next = job ? nextFire(job, now) : null;
      const unloaded = latest.beforeAnyRunner;
      const verdict =
        `${name} has not fired yet in namespace "${namespace}" (no scheduled fire in the history` +
        (unloaded
          ? `; its schedule's latest fire, ${formatInstant(unloaded)} UTC, came before any ` +
            'runner loaded it)'
          : ')') +
        (job && !job.enabled ? '; it is disabled in the schedules file' : '') +
        (next ? `; next fire ${formatInstant(next)} UTC` : '');
      if (args.json) {
        printJson({
          job: name,
          namespace,
          scheduledAt: null,
          verdict,
          winner: null,
          attempts: [],
          missing: [],
          missingRunners: [],
          pausedNow: pauseJson(pause),
        });
      } else {
        process.stdout.write(`${verdict}\n`);
        if (pause) process.stdout.write(`note: ${name} is ${pausedReason(pause)}\n`);
      }
      return ExitCode.Ok;
    }

    const attemptHosts = new Set(rows.map((r) => r.host));
    const missing = [...runnersAtFire(runners, fire), ...restartedSince(runners, fire, before)]
      .filter((r) => !attemptHosts.has(r.host))
      .sort((a, b) => a.host.localeCompare(b.host))
      .map((r) => judgeMissing(r, name, fire, now, goneAfter));
    const notAFire = rows.length === 0 && job ? notAFireOf(job, fire) : null;
    const verdict = verdictOf(rows, missing, fire, now, notAFire);
    const notes = notesFor(job, fire, rows, now, pause, notAFire);
    if (latest.fromSchedule && rows.length === 0) {
      notes.unshift(
        "the latest fire by the schedules file's schedule; no runner wrote a row for it",
      );
    }

    if (args.json) {
      printJson({
        job: name,
        namespace,
        scheduledAt: fire.toISOString(),
        latest: given == null,
        latestFromSchedule: latest.fromSchedule,
        verdict,
        winner: rows.find((r) => r.winner) ? runToJson(rows.find((r) => r.winner)!) : null,
        // Every worker slot's run, for a fan-out job (one entry otherwise).
        winners: rows.filter((r) => r.winner).map(runToJson),
        attempts: rows.map(runToJson),
        missing: missing.map((m) => m.host),
        missingRunners: missing,
        notes,
        pausedNow: pauseJson(pause),
      });
      return ExitCode.Ok;
    }

    const out: string[] = [verdict, ''];
    out.push(`job:        ${name} (namespace ${namespace})`);
    out.push(`fire:       ${formatInstant(fire)} UTC${given == null ? ' (the latest)' : ''}`);
    for (const note of notes) out.push(`note:       ${note}`);
    out.push('');
    if (rows.length === 0) {
      out.push('attempts:   none (no runner wrote a row for this fire)');
    } else {
      out.push(`attempts (${rows.length}):`);
      out.push(
        table(
          [
            'HOST',
            'WINNER',
            'TRIGGER',
            'STATUS',
            'STARTED',
            'FINISHED',
            'DURATION',
            'REASON / ERROR',
          ],
          rows.map((r) => [
            r.host,
            winnerCell(r),
            r.trigger,
            r.attempts > 1 ? `${r.status} ×${r.attempts}` : r.status,
            formatInstant(r.startedAt),
            formatInstant(r.finishedAt),
            r.finishedAt ? formatDuration(r.finishedAt.getTime() - r.startedAt.getTime()) : '',
            oneLine(r.reason ?? r.error ?? ''),
          ]),
        ).trimEnd(),
      );
    }
    out.push('');
    if (missing.length === 0) {
      out.push(
        runners.length === 0
          ? 'no attempt missing: no runner is registered in this namespace'
          : rows.length === 0
            ? 'no attempt missing: no registered runner was running at the fire'
            : 'no attempt missing: every runner that was running at the fire left a row',
      );
    } else {
      out.push(`runners that left no attempt (${missing.length}):`);
      out.push(
        table(
          ['HOST', 'PID', 'STATE', 'LAST SEEN', 'DETAIL'],
          missing.map((m) => [
            m.host,
            m.pid,
            m.state,
            formatInstant(new Date(m.lastSeenAt)),
            m.detail,
          ]),
        ).trimEnd(),
      );
    }
    process.stdout.write(`${out.join('\n')}\n`);
    return ExitCode.Ok;
  }),
};

function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

function pauseJson(p: Pause | null) {
  return p ? { pausedBy: p.pausedBy, pausedAt: p.pausedAt.toISOString(), reason: p.reason } : null;
}

function scheduleOf(job: JobDefinition): Schedule | null {
  try {
    return parseSchedule(job.schedule, job.timezone);
  } catch {
    return null;
  }
}

function nextFire(job: JobDefinition, after: Date): Date | null {
  return scheduleOf(job)?.nextAfter(after) ?? null;
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
): LatestFire {
  const schedule = job?.enabled ? scheduleOf(job) : null;
  const last = schedule ? lastFireAtOrBefore(schedule, now) : null;
  if (!job || !last || (inHistory && last.getTime() <= inHistory.getTime())) {
    return { fire: inHistory, fromSchedule: false, beforeAnyRunner: null };
  }
  const hadIt = runnersAtFire(runners, last).some(
    (r) => (loadedJobs(r).get(job.name)?.since.getTime() ?? Infinity) <= last.getTime(),
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
        ? `no heartbeat for ${formatDuration(r.lastSeenAgoMs)}`
        : 'its lock session has ended';
    const already =
      r.lastSeenAt.getTime() + goneAfterMs < fire.getTime() ? ', before the fire' : '';
    return {
      ...base,
      state: 'gone',
      detail: `gone since ${seen}${already} (${why}: crashed, killed, or cut off from the database)`,
    };
  }
  const loaded = loadedJobs(r).get(job);
  if (!loaded) {
    return {
      ...base,
      state: 'no-job',
      detail: `alive, but its schedule has no job "${job}" (a different schedules file?)`,
    };
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
          ? `alive; has not written its attempt yet (the fire was ${formatDuration(Math.max(0, sinceFire))} ago)`
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
  // A fan-out fire (`workers: N`) has a winner per slot: every one is named.
  const winners = rows.filter((r) => r.winner);
  const missed = rows.find((r) => r.status === 'missed');
  const skips = rows.filter((r) => r.status === 'skipped');
  const parts: string[] = [];
  if (winners.length > 0) {
    parts.push(
      winners.map((w) => winnerPhrase(w, now, winners.length > 1 ? w.workerSlot : null)).join(', '),
    );
    if (skips.length > 0) parts.push(`${count(skips.length, 'runner')} skipped`);
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
      `nobody attempted it yet: the fire was ${formatDuration(now.getTime() - fire.getTime())} ago`,
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
            : m.state === 'loaded-later'
              ? 'alive, given the job only after this fire'
              : m.state === 'restarted'
                ? `restarted at ${formatInstant(new Date(m.startedAt))}: down or starting at the fire`
                : recent
                  ? 'alive: its attempt is not written yet'
                  : 'alive now: lagging, or it was not connected then';
    parts.push(`${m.host} left no attempt (${state})`);
  }
  return parts.join('; ');
}

function winnerPhrase(w: Run, now: Date, slot: number | null = null): string {
  const how =
    (w.trigger === 'schedule' ? '' : ` (${w.trigger})`) + (slot != null ? ` [slot ${slot}]` : '');
  const tries = w.attempts > 1 ? `, ${w.attempts} attempts` : '';
  if (w.status === 'running') {
    return `running on ${w.host}${how} since ${formatInstant(w.startedAt)} (for ${formatDuration(now.getTime() - w.startedAt.getTime())}${tries})`;
  }
  const took = w.finishedAt ? formatDuration(w.finishedAt.getTime() - w.startedAt.getTime()) : '';
  if (w.status === 'done') return `ran on ${w.host}${how} (done${took && ` in ${took}`}${tries})`;
  const error = w.error ? `: ${oneLine(w.error, 160)}` : '';
  return `ran on ${w.host}${how} (${w.status}${took && ` after ${took}`}${tries}${error})`;
}

function notesFor(
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
  return notes;
}

/** Why an instant with no rows is no fire at all of the job's schedule; null when it is one. */
function notAFireOf(job: JobDefinition, at: Date): string | null {
  const next = nextFire(job, new Date(at.getTime() - 1));
  if (!next || next.getTime() === at.getTime()) return null;
  return (
    `${formatInstant(at)} is not a fire of "${job.schedule}" (${job.timezone}); ` +
    `the next fire after it is ${formatInstant(next)} UTC`
  );
}

function count(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`;
}

function oneLine(s: string, max = 100): string {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
