/**
 * Library mode's configuration: the jobs an application defines in code, validated by the same
 * schema and the same checks as `schedules.yaml` (config/schema.ts, config/load.ts) — the code's
 * options are handed to the file's parser as the document it would have read, so every message is
 * the file's, naming the job (`scheduler: jobs.settle.timeout: expected a duration…`). A
 * `schedules.yaml` loaded as well (`scheduler.load`) is validated on its own, with its lines, and
 * the two are merged: one namespace, no job defined twice.
 *
 * The `after:` edges of the code's jobs are checked on the merged jobs (`mergeConfigs`), not job
 * by job: a code job may run after another defined later, or after a job of the file. A job of the
 * file runs after jobs of the file only (the file is checked alone, with its lines).
 */
import type { z } from 'zod';
import { dependencyProblems, type AfterPlace } from '../config/dependency-checks.js';
import { parseConfig } from '../config/load.js';
import { retentionTooShort } from '../config/retention.js';
import type { Config, defaultsSchema, jobSchema } from '../config/schema.js';
import { ConfigError, type ConfigProblem } from '../errors.js';

/**
 * A job's options, as its entry in `schedules.yaml` would be written (`schedule`, `timezone`,
 * `timeout: '30m'`, `retries`, `catchUp`, `overlap`, `notify`, …; docs/configuration.md), without
 * `command`, `module` or `shell`: the handler given with it is what runs.
 */
export type JobOptions = Omit<z.input<typeof jobSchema>, 'command' | 'module' | 'shell'>;

/** `defaults:` of a schedules file, for the code's jobs. */
export type JobDefaults = z.input<typeof defaultsSchema>;

/** The top-level keys of a schedules file a scheduler may be given in code. */
export interface CodeSettings {
  namespace: string;
  defaults?: JobDefaults;
  /** Databases by name for `ctx.db` (`connection:` of a job): `{url}` or `{urlFromEnv}`. */
  connections?: Record<string, { url?: string; urlFromEnv?: string }>;
  /** Notification targets by name, as `notify:` at the top of schedules.yaml. */
  notify?: Record<string, unknown>;
  /** `retention:` as in schedules.yaml. */
  retention?: unknown;
  /** Pools by name, as `pools:` at the top of schedules.yaml (docs/pools.md). */
  pools?: Record<string, unknown>;
}

/** Where the code's problems are said to be (no file, no line). */
export const CODE_PLACE = 'scheduler';

/**
 * The code's jobs as a Config: every problem of every job at once (ConfigError, exit 78), each
 * named `scheduler: jobs.<name>.<key>: …`. `cwd` (relative paths in options) is the process's.
 */
export function codeConfig(settings: CodeSettings, jobs: ReadonlyMap<string, JobOptions>): Config {
  const document = {
    namespace: settings.namespace,
    ...(settings.defaults ? { defaults: settings.defaults } : {}),
    ...(settings.connections ? { connections: settings.connections } : {}),
    ...(settings.notify ? { notify: settings.notify } : {}),
    ...(settings.retention != null ? { retention: settings.retention } : {}),
    ...(settings.pools ? { pools: settings.pools } : {}),
    jobs: Object.fromEntries(jobs),
  };
  // JSON is YAML: the file's parser reads the options exactly as it would read the file.
  const place = `${process.cwd()}/${CODE_PLACE}`;
  try {
    return parseConfig(place, JSON.stringify(document), {
      handlers: new Set(jobs.keys()),
      // Checked on the merged jobs (mergeConfigs): a parent may be defined later, or in a file.
      deferDependencies: true,
    });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // The lines are of the generated text, not the user's code: left out.
    throw new ConfigError(
      err.problems.map((p) => ({ file: CODE_PLACE, path: p.path, message: p.message })),
    );
  }
}

