/**
 * `baton kill <run-id> [--reason TEXT] [--grace 10s]`: stops one running run from any host. The
 * order goes through the database (actions/kill.ts); the runner that owns the run acts on it
 * within about two seconds (fire/kill-watch.ts): SIGTERM to the job's process group, SIGKILL
 * after the grace, the verdict `killed` with who asked and why. This command waits for that
 * verdict and says what came of it.
 *
 * Exit codes (docs/runbook.md): 0 when the run is not running afterwards — killed, found
 * finished already (nothing changed), or found without a runner (declared `lost`); a script that
 * kills a stuck run must not fail because the run ended first. 75 when the owner did not act in
 * time (the request stands); 64 for an unknown run id, as `baton show`.
 */
import type { CommandModule } from 'yargs';
import { UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { killOutcomeDocument, killRun, type KillOutcome } from '../../actions/kill.js';
import { checkedReason, operatorName } from '../../operator.js';
import { openConnection } from '../../store/connect.js';
import { formatInstant } from '../../text.js';
import { formatDuration } from '../../config/duration.js';
import { action } from '../action.js';
import {
  FREE_TEXT,
  durationOption,
  parseRunId,
  resolveDatabase,
  resolveHost,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import { withAuditTable } from '../audit-view.js';
import { optionalConfig } from '../config-options.js';
import { eventTargets } from '../../config/notify-targets.js';

interface KillArgs extends CommonArgs {
  runId: string;
  reason?: string;
  grace: string;
  json: boolean;
}

/** A grace beyond this is a typo (`10m` for `10s`): the command would wait that long too. */
const GRACE_MAX_MS = 3_600_000;

export const killCommand: CommandModule<object, KillArgs> = {
  command: 'kill <run-id>',
  describe:
    'Stop a running run from any host: its runner sends SIGTERM, SIGKILL after --grace ' +
    '(recorded `killed`, with who and why)',
  builder: (y) =>
    withCommonOptions(y)
      .positional('run-id', {
        type: 'string',
        demandOption: true,
        describe: 'the run id (the ID column of `baton history -o wide`, BATON_RUN_ID in the job)',
      })
      .option('reason', { ...FREE_TEXT, describe: 'why, for the run row and the audit' })
      .option('grace', {
        type: 'string',
        default: '10s',
        describe: 'SIGTERM → SIGKILL delay for the job',
      })
      .option('json', {
        type: 'boolean',
        default: false,
        describe: 'print one JSON object',
      }) as never,
  handler: action(async (args: KillArgs) => {
    const runId = parseRunId(args.runId);
    const reason = checkedReason(args.reason);
    const graceMs = durationOption('grace', String(args.grace));
    if (graceMs > GRACE_MAX_MS) throw new UsageError(`--grace "${args.grace}": at most 1h`);
    const host = resolveHost(args);
    const target = resolveDatabase(args);
    const operator = operatorName();
    // A run declared lost is told to the job's `notify:` targets, as the reaper's would be, when
    // this host has the job's schedules file.
    const config = optionalConfig(args);
    const targetsOf = (namespace: string, job: string) => {
      if (config?.namespace !== namespace) return undefined;
      const notify = config.jobs.find((j) => j.name === job)?.notify;
      return notify ? eventTargets(notify) : undefined;
    };
    const outcome = await withAuditTable(target, async () => {
      const conn = await openConnection(target, { create: false });
      try {
        // Any namespace: the run id names one run in the whole database, whose credentials the
        // operator holds.
        const order = {
          runId,
          namespace: null,
          operator,
          host,
          via: 'cli' as const,
          reason,
          graceMs,
          targetsOf,
        };
        return await killRun(conn, order);
      } finally {
        await conn.end().catch(() => {});
      }
    });
    if (outcome.kind === 'not-found') {
      throw new UsageError(
        `no run with id ${runId} in the history at ${target.display} (see \`baton history\`)`,
      );
    }
    if (args.json) {
      process.stdout.write(`${JSON.stringify(killOutcomeDocument(outcome, graceMs), null, 2)}\n`);
    } else {
      process.stdout.write(`${killWords(outcome, graceMs)}\n`);
    }
    return outcome.kind === 'pending' ? ExitCode.TempFail : ExitCode.Ok;
  }),
};

type Found = Exclude<KillOutcome, { kind: 'not-found' }>;

function killWords(o: Found, graceMs: number): string {
  const { run } = o;
  const which = `run ${run.id} (${run.job} on ${run.host})`;
  const ended = run.finishedAt ? ` at ${formatInstant(run.finishedAt)} UTC` : '';
  const earlier =
    o.alreadyRequested && run.request
      ? `a kill was already requested by ${run.request.by} at ` +
        `${formatInstant(run.request.at)} UTC; `
      : '';
  switch (o.kind) {
    case 'killed':
      return (
        `${earlier}killed ${which}: ${run.error ?? 'killed'}` +
        (o.tookMs != null ? ` (stopped ${formatDuration(o.tookMs)} after the request)` : '')
      );
    case 'finished':
      if (!run.winner) {
        const row = `run ${run.id} is a ${run.status} row of ${run.job}`;
        return `${row} (${run.host} ran nothing for it), nothing changed`;
      }
      return o.beforeRequest
        ? `${which} already finished (${run.status}${ended}), nothing changed`
        : `${earlier}${which} ended on its own before its runner acted (${run.status}${ended}); ` +
            'nothing was killed';
    case 'lost':
      return `${which}: its runner is gone: declared lost${run.error ? ` (${run.error})` : ''}`;
    case 'pending':
      return (
        `${earlier}kill requested for ${which}, but its runner has not acted within ` +
        `${formatDuration(graceMs)} and a few seconds; the request stands ` +
        `(\`baton show ${run.id}\`)`
      );
  }
}
