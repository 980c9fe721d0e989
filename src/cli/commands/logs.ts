/**
 * `baton logs <run-id | job>`: a run's whole output, from the history (`baton_run_output`), on
 * any host — not only the one that ran it. The job's stdout goes to stdout and its stderr to
 * stderr, in the order they were printed (as `docker logs` does), so `2>/dev/null` keeps stdout
 * only; baton's own notes (attempts, output dropped over `output.max`, how the run ended) go to
 * stderr, prefixed `baton:`. `--follow` reads on while the run is running, until it ends.
 * `--json`: one document with every chunk; with `--follow`, one JSON object per line.
 */
import type { CommandModule } from 'yargs';
import { isMissingSchemaError, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { formatSize } from '../../config/size.js';
import { delay } from '../../delay.js';
import { openConnection } from '../../store/connect.js';
import type { Queryable } from '../../store/deadline.js';
import { findRun, latestRunOf } from '../../store/history-reads.js';
import { readOutput, type OutputRow } from '../../store/run-output.js';
import type { Run } from '../../store/runs.js';
import { formatInstant } from '../../text.js';
import { action } from '../action.js';
import { resolveDatabase, withCommonOptions, type CommonArgs } from '../options.js';
import { resolveNamespace } from '../config-options.js';

interface LogsArgs extends CommonArgs {
  run: string;
  attempt?: number;
  follow: boolean;
  json: boolean;
  namespace?: string;
}

/** How often `--follow` looks for new output. */
const FOLLOW_POLL_MS = 500;
/** Chunks read per statement (at most 64 KiB each: 4 MiB). */
const PAGE = 64;

export const logsCommand: CommandModule<object, LogsArgs> = {
  command: 'logs <run>',
  describe: "A run's whole output (all attempts), from any host; --follow while it runs",
  builder: (y) =>
    withCommonOptions(y)
      .positional('run', {
        type: 'string',
        demandOption: true,
        describe: 'a run id (the ID column of `baton history`), or a job: its latest run',
      })
      .option('attempt', { type: 'number', describe: 'only this attempt (1 = the first)' })
      .option('follow', {
        alias: 'f',
        type: 'boolean',
        default: false,
        describe: 'keep printing while the run is running, until it ends',
      })
      .option('json', {
        type: 'boolean',
        default: false,
        describe: 'chunks as JSON (with --follow: one object per line)',
      })
      .option('namespace', {
        type: 'string',
        describe: "namespace of a job named (env BATON_NAMESPACE; default the schedules file's)",
      }) as never,
  handler: action(async (args: LogsArgs) => {
    if (args.attempt != null && (!Number.isInteger(args.attempt) || args.attempt < 1)) {
      throw new UsageError('--attempt must be a whole number from 1');
    }
    const target = resolveDatabase(args);
    const raw = String(args.run).trim();
    const byId = /^\d+$/.test(raw);
    if (byId && (!/^[1-9]\d{0,19}$/.test(raw) || !Number.isSafeInteger(Number(raw)))) {
      throw new UsageError(`run id "${raw}": no such run`);
    }
    const namespace = byId ? null : resolveNamespace(args);
    let conn;
    try {
      conn = await openConnection(target, { create: false });
      let run: Run | null = null;
      try {
        run = byId ? await findRun(conn, Number(raw)) : await latestRunOf(conn, namespace!, raw);
      } catch (err) {
        if (!isMissingSchemaError(err)) throw err;
      }
      if (!run) {
        throw new UsageError(
          byId
            ? `no run with id ${raw} in the history at ${target.display} (see \`baton history\`)`
            : `job "${raw}" has no run in namespace "${namespace}" (see \`baton history\`)`,
        );
      }
      if (!run.winner) {
        throw new UsageError(
          `run ${run.id} is a ${run.status} row: the runner that wrote it did not run the job ` +
            `(\`baton explain ${run.job} ${formatInstant(run.scheduledAt)}\` says who did)`,
        );
      }
      const printer = args.json && !args.follow ? new JsonDocument() : new Printer(args.json);
      await printOutput(conn, run, printer, args);
      return ExitCode.Ok;
    } finally {
      await conn?.end().catch(() => {});
    }
  }),
};

async function printOutput(db: Queryable, first: Run, out: Sink, args: LogsArgs): Promise<void> {
  let run = first;
  let afterSeq = -1;
  let any = false;
  for (;;) {
    const rows = await readOutput(db, run.id, { afterSeq, attempt: args.attempt, limit: PAGE });
    for (const row of rows) out.chunk(row);
    if (rows.length > 0) {
      any = true;
      afterSeq = rows.at(-1)!.seq;
      if (rows.length === PAGE) continue;
    }
    if (!args.follow || run.status !== 'running') break;
    await delay(FOLLOW_POLL_MS);
    // Read the row first, then the output: a run seen finished has all its output in already.
    run = (await findRun(db, run.id)) ?? run;
    if (run.status !== 'running') {
      for (;;) {
        const rest = await readOutput(db, run.id, { afterSeq, attempt: args.attempt, limit: PAGE });
        for (const row of rest) out.chunk(row);
        if (rest.length > 0) any = true;
        if (rest.length < PAGE) break;
        afterSeq = rest.at(-1)!.seq;
      }
      break;
    }
  }
  if (!any && run.outputTail) out.onlyTail(run.outputTail);
  out.end(run);
}

interface Sink {
  chunk(row: OutputRow): void;
  onlyTail(tail: string): void;
  end(run: Run): void;
}

const STREAM_NAMES = { 1: 'stdout', 2: 'stderr' } as const;

/** The chunk as JSON: its text when it is valid UTF-8, else its bytes as base64. */
function chunkJson(row: OutputRow) {
  const text = new TextDecoder('utf-8', { fatal: true });
  let body: { text: string } | { base64: string };
  try {
    body = { text: text.decode(row.data) };
  } catch {
    body = { base64: row.data.toString('base64') };
  }
  return {
    seq: row.seq,
    attempt: row.attempt,
    stream: STREAM_NAMES[row.stream],
    offset: row.offset,
    at: row.readAt.toISOString(),
    ...body,
  };
}

function endJson(run: Run) {
  return {
    id: run.id,
    job: run.job,
    status: run.status,
    exitCode: run.exitCode,
    error: run.error,
    attempts: run.attempts,
    host: run.host,
  };
}

/** Gaps in an attempt's offsets: output dropped between the head and the tail. */
class Gaps {
  private readonly next = new Map<number, number>();
  /** Bytes dropped before `row`, if any. */
  before(row: OutputRow): number {
    const expected = this.next.get(row.attempt) ?? 0;
    this.next.set(row.attempt, row.offset + row.data.length);
    return row.offset > expected ? row.offset - expected : 0;
  }
}

/** Text to the terminal (the job's streams to ours), or one JSON object per line (`--follow`). */
class Printer implements Sink {
  private attempt = 0;
  private readonly gaps = new Gaps();
  constructor(private readonly json: boolean) {}

  chunk(row: OutputRow): void {
    const dropped = this.gaps.before(row);
    if (this.json) {
      process.stdout.write(`${JSON.stringify({ ...chunkJson(row), droppedBefore: dropped })}\n`);
      return;
    }
    if (row.attempt !== this.attempt) {
      if (row.attempt > 1 || this.attempt !== 0) note(`attempt ${row.attempt}`);
      this.attempt = row.attempt;
    }
    if (dropped > 0) note(`… ${formatSize(dropped)} of output dropped here (over output.max) …`);
    (row.stream === 2 ? process.stderr : process.stdout).write(row.data);
  }

  onlyTail(tail: string): void {
    if (this.json) return;
    note(
      'no whole output is kept for this run (it ran before baton kept it, its job has ' +
        '`output: {max: 0}`, or `retention.output` removed it); its last bytes:',
    );
    process.stdout.write(tail.endsWith('\n') ? tail : `${tail}\n`);
  }

  end(run: Run): void {
    if (this.json) {
      process.stdout.write(`${JSON.stringify({ end: endJson(run) })}\n`);
      return;
    }
    const how =
      run.status === 'running'
        ? 'is still running (--follow reads on until it ends)'
        : `${run.status}${run.exitCode != null ? ` (exit code ${run.exitCode})` : ''}` +
          (run.error ? `: ${run.error}` : '');
    note(`run ${run.id} of ${run.job} on ${run.host} ${how}`);
  }
}

/** `--json` without `--follow`: one document. */
class JsonDocument implements Sink {
  private readonly chunks: object[] = [];
  private readonly gaps = new Gaps();
  private tail: string | null = null;

  chunk(row: OutputRow): void {
    this.chunks.push({ ...chunkJson(row), droppedBefore: this.gaps.before(row) });
  }
  onlyTail(tail: string): void {
    this.tail = tail;
  }
  end(run: Run): void {
    const doc = {
      run: endJson(run),
      chunks: this.chunks,
      ...(this.tail ? { outputTail: this.tail } : {}),
    };
    process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
  }
}

function note(text: string): void {
  process.stderr.write(`baton: ${text}\n`);
}