/**
 * The code's jobs and a schedules file's, as one schedule; refused when they disagree, or when
 * the code's jobs' `after:` edges are wrong among them all (a file's own edges were checked when
 * it was loaded). `dependencies: false` leaves the edges out: `scheduler.load()` merges before
 * every job is defined (a parent may come in a later `scheduler.job`); `start()` checks them.
 */
export function mergeConfigs(
  code: Config | null,
  file: Config | null,
  o: { dependencies?: boolean } = {},
): Config {
  const edges = o.dependencies !== false;
  if (!code || !file) {
    const only = code ?? file;
    if (!only) {
      throw new ConfigError([
        { file: CODE_PLACE, path: 'jobs', message: 'no jobs defined (scheduler.job or .load)' },
      ]);
    }
    if (code && edges) {
      const problems = mergedDependencyProblems(code, null);
      if (problems.length > 0) throw new ConfigError(problems);
    }
    return only;
  }
  const problems = edges ? mergedDependencyProblems(code, file) : [];
  if (code.namespace !== file.namespace) {
    problems.push({
      file: file.file,
      path: 'namespace',
      message:
        `the file's namespace "${file.namespace}" is not the scheduler's ` +
        `"${code.namespace}" (one scheduler, one namespace)`,
    });
  }
  const inCode = new Set(code.jobs.map((j) => j.name));
  for (const job of file.jobs) {
    if (inCode.has(job.name)) {
      problems.push({
        file: file.file,
        path: `jobs.${job.name}`,
        message: `${job.name} is defined in code too (scheduler.job): define it once`,
      });
    }
  }
  if (code.retention && file.retention) {
    problems.push({
      file: file.file,
      path: 'retention',
      message: 'retention is given to the scheduler too: give it in one place',
    });
  }
  for (const [name, pool] of Object.entries(file.pools)) {
    const other = Object.hasOwn(code.pools, name) ? code.pools[name] : undefined;
    if (other && (other.slots !== pool.slots || other.scope !== pool.scope)) {
      problems.push({
        file: file.file,
        path: `pools.${name}`,
        message: `pool ${name} is given to the scheduler too, differently: give it in one place`,
      });
    }
  }
  const jobs = [...code.jobs, ...file.jobs];
  const retention = code.retention ?? file.retention;
  // Each half was checked alone: the bound must also keep every catch-up window of the other's
  // jobs, or fires pruned after an outage would look unrun and run again.
  for (const [key, ms] of [
    ['runs', retention?.runsMs],
    ['skips', retention?.skipsMs],
  ] as const) {
    const tooShort = ms == null ? null : retentionTooShort(ms, jobs);
    if (tooShort) {
      problems.push({
        file: code.retention ? CODE_PLACE : file.file,
        path: `retention.${key}`,
        message: tooShort,
      });
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    file: file.file,
    namespace: code.namespace,
    jobs,
    connections: { ...file.connections, ...code.connections },
    retention,
    notifyTargets: { ...file.notifyTargets, ...code.notifyTargets },
    pools: { ...file.pools, ...code.pools },
  };
}

/**
 * The problems of the code's jobs' `after:` edges among the code's and the file's jobs, each
 * named `scheduler: jobs.<child>.after…` (the options have no lines). The file's jobs are checked
 * again with them; their edges name jobs of the file only, which were checked when it was loaded.
 */
function mergedDependencyProblems(code: Config, file: Config | null): ConfigProblem[] {
  const jobs = [...code.jobs, ...(file?.jobs ?? [])];
  const inCode = new Set(code.jobs.map((j) => j.name));
  const where = (place: AfterPlace) => (place === 'after' ? 'after' : 'after.jobs');
  return dependencyProblems(jobs, {
    namespace: code.namespace,
    declared: new Set(jobs.map((j) => j.name)),
    locate: (job, place, message) => ({
      file: inCode.has(job) ? CODE_PLACE : (file?.file ?? CODE_PLACE),
      path: `jobs.${job}.${where(place)}`,
      message,
    }),
  });
}
