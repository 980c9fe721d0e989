/**
 * The shape of schedules.yaml, as zod schemas, and the typed settings it becomes.
 *
 * Every key a user may write is declared here with a comment saying why it exists; unknown keys
 * are refused (strict objects), so a typo such as `schedlue:` is an error at load time instead of a
 * job that silently never runs. Semantic checks that need more than the shape (cron expressions,
 * time zones, module files) live in `load.ts`.
 */
import { z } from 'zod';
import { DURATION_HINT, formatDuration, parseDuration } from './duration.js';
import {
  DEFAULT_RETRY_DELAY_MAX_MS,
  DEFAULT_RETRY_DELAY_MS,
  DEFAULT_RETRY_FACTOR,
} from './defaults.js';
import { MAX_RETRY_FACTOR, type RetryBackoff } from './retry-delay.js';
import {
  duration,
  durationOrZero,
  settleDuration,
  timerDuration,
  timerDurationOrZero,
  withinDuration,
} from './value-schemas.js';
import { TAG_HINT, TAG_PATTERN, type Prefer, type RunOn } from './placement.js';
import {
  MAX_POOL_SLOTS,
  POOL_FULL_POLICIES,
  POOL_SCOPES,
  type JobPool,
  type PoolDefinition,
} from './pools.js';
import {
  jobNotifySchema,
  targetsSchema,
  type JobNotify,
  type NotifyTarget,
} from './notify-schema.js';
import { parseSize, SIZE_HINT } from './size.js';
import {
  DEFAULT_WARN_FLOOR_MS,
  MAX_WARN_FACTOR,
  parseRelativeWarn,
  type DurationLimits,
  type WarnLimit,
} from './duration-limits.js';

import { JOB_NAME_MAX, JOB_NAME_PATTERN, NAMESPACE_MAX } from './names.js';

export { JOB_NAME_MAX, JOB_NAME_PATTERN, NAMESPACE_MAX };

const nameRule = (max: number, what: string) =>
  z
    .string()
    .max(max, `${what} is longer than ${max} characters`)
    .regex(
      JOB_NAME_PATTERN,
      `${what} may contain only letters, digits, '.', '_' and '-', and must start with a letter or digit`,
    );

export const namespaceSchema = nameRule(NAMESPACE_MAX, 'namespace');
export const jobNameSchema = nameRule(JOB_NAME_MAX, 'job name');

/** A size such as `4MiB`, as bytes; `0` is allowed (keep none). */
const size = z.unknown().transform((value, ctx) => {
  const bytes = typeof value === 'string' || typeof value === 'number' ? parseSize(value) : null;
  if (bytes == null) {
    ctx.addIssue({
      code: 'custom',
      message: `expected a size, got ${JSON.stringify(value)}: ${SIZE_HINT}`,
    });
    return z.NEVER;
  }
  return bytes;
});

/** The most `output.max` may be: the tail is held in memory and handed over when a run ends. */
export const OUTPUT_MAX_LIMIT = 64 * 1024 * 1024;

/** `output:` — what is kept of each attempt's output (execution/output-capture.ts). */
const output = z
  .object({
    max: size.refine((bytes) => bytes <= OUTPUT_MAX_LIMIT, {
      message: 'output.max is at most 64MiB: the tail of a run is held in memory until it ends',
    }),
    log: z.boolean(),
  })
  .partial()
  .strict();

/**
 * Which missed fires of the catch-up window run after an outage:
 * - `latest`: only the newest one (the default, and what `catchUp: 10m` means) — for a batch
 *   that does the whole job each time, where running three missed fires would do it three times;
 * - `all`: each of them once, oldest first, one after another (daemon/catch-up.ts) — for a batch
 *   that must not lose a period, such as an hourly import.
 */
export const CATCH_UP_FIRES = ['latest', 'all'] as const;
export type CatchUpFires = (typeof CATCH_UP_FIRES)[number];

const catchUpWindow = z
  .object({ window: duration, fires: z.enum(CATCH_UP_FIRES).optional() })
  .strict();

/**
 * `catchUp: 10m` (the latest missed fire), or `catchUp: {window: 6h, fires: all}`. Told apart by
 * the value's type rather than by a union, so that a mistake is reported in the form written.
 */
