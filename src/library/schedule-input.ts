/**
 * What `scheduler.schedules.upsert(job, key, {schedule, timezone, params})` accepts
 * (docs/library-mode.md, "Schedules created at run time"): every problem of the call found at once
 * and refused as a ConfigError naming the field (`scheduler: schedules.upsert.schedule: …`),
 * before anything is written — the application passes what its tenants typed, so nothing of it is
 * trusted, and nothing of a bad call is half-applied.
 *
 * - `job`: a job defined with `scheduler.job(name, options, handler)`: it gives the handler and
 *   every policy (timeout, retries, overlap, pool, notify…); not one that runs `after:` others.
 * - `key`: src/schedule-keys.ts (ASCII letters, digits, `_ . @ -`, starting with a letter or
 *   digit, the job's name, `:` and the key at most 128 characters).
 * - `schedule`: a cron expression checked as schedules.yaml's are (config/load.ts, the same
 *   croner reading and the same messages), at most 255 characters; with the job's `prefer:`, its
 *   lead must be shorter than the schedule's shortest period, as in a file.
 * - `timezone`: an IANA name (default the job's), at most 64 characters.
 * - `params`: names as `baton run --env`'s (letters, digits, `_`, not starting with a digit, not
 *   `BATON_*`), string values, at most 32 KiB as recorded — the limits of `baton run --env`, whose
 *   parameters a run's row records the same way.
 */
import { notShorterThanPeriod } from '../config/load.js';
import type { JobDefinition } from '../config/schema.js';
import { ConfigError, type ConfigProblem } from '../errors.js';
import { PARAM_NAME, PARAMS_MAX_BYTES } from '../fire/run-params.js';
import { assertTimeZone, parseSchedule, type Schedule } from '../schedule/cron.js';
import { keyProblem } from '../schedule-keys.js';
import type { ScheduleDefinition } from '../store/schedules.js';
import { CODE_PLACE } from './job-options.js';

/** The third argument of `upsert`. */
export interface ScheduleInput {
  /** A cron expression, as a job's `schedule` in schedules.yaml. */
  schedule: string;
  /** An IANA time zone; default the job's `timezone`. */
  timezone?: string;
  /** Given to each run as `ctx.params` and recorded on its row; none by default. */
  params?: Record<string, string>;
}

const INPUT_KEYS = ['schedule', 'timezone', 'params'];
/** `baton_schedules.schedule` and `.timezone`. */
const SCHEDULE_MAX = 255;
const TIMEZONE_MAX = 64;

/** Refuses a call's `job` (unknown, or not one that can have schedules): its problem, or null. */
export function jobProblem(
  job: unknown,
  definition: JobDefinition | null,
  handlers: readonly string[],
): string | null {
  if (typeof job !== 'string') return `expected a job's name, got ${typeof job}`;
  if (!definition) {
    const known = handlers.length > 0 ? handlers.join(', ') : 'none yet';
    return (
      `unknown job ${JSON.stringify(job.slice(0, 128))}: define it with scheduler.job(name, ` +
      `options, handler) first (jobs: ${known})`
    );
  }
  if (definition.target.kind !== 'handler') {
    return `${job} is a job of a schedules file; schedules created at run time are for handler jobs (scheduler.job)`;
  }
  if (definition.after) {
    return `${job} runs after its parents (\`after:\`): it cannot have schedules of its own`;
  }
  return null;
}

/**
 * The call's definition, checked whole; a ConfigError listing every problem otherwise. `call`
 * names the method in the problems' paths (`schedules.upsert`).
 */
