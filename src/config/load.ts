/**
 * schedules.yaml → a validated, typed `Config`, or a `ConfigError` listing every problem with its
 * file, line and path. Nothing is half-loaded: either the whole file is valid or nothing of it is
 * used (docs/design.md, "Guarantees": bad input is refused whole).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { ConfigError, errorMessage, type ConfigProblem } from '../errors.js';
import { TSX_MISSING, TYPESCRIPT_FILE, tsxLoader } from '../typescript-jobs.js';
import { parseDatabaseUrl } from './database-url.js';
import {
  DEFAULT_OUTPUT_MAX_BYTES,
  DEFAULT_NAMESPACE,
  DEFAULT_RETRY_DELAY_MS,
  DEFAULT_TIMEZONE,
  DEFAULT_AFTER_WITHIN_MS,
} from './defaults.js';
import { dependencyProblems, type AfterPlace } from './dependency-checks.js';
import { DEFAULT_PREFER_LEAD_MS } from './placement.js';
import type { JobPool, PoolDefinition } from './pools.js';
import { buildJobNotify, buildNotifyTargets } from './notify-config.js';
import { retentionTooShort } from './retention.js';
import { buildCalendars, type Calendars } from './calendars.js';
import { MAX_SHIFTED_PER_YEAR, MAX_TIMING_BYTES } from '../schedule/calendar.js';
import { assertTimeZone, parseSchedule, type Schedule } from '../schedule/cron.js';
import { formatDuration } from './duration.js';
import {
  fileSchema,
  jobNameSchema,
  poolNameSchema,
  type Config,
  type ConnectionSource,
  type JobDefinition,
  type JobTarget,
  type RawFile,
  type RawJob,
  type Retention,
} from './schema.js';
import { YamlSource, type PathSegment } from './yaml-source.js';

/** Reads and validates a schedules file. Throws ConfigError (exit 78) on any problem. */
export interface LoadOptions {
  /**
   * Whether the environment variables named by `connections:` must be set here. They must where
   * jobs run (`start`, `run`, `validate`); an operator's shell for `list` or `status` rarely has
   * the daemon's secrets, and does not need them.
   */
  connectionVariables?: 'require' | 'ignore';
  /** Library mode: jobs without `command` or `module` that run a function given in code. */
  handlers?: ReadonlySet<string>;
  /**
   * Library mode: leave the `after:` edges unchecked here; they are checked once the code's jobs
   * are merged with a schedules file's (library/job-options.ts `mergeConfigs`), where a code job's
   * parent may be.
   */
  deferDependencies?: boolean;
}