const catchUp = z.unknown().transform((value, ctx) => {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const parsed = catchUpWindow.safeParse(value);
    if (!parsed.success) {
      for (const issue of parsed.error.issues)
        ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
      return z.NEVER;
    }
    return { windowMs: parsed.data.window, fires: parsed.data.fires ?? 'latest' };
  }
  const ms = typeof value === 'string' ? parseDuration(value) : null;
  if (ms == null || ms <= 0) {
    ctx.addIssue({
      code: 'custom',
      message:
        `expected a duration, got ${JSON.stringify(value)}: ${DURATION_HINT}; ` +
        'or {window: <duration>, fires: latest | all}',
    });
    return z.NEVER;
  }
  // Past the longest duration, or too long to be a number: the duration's own message.
  const bounded = duration.safeParse(value);
  if (!bounded.success) {
    for (const issue of bounded.error.issues) ctx.addIssue(issue as never);
    return z.NEVER;
  }
  return { windowMs: ms, fires: 'latest' as CatchUpFires };
});

/** `retryDelay: {initial, factor, max}`: a backoff (config/retry-delay.ts), defaults applied. */
const retryBackoff = z
  .strictObject({
    initial: timerDuration.optional(),
    factor: z
      .number()
      .min(1, 'factor must be 1 or more (1: every wait the same, with the jitter)')
      .max(MAX_RETRY_FACTOR, `factor must be at most ${MAX_RETRY_FACTOR}`)
      .optional(),
    max: timerDuration.optional(),
  })
  .transform((b, ctx) => {
    const initialMs = b.initial ?? DEFAULT_RETRY_DELAY_MS;
    const maxMs = b.max ?? DEFAULT_RETRY_DELAY_MAX_MS;
    if (initialMs > maxMs) {
      const [initial, max] = [formatDuration(initialMs), formatDuration(maxMs)];
      ctx.addIssue(
        b.max != null
          ? {
              code: 'custom',
              path: ['max'],
              message: `max ${max} is shorter than initial ${initial}`,
            }
          : {
              code: 'custom',
              path: ['initial'],
              message: `initial ${initial} is longer than max's default ${max}: give max too`,
            },
      );
      return z.NEVER;
    }
    return { initialMs, factor: b.factor ?? DEFAULT_RETRY_FACTOR, maxMs };
  });

/**
 * `retryDelay: 30s` (the same wait before every retry), or `retryDelay: {initial: 10s, factor: 2,
 * max: 10m}` (a backoff). Told apart by the value's type rather than by a union, so that a mistake
 * is reported in the form written.
 */
const retryDelay = z.unknown().transform((value, ctx) => {
  const isObject = value !== null && typeof value === 'object' && !Array.isArray(value);
  const parsed = isObject ? retryBackoff.safeParse(value) : timerDurationOrZero.safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const message = issue.message.startsWith('expected a duration')
        ? `${issue.message}; or {initial, factor, max} for a backoff`
        : issue.message;
      ctx.addIssue({ ...issue, message } as never);
    }
    return z.NEVER;
  }
  return parsed.data;
});

/**
 * After a database failover, the fires in doubt (they may have run on the old primary, whose rows
 * the new one may lack; daemon/in-doubt.ts):
 * - `skip`: recorded `missed` with the kind `in-doubt`, never caught up (the default: a batch
 *   that is not idempotent must not run twice);
 * - `catchUp`: caught up like any fire nobody attempted (`catchUp:` decides which), for a batch
 *   that is idempotent.
 */
export const ON_FAILOVER_POLICIES = ['skip', 'catchUp'] as const;
export type OnFailoverPolicy = (typeof ON_FAILOVER_POLICIES)[number];

/**
 * What a fire does when it finds the job still running (on any runner):
 * - `skip`: records a skip and lets the fire go (the default; no overlap, no pile-up);
 * - `queue`: waits for the running run, at most until the job's next fire, then runs once;
 * - `allow`: takes no job lock, so runs of successive fires may overlap; the fire key still
 *   gives every fire exactly one winner.
 */
export const OVERLAP_POLICIES = ['skip', 'queue', 'allow'] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];