export function checkScheduleInput(
  call: string,
  job: string,
  key: unknown,
  input: unknown,
  definition: JobDefinition,
): ScheduleDefinition {
  const problems: ConfigProblem[] = [];
  const problem = (field: string, message: string) =>
    problems.push({ file: CODE_PLACE, path: field ? `${call}.${field}` : call, message });
  const keyWrong = keyProblem(job, key);
  if (keyWrong) problem('key', keyWrong);
  if (input == null || typeof input !== 'object' || Array.isArray(input)) {
    problem('', `expected an object {schedule, timezone?, params?}, got ${describe(input)}`);
    throw new ConfigError(problems);
  }
  const given = input as Record<string, unknown>;
  for (const name of Object.keys(given).filter((k) => !INPUT_KEYS.includes(k))) {
    problem(name.slice(0, 40), `unknown option (options: ${INPUT_KEYS.join(', ')})`);
  }
  const timezone = checkTimezone(given.timezone, definition, (m) => problem('timezone', m));
  const schedule = checkSchedule(given.schedule, timezone, definition, (m) =>
    problem('schedule', m),
  );
  const params = checkParams(given.params, (m) => problem('params', m));
  if (problems.length > 0 || schedule == null || timezone == null || params == null) {
    throw new ConfigError(problems);
  }
  return { schedule, timezone, params };
}

function checkTimezone(
  value: unknown,
  definition: JobDefinition,
  report: (message: string) => void,
): string | null {
  if (value == null) return definition.timezone;
  if (typeof value !== 'string') return (report(`expected a string, got ${describe(value)}`), null);
  if (value.length > TIMEZONE_MAX) {
    return (report(`is ${value.length} characters long, more than ${TIMEZONE_MAX}`), null);
  }
  try {
    assertTimeZone(value);
  } catch (err) {
    return (report((err as Error).message), null);
  }
  return value;
}

function checkSchedule(
  value: unknown,
  timezone: string | null,
  definition: JobDefinition,
  report: (message: string) => void,
): string | null {
  if (value == null) return (report('required: a cron expression'), null);
  if (typeof value !== 'string') return (report(`expected a string, got ${describe(value)}`), null);
  if (value.length > SCHEDULE_MAX) {
    return (report(`is ${value.length} characters long, more than ${SCHEDULE_MAX}`), null);
  }
  // A time zone refused is its own problem; the expression is read in UTC to check it anyway.
  let schedule: Schedule;
  try {
    schedule = parseSchedule(value, timezone ?? 'UTC');
  } catch (err) {
    return (report((err as Error).message), null);
  }
  if (definition.prefer) {
    const tooLong = notShorterThanPeriod(
      `the lead of ${definition.name}'s \`prefer\``,
      definition.prefer.leadMs,
      schedule,
    );
    if (tooLong) return (report(tooLong), null);
  }
  return value;
}

function checkParams(
  value: unknown,
  report: (message: string) => void,
): Record<string, string> | null {
  if (value == null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    return (report(`expected an object of strings (name → value), got ${describe(value)}`), null);
  }
  // Entries, then an object of them: `params[name] = v` would set the prototype of a name
  // `__proto__` (a valid name) instead of keeping it.
  const entries: [string, string][] = [];
  let ok = true;
  for (const [name, v] of Object.entries(value as Record<string, unknown>)) {
    const shown = JSON.stringify(name.length > 40 ? `${name.slice(0, 40)}…` : name);
    if (!PARAM_NAME.test(name)) {
      report(`${shown}: a name has letters, digits and _, and does not start with a digit`);
      ok = false;
    } else if (name.startsWith('BATON_')) {
      report(`${shown}: BATON_* names are baton's own (the fire's)`);
      ok = false;
    } else if (typeof v !== 'string') {
      report(`${shown}: expected a string value, got ${describe(v)}`);
      ok = false;
    } else {
      entries.push([name, v]);
    }
  }
  if (!ok) return null;
  const params: Record<string, string> = Object.fromEntries(entries);
  // As a run's row records them (fire/run-params.ts `checkParamsSize`, `baton run --env`).
  const bytes = Buffer.byteLength(JSON.stringify({ env: params, args: [] }), 'utf8');
  if (bytes > PARAMS_MAX_BYTES) {
    report(
      `${bytes} bytes as recorded, more than ${PARAMS_MAX_BYTES} (32 KiB): keep large values ` +
        'where the handler reads them (a table, a file), and pass their name',
    );
    return null;
  }
  return params;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') {
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  }
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}
