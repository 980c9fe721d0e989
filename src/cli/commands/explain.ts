/**
 * `baton explain <job> [fire-time]`: why did a fire run where it did, or not at all. One verdict
 * line first, then every runner's attempt for the fire, then the registered runners that were there
 * for it and left no row at all — each judged now: gone (crashed or cut off), stopped, alive
 * without the job in its schedule, or alive and lagging.
 */
import { existsSync } from 'node:fs';
import type { CommandModule } from 'yargs';
import { loadConfig } from '../../config/load.js';
import type { Config, JobDefinition } from '../../config/schema.js';
import { jobNameSchema } from '../../config/schema.js';
import { UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { parseSchedule } from '../../schedule/cron.js';
import { openConnection } from '../../store/connect.js';
import {
  ALIVE_WITHIN_MS,
  databaseNow,
  isMissingSchema,
  jobHasRows,
  latestFire,
  runnersAtFire,
  runnersNow,
  type RunnerNow,
} from '../../store/fire-reads.js';
import { findPause, pausedReason, type Pause } from '../../store/pauses.js';
import { fireRows, type Run } from '../../store/runs.js';
import { action } from '../action.js';
import { formatDuration, formatInstant, table } from '../format.js';
import {
  configPath,
  resolveDatabase,
  resolveNamespace,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import { runToJson } from './history.js';
import { parseFrom } from './list.js';

interface ExplainArgs extends CommonArgs {
  job: string;
  fire?: string;
  json: boolean;
  namespace?: string;
}

/** How recent a fire may be for an alive runner without a row to count as "still contending". */
const STILL_CONTENDING_MS = 5_000;

export type MissingState = 'gone' | 'stopped' | 'no-job' | 'lagging';

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
  return existsSync(file) ? loadConfig(file) : null;
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
      }) as never,
  handler: action(async (args: ExplainArgs) => {
    const name = String(args.job);
    const nameCheck = jobNameSchema.safeParse(name);
    if (!nameCheck.success) {
      throw new UsageError(`"${name}": ${nameCheck.error.issues[0]?.message}`);
    }
    const given = args.fire != null ? parseFireTime(String(args.fire)) : null;
    const namespace = resolveNamespace(args);
    const config = optionalConfig(args);
    const job =
      config && config.namespace === namespace
        ? (config.jobs.find((j) => j.name === name) ?? null)
        : null;
    const target = resolveDatabase(args);

    let fire: Date | null = given;
    let rows: Run[] = [];
    let runners: RunnerNow[] = [];
    let now = new Date();
    let known = job != null;
    let pause: Pause | null = null;
    let conn;
    try {
      conn = await openConnection(target, { create: false });
      now = await databaseNow(conn);
      try {
        fire ??= await latestFire(conn, namespace, name);
        if (fire) rows = await fireRows(conn, namespace, name, fire);
        known ||= rows.length > 0 || (await jobHasRows(conn, namespace, name));
      } catch (err) {
        if (!isMissingSchema(err)) throw err;
      }
      try {
        ({ now, runners } = await runnersNow(conn, namespace));
        pause = await findPause(conn, namespace, name);
      } catch (err) {
        // A database from before the registry (migration 0003): nobody to name.
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
      const verdict =
        `${name} has not fired yet in namespace "${namespace}" (no scheduled fire in the history)` +
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
    const missing = runnersAtFire(runners, fire)
      .filter((r) => !attemptHosts.has(r.host))
      .map((r) => judgeMissing(r, name, fire, now));
    const notAFire = rows.length === 0 && job ? notAFireOf(job, fire) : null;
    const verdict = verdictOf(rows, missing, fire, now, notAFire);
    const notes = notesFor(job, fire, rows, now, pause, notAFire);

    if (args.json) {
      printJson({
        job: name,
        namespace,
        scheduledAt: fire.toISOString(),
        latest: given == null,
        verdict,
        winner: rows.find((r) => r.winner) ? runToJson(rows.find((r) => r.winner)!) : null,
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
            r.winner ? 'yes' : '',
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

function nextFire(job: JobDefinition, after: Date): Date | null {
  try {
    return parseSchedule(job.schedule, job.timezone).nextAfter(after);
  } catch {
    return null;
  }
}

/** Why a runner that was there for the fire left no row, judged now. */
export function judgeMissing(r: RunnerNow, job: string, fire: Date, now: Date): MissingRunner {
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
  if (r.stoppedAt) {
    return { ...base, state: 'stopped', detail: `stopped at ${formatInstant(r.stoppedAt)}` };
  }
  if (!r.alive) {
    const why =
      r.lastSeenAgoMs > ALIVE_WITHIN_MS
        ? `no heartbeat for ${formatDuration(r.lastSeenAgoMs)}`
        : 'its lock session has ended';
    const already =
      r.lastSeenAt.getTime() + ALIVE_WITHIN_MS < fire.getTime() ? ', before the fire' : '';
    return {
      ...base,
      state: 'gone',
      detail: `gone since ${seen}${already} (${why}: crashed, killed, or cut off from the database)`,
    };
  }
  if (!Object.hasOwn(r.schedule, job)) {
    return {
      ...base,
      state: 'no-job',
      detail: `alive, but its schedule has no job "${job}" (a different schedules file?)`,
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
  const winner = rows.find((r) => r.winner);
  const missed = rows.find((r) => r.status === 'missed');
  const skips = rows.filter((r) => r.status === 'skipped');
  const parts: string[] = [];
  if (winner) {
    parts.push(winnerPhrase(winner, now));
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
  } else {
    parts.push(`nobody attempted it: ${notAFire ?? 'no runner wrote a row for this fire'}`);
  }
  // For an instant that is no fire at all, the runners' silence says nothing (they are listed).
  for (const m of notAFire ? [] : missing) {
    const state =
      m.state === 'gone'
        ? `gone since ${formatInstant(new Date(m.lastSeenAt))}`
        : m.state === 'stopped'
          ? `stopped at ${formatInstant(m.stoppedAt ? new Date(m.stoppedAt) : null)}`
          : m.state === 'no-job'
            ? 'alive, without this job in its schedule'
            : 'alive now: lagging, or it was not connected then';
    parts.push(`${m.host} left no attempt (${state})`);
  }
  return parts.join('; ');
}

function winnerPhrase(w: Run, now: Date): string {
  const how = w.trigger === 'schedule' ? '' : ` (${w.trigger})`;
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