/**
 * How the skips of a job are kept (docs/history.md, "Skip tallies"):
 * - `rows`: one `baton_runs` row per runner per fire it skipped (the default);
 * - `tally`: a skip of a fire whose winner the runner saw is counted per runner and hour in
 *   `baton_skip_tallies`; every other skip still writes its row. For every-second jobs on many
 *   runners, whose skip rows are most of the history.
 */
export const SKIP_RECORDS = ['rows', 'tally'] as const;
export type SkipRecord = (typeof SKIP_RECORDS)[number];

/**
 * When a child job (`after:`) runs after its parents' runs of an instant:
 * - `success`: every parent's run of the instant ended `done` (the default);
 * - `failure`: every parent's run failed (`failed`, `timeout`, `killed`, `lost`; not `interrupted`,
 *   a graceful stop of its runner) — a clean-up or an alarm job;
 * - `always`: every parent ran and has a verdict, whichever.
 * A parent that did not run the instant at all (skipped, missed, paused) never lets its child
 * run: the child is skipped as `upstream` (docs/dependencies.md).
 */
export const AFTER_ON = ['success', 'failure', 'always'] as const;
export type AfterOn = (typeof AFTER_ON)[number];

/** `after:` — the jobs a job runs after, for the same instant (docs/dependencies.md). */
const afterSchema = z.strictObject({
  /** The parents: jobs of the same file (namespace). One name or a list. */
  jobs: z.union([
    z
      .string()
      .min(1)
      .transform((name) => [name]),
    z
      .array(z.string().min(1))
      .min(1)
      .superRefine((names, ctx) => {
        // A parent named twice is a typo for another parent, not a wish to wait for it twice.
        names.forEach((name, i) => {
          if (names.indexOf(name) < i) {
            ctx.addIssue({
              code: 'custom',
              path: [i],
              message: `"${name}" is named twice: a typo for another parent?`,
            });
          }
        });
      }),
  ]),
  on: z.enum(AFTER_ON).optional(),
  /**
   * How long after the instant the child waits for its parents' verdicts before it is skipped as
   * `upstream`. Default a day.
   */
  within: withinDuration.optional(),
});

/**
 * `duration.warn:` a duration (kept by the run's own timer, hence a timer's bound), or `p95x3`:
 * a multiple of a percentile of the job's recent successful runs (config/duration-limits.ts).
 * Told apart by the value rather than by a union, so that a mistake gets the message of its form.
 */
const warnValue = z.unknown().transform((value, ctx): Omit<WarnLimit, 'floorMs'> | WarnLimit => {
  const relative = typeof value === 'string' ? parseRelativeWarn(value) : null;
  if (relative) {
    const { percentile, factor } = relative;
    if (percentile < 1 || percentile > 99) {
      ctx.addIssue({ code: 'custom', message: `the percentile is p1 to p99, got p${percentile}` });
      return z.NEVER;
    }
    if (factor < 1 || factor > MAX_WARN_FACTOR) {
      ctx.addIssue({
        code: 'custom',
        message:
          `the factor is 1 to ${MAX_WARN_FACTOR}, got ${factor} (below 1 most runs would be ` +
          'slow; past it the warn tells nothing)',
      });
      return z.NEVER;
    }
    return { kind: 'relative', percentile, factor, floorMs: DEFAULT_WARN_FLOOR_MS };
  }
  if (typeof value === 'string' && /^p\d/.test(value.trim())) {
    ctx.addIssue({
      code: 'custom',
      message: `expected a percentile (p1 to p99) times a factor, such as p95x3, got ${JSON.stringify(value)}`,
    });
    return z.NEVER;
  }
  const fixed = timerDuration.safeParse(value);
  if (!fixed.success) {
    const message = fixed.error.issues[0]?.message ?? 'expected a duration';
    ctx.addIssue({
      code: 'custom',
      message: `${message}; or a multiple of a percentile of the job's recent runs, such as p95x3`,
    });
    return z.NEVER;
  }
  return { kind: 'fixed', ms: fixed.data };
});

/**
 * `duration:` — soft limits, told and never enforced (config/duration-limits.ts): `warn` (a run
 * past it is `slow`), `min` (a successful run shorter than it is `too-short`), `warnFloor` (the
 * least a relative `warn` is). Checks between the keys are here; against `timeout` in load.ts.
 */
