/**
 * `baton definitions [job…]` and `baton definitions apply [job…]`: the operator's side of a
 * job's timing versions (store/timings.ts; the rule is schedule/timing-switch.ts, the operator's
 * view docs/schedules.md, "Changing a job's time").
 *
 * `definitions` reads: each version with its schedule and zone, its effective instant and who
 * chose it, who recorded it and when, which is in force, which live runners have which (their
 * registry rows), the local file's version, and for a switch to come its transition preview.
 *
 * `apply` writes (actions/definitions.ts, with the audit rows): the local file's timings the
 * fleet lacks — or an earlier version's timing again, a rollback — as new versions, effective at
 * `--at` or at the default instant a runner would choose; and, with `--at`, a pending version's
 * new instant. It prints each change's preview first; `--dry-run` stops there — what an operator
 * runs on the deploy host with the new file before rolling it out. Every job is judged before
 * anything is written: one bad job refuses them all (64).
 */
import type { CommandModule } from 'yargs';
import {
  applyPlan,
  planApply,
  writes,
  type ApplyResult,
  type SwitchAt,
} from '../../actions/definitions.js';
import { jobNameSchema, type Config, type JobDefinition } from '../../config/schema.js';
import { UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { jobTimingView, liveRunners } from '../../fleet/timing-preview.js';
import { parseFrom } from '../../instants.js';
import { checkedReason, operatorName } from '../../operator.js';
import { databaseNow } from '../../store/fire-reads.js';
import { listRunners } from '../../store/runners.js';
import { settleMsOf } from '../../store/timing-proposal.js';
import { readTimings } from '../../store/timings.js';
import { formatInstant } from '../../text.js';
import { argsAfterDashes } from '../../fire/run-params.js';
import { action } from '../action.js';
import { withTable } from '../table-connection.js';
import { invocationArgv } from '../usage.js';
import {
  namespaceLine,
  optionalConfig,
  resolveConfig,
  resolveNamespaceSource,
} from '../config-options.js';
import { jobTimingToJson, renderJob, renderStep, stepToJson } from '../definitions-view.js';
import {
  didYouMean,
  FREE_TEXT,
  resolveDatabase,
  resolveHost,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';

interface DefinitionsArgs extends CommonArgs {
  job?: string[];
  namespace?: string;
  json: boolean;
}

interface ApplyArgs extends DefinitionsArgs {
  at?: string;
  dryRun: boolean;
  reason?: string;
}

const jobPositional = {
  type: 'string',
  array: true,
  describe: 'job names (default: every job)',
} as const;

const jsonOption = { type: 'boolean', default: false, describe: 'print one JSON object' } as const;

/**
 * The job names given, each a job name. Words after `--` count too: yargs would leave them out
 * of the positionals, and `apply -- --all` would then apply every job instead of refusing
 * "--all", which is no job's name.
 */
function jobNames(args: DefinitionsArgs): string[] {
  const names = [...(args.job ?? []).map(String), ...argsAfterDashes(invocationArgv())];
  for (const name of names) {
    const check = jobNameSchema.safeParse(name);
    if (!check.success) {
      throw new UsageError(
        `job "${name}": ${check.error.issues[0]?.message}` +
          (name.startsWith('-') ? ' (it looks like an option: see --help)' : ''),
      );
    }
  }
  return [...new Set(names)];
}

/** `--at`: an ISO-8601 instant with an offset, a date (that day's start in each job's zone), or `midnight`. */
export function parseSwitchAt(value: string): SwitchAt {
  const given = value.trim();
  if (given.toLowerCase() === 'midnight') return { kind: 'midnight', given };
  if (/^\d{4}-\d{2}-\d{2}$/.test(given)) return { kind: 'date', date: given, given };
  try {
    return { kind: 'instant', at: parseFrom(given), given };
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    throw new UsageError(
      `--at "${value}": expected an ISO-8601 instant with Z or an offset (2026-12-08T00:00:00+01:00), ` +
        "a date (2026-12-08: that day's start in each job's time zone), or midnight (the first " +
        "midnight in each job's zone after the settle window)",
    );
  }
}

const view: CommandModule<object, DefinitionsArgs>['handler'] = action(
  async (args: DefinitionsArgs) => {
    const names = jobNames(args);
    const resolved = resolveNamespaceSource(args);
    const { namespace } = resolved;
    const config = optionalConfig(args);
    const file = config?.namespace === namespace ? config : null;
    const target = resolveDatabase(args);
    const { now, timings, runners } = await withTable(target, 'baton_timings', async (conn) => ({
      now: await databaseNow(conn),
      timings: await readTimings(conn, namespace),
      runners: await listRunners(conn, namespace),
    }));
    const fileJobs = new Map((file?.jobs ?? []).map((j) => [j.name, j]));
    const known = new Set([...timings.keys(), ...fileJobs.keys()]);
    const unknown = names.filter((n) => !known.has(n));
    if (unknown.length > 0) {
      const where = file ? ` nor a job of ${file.file}` : '';
      throw new UsageError(
        unknown
          .map(
            (n) =>
              `"${n}" has no timing versions in namespace "${namespace}"${where}` +
              didYouMean(n, known),
          )
          .join('\n'),
      );
    }
    const jobs =
      names.length > 0
        ? names
        : [
            ...new Set([
              ...timings.keys(),
              ...[...fileJobs.values()].filter((j) => j.enabled && j.schedule).map((j) => j.name),
            ]),
          ].sort();
    const live = liveRunners(runners, now);
    const views = jobs.map((job) => {
      const own = fileJobs.get(job);
      return jobTimingView(
        job,
        timings.get(job) ?? [],
        now,
        live,
        own?.schedule != null ? { schedule: own.schedule, timezone: own.timezone } : null,
      );
    });
    if (args.json) {
      const doc = { namespace, now: now.toISOString(), jobs: views.map(jobTimingToJson) };
      process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
      return ExitCode.Ok;
    }
    process.stdout.write(`${namespaceLine(resolved)}, database time ${formatInstant(now)} UTC\n`);
    if (views.length === 0) {
      process.stdout.write(`no timing versions recorded in namespace "${namespace}"\n`);
      return ExitCode.Ok;
    }
    for (const v of views) {
      const own = fileJobs.get(v.job);
      process.stdout.write('\n');
      if (own && own.schedule == null && v.versions.length === 0) {
        process.stdout.write(
          `${v.job}: no schedule of its own (it runs after its parents): no timing versions\n`,
        );
        continue;
      }
      process.stdout.write(renderJob(v, now));
    }
    return ExitCode.Ok;
  },
);

/** The file's jobs `apply` is about: those named (each checked), or every enabled scheduled one. */
function jobsToApply(config: Config, names: readonly string[]): JobDefinition[] {
  if (names.length === 0) return config.jobs.filter((j) => j.enabled && j.schedule != null);
  const all = config.jobs.map((j) => j.name);
  const problems: string[] = [];
  const jobs: JobDefinition[] = [];
  for (const name of names) {
    const job = config.jobs.find((j) => j.name === name);
    if (!job) {
      problems.push(`unknown job "${name}" in ${config.file}${didYouMean(name, all)}`);
    } else if (job.schedule == null) {
      problems.push(
        `${name}: no schedule of its own in ${config.file} (it runs after its parents): it has ` +
          'no timing to apply',
      );
    } else {
      jobs.push(job);
    }
  }
  if (problems.length > 0) {
    throw new UsageError(`${problems.join('\n')}\nnothing was written`);
  }
  return jobs;
}

const apply: CommandModule<object, ApplyArgs>['handler'] = action(async (args: ApplyArgs) => {
  const names = jobNames(args);
  const at = args.at != null ? parseSwitchAt(String(args.at)) : null;
  const reason = checkedReason(args.reason);
  const config = resolveConfig(args, { connectionVariables: 'ignore' });
  const explicit = args.namespace ?? process.env.BATON_NAMESPACE;
  if (explicit != null && explicit !== config.namespace) {
    throw new UsageError(
      `${args.namespace != null ? '--namespace' : 'BATON_NAMESPACE'} "${explicit}" is not the ` +
        `namespace of ${config.file} ("${config.namespace}"): apply records that file's timings ` +
        'in its own namespace; give the file of that namespace (--config), or leave the namespace out',
    );
  }
  const jobs = jobsToApply(config, names);
  const host = resolveHost(args);
  const target = resolveDatabase(args);
  const settleMs = settleMsOf(config);
  const namespace = config.namespace;
  const { plan, results } = await withTable(target, 'baton_timings', async (conn) => {
    const now = await databaseNow(conn);
    const timings = await readTimings(
      conn,
      namespace,
      jobs.map((j) => j.name),
    );
    const plan = planApply({
      namespace,
      now,
      settleMs,
      jobs,
      named: names.length > 0,
      timings,
      at,
    });
    const results = args.dryRun
      ? null
      : await applyPlan(conn, plan, { operator: operatorName(), host, via: 'cli', reason });
    return { plan, results };
  });
  const resultOf = (job: string): ApplyResult | null =>
    results?.find((r) => r.step.job === job) ?? null;
  const failed = (results ?? []).some((r) => writes(r.step) && !r.applied);
  const code = failed ? ExitCode.TempFail : ExitCode.Ok;
  if (args.json) {
    const doc = {
      namespace,
      now: plan.now.toISOString(),
      file: config.file,
      settleMs,
      dryRun: args.dryRun,
      changes: plan.steps.map((s) => stepToJson(s, resultOf(s.job))),
    };
    process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
    return code;
  }
  process.stdout.write(
    `namespace "${namespace}" (from the schedules file ${config.file}), database time ` +
      `${formatInstant(plan.now)} UTC${args.dryRun ? '; dry run: nothing is written' : ''}\n`,
  );
  if (plan.steps.length === 0) {
    process.stdout.write(`no job of ${config.file} has a schedule of its own: nothing to apply\n`);
    return code;
  }
  for (const step of plan.steps) {
    process.stdout.write(`\n${renderStep(step, plan, resultOf(step.job), args.dryRun)}`);
  }
  if (failed) {
    process.stderr.write(
      'baton: the table changed while this ran (see NOT APPLIED above): run `baton definitions` ' +
        'to see the versions, then apply again\n',
    );
  }
  return code;
});

export const definitionsApplyCommand: CommandModule<object, ApplyArgs> = {
  command: 'apply [job..]',
  describe:
    "Record the schedules file's changed timings as the fleet's next versions (preview first)",
  builder: (y) =>
    withCommonOptions(y)
      .positional('job', {
        ...jobPositional,
        describe: 'job names (default: every enabled job with a schedule of its own)',
      })
      .option('at', {
        ...FREE_TEXT,
        describe:
          'when the change takes effect: an ISO-8601 instant with an offset, a date (its start ' +
          "in the job's zone), or midnight (default: the first fire after the settle window " +
          'whose day is neither doubled nor skipped)',
      })
      .option('dry-run', {
        type: 'boolean',
        default: false,
        describe: 'show the changes and their previews; write nothing',
      })
      .option('reason', { ...FREE_TEXT, describe: 'why, for the audit' })
      .option('namespace', {
        type: 'string',
        describe: "must be the schedules file's namespace when given (env BATON_NAMESPACE)",
      })
      .option('json', jsonOption) as never,
  handler: apply,
};

export const definitionsCommand: CommandModule<object, DefinitionsArgs> = {
  command: 'definitions [job..]',
  describe: "Each job's timing versions, who runs which, and a switch's preview",
  builder: (y) =>
    withCommonOptions(y)
      .positional('job', jobPositional)
      .option('namespace', {
        type: 'string',
        describe: "namespace to read (env BATON_NAMESPACE; default the schedules file's)",
      })
      .option('json', jsonOption)
      .command(definitionsApplyCommand) as never,
  handler: view,
};
