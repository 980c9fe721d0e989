/**
 * Shell completion (`baton completion >> ~/.bashrc`): yargs completes the commands and options;
 * here the values only baton knows. Loaded on a Tab only (program.ts): a runner does not carry the
 * YAML parser for it. Job names come from the schedules file (`--config`,
 * BATON_CONFIG, ./schedules.yaml), read as plain YAML — no database, no validation, so that Tab
 * answers at once and still works on a file being edited. Run ids (`baton show`) come from the
 * database, given half a second to connect and a second in all: a Tab that hangs is worse than
 * one that offers nothing.
 */
import { existsSync, readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { Arguments } from 'yargs';
import { Parser } from 'yargs/helpers';
import { DEFAULT_NAMESPACE } from '../config/defaults.js';
import { openConnection } from '../store/connect.js';
import { withDeadline } from '../store/deadline.js';
import { recentRuns } from '../store/history-reads.js';
import { configPath, resolveDatabase, type CommonArgs } from './options.js';

/** The commands whose first argument is a job of the schedules file. */
const JOB_COMMANDS: ReadonlySet<string> = new Set([
  'run',
  'backfill',
  'history',
  'explain',
  'pause',
  'resume',
]);
/** The commands whose first argument is a run id. */
const RUN_ID_COMMANDS: ReadonlySet<string> = new Set(['show', 'kill']);

const CONNECT_MS = 500;
const DEADLINE_MS = 1_000;
const RUN_IDS = 20;

export type Done = (completions: string[]) => void;
export type Fallback = (
  onCompleted?: (err: Error | null, completions: string[] | undefined) => void,
) => void;

/**
 * What a Tab may offer for the first argument of the command being typed, found before yargs
 * parses: yargs completes synchronously only — by the time an asynchronous completion answered,
 * it would have run the command itself (`baton pause ti<Tab>` pausing "ti").
 */
export async function candidates(words: string[]): Promise<string[]> {
  const parsed = Parser(words.slice(1), {
    string: ['config', 'database-url', 'database-url-file', 'namespace'],
  });
  const args = parsed as unknown as CommonArgs & { namespace?: string };
  const command = String(parsed._[0] ?? '');
  try {
    // `definitions` takes a job, or its `apply` sub-command first.
    if (command === 'definitions') return ['apply', ...jobNames(args)];
    // `blackout` takes its sub-commands; jobs come with --job.
    if (command === 'blackout') return ['list', 'cancel'];
    if (JOB_COMMANDS.has(command)) return jobNames(args);
    if (RUN_ID_COMMANDS.has(command) && !(words.at(-1) ?? '').startsWith('-')) {
      return await runIds(args);
    }
  } catch {
    // No schedules file to read, no database to ask: yargs' own completion then.
  }
  return [];
}

/**
 * The completion function given to yargs' `.completion()`: (current, argv, fallback, done) —
 * four parameters, so that yargs passes its own completion as the fallback. `found` is offered
 * when the word under the cursor is the command's first argument (not an option or its value).
 */
export function completer(found: string[]) {
  return (current: string, argv: Arguments, fallback: Fallback, done: Done): void => {
    const words = argv._.map(String).slice(1); // without the script name
    const first = words.length === 2 && words[1] === current && !current.startsWith('-');
    if (first && found.length > 0) done(found);
    else fallback((_err, completions) => done(completions ?? []));
  };
}

interface FileHeads {
  jobs: string[];
  namespace: string | null;
}

/** The job names and namespace of the schedules file, or nothing when it cannot be read. */
function readHeads(args: CommonArgs): FileHeads {
  const file = configPath(args);
  if (!existsSync(file)) return { jobs: [], namespace: null };
  try {
    const doc = parse(readFileSync(file, 'utf8')) as unknown;
    if (doc == null || typeof doc !== 'object') return { jobs: [], namespace: null };
    const { jobs, namespace } = doc as { jobs?: unknown; namespace?: unknown };
    return {
      jobs: jobs != null && typeof jobs === 'object' ? Object.keys(jobs) : [],
      namespace: typeof namespace === 'string' ? namespace : null,
    };
  } catch {
    return { jobs: [], namespace: null };
  }
}

function jobNames(args: CommonArgs): string[] {
  return readHeads(args).jobs;
}

async function runIds(args: CommonArgs & { namespace?: string }): Promise<string[]> {
  const namespace =
    args.namespace ?? process.env.BATON_NAMESPACE ?? readHeads(args).namespace ?? DEFAULT_NAMESPACE;
  const target = resolveDatabase(args);
  const quick = { ...target, connection: { ...target.connection, connectTimeout: CONNECT_MS } };
  let conn: Awaited<ReturnType<typeof openConnection>> | undefined;
  try {
    const runs = await withDeadline(
      (async () => {
        conn = await openConnection(quick, { create: false });
        return recentRuns(conn, namespace, RUN_IDS);
      })(),
      DEADLINE_MS,
      'reading recent runs',
      () => conn?.destroy(),
    );
    // zsh shows a description beside each value; bash takes the values alone.
    const zsh = /zsh/.test(process.env.SHELL ?? '') || process.env.ZSH_NAME != null;
    return runs.map((r) =>
      zsh ? `${r.id}:${r.job} ${r.status} ${r.scheduledAt.toISOString()}` : String(r.id),
    );
  } finally {
    await conn?.end().catch(() => {});
  }
}