const durationLimitsKeys = z
  .strictObject({ warn: warnValue, min: duration, warnFloor: timerDuration })
  .partial();
const durationLimitsSchema = z.unknown().transform((value, ctx): DurationLimits => {
  // Parsed by hand, so that the checks between the keys run only on keys that are all right
  // (an unknown key is not also "no warn nor min").
  const parsed = durationLimitsKeys.safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) ctx.addIssue(issue as never);
    return z.NEVER;
  }
  const d = parsed.data;
  if (d.warn == null && d.min == null) {
    ctx.addIssue({ code: 'custom', message: 'give `warn`, `min` or both (durations)' });
    return z.NEVER;
  }
  const warn = d.warn as WarnLimit | undefined;
  if (d.warnFloor != null && warn?.kind !== 'relative') {
    ctx.addIssue({
      code: 'custom',
      path: ['warnFloor'],
      message:
        '`warnFloor` is the least a relative `warn` (such as p95x3) is; this warn is not one',
    });
    return z.NEVER;
  }
  if (warn?.kind === 'fixed' && d.min != null && d.min >= warn.ms) {
    ctx.addIssue({
      code: 'custom',
      path: ['min'],
      message:
        `\`min\` ${formatDuration(d.min)} is not shorter than \`warn\` ` +
        `${formatDuration(warn.ms)}: every successful run would be too short or slow`,
    });
    return z.NEVER;
  }
  const limited =
    warn?.kind === 'relative' && d.warnFloor != null ? { ...warn, floorMs: d.warnFloor } : warn;
  return { warn: limited ?? null, minMs: d.min ?? null };
});

/** The worker slot is stored in `baton_runs.winner` (TINYINT). */
export const MAX_WORKERS = 100;

const hostList = z.array(z.string().min(1, 'a host must not be empty').max(255)).min(1);

/** `runOn:` — which runners may run the job (config/placement.ts); at least one of the two. */
const runOnSchema = z
  .strictObject({
    tags: z.array(z.string().regex(TAG_PATTERN, TAG_HINT)).min(1, 'tags must not be empty'),
    hosts: hostList,
  })
  .partial()
  .refine((r) => r.tags != null || r.hosts != null, {
    message: 'runOn needs `tags`, `hosts` or both (an empty runOn would run nowhere)',
  })
  .transform((r): RunOn => ({ tags: r.tags ?? [], hosts: r.hosts ?? [] }));

/**
 * `prefer:` — a list of hosts, or `{hosts, lead}` (config/placement.ts). The lead is resolved by
 * load.ts (its default depends on the schedule's period).
 */
const preferSchema = z.union([
  hostList.transform((hosts) => ({ hosts, lead: undefined as number | undefined })),
  z.strictObject({ hosts: hostList, lead: duration.optional() }),
]);

/**
 * A database a module job works on (`ctx.db`). The URL may be written here or, better (it holds
 * a password), named by an environment variable of the runner.
 */
export const connectionSchema = z.strictObject({
  url: z.string().min(1).optional(),
  urlFromEnv: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not an environment variable name')
    .optional(),
});

