/**
 * Writes the output of this process's runs into `baton_run_output` while they run: chunks handed
 * on by the job's capture (execution/output-capture.ts) are gathered for FLUSH_MS and written in
 * one INSERT for all runs together — a few statements a second however many runs print.
 *
 * A write that fails (a pool hiccup) is tried again at the next flush, up to RETRY_MAX_BYTES held;
 * beyond that the oldest are dropped, with a warning: the output is worth less than the runner's
 * memory. Before a run's verdict is written, `settle` writes what is left of its output, so a run
 * that reads finished has all its output in.
 */
import type { OutputChunk } from '../execution/output-capture.js';
import type { OutputSink } from '../execution/job-launch.js';
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import { insertOutput, INSERT_MAX_BYTES, type OutputRow } from '../store/run-output.js';

/** How long chunks are gathered before they are written. */
export const FLUSH_MS = 250;
/** Output held for another try after failed writes, at most. */
const RETRY_MAX_BYTES = 32 * 1024 * 1024;

interface Pending {
  pool: Queryable;
  row: OutputRow;
}

export class OutputWriter {
  private pending: Pending[] = [];
  private readonly nextSeq = new Map<number, number>();
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  private warned = false;

  constructor(private readonly log?: Logger) {}

  /** Where one attempt of run `runId` hands its output. */
  sink(
    pool: Queryable,
    run: { runId: number; namespace: string; attempt: number },
    maxBytes: number,
  ): OutputSink {
    return { maxBytes, deliver: (chunks) => this.add(pool, run, chunks) };
  }

  /** Writes everything handed on for `runId` so far (and all other pending output). */
  async settle(runId: number): Promise<void> {
    await this.flush();
    this.nextSeq.delete(runId);
  }

  /** Writes what is pending now (after the writes already under way). */
  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.writing = this.writing.then(() => this.writePending());
    return this.writing;
  }

  private add(
    pool: Queryable,
    { runId, namespace, attempt }: { runId: number; namespace: string; attempt: number },
    chunks: OutputChunk[],
  ): void {
    let seq = this.nextSeq.get(runId) ?? 0;
    for (const c of chunks) {
      const row: OutputRow = {
        runId,
        namespace,
        seq: seq++,
        attempt,
        stream: c.stream,
        offset: c.offset,
        readAt: new Date(c.at),
        data: c.data,
      };
      this.pending.push({ pool, row });
    }
    this.nextSeq.set(runId, seq);
    if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), FLUSH_MS);
      this.timer.unref();
    }
  }

  private async writePending(): Promise<void> {
    const taken = this.pending;
    this.pending = [];
    const failed: Pending[] = [];
    for (const batch of batches(taken)) {
      try {
        await insertOutput(
          batch[0]!.pool,
          batch.map((p) => p.row),
        );
      } catch (err) {
        failed.push(...batch);
        if (!this.warned) {
          this.warned = true;
          this.log?.warn({ err: errorMessage(err) }, 'could not write job output; will retry');
        }
      }
    }
    if (failed.length === 0) {
      this.warned = false;
      return;
    }
    // Kept for the next flush, oldest dropped beyond the bound.
    let held = 0;
    const kept: Pending[] = [];
    for (const p of [...failed, ...this.pending].reverse()) {
      held += p.row.data.length;
      if (held > RETRY_MAX_BYTES) break;
      kept.unshift(p);
    }
    this.pending = kept;
    if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), FLUSH_MS);
      this.timer.unref();
    }
  }
}

/** Consecutive rows of the same pool, at most INSERT_MAX_BYTES each. */
function* batches(rows: Pending[]): Generator<Pending[]> {
  let batch: Pending[] = [];
  let bytes = 0;
  for (const p of rows) {
    if (
      batch.length > 0 &&
      (p.pool !== batch[0]!.pool || bytes + p.row.data.length > INSERT_MAX_BYTES)
    ) {
      yield batch;
      batch = [];
      bytes = 0;
    }
    batch.push(p);
    bytes += p.row.data.length;
  }
  if (batch.length > 0) yield batch;
}
