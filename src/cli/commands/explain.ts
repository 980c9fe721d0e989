/**
 * `baton explain <job> [fire-time]`: why did a fire run where it did, or not at all. One verdict
 * line first, then every runner's attempt for the fire, then the registered runners that were there
 * for it and left no row at all, each with why. The reads are store/explain-reads.ts's, the
 * judgement (which fire is the latest, the verdict, why a runner left no row) fleet/explain.ts's;
 * this file reads the arguments and prints. A child job's fire (`after:`) is explained by its chain
 * instead of its runners (cli/chain-view.ts): its chain row, its parents at the instant.
 */
import { chainedRunDocument, pauseDocument } from '../../actions/documents.js';
import type { CommandModule } from 'yargs';
import { jobNameSchema } from '../../config/schema.js';
import { isMissingSchemaError, orEmpty, UsageError } from '../../errors.js';
import { findSchedule, type StoredSchedule } from '../../store/schedules.js';
import { ExitCode } from '../../exit-codes.js';
import {
  judgeFire,
  latestOf,
  NO_LATEST,
  notFiredVerdict,
  type FireJudgement,
} from '../../fleet/explain.js';
import { readFireFacts } from '../../store/explain-reads.js';
import { pausedReason } from '../../store/pauses.js';
import type { Run } from '../../store/runs.js';
import { formatInstant, oneLine } from '../../text.js';
import type { DatabaseTarget } from '../../config/database-url.js';
import type { AuditRecord } from '../../store/audit.js';
import { openConnection } from '../../store/connect.js';
import { action } from '../action.js';
import { actionLine, actionsByRun, actionToJson } from '../audit-view.js';
import { optionalConfig, resolveNamespace } from '../config-options.js';
import { durationCell, table, winnerCell } from '../format.js';
import { tallyToJson } from '../tally-view.js';
import { chainHead, chainToJson, renderParents, upstreamOfFires } from '../chain-view.js';
import {
  KEY_OPTION,
  resolveDatabase,
  subjectOf,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import { parseFireTime } from '../../instants.js';
import { GONE_AFTER_OPTION, goneAfterMs } from '../fleet-options.js';

interface ExplainArgs extends CommonArgs {
  job: string;
  key?: string;
  fire?: string;
  json: boolean;
  namespace?: string;
  goneAfter: string;
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
      .option('key', {
        ...KEY_OPTION,
        describe: `${KEY_OPTION.describe}: a fire of <job>:<key>`,
      })
      .option('json', { type: 'boolean', default: false, describe: 'print JSON' })
      .option('namespace', {
        type: 'string',
        describe: "namespace to read (env BATON_NAMESPACE; default the schedules file's)",
      })
      .option('gone-after', GONE_AFTER_OPTION) as never,
  handler: action(async (args: ExplainArgs) => {
    const jobName = String(args.job);
    const nameCheck = jobNameSchema.safeParse(jobName);
    if (!nameCheck.success) {
      throw new UsageError(`"${jobName}": ${nameCheck.error.issues[0]?.message}`);
    }
    // A schedule created at run time: its fires are the subject `<job>:<key>`'s.
    const name = subjectOf(jobName, args.key);
    const given = args.fire != null ? parseFireTime(String(args.fire)) : null;
    const goneAfter = goneAfterMs(args);
    const namespace = resolveNamespace(args);
    const config = optionalConfig(args);
    // A key's fires are judged from the history alone: its timing is in the database, not the file.
    const job =
      config && config.namespace === namespace && args.key == null
        ? (config.jobs.find((j) => j.name === name) ?? null)
        : null;
    const schedule =
      args.key != null
        ? await readDynamicSchedule(resolveDatabase(args), namespace, jobName, String(args.key))
        : null;

    const facts = await readFireFacts(resolveDatabase(args), {
      namespace,
      job: name,
      goneAfterMs: goneAfter,
      fire: given,
      latest: (inHistory, runners, now, timings) => latestOf(job, inHistory, runners, now, timings),
      knownJob: job != null || schedule != null,
      parents: job?.after?.jobs ?? [],
    });
    if (!facts.known) {
      if (args.key != null) {
        throw new UsageError(
          `${jobName} has no schedule under the key ${JSON.stringify(String(args.key))} in ` +
            `namespace "${namespace}", and no rows in its history`,
        );
      }
      const where = config ? ` and not in ${config.file}` : '';
      throw new UsageError(
        `unknown job "${name}": no rows in the history of namespace "${namespace}"${where}`,
      );
    }
    const { fire, rows, now, pause } = facts;
    const latest = facts.latest ?? NO_LATEST;

    if (!fire) {
      const verdict = notFiredVerdict(name, namespace, job, latest, now, facts.timings);
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
          pausedNow: pauseDocument(pause),
          ...(args.key != null ? { schedule: scheduleDocument(schedule) } : {}),
        });
      } else {
        process.stdout.write(`${verdict}\n`);
        if (schedule) process.stdout.write(`schedule:   ${scheduleLine(schedule)}\n`);
        if (pause) process.stdout.write(`note: ${name} is ${pausedReason(pause)}\n`);
      }
      return ExitCode.Ok;
    }

    const judged = judgeFire({ ...facts, name, job, fire, goneAfterMs: goneAfter, latest });
    const actions = await fireActions(resolveDatabase(args), namespace, rows);
    const upstream = upstreamOfFires(facts.chain?.fires ?? []);
    const runDocument = (r: Run) => chainedRunDocument(r, upstream.get(r.id));
    const after = job?.after ?? null;
    if (args.json) {
      const winners = rows.filter((r) => r.winner);
      printJson({
        job: name,
        namespace,
        scheduledAt: fire.toISOString(),
        latest: given == null,
        latestFromSchedule: latest.fromSchedule,
        verdict: judged.verdict,
        winner: winners[0] ? runDocument(winners[0]) : null,
        // Every worker slot's run, for a fan-out job (one entry otherwise).
        winners: winners.map(runDocument),
        attempts: rows.map(runDocument),
        missing: judged.missing.map((m) => m.host),
        missingRunners: judged.missing,
        // `skips: tally`: the hour's tallies, and the runners among them not judged missing.
        tallied: judged.tallied,
        tallies: facts.tallies.map(tallyToJson),
        notes: judged.notes,
        pausedNow: pauseDocument(pause),
        actions: actions.map(actionToJson),
        // A child job's (`after:`) chain at this instant; null for any other job.
        chain: judged.chain ? chainToJson(judged.chain, after, facts.chain?.fires ?? []) : null,
        // `--key`: the schedule created at run time, as it stands (null: none was ever stored).
        ...(args.key != null ? { schedule: scheduleDocument(schedule) } : {}),
      });
      return ExitCode.Ok;
    }
    const head = [
      `job:        ${name} (namespace ${namespace})`,
      `fire:       ${formatInstant(fire)} UTC${given == null ? ' (the latest)' : ''}`,
      ...(schedule ? [`schedule:   ${scheduleLine(schedule)}`] : []),
      ...(judged.chain ? chainHead(judged.chain, after) : []),
    ];
    process.stdout.write(render(head, rows, facts.runners.length, judged));
    if (actions.length > 0) {
      const lines = actions.map((a) => `  run ${a.runId}: ${actionLine(a)}\n`).join('');
      process.stdout.write(`\noperators' actions on its runs (baton audit):\n${lines}`);
    }
    return ExitCode.Ok;
  }),
};