/** Keys that may appear in `defaults:` as well as in a job. */
const inheritableShape = {
  /** IANA time zone the cron expression is read in. Default UTC, the same on every host. */
  timezone: z.string().min(1),
  /** Run a string command through /bin/sh -c. Must be said explicitly (no accidental shells). */
  shell: z.boolean(),
  /** Free text shown by `baton list`. */
  description: z.string(),
  /** `false` keeps the job in the file (and `baton run`) but never schedules it. */
  enabled: z.boolean(),
  /** Extra environment variables for the job's process, on top of the runner's own. */
  env: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]).transform(String)),
  /** Working directory of the job's process, relative to the schedules file. Default: its folder. */
  cwd: z.string().min(1),
  /** Stop a run (SIGTERM, then SIGKILL) that takes longer than this; recorded `timeout`. */
  timeout: timerDuration,
  /** Start a failed (or timed-out) run again, up to this many times, still holding the fire. */
  retries: z
    .number()
    .int('retries must be a whole number')
    .min(0, 'retries must be 0 or more')
    .max(100, 'retries must be at most 100'),
  /**
   * Pause between a failure and its retry: the same each time (default 10s; `0s`: retry at
   * once), or growing (`{initial, factor, max}`: config/retry-delay.ts).
   */
  retryDelay,
  /**
   * After start-up or a database outage, run the latest fire of this window that nobody ran, or
   * every one of them (`{window, fires: all}`), once fleet-wide with `trigger = catchup`.
   * Without it, missed fires are only recorded.
   */
  catchUp,
  /** After a database failover: whether the fires in doubt are caught up (default skip). */
  onFailover: z.enum(ON_FAILOVER_POLICIES),
  overlap: z.enum(OVERLAP_POLICIES),
  /** `rows` (default) or `tally`: see SKIP_RECORDS. */
  skips: z.enum(SKIP_RECORDS),
  /**
   * The dead-man's switch: `baton status` warns when the job has had no successful run for this
   * long. Default: two periods of its schedule plus a grace (see `src/schedule/dead-man.ts`).
   */
  expect: duration,
  /**
   * Fan-out: up to this many runners win the same fire, each with its own worker slot (1..N) —
   * for batches that share their rows out with the claim helpers. Default 1.
   */
  workers: z
    .number()
    .int('workers must be a whole number')
    .min(1, 'workers must be at least 1')
    .max(MAX_WORKERS, `workers must be at most ${MAX_WORKERS}`),
  /** The connection (from `connections:`) behind a module job's `ctx.db`; default baton's own. */
  connection: z.string().min(1),
  /**
   * Start each fire up to this long after its instant, by a delay that is the same on every
   * runner (`src/schedule/jitter.ts`), so that jobs sharing an expression do not all start in one
   * second. Must be shorter than the job's shortest period. Default none.
   */
  jitter: durationOrZero,
  /**
   * Environment variables whose values are secrets: masked as `***` wherever the job's output is
   * kept (with the database passwords, which always are).
   */
  secretEnv: z.array(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'secretEnv: expected names of variables'),
  ),
  /**
   * What the history keeps of each attempt's output: `max` bytes (default 4MiB), the head and the
   * tail when it prints more; `max: 0` keeps none (the last 8 KiB stay in `output_tail`).
   * `log: true` also passes each line of it to the runner's log (journald).
   */
  output,
  /**
   * Who is told of what (docs/notifications.md): `{on: [failed, recovered], to: [ops], throttle}`
   * with targets from the top-level `notify:`; `false` turns off what `defaults:` gives.
   */
  notify: jobNotifySchema,
  /**
   * Soft limits, told and never enforced (docs/configuration.md): `{warn: 45m, min: 5s}`, or
   * `{warn: p95x3, warnFloor: 2m}` relative to the job's recent successful runs.
   */
  duration: durationLimitsSchema,
  /** Which runners may run it: `{tags: [sftp]}`, `{hosts: [srv-01]}` (docs/placement.md). */
  runOn: runOnSchema,
  /** Which runner runs it while alive and on time; the others after `lead` (docs/placement.md). */
  prefer: preferSchema,
  /** The pool (from `pools:`) whose slots its runs take: at most N at once (docs/pools.md). */
  pool: z.string().min(1),
  /** What a fire does when every slot of its pool is taken: `skip` (default) or `queue`. */
  poolFull: z.enum(POOL_FULL_POLICIES),
};

export const defaultsSchema = z.strictObject(inheritableShape).partial();

/**
 * An instant of a schedule (`anchor`, `at`, `from`, `until`): as text, read by
 * schedule/compound.ts (a date is 00:00 UTC; a time needs `Z` or an offset). A YAML timestamp
 * the parser made a Date of is taken as the instant it is.
 */
const scheduleInstant = z
  .union([
    z
      .string()
      .trim()
      .min(1)
      // One instant: the line's separators (`|`, `;`, `,`) would smuggle in more.
      .refine(
        (v) => !/[|;,]/.test(v),
        'one instant: a date, or a date and time with Z or an offset',
      ),
    z.date(),
  ])
  .transform((v) => (typeof v === 'string' ? v : v.toISOString()));

