/**
 * `baton pause <job>` and `baton resume <job>`: the fleet's pause switch, stored in the database
 * (`baton_pauses`), so every runner honours it at its next fire — a paused fire leaves one skip row
 * per runner whose reason starts with `paused by`. `baton run` still runs a paused job (with a
 * note): a pause stops the schedule, not an operator.
 */
import type { CommandModule } from 'yargs';
import { jobNameSchema } from '../../config/schema.js';
import { DatabaseUnavailableError, isMissingSchemaError, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { openConnection } from '../../store/connect.js';
import type { DatabaseTarget } from '../../config/database-url.js';
import { findPause, pauseJob, pausedReason, resumeJob } from '../../store/pauses.js';
import { action } from '../action.js';
import { resolveDatabase, resolveHost, withCommonOptions, type CommonArgs } from '../options.js';
import { optionalConfig, resolveNamespace } from '../config-options.js';

interface PauseArgs extends CommonArgs {
  job: string;
  reason?: string;
  namespace?: string;
}

/** `baton_pauses.reason` is VARCHAR(512). */
const REASON_MAX = 512;

const namespaceOption = {
  type: 'string',
  describe: "namespace of the job (env BATON_NAMESPACE; default the schedules file's)",
} as const;

function checkJobName(name: string): void {
  const check = jobNameSchema.safeParse(name);
  if (!check.success) throw new UsageError(`"${name}": ${check.error.issues[0]?.message}`);
}

/** Runs `body` on a connection to a migrated database; a missing table is a clear 69. */
async function withPauses<T>(
  target: DatabaseTarget,
  body: (conn: Awaited<ReturnType<typeof openConnection>>) => Promise<T>,
): Promise<T> {
  let conn;
  try {
    conn = await openConnection(target, { create: false });
    return await body(conn);
  } catch (err) {
    if (!isMissingSchemaError(err)) throw err;
    throw new DatabaseUnavailableError(
      `the database at ${target.display} has no baton_pauses table yet: run \`baton migrate\` ` +
        '(or start a runner, which migrates) first',
      { cause: err },
    );
  } finally {
    await conn?.end().catch(() => {});
  }
}

export const pauseCommand: CommandModule<object, PauseArgs> = {
  command: 'pause <job>',
  describe: 'Pause a job on every runner from its next fire (skip rows say "paused")',
  builder: (y) =>
    withCommonOptions(y)
      .positional('job', { type: 'string', demandOption: true, describe: 'job name' })
      .option('reason', { type: 'string', describe: 'why, for the skip rows and `status`' })
      .option('namespace', namespaceOption) as never,
  handler: action(async (args: PauseArgs) => {
    const name = String(args.job);
    checkJobName(name);
    const reason = args.reason != null ? String(args.reason).trim() || null : null;
    if (reason != null && reason.length > REASON_MAX) {
      throw new UsageError(`--reason is longer than ${REASON_MAX} characters`);
    }
    const namespace = resolveNamespace(args);
    const pausedBy = resolveHost(args);
    const config = optionalConfig(args);
    if (config && config.namespace === namespace && !config.jobs.some((j) => j.name === name)) {
      process.stderr.write(
        `baton: warning: "${name}" is not a job of ${config.file}; pausing it anyway\n`,
      );
    }
    const target = resolveDatabase(args);
    const { before, after } = await withPauses(target, async (conn) => {
      const before = await findPause(conn, namespace, name);
      await pauseJob(conn, namespace, name, reason, pausedBy);
      return { before, after: await findPause(conn, namespace, name) };
    });
    if (before) {
      process.stdout.write(`${name} was already ${pausedReason(before)}; the pause is renewed\n`);
    }
    process.stdout.write(
      `paused ${name} in namespace "${namespace}": ${after ? pausedReason(after) : ''}\n` +
        'every runner skips it from its next fire (skip rows say so); ' +
        `\`baton resume ${name}\` undoes it\n`,
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
      .option('namespace', namespaceOption) as never,
  handler: action(async (args: PauseArgs) => {
    const name = String(args.job);
    checkJobName(name);
    const namespace = resolveNamespace(args);
    const target = resolveDatabase(args);
    const { before, removed } = await withPauses(target, async (conn) => {
      const before = await findPause(conn, namespace, name);
      return { before, removed: await resumeJob(conn, namespace, name) };
    });
    if (!removed) {
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