/** The text form: the verdict, the fire and its notes, the attempts, the runners without one. */
function render(head: string[], rows: Run[], registered: number, judged: FireJudgement): string {
  const { verdict, notes, missing } = judged;
  const out: string[] = [verdict, '', ...head];
  for (const note of notes) out.push(`note:       ${note}`);
  out.push('');
  if (judged.chain && judged.chain.parents.length > 0) {
    out.push(...renderParents(judged.chain), '');
  }
  if (rows.length === 0) {
    out.push('attempts:   none (no runner wrote a row for this fire)');
  } else {
    out.push(`attempts (${rows.length}):`);
    // Generations only when the fire was re-run (docs/history.md, "Re-runs").
    const generations = rows.some((r) => r.rerun > 0);
    out.push(
      table(
        [
          ...(generations ? ['GEN'] : []),
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
          ...(generations ? [String(r.rerun)] : []),
          r.host,
          winnerCell(r),
          r.trigger,
          r.attempts > 1 ? `${r.status} ×${r.attempts}` : r.status,
          formatInstant(r.startedAt),
          formatInstant(r.finishedAt),
          durationCell(r),
          oneLine(r.reason ?? r.error ?? ''),
        ]),
      ).trimEnd(),
    );
    for (const r of rows.filter((row) => row.params)) {
      out.push(`params of run ${r.id}: ${JSON.stringify(r.params)}`);
    }
  }
  out.push('');
  if (judged.chain) {
    // Judged once from its chain row by one runner: the others have nothing to leave.
    out.push("runners: a child's fire is judged from its chain row, not contended by every runner");
  } else if (missing.length === 0) {
    out.push(
      registered === 0
        ? 'no attempt missing: no runner is registered in this namespace'
        : rows.length === 0
          ? 'no attempt missing: no registered runner was running at the fire'
          : judged.tallied.length > 0
            ? 'no attempt missing: every runner that was running at the fire left a row or a tally'
            : 'no attempt missing: every runner that was running at the fire left a row',
    );
  } else {
    // Runners placed elsewhere (`runOn`) write nothing by design: listed apart, not as missing.
    const ineligible = missing.filter((m) => m.state === 'ineligible');
    const silent = missing.filter((m) => m.state !== 'ineligible');
    const listing = (ms: typeof missing) =>
      table(
        ['HOST', 'PID', 'STATE', 'LAST SEEN', 'DETAIL'],
        ms.map((m) => [m.host, m.pid, m.state, formatInstant(new Date(m.lastSeenAt)), m.detail]),
      ).trimEnd();
    if (silent.length > 0) {
      out.push(`runners that left no attempt (${silent.length}):`);
      out.push(listing(silent));
    }
    if (ineligible.length > 0) {
      if (silent.length > 0) out.push('');
      out.push(`runners not eligible for this job (${ineligible.length}):`);
      out.push(listing(ineligible));
    }
  }
  return `${out.join('\n')}\n`;
}