/**
 * One schedule of a list or an object's field: `|` and `;` are the line's own separators
 * (schedule/compound.ts), so written inside one they would join or bound the whole schedule.
 */
const oneSchedule = z
  .string()
  .min(1)
  .refine(
    (v) => !/[|;]/.test(v),
    'one schedule per entry: no `|` or `;` (bound the schedule with from, until, maxFires)',
  );

/** One schedule of a job: a cron expression, an interval, or instants (schedule/compound.ts). */
const schedulePart = z.union([
  oneSchedule,
  z.strictObject({
    // A bare number (`every: 90`) is read, and refused for its missing unit by compound.ts.
    every: z.union([oneSchedule, z.number()]).transform(String),
    anchor: scheduleInstant.optional(),
  }),
  z.strictObject({ at: z.union([scheduleInstant, z.array(scheduleInstant).min(1)]) }),
]);

/** A part as compound text: `@every 90m anchor …`, `@at …, …`, or the expression itself. */
function schedulePartText(part: z.infer<typeof schedulePart>): string {
  if (typeof part === 'string') return part;
  if ('every' in part) return `@every ${part.every}${part.anchor ? ` anchor ${part.anchor}` : ''}`;
  return `@at ${(Array.isArray(part.at) ? part.at : [part.at]).join(', ')}`;
}

export const jobSchema = z
  .strictObject({
    ...inheritableShape,
    /**
     * Cron expression: 5 fields, or 6 with seconds first, or a nickname such as @daily. A job
     * with `after:` may leave it out: it then runs only after its parents, at their instants.
     */
    schedule: z
      // A string alone is the whole line (docs/schedules.md), bounds and all.
      .union([z.string().min(1), schedulePart, z.array(schedulePart).min(1)])
      // One line of text wherever a timing goes (its versions, list, the fingerprint).
      .transform((v) => (Array.isArray(v) ? v : [v]).map(schedulePartText).join(' | ')),
    /** Bounds of the schedule (schedule/compound.ts): no fire before `from`, none after `until`. */
    from: scheduleInstant,
    until: scheduleInstant,
    /** Only the first N fires at or after `from` (which it needs: every runner counts the same). */
    maxFires: z.number().int().min(1).max(1_000),
    /** Calendars (`calendars:`) whose days and spans its fires are skipped on. */
    skipOn: z.array(z.string().min(1)).min(1),
    /** Calendars its fires may only fall on (any of them). */
    onlyOn: z.array(z.string().min(1)).min(1),
    /** Where a fire its calendars skip goes: nowhere (`none`), or the nearest allowed day. */
    shift: z.enum(['none', 'next', 'previous']),
    /** What to run: an argv array (no shell), or a string together with `shell: true`. */
    command: z.union([z.array(z.string()).min(1, 'command must not be empty'), z.string().min(1)]),
    /** A module under jobs/ whose default export is `async (ctx) => …`; relative to this file. */
    module: z.string().min(1),
    /** Run after other jobs' runs of the same instant (docs/dependencies.md). */
    after: afterSchema,
    /** Each fire runs once on every runner that may run the job (docs/placement.md). */
    every: z.boolean(),
  })
  .partial({
    // Optional for a job with `after:` (it runs at its parents' instants); load.ts requires one
    // of the two.
    schedule: true,
    from: true,
    until: true,
    maxFires: true,
    skipOn: true,
    onlyOn: true,
    shift: true,
    timezone: true,
    shell: true,
    description: true,
    enabled: true,
    env: true,
    cwd: true,
    timeout: true,
    retries: true,
    retryDelay: true,
    catchUp: true,
    onFailover: true,
    overlap: true,
    skips: true,
    expect: true,
    workers: true,
    connection: true,
    jitter: true,
    output: true,
    secretEnv: true,
    notify: true,
    duration: true,
    command: true,
    module: true,
    after: true,
    runOn: true,
    prefer: true,
    every: true,
    pool: true,
    poolFull: true,
  });

/**
 * `pools:` — `{warehouse: {slots: 2}}`, `{sftp: {slots: 1, scope: host}}` (config/pools.ts). A
 * pool's name is part of its slots' lock names and of the `pool` column of its runs' rows.
 */