export function loadConfig(file: string, options: LoadOptions = {}): Config {
  const absolute = path.resolve(file);
  let text: string;
  try {
    text = readFileSync(absolute, 'utf8');
  } catch (err) {
    const reason =
      (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : String(err);
    throw new ConfigError([{ file: absolute, path: '', message: `cannot read: ${reason}` }]);
  }
  return parseConfig(absolute, text, options);
}

/** Validates schedules-file text; `file` is used for messages and to resolve relative paths. */
export function parseConfig(file: string, text: string, options: LoadOptions = {}): Config {
  const source = new YamlSource(file, text);
  if (!source.ok) throw new ConfigError(source.problems);

  const raw = source.toJS();
  if (raw == null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ConfigError([source.problem([], 'expected a mapping with a `jobs:` key')]);
  }
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) throw new ConfigError(zodProblems(source, raw, parsed.error));

  const problems: ConfigProblem[] = [];
  const config = buildConfig(source, parsed.data, problems, options);
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

function buildConfig(
  source: YamlSource,
  raw: RawFile,
  problems: ConfigProblem[],
  options: LoadOptions,
): Config {
  const baseDir = path.dirname(source.file);
  const connections = buildConnections(source, raw, problems, options);
  const notifyTargets = buildNotifyTargets(source, raw.notify, problems, options);
  const pools = buildPools(source, raw, problems);
  const calendars = buildCalendars(source, raw.calendars, baseDir, problems);
  const jobs: JobDefinition[] = [];
  for (const [name, rawJob] of Object.entries(raw.jobs)) {
    const inherited = new Set(Object.keys(raw.defaults ?? {}).filter((k) => !(k in rawJob)));
    const merged = { ...raw.defaults, ...rawJob };
    const pool = resolvePool(source, name, merged, inherited, pools, problems);
    const job = buildJob(
      source,
      baseDir,
      name,
      merged,
      inherited,
      problems,
      calendars,
      options.handlers?.has(name) === true,
    );
    if (job && pool) job.pool = pool;
    if (job) {
      const notify = buildJobNotify(
        source,
        name,
        raw.defaults?.notify,
        rawJob.notify,
        notifyTargets,
        problems,
      );
      jobs.push({ ...job, notify });
    }
    // Own keys only: `toString` or `constructor` is in every object, and named no connection.
    if (job?.connection != null && !Object.hasOwn(connections, job.connection)) {
      const known = Object.keys(connections).join(', ') || 'none defined';
      problems.push(
        source.problem(
          ['jobs', name, 'connection'],
          `unknown connection "${job.connection}" (connections: ${known})`,
        ),
      );
    }
  }
  if (Object.keys(raw.jobs).length === 0) {
    problems.push(source.problem(['jobs'], 'no jobs defined'));
  }
  const namespace = raw.namespace ?? DEFAULT_NAMESPACE;
  if (!options.deferDependencies) {
    const declared = new Set(Object.keys(raw.jobs));
    const locate = (job: string, place: AfterPlace, message: string) =>
      source.problem(afterPath(source, job, place), message);
    problems.push(...dependencyProblems(jobs, { namespace, declared, locate }));
  }
  const retention = raw.retention ?? null;
  if (retention) checkRetention(source, retention, jobs, problems);
  return {
    file: source.file,
    namespace,
    jobs,
    connections,
    retention,
    notifyTargets,
    pools,
    ...(raw.scheduleChanges?.settle != null
      ? { scheduleChanges: { settleMs: raw.scheduleChanges.settle } }
      : {}),
  };
}

/** `pools:`, each name checked like a job's (it is part of lock names and of run rows). */
function buildPools(
  source: YamlSource,
  raw: RawFile,
  problems: ConfigProblem[],
): Record<string, PoolDefinition> {
  const pools: Record<string, PoolDefinition> = {};
  for (const [name, spec] of Object.entries(raw.pools ?? {})) {
    const checked = poolNameSchema.safeParse(name);
    if (!checked.success) {
      const message = checked.error.issues.map((i) => i.message).join('; ');
      problems.push(source.problem(['pools', name], message));
      continue;
    }
    pools[name] = { name, slots: spec.slots, scope: spec.scope ?? 'fleet' };
  }
  return pools;
}

/**
 * A job's `pool:` and `poolFull:`, resolved against `pools:`; each problem reported where it is
 * written (the job's key, or `defaults:` for a job inheriting it). Undefined: no pool (or a
 * problem).
 */
function resolvePool(
  source: YamlSource,
  name: string,
  job: RawJob,
  inherited: ReadonlySet<string>,
  pools: Readonly<Record<string, PoolDefinition>>,
  problems: ConfigProblem[],
): JobPool | undefined {
  const report = (key: string, message: string) =>
    problems.push(
      inherited.has(key)
        ? source.problem(['defaults', key], `${message} (inherited by jobs.${name})`)
        : source.problem(['jobs', name, key], message),
    );
  if (job.pool == null) {
    // Inherited, it just does not apply; written on the job without a pool, it is a mistake.
    if (job.poolFull != null && !inherited.has('poolFull')) {
      report('poolFull', '`poolFull` says what a fire does when its pool is full; set `pool` too');
    }
    return undefined;
  }
  // Own keys only: `pools[...]` of `constructor` or `toString` is Object's, not a pool.
  const pool = Object.hasOwn(pools, job.pool) ? pools[job.pool] : undefined;
  if (!pool) {
    const known = Object.keys(pools).join(', ') || 'none defined';
    report('pool', `unknown pool "${job.pool}" (pools: ${known})`);
    return undefined;
  }
  const full = job.poolFull ?? 'skip';
  if (full === 'queue' && (job.workers ?? 1) > 1) {
    report(
      'poolFull',
      'a fan-out job (`workers` > 1) cannot queue for its pool (`poolFull: queue`)',
    );
    return undefined;
  }
  if (full === 'queue' && job.overlap === 'allow') {
    // A queued fire waits for a slot under the job's lock: with `allow` there is none, and every
    // runner would wait (and take a slot) for the same fire.
    report('poolFull', 'a job with `overlap: allow` cannot queue for its pool (`poolFull: queue`)');
    return undefined;
  }
  return { ...pool, full };
}

/**
 * The path of a problem of a job's `after:`: the key, its list, or the item naming a parent
 * (its index as written; `jobs: settle` written as one name has no item: the list's key).
 */
function afterPath(source: YamlSource, job: string, place: AfterPlace): PathSegment[] {
  const after = ['jobs', job, 'after'];
  if (place === 'after') return after;
  if (place === 'jobs') return [...after, 'jobs'];
  const written = valueAt(source.toJS(), [...after, 'jobs']);
  const index = Array.isArray(written) ? written.indexOf(place.parent) : -1;
  return index >= 0 ? [...after, 'jobs', index] : [...after, 'jobs'];
}

/** `retention:` must keep what baton reads back (see `retentionTooShort`). */
function checkRetention(
  source: YamlSource,
  retention: Retention,
  jobs: readonly JobDefinition[],
  problems: ConfigProblem[],
): void {
  // `retention: 30d` is reported where it is written, once; the object form per key.
  const written = valueAt(source.toJS(), ['retention']);
  const keys =
    typeof written === 'object'
      ? ([
          ['runs', retention.runsMs],
          ['skips', retention.skipsMs],
        ] as const)
      : ([[null, retention.runsMs]] as const);
  for (const [key, ms] of keys) {
    const tooShort = ms == null ? null : retentionTooShort(ms, jobs);
    if (tooShort) problems.push(source.problem(key ? ['retention', key] : ['retention'], tooShort));
  }
}

/**
 * `connections:`, checked now (a URL that parses, an environment variable that is set) so that a
 * run never fails on them later. The URLs themselves stay out of every message.
 */
function buildConnections(
  source: YamlSource,
  raw: RawFile,
  problems: ConfigProblem[],
  options: LoadOptions,
): Record<string, ConnectionSource> {
  const connections: Record<string, ConnectionSource> = {};
  for (const [name, spec] of Object.entries(raw.connections ?? {})) {
    const at = (key?: string): PathSegment[] =>
      key ? ['connections', name, key] : ['connections', name];
    if ((spec.url == null) === (spec.urlFromEnv == null)) {
      problems.push(source.problem(at(), 'set exactly one of `url` and `urlFromEnv`'));
      continue;
    }
    const url = spec.url ?? process.env[spec.urlFromEnv!];
    if ((url == null || url === '') && options.connectionVariables === 'ignore') {
      connections[name] = { kind: 'env', variable: spec.urlFromEnv! };
      continue;
    }
    if (url == null || url === '') {
      problems.push(
        source.problem(at('urlFromEnv'), `environment variable ${spec.urlFromEnv} is not set`),
      );
      continue;
    }
    try {
      parseDatabaseUrl(url, 'the URL');
    } catch (err) {
      problems.push(source.problem(at(spec.url != null ? 'url' : 'urlFromEnv'), errorMessage(err)));
      continue;
    }
    connections[name] =
      spec.url != null
        ? { kind: 'url', url: spec.url }
        : { kind: 'env', variable: spec.urlFromEnv! };
  }
  return connections;
}

function buildJob(
  source: YamlSource,
  baseDir: string,
  name: string,
  job: RawJob,
  inherited: ReadonlySet<string>,
  problems: ConfigProblem[],
  calendars: Calendars,
  handler = false,
): JobDefinition | undefined {
  const at = (key?: string): PathSegment[] => (key ? ['jobs', name, key] : ['jobs', name]);
  const before = problems.length;
  const report = (key: string | undefined, message: string) =>
    problems.push(source.problem(at(key), message));

  const nameCheck = jobNameSchema.safeParse(name);
  if (!nameCheck.success)
    report(undefined, nameCheck.error.issues.map((i) => i.message).join('; '));

  // A job with `after:` alone has no fires of its own: it runs at its parents' instants. A
  // library-mode handler may have none at all: it runs by the schedules the application creates
  // at run time (`scheduler.schedules.upsert`), or when asked (`runNow`, `baton run`).
  const handlerTarget = handler && job.command == null && job.module == null;
  if (job.schedule == null && job.after == null && !handlerTarget)
    report(undefined, 'missing `schedule` (or `after:`)');
  const timingText = boundedSchedule(job, calendars, report);
  const timezone = job.timezone ?? DEFAULT_TIMEZONE;
  let timezoneOk = true;
  try {
    assertTimeZone(timezone);
  } catch (err) {
    timezoneOk = false;
    if (inherited.has('timezone')) {
      // Reported where it is written (defaults.timezone), once per job that inherits it.
      problems.push(
        source.problem(
          ['defaults', 'timezone'],
          `${(err as Error).message} (inherited by jobs.${name})`,
        ),
      );
    } else {
      report('timezone', (err as Error).message);
    }
  }
  // Jitter spreads the starts of a schedule's fires; a job without one starts when its parents
  // let it. Inherited from `defaults:` it just does not apply; written on the job it is a mistake.
  const jitterApplies = job.schedule != null;
  if (!jitterApplies && (job.jitter ?? 0) > 0 && !inherited.has('jitter')) {
    report(
      'jitter',
      `\`jitter\` delays the fires of a job's own schedule; ${name} has none ` +
        (job.after != null
          ? '(it runs after its parents, when they let it)'
          : '(its schedules created at run time start at their instants)') +
        ': remove it',
    );
  }
  let preferLeadMs = job.prefer?.lead ?? DEFAULT_PREFER_LEAD_MS;
  // Reported where it is written: on the job, or in `defaults:` for each job inheriting it.
  const reportSetting = (key: string, message: string) =>
    inherited.has(key)
      ? problems.push(source.problem(['defaults', key], `${message} (inherited by jobs.${name})`))
      : report(key, message);
  if (timingText != null && timezoneOk) {
    try {
      const schedule = parseSchedule(timingText, timezone);
      const neverFires = neverFiresForCalendars(job, timingText, timezone, schedule);
      if (neverFires) report(job.onlyOn ? 'onlyOn' : 'skipOn', neverFires);
      const tooDense = tooManyToShift(job, schedule);
      if (tooDense) report('shift', tooDense);
      if ((job.jitter ?? 0) > 0) {
        const tooLong = notShorterThanPeriod('jitter', job.jitter!, schedule);
        if (tooLong) reportSetting('jitter', tooLong);
      }
      if (job.prefer?.lead != null) {
        const tooLong = notShorterThanPeriod('the lead of `prefer`', job.prefer.lead, schedule);
        if (tooLong) reportSetting('prefer', tooLong);
      }
      if (job.prefer) preferLeadMs = job.prefer.lead ?? defaultPreferLead(schedule);
    } catch (err) {
      report('schedule', (err as Error).message);
    }
  }

  const target: JobTarget | undefined = handlerTarget
    ? { kind: 'handler' }
    : buildTarget(baseDir, job, report);
  if ((job.workers ?? 1) > 1 && job.overlap === 'queue') {
    report('workers', 'a fan-out job (`workers` > 1) cannot use `overlap: queue`');
  }
  checkPlacement(job, report, reportSetting);
  const warnTooLong = warnPastTimeout(job);
  if (warnTooLong) {
    // Reported at the `warn` written: the job's, or that of `defaults:` it inherits.
    problems.push(
      inherited.has('duration')
        ? source.problem(
            ['defaults', 'duration', 'warn'],
            `${warnTooLong} (inherited by jobs.${name})`,
          )
        : source.problem(['jobs', name, 'duration', 'warn'], warnTooLong),
    );
  }
  if (
    job.connection != null &&
    target &&
    target.kind !== 'module' &&
    target.kind !== 'handler' &&
    !inherited.has('connection')
  ) {
    report('connection', '`connection` gives a module job its `ctx.db`; this job is a command');
  }
  const cwd = path.resolve(baseDir, job.cwd ?? '.');
  if (job.cwd != null && !isDirectory(cwd)) report('cwd', `directory not found: ${cwd}`);

  // (A job with neither `schedule` nor `after` was reported above.)
  if (problems.length > before || !target) return undefined;
  return {
    name,
    schedule: timingText,
    timezone,
    ...(job.description != null ? { description: job.description } : {}),
    enabled: job.enabled ?? true,
    target,
    env: job.env ?? {},
    cwd,
    timeoutMs: job.timeout ?? null,
    retries: job.retries ?? 0,
    ...retryDelayOf(job.retryDelay),
    catchUpMs: job.catchUp?.windowMs ?? null,
    catchUpFires: job.catchUp?.fires ?? 'latest',
    onFailover: job.onFailover ?? 'skip',
    overlap: job.overlap ?? 'skip',
    skips: job.skips ?? 'rows',
    expectMs: job.expect ?? null,
    workers: job.workers ?? 1,
    connection: job.connection ?? null,
    jitterMs: jitterApplies ? (job.jitter ?? 0) : 0,
    outputMaxBytes: job.output?.max ?? DEFAULT_OUTPUT_MAX_BYTES,
    secretEnv: job.secretEnv ?? [],
    outputLog: job.output?.log ?? false,
    notify: null,
    ...(job.duration ? { duration: job.duration } : {}),
    ...(job.after
      ? {
          after: {
            jobs: [...new Set(job.after.jobs)],
            on: job.after.on ?? 'success',
            withinMs: job.after.within ?? DEFAULT_AFTER_WITHIN_MS,
          },
        }
      : {}),
    ...(job.runOn
      ? { runOn: { tags: [...new Set(job.runOn.tags)], hosts: [...new Set(job.runOn.hosts)] } }
      : {}),
    ...(job.prefer
      ? { prefer: { hosts: [...new Set(job.prefer.hosts)], leadMs: preferLeadMs } }
      : {}),
    ...(job.every ? { every: true as const } : {}),
  };
}

/**
 * `runOn`, `prefer` and `every` together (docs/placement.md): what cannot be meant at once.
 * `report` names the job's own key, `reportSetting` the key where it is written (the job's, or
 * `defaults:`).
 */
function checkPlacement(
  job: RawJob,
  report: (key: string | undefined, message: string) => void,
  reportSetting: (key: string, message: string) => void,
): void {
  if (job.every) {
    if ((job.workers ?? 1) > 1) {
      report(
        'every',
        '`every` runs each fire once on every runner; it cannot also fan out with `workers`',
      );
    }
    if (job.prefer) {
      reportSetting('prefer', '`prefer` picks one runner; a job with `every` runs on all of them');
    }
    if (job.after) {
      report('every', '`every` cannot run after other jobs (`after:`): whose run would it follow?');
    }
  }
  if (job.prefer && job.runOn && job.runOn.hosts.length > 0) {
    const outside = job.prefer.hosts.filter((h) => !job.runOn!.hosts.includes(h));
    if (outside.length > 0) {
      reportSetting(
        'prefer',
        `${outside.join(', ')} may not run this job (its runOn lists only ` +
          `${job.runOn.hosts.join(', ')})`,
      );
    }
  }
}

/**
 * Why a fixed `duration.warn` can never be reached, or null: a job without retries is stopped at
 * its `timeout`, so a warn as long or longer would never tell. (With retries a run's attempts
 * and pauses add up past the timeout, and a warn beyond it is meaningful.)
 */
/**
 * The job's timing as one line (schedule/compound.ts): its `schedule` with the bounds `from`,
 * `until` and `maxFires` appended. A bound without a schedule is reported where it is written.
 */
function boundedSchedule(
  job: RawJob,
  calendars: Calendars,
  report: (key: string | undefined, message: string) => void,
): string | null {
  const bounds = [
    job.from != null ? `from ${job.from}` : null,
    job.until != null ? `until ${job.until}` : null,
    job.maxFires != null ? `max ${job.maxFires}` : null,
  ].filter((b) => b != null);
  if (job.schedule == null) {
    for (const key of ['from', 'until', 'maxFires'] as const) {
      if (job[key] != null)
        report(key, `\`${key}\` bounds a job's own schedule; this job has none`);
    }
    for (const key of ['skipOn', 'onlyOn', 'shift'] as const) {
      if (job[key] != null)
        report(key, `\`${key}\` applies to a job's own schedule; this job has none`);
    }
    return null;
  }
  // The calendars, carried in the line with their items (schedule/calendar.ts), in the order
  // written: a change of a calendar's days is a change of the job's timing.
  const clauses: string[] = [];
  for (const key of ['skipOn', 'onlyOn'] as const) {
    for (const name of [...new Set(job[key] ?? [])]) {
      const items = calendars.get(name);
      // A calendar with problems of its own: reported there.
      if (items === null) continue;
      if (!items) {
        const known = [...calendars.keys()].join(', ') || 'none defined';
        report(key, `unknown calendar "${name}" (calendars: ${known})`);
        continue;
      }
      clauses.push([key === 'skipOn' ? 'skip' : 'only', name, ...items].join(' '));
    }
  }
  if (job.shift != null && job.shift !== 'none') {
    if (job.skipOn == null && job.onlyOn == null) {
      report(
        'shift',
        '`shift` moves the fires a calendar skips; this job names none (skipOn, onlyOn)',
      );
    }
    clauses.push(`shift ${job.shift}`);
  }
  const line = [job.schedule, ...bounds, ...clauses].join('; ');
  const bytes = Buffer.byteLength(line);
  if (bytes > MAX_TIMING_BYTES) {
    report(
      job.onlyOn ? 'onlyOn' : 'skipOn',
      `its calendars make its timing ${bytes} bytes long, more than the ${MAX_TIMING_BYTES} a ` +
        'timing version holds: write fewer days and spans (a range for consecutive days)',
    );
  }
  return line;
}

/**
 * `shift` on a schedule whose calendars skip more of its fires in a year than MAX_SHIFTED_PER_YEAR
 * (schedule/calendar.ts): it moves a few fires a day, not a per-second job's holiday — each next
 * fire of a shifted schedule looks back over its skipped fires, on the runner's event loop.
 */
function tooManyToShift(job: RawJob, schedule: Schedule): string | null {
  if (job.shift == null || job.shift === 'none' || !schedule.calendarSkips) return null;
  const now = new Date();
  const year = new Date(now.getTime() + 366 * 86_400_000);
  const skipped = schedule.calendarSkips(now, year, MAX_SHIFTED_PER_YEAR + 1).length;
  if (skipped <= MAX_SHIFTED_PER_YEAR) return null;
  return (
    `its calendars skip more than ${MAX_SHIFTED_PER_YEAR} of its fires within the next year: shift ` +
    'moves the fires of a job that fires a few times a day; leave it out (shift: none)'
  );
}

/**
 * A schedule that fires within the next year, but never there because of its calendars: refused
 * like `0 0 31 2 *` is (what it is named for would never run).
 */
function neverFiresForCalendars(
  job: RawJob,
  timingText: string,
  timezone: string,
  schedule: Schedule,
): string | null {
  if (job.skipOn == null && job.onlyOn == null) return null;
  const now = new Date();
  const yearAhead = now.getTime() + 366 * 86_400_000;
  const next = schedule.nextAfter(now);
  if (next && next.getTime() <= yearAhead) return null;
  const plain = parseSchedule(timingText.split(/;\s*(?:skip|only|shift)\b/i)[0]!, timezone);
  const unfiltered = plain.nextAfter(now);
  if (!unfiltered || unfiltered.getTime() > yearAhead) return null;
  return (
    'the schedule never fires within the next year on the days its calendars allow ' +
    `(its next fire without them: ${unfiltered.toISOString()})`
  );
}

function warnPastTimeout(job: RawJob): string | null {
  const warn = job.duration?.warn;
  if (warn?.kind !== 'fixed' || job.timeout == null || (job.retries ?? 0) > 0) return null;
  if (warn.ms < job.timeout) return null;
  return (
    `\`warn\` ${formatDuration(warn.ms)} is not shorter than \`timeout\` ` +
    `${formatDuration(job.timeout)}: the run is stopped before it could be slow`
  );
}

/**
 * The lead of a `prefer` that does not say: DEFAULT_PREFER_LEAD_MS, or half the schedule's
 * shortest period when that is shorter (an every-second job leaves its preferred runner 500 ms).
 */
function defaultPreferLead(schedule: Schedule): number {
  return Math.min(DEFAULT_PREFER_LEAD_MS, Math.floor(shortestPeriodMs(schedule) / 2));
}

/** How many fires ahead the shortest period is looked for (a year of a daily job and more). */
const PERIOD_SAMPLE = 500;

/**
 * Why a delay of `ms` after each instant (`what`: jitter, a preferred runner's lead) is too long for
 * `schedule`, or null. A delay as long as the gap to the next fire
 * would start a fire after its successor's instant: fires would overtake each other and overlap
 * rules would judge the wrong one. The shortest gap over the next fires is the bound, so that a
 * schedule with uneven gaps (`0 9,10 * * *`) is held to its shortest one.
 */
export function notShorterThanPeriod(what: string, ms: number, schedule: Schedule): string | null {
  const shortest = shortestPeriodMs(schedule);
  if (ms < shortest) return null;
  return (
    `${what} ${formatDuration(ms)} is not shorter than the schedule's shortest period ` +
    `(${formatDuration(shortest)} between fires): write less than ${formatDuration(shortest)}`
  );
}

/** The shortest gap between two of the schedule's next PERIOD_SAMPLE fires. */
function shortestPeriodMs(schedule: Schedule): number {
  const fires = schedule.nextN(PERIOD_SAMPLE + 1, new Date());
  let shortest = Infinity;
  for (let i = 1; i < fires.length; i++) {
    shortest = Math.min(shortest, fires[i]!.getTime() - fires[i - 1]!.getTime());
  }
  return shortest;
}

function buildTarget(
  baseDir: string,
  job: RawJob,
  report: (key: string | undefined, message: string) => void,
): JobTarget | undefined {
  if (job.command != null && job.module != null) {
    report('module', 'set either `command` or `module`, not both');
    return undefined;
  }
  if (job.module != null) {
    if (job.shell) report('shell', '`shell` applies to `command`, not to `module`');
    const modulePath = path.resolve(baseDir, job.module);
    if (!existsSync(modulePath)) {
      report('module', `module file not found: ${modulePath}`);
      return undefined;
    }
    if (TYPESCRIPT_FILE.test(modulePath) && tsxLoader() == null) {
      report('module', `${job.module} ${TSX_MISSING}`);
      return undefined;
    }
    return { kind: 'module', path: modulePath };
  }
  if (job.command == null) {
    report(undefined, 'missing `command` or `module` (one of them says what to run)');
    return undefined;
  }
  if (typeof job.command === 'string') {
    if (job.shell !== true) {
      report(
        'command',
        'a string command runs through a shell: write it as an argv list ["prog", "arg"], ' +
          'or set `shell: true` to say that a shell is meant',
      );
      return undefined;
    }
    return { kind: 'shell', script: job.command };
  }
  if (job.shell === true) {
    report('shell', 'with `shell: true` give `command` as one string, not a list');
    return undefined;
  }
  return { kind: 'command', argv: job.command };
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function zodProblems(source: YamlSource, raw: unknown, error: z.ZodError): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const issue of error.issues) {
    const where = issue.path.filter((p): p is PathSegment => typeof p !== 'symbol');
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        problems.push(source.problem([...where, key], `unknown key "${key}"`));
      }
      continue;
    }
    problems.push(source.problem(where, describeIssue(issue, valueAt(raw, where))));
  }
  return problems;
}

function describeIssue(issue: z.core.$ZodIssue, value: unknown): string {
  if (issue.code === 'invalid_type') {
    if (value === undefined) return 'required';
    const got = value === null ? 'nothing' : Array.isArray(value) ? 'a list' : typeof value;
    return `expected ${issue.expected}, got ${got}`;
  }
  if (issue.code === 'invalid_union') return 'expected an argv list of strings, or a string';
  return issue.message;
}

function valueAt(root: unknown, path: readonly PathSegment[]): unknown {
  let node = root;
  for (const segment of path) {
    if (node == null || typeof node !== 'object') return undefined;
    node = (node as Record<string | number, unknown>)[segment];
  }
  return node;
}

/** `retryDelay:` as the job's settings: a fixed wait, or a backoff's first and its growth. */
function retryDelayOf(
  setting: RawJob['retryDelay'],
): Pick<JobDefinition, 'retryDelayMs' | 'retryBackoff'> {
  if (setting == null) return { retryDelayMs: DEFAULT_RETRY_DELAY_MS };
  if (typeof setting === 'number') return { retryDelayMs: setting };
  return {
    retryDelayMs: setting.initialMs,
    retryBackoff: { factor: setting.factor, maxMs: setting.maxMs },
  };
}
