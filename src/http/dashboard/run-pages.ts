/**
 * The data of the dashboard's run and job pages (`api/run`, `api/job`): one run with its output,
 * read on from a chunk on (the page polls while the run is running), and a job's recent runs,
 * next fires and pause. Read-only, and only within the runner's own namespace.
 */
import { pauseDocument, runDocumentOverHttp } from '../../actions/documents.js';
import { childrenOf } from '../../config/dependencies.js';
import { parseSchedule } from '../../schedule/cron.js';
import { findRun, listRuns } from '../../store/history-reads.js';
import { parentRunsOf } from '../../store/dependent-fire-reads.js';
import { findPause } from '../../store/pauses.js';
import { readOutput } from '../../store/run-output.js';
import type { DashboardSource } from './overview.js';

/** Chunks per answer (at most 64 KiB each: 1 MiB); the page asks again while `more` says so. */
const CHUNKS_PER_READ = 16;
/** Rows read for a job page (its runs are the winners' rows among them). */
const JOB_ROWS = 300;
/** Next fires listed on a job page. */
const NEXT_FIRES = 5;

const STREAMS = { 1: 'stdout', 2: 'stderr' } as const;

/** null: no such run in this namespace (or no database). */
export async function runPage(source: DashboardSource, id: number, afterSeq: number) {
  const { pool } = source;
  if (!pool) return null;
  const run = await findRun(pool, id);
  if (!run || run.namespace !== source.namespace || !run.winner) return null;
  const rows = await readOutput(pool, id, { afterSeq, limit: CHUNKS_PER_READ });
  // A child's run: the parent runs that let it start (docs/dependencies.md).
  const upstream =
    run.trigger === 'after' ? ((await parentRunsOf(pool, [id])).get(id) ?? null) : null;
  return {
    run: runDocumentOverHttp(run, upstream),
    chunks: rows.map((r) => ({
      seq: r.seq,
      attempt: r.attempt,
      stream: STREAMS[r.stream],
      offset: r.offset,
      bytes: r.data.length,
      // Bytes: the page decodes each stream as one (a character may be cut between chunks) and
      // shows it as text, never as markup; invalid UTF-8 becomes U+FFFD.
      base64: r.data.toString('base64'),
    })),
    more: rows.length === CHUNKS_PER_READ,
    // Runs from before whole output was kept have only their tail.
    outputTail: afterSeq < 0 && rows.length === 0 ? run.outputTail : null,
  };
}

/**
 * A job's recent runs (newest first) — with a child's `upstream` skips, the fires its parents did
 * not let run —, its next fires by this runner's schedule (none for a disabled job, or one that
 * runs only after its parents), its pause — who, when, why — and its place in the `after:` graph:
 * the jobs it runs after, and those that run after it; null without a database.
 */
export async function jobPage(source: DashboardSource, job: string) {
  const { pool } = source;
  if (!pool) return null;
  const rows = await listRuns(pool, { namespace: source.namespace, job, limit: JOB_ROWS });
  const pause = await findPause(pool, source.namespace, job);
  const definition = source.config.jobs.find((j) => j.name === job);
  const nextFires =
    definition?.enabled && definition.schedule != null
      ? parseSchedule(definition.schedule, definition.timezone).nextN(NEXT_FIRES, source.now)
      : [];
  return {
    job,
    known: definition != null,
    enabled: definition?.enabled ?? false,
    schedule: definition?.schedule ?? null,
    timezone: definition?.timezone ?? null,
    /** The jobs it runs after (parents), `on` and `withinMs`; null: none. */
    after: definition?.after ?? null,
    /** The jobs that run after it (children), in the file's order. */
    children: childrenOf(source.config.jobs, job).map((c) => c.name),
    pause: pauseDocument(pause),
    nextFires: nextFires.map((d) => d.toISOString()),
    runs: rows
      .filter((r) => r.winner || r.status === 'missed' || r.reasonKind === 'upstream')
      .map((r) => runDocumentOverHttp(r)),
  };
}