const poolSchema = z.strictObject({
  slots: z
    .number()
    .int('slots must be a whole number')
    .min(1, 'slots must be at least 1 (a pool of none would run nothing)')
    .max(MAX_POOL_SLOTS, `slots must be at most ${MAX_POOL_SLOTS}`),
  /** `fleet` (default): the slots are the fleet's; `host`: each server has its own. */
  scope: z.enum(POOL_SCOPES).optional(),
});
/** `baton_runs.pool VARCHAR(64)`; the name is checked like a job's (load.ts). */
export const POOL_NAME_MAX = 64;
export const poolNameSchema = nameRule(POOL_NAME_MAX, 'pool name');

/**
 * `retention:`, how long history rows are kept before runners prune them
 * (`src/daemon/retention-schedule.ts`, `baton prune`). One duration for every row, or `{ runs,
 * skips }` apart: skip rows pile up fastest (one per runner per fire) and say the least once old.
 * A missing key keeps those rows.
 */
const retentionDurations = z
  .strictObject({ runs: duration, skips: duration, output: duration })
  .partial();
const retentionSchema = z.unknown().transform((value, ctx): Retention => {
  // Dispatched by hand rather than with z.union, so that a mistake gets the message of the form
  // it was meant in ("expected a duration", or the object's own key), not a union's summary.
  const isObject = value != null && typeof value === 'object' && !Array.isArray(value);
  const result = isObject ? retentionDurations.safeParse(value) : duration.safeParse(value);
  if (!result.success) {
    for (const issue of result.error.issues) ctx.addIssue(issue as never);
    return z.NEVER;
  }
  if (typeof result.data === 'number') return { runsMs: result.data, skipsMs: result.data };
  const { runs, skips, output } = result.data;
  if (runs == null && skips == null && output == null) {
    ctx.addIssue({ code: 'custom', message: 'give `runs`, `skips`, `output` or some (durations)' });
    return z.NEVER;
  }
  return {
    runsMs: runs ?? null,
    skipsMs: skips ?? null,
    ...(output != null ? { outputMs: output } : {}),
  };
});

export const fileSchema = z.strictObject({
  /** Scopes lock names and history, so two environments can share one server. */
  namespace: namespaceSchema.optional(),
  /** Values every job inherits unless it sets its own. */
  defaults: defaultsSchema.optional(),
  /** Databases module jobs work on, by name (`connection: shop`). */
  connections: z.record(z.string(), connectionSchema).optional(),
  jobs: z.record(z.string(), jobSchema),
  /** How long history is kept; without it history is never deleted. */
  retention: retentionSchema.optional(),
  /** Notification targets by name (webhook, command, email), named by jobs' `notify: {to}`. */
  notify: targetsSchema.optional(),
  /** Pools by name, named by jobs' `pool:` (config/pools.ts). */
  pools: z.record(z.string(), poolSchema).optional(),
  /** Named sets of days and spans, named by jobs' `skipOn` and `onlyOn` (config/calendars.ts). */
  calendars: z
    .record(
      z.string(),
      z.strictObject({
        dates: z
          .array(
            z.union([
              z.string().trim().min(1),
              z.strictObject({ from: z.string().trim().min(1), until: z.string().trim().min(1) }),
            ]),
          )
          .optional(),
        file: z.string().min(1).optional(),
      }),
    )
    .optional(),
  /** How a changed timing takes effect fleet-wide (schedule/timing-switch.ts). */
  scheduleChanges: z.strictObject({ settle: settleDuration.optional() }).optional(),
});

export type RawFile = z.infer<typeof fileSchema>;
export type RawJob = z.infer<typeof jobSchema>;

/** How a job is started. */
export type JobTarget =
  | { kind: 'command'; argv: string[] }
  | { kind: 'shell'; script: string }
  | { kind: 'module'; path: string }
  /** Library mode: a function of the application, run in its process (execution/in-process.ts). */
  | { kind: 'handler' };

/** A job's `after:`, validated: its parents, when it runs, how long it waits for them. */
export interface JobAfter {
  /** The parent jobs, in the order written; every one of them must satisfy `on`. */
  jobs: string[];
  on: AfterOn;
  /** From the instant; past it a child still waiting is skipped as `upstream`. */
  withinMs: number;
}