/** The actions tied to the fire's runs, oldest first; none when the audit cannot be read. */
async function fireActions(
  target: DatabaseTarget,
  namespace: string,
  rows: Run[],
): Promise<AuditRecord[]> {
  const ids = rows.filter((r) => r.winner).map((r) => r.id);
  if (ids.length === 0) return [];
  let conn;
  try {
    conn = await openConnection(target, { create: false });
    const byRun = await actionsByRun(conn, namespace, ids);
    return [...byRun.values()]
      .flat()
      .sort((a, b) => a.at.getTime() - b.at.getTime() || a.id - b.id);
  } finally {
    await conn?.end().catch(() => {});
  }
}

/** The schedule of `--key` as stored, live or removed; null when it never existed (or was pruned). */
async function readDynamicSchedule(
  target: DatabaseTarget,
  namespace: string,
  job: string,
  key: string,
): Promise<StoredSchedule | null> {
  let conn;
  try {
    conn = await openConnection(target, { create: false });
    return await orEmpty(findSchedule(conn, namespace, job, key), null);
  } catch (err) {
    if (isMissingSchemaError(err)) return null;
    throw err;
  } finally {
    await conn?.end().catch(() => {});
  }
}

function scheduleLine(s: StoredSchedule): string {
  const params = Object.keys(s.params).length > 0 ? `, params ${JSON.stringify(s.params)}` : '';
  const state = s.removedAt
    ? `removed at ${formatInstant(s.removedAt)} UTC`
    : `since ${formatInstant(s.updatedAt)} UTC`;
  return `"${s.schedule}" ${s.timezone}${params} (key ${s.key} of ${s.job}; ${state})`;
}

function scheduleDocument(s: StoredSchedule | null): object | null {
  if (!s) return null;
  return {
    job: s.job,
    key: s.key,
    schedule: s.schedule,
    timezone: s.timezone,
    params: s.params,
    revision: s.revision,
    createdAt: s.createdAt.toISOString(),
    updatedAt: s.updatedAt.toISOString(),
    removedAt: s.removedAt?.toISOString() ?? null,
  };
}

function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
