/**
 * `baton pause <job>` and `baton resume <job>`: the fleet's pause switch, stored in the database
 * (`baton_pauses`), so every runner honours it at its next fire — a paused fire leaves one skip row
 * per runner whose reason starts with `paused by`. `baton run` still runs a paused job (with a
 * note): a pause stops the schedule, not an operator.
 *
 * A mistyped name would pause a job nobody runs while the real one goes on, so both refuse a job
 * they do not know (64, with the closest name). The schedules file is the truth when it is the
 * namespace's: `pause` takes only its jobs (`--force` for a job not yet in the file; renewing a
 * pause that exists needs none); without one, the namespace's history and pauses say which jobs
 * exist. `resume` lifts any pause there is — also of a job since removed from the file — and
 * refuses a name nothing knows.
 *
 * Both are the write API's actions too (actions/pause.ts: the audit, the pause signed
 * `operator@host`, the JSON); here, which names are accepted and what is said.
 */
import type { CommandModule } from 'yargs';
import { jobNameSchema } from '../../config/schema.js';
import { orEmpty, UsageError } from '../../errors.js';
import { subjectName } from '../../schedule-keys.js';
import { countSchedules, listSchedules } from '../../store/schedules.js';
import { ExitCode } from '../../exit-codes.js';
import { historyJobs } from '../../store/history-reads.js';
import { listPauses, pausedReason, type Pause } from '../../store/pauses.js';
import { checkedReason, operatorName } from '../../operator.js';
import { pause, pauseOutcomeDocument, resume, resumeOutcomeDocument } from '../../actions/pause.js';
import { action } from '../action.js';
import { withTable, type Connection } from '../table-connection.js';
import {
  FREE_TEXT,
  KEY_OPTION,
  subjectOf,
  didYouMean,
  resolveDatabase,
  resolveHost,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import { optionalConfig, resolveNamespace } from '../config-options.js';

interface PauseArgs extends CommonArgs {
  job: string;
  key?: string;
  reason?: string;
  namespace?: string;
  force: boolean;
  json: boolean;
}

const namespaceOption = {
  type: 'string',
  describe: "namespace of the job (env BATON_NAMESPACE; default the schedules file's)",
} as const;

const keyOption = {
  ...KEY_OPTION,
  describe: `${KEY_OPTION.describe}: that schedule only (pausing the job pauses all of them)`,
} as const;

const jsonOption = { type: 'boolean', default: false, describe: 'print one JSON object' } as const;

function checkJobName(name: string): void {
  const check = jobNameSchema.safeParse(name);
  if (!check.success) throw new UsageError(`"${name}": ${check.error.issues[0]?.message}`);
}

/**
 * The jobs a name is checked against, and where they come from: the schedules file's when it is
 * this namespace's, else those the namespace's history and pauses name.
 */
async function knownJobs(
  args: PauseArgs,
  namespace: string,
  conn: Connection,
  pauses: readonly Pause[],
): Promise<{ names: Set<string>; where: string }> {
  // `--key`: the job's live schedules created at run time are what a key may name.
  if (args.key != null) {
    const job = String(args.job);
    const keys = await orEmpty(listSchedules(conn, namespace, job), []);
    return {
      names: new Set(keys.map((s) => subjectName(s.job, s.key))),
      where: `the schedules of ${job} in namespace "${namespace}" (scheduler.schedules)`,
    };
  }
  const config = optionalConfig(args);
  if (config && config.namespace === namespace) {
    return { names: new Set(config.jobs.map((j) => j.name)), where: config.file };
  }
  // A library-mode job with schedules created at run time is known by them, runs or not.
  const scheduled = await orEmpty(countSchedules(conn, namespace), new Map<string, number>());
  const names = new Set([
    ...(await historyJobs(conn, namespace)),
    ...pauses.map((p) => p.job),
    ...scheduled.keys(),
  ]);
  return { names, where: `the history of namespace "${namespace}" (no schedules file of it here)` };
}

export const pauseCommand: CommandModule<object, PauseArgs> = {
  command: 'pause <job>',
  describe: 'Pause a job on every runner from its next fire (skip rows say "paused")',
  builder: (y) =>
    withCommonOptions(y)
      .positional('job', { type: 'string', demandOption: true, describe: 'job name' })
      .option('reason', { ...FREE_TEXT, describe: 'why, for the skip rows and `status`' })
      .option('key', keyOption)
      .option('namespace', namespaceOption)
      .option('force', {
        type: 'boolean',
        default: false,
        describe: 'pause a job the schedules file does not have (yet)',
      })
      .option('json', jsonOption) as never,
  handler: action(async (args: PauseArgs) => {
    checkJobName(String(args.job));
    // A schedule created at run time is paused as its subject, `<job>:<key>`.
    const name = subjectOf(String(args.job), args.key);
    const reason = checkedReason(args.reason);
    const namespace = resolveNamespace(args);
    const host = resolveHost(args);
    const operator = operatorName();
    const target = resolveDatabase(args);
    const outcome = await withTable(target, 'baton_pauses', async (conn) => {
      const pauses = await listPauses(conn, namespace);
      const known = await knownJobs(args, namespace, conn, pauses);
      const forced = !known.names.has(name);
      // Renewing a pause there already is (one forced before) needs no --force again.
      if (forced && !args.force && !pauses.some((p) => p.job === name)) {
        throw new UsageError(
          `"${name}" is not a job of ${known.where}${didYouMean(name, known.names)}; ` +
            'nothing was paused (--force pauses it anyway, e.g. a job not yet in the file)',
        );
      }
      return pause(conn, namespace, name, { operator, host, via: 'cli', reason }, { forced });
    });
    if (args.json) {
      process.stdout.write(`${JSON.stringify(pauseOutcomeDocument(outcome), null, 2)}\n`);
      return ExitCode.Ok;
    }
    const { before, after, forced } = outcome;
    if (forced) {
      process.stderr.write(
        `baton: warning: "${name}" is not a known job; paused it anyway (--force)\n`,
      );
    }
    if (!after) {
      process.stdout.write(
        `paused ${name} in namespace "${namespace}", but a resume at the same time lifted it ` +
          'again: it is not paused\n',
      );
      return ExitCode.Ok;
    }
    if (before) {
      process.stdout.write(`${name} was already ${pausedReason(before)}; the pause is renewed\n`);
    }
    process.stdout.write(
      `paused ${name} in namespace "${namespace}": ${pausedReason(after)}\n` +
        'every runner skips it from its next fire (skip rows say so); ' +
        `\`baton resume ${args.key != null ? `${args.job} --key ${args.key}` : name}\` undoes it\n`,
    );
    return ExitCode.Ok;
  }),
};

export const resumeCommand: CommandModule<object, PauseArgs> = {
  command: 'resume <job>',
  describe: 'Resume a paused job on every runner',
  builder: (y) =>
    withCommonOptions(y)
      .positional('job', { type: 'string', demandOption: true, describe: 'job name' })
      .option('reason', { ...FREE_TEXT, describe: 'why, for the audit' })
      .option('key', keyOption)
      .option('namespace', namespaceOption)
      .option('json', jsonOption) as never,
  handler: action(async (args: PauseArgs) => {
    checkJobName(String(args.job));
    // A schedule created at run time is paused as its subject, `<job>:<key>`.
    const name = subjectOf(String(args.job), args.key);
    const reason = checkedReason(args.reason);
    const namespace = resolveNamespace(args);
    const host = resolveHost(args);
    const target = resolveDatabase(args);
    const outcome = await withTable(target, 'baton_pauses', async (conn) => {
      const pauses = await listPauses(conn, namespace);
      const before = pauses.find((p) => p.job === name) ?? null;
      if (before == null) {
        // Nothing to lift: fine for a job that exists, a mistake for a name nothing knows.
        const known = await knownJobs(args, namespace, conn, pauses);
        if (!known.names.has(name)) {
          const paused = pauses.map((p) => p.job);
          throw new UsageError(
            `nothing is paused under "${name}" in namespace "${namespace}", and it is not a job ` +
              `of ${known.where}${didYouMean(name, [...paused, ...known.names])} ` +
              `(paused: ${paused.join(', ') || 'none'})`,
          );
        }
      }
      return resume(conn, namespace, name, { operator: operatorName(), host, via: 'cli', reason });
    });
    if (args.json) {
      process.stdout.write(`${JSON.stringify(resumeOutcomeDocument(outcome), null, 2)}\n`);
      return ExitCode.Ok;
    }
    const { before, resumed } = outcome;
    if (!resumed) {
      process.stdout.write(`${name} was not paused in namespace "${namespace}": nothing to do\n`);
      return ExitCode.Ok;
    }
    process.stdout.write(
      `resumed ${name} in namespace "${namespace}"` +
        (before ? ` (it was ${pausedReason(before)})` : '') +
        ': every runner runs it again from its next fire\n',
    );
    return ExitCode.Ok;
  }),
};