/** One validated job, with every default applied. */
export interface JobDefinition {
  name: string;
  /**
   * The cron expression; null: the job has no fires of its own and runs only after its parents
   * (`after:` without `schedule:`, docs/dependencies.md).
   */
  schedule: string | null;
  timezone: string;
  description?: string;
  enabled: boolean;
  target: JobTarget;
  env: Record<string, string>;
  /** Absolute working directory. */
  cwd: string;
  /** Per attempt; null = no limit. */
  timeoutMs: number | null;
  retries: number;
  /** The wait before each retry, or a backoff's first (`retryBackoff`): config/retry-delay.ts. */
  retryDelayMs: number;
  /** `retryDelay: {initial, factor, max}`: each wait grows from the first; absent: fixed. */
  retryBackoff?: RetryBackoff;
  /** null = missed fires are recorded, never run. */
  catchUpMs: number | null;
  /** Which missed fires of the window run: the latest, or all of them in order. */
  catchUpFires: CatchUpFires;
  /** After a database failover: whether the fires in doubt are caught up. */
  onFailover: OnFailoverPolicy;
  overlap: OverlapPolicy;
  /** How its skips are kept: rows, or tallies for the skips of fires with a winner seen. */
  skips: SkipRecord;
  /** null = two periods plus a grace. */
  expectMs: number | null;
  /** How many runners may win one fire (worker slots 1..workers). */
  workers: number;
  /** A name from `connections:` for `ctx.db`; null = the baton database. */
  connection: string | null;
  /** Fires start up to this long after their instant (`src/schedule/jitter.ts`); 0 = at it. */
  jitterMs: number;
  /** Bytes of each attempt's output kept in `baton_run_output`; 0 = none. */
  outputMaxBytes: number;
  /** Variables whose values are masked in the kept output. */
  secretEnv: string[];
  /** Pass each line of the kept output to the runner's log too (`output: {log: true}`). */
  outputLog: boolean;
  /** What the job's events notify, and whom; null: nothing. */
  notify: JobNotify | null;
  /** Its soft limits (`duration:`: a `slow` warn, a `too-short` min); absent: none. */
  duration?: DurationLimits;
  /** The jobs it runs after (a child); absent: none. */
  after?: JobAfter;
  /** Which runners may run it (`runOn:`); absent: any. */
  runOn?: RunOn;
  /** The runners that ask first for its fires while alive (`prefer:`); absent: none. */
  prefer?: Prefer;
  /** Each fire runs once on every runner that may run it (`every: true`); absent: false. */
  every?: true;
  /** The pool whose slots its runs take, and what it does when full (`pool:`); absent: none. */
  pool?: JobPool;
}

/** Where a connection's URL comes from; resolved when a run starts, never logged. */
export type ConnectionSource = { kind: 'url'; url: string } | { kind: 'env'; variable: string };

/** How long history rows are kept, per kind of row; null keeps that kind forever. */
export interface Retention {
  /** Finished runs: every status but `running` and `skipped`. */
  runsMs: number | null;
  /** Rows with status `skipped`. */
  skipsMs: number | null;
  /**
   * Runs' whole output (`baton_run_output`), by when it was printed; null: it goes with its run.
   * Absent: as null.
   */
  outputMs?: number | null;
}

export interface Config {
  /** Absolute path of the schedules file it came from. */
  file: string;
  namespace: string;
  jobs: JobDefinition[];
  connections: Record<string, ConnectionSource>;
  /** null: `retention:` is not set, history is kept forever. */
  retention: Retention | null;
  /** The top-level `notify:` targets by name. */
  notifyTargets: Record<string, NotifyTarget>;
  /** The top-level `pools:` by name; `{}` without any. */
  pools: Record<string, PoolDefinition>;
  /**
   * `scheduleChanges:`: a changed timing takes effect at its default instant no sooner than
   * `settleMs` after it is first recorded. Absent: DEFAULT_SETTLE_MS.
   */
  scheduleChanges?: { settleMs: number };
}

export type { JobNotify, NotifyTarget, SecretSource } from './notify-schema.js';
export type { NotifyEventName } from './defaults.js';
