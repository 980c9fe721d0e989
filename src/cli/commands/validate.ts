import { shortTiming } from '../../schedule/calendar.js';
import type { CommandModule } from 'yargs';
import { describeAfter } from '../../config/dependencies.js';
import { formatDuration } from '../../config/duration.js';
import type { Config, JobDefinition } from '../../config/schema.js';
import { ConfigError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { action } from '../action.js';
import { withCommonOptions, type CommonArgs } from '../options.js';
import { resolveConfig } from '../config-options.js';

export function describeTarget(job: Config['jobs'][number]): string {
  const t = job.target;
  if (t.kind === 'module') return `module ${t.path}`;
  if (t.kind === 'shell') return `sh -c ${JSON.stringify(t.script)}`;
  if (t.kind === 'handler') return 'a function of the application (library mode)';
  return t.argv.map((a) => (/^[\w./:=@%+-]+$/.test(a) ? a : JSON.stringify(a))).join(' ');
}

interface ValidateArgs extends CommonArgs {
  json?: boolean;
}

export const validateCommand: CommandModule<object, ValidateArgs> = {
  command: 'validate',
  describe: 'Check the schedules file and print its jobs (exit 0, or 78 when invalid)',
  builder: (y) =>
    withCommonOptions(y).option('json', {
      type: 'boolean',
      describe: 'print {valid, jobs} or {valid: false, problems} as JSON (for CI checks)',
    }) as never,
  handler: action((args: ValidateArgs) => {
    if (args.json) return validateAsJson(args);
    const config = resolveConfig(args);
    process.stdout.write(
      `${config.file}: valid, namespace "${config.namespace}", ${config.jobs.length} job(s)\n`,
    );
    for (const job of config.jobs) {
      const state = job.enabled ? '' : ' (disabled)';
      const when = [
        job.schedule != null ? `"${shortTiming(job.schedule)}" ${job.timezone}` : null,
        job.after ? describeAfter(job.after) : null,
      ].filter((w) => w != null);
      process.stdout.write(
        `  ${job.name}${state}: ${when.join(', and ')} → ${describeTarget(job)}\n`,
      );
    }
    const edges = edgesOf(config.jobs);
    if (edges.length > 0) {
      process.stdout.write(`runs after (parent → child), ${edges.length} edge(s):\n`);
      for (const e of edges) {
        process.stdout.write(
          `  ${e.parent} → ${e.child} (on ${e.on}, within ${formatDuration(e.withinMs)})\n`,
        );
      }
    }
    return ExitCode.Ok;
  }),
};

/** The `after:` edges, one per parent of each child, in the file's order. */
function edgesOf(jobs: readonly JobDefinition[]) {
  return jobs.flatMap((job) =>
    (job.after?.jobs ?? []).map((parent) => ({
      parent,
      child: job.name,
      on: job.after!.on,
      withinMs: job.after!.withinMs,
    })),
  );
}

/** `--json`: the verdict on stdout either way, so a pipeline reads one document. */
function validateAsJson(args: ValidateArgs): number {
  let config: Config;
  try {
    config = resolveConfig(args);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stdout.write(`${JSON.stringify({ valid: false, problems: err.problems }, null, 2)}\n`);
    return ExitCode.Config;
  }
  const jobs = config.jobs.map((job) => ({
    name: job.name,
    enabled: job.enabled,
    schedule: job.schedule,
    timezone: job.timezone,
    after: job.after ?? null,
    target: describeTarget(job),
  }));
  const verdict = {
    valid: true,
    file: config.file,
    namespace: config.namespace,
    jobs,
    edges: edgesOf(config.jobs),
  };
  process.stdout.write(`${JSON.stringify(verdict, null, 2)}\n`);
  return ExitCode.Ok;
}
