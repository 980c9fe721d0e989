/**
 * Writes the output of this process's runs into `baton_run_output` while they run: chunks handed
 * on by the job's capture (execution/output-capture.ts) are gathered for FLUSH_MS and written in
 * one INSERT for all runs together — a few statements a second however many runs print.
 *
 * A write that fails (a pool hiccup) is tried again at a later flush, in order, up to RETRY_MAX_BYTES
 * held and MAX_ATTEMPTS tries of a batch; beyond that output is dropped, with a warning: it is
 * worth less than the runner's memory and its other runs' output. Writes are idempotent, so a
 * statement that committed although its answer was lost is harmless when tried again. Before a run's verdict is written, `settle` writes what is left of its output, so a run
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
/** Tries of one batch before it is dropped (a statement the server refuses every time). */
const MAX_ATTEMPTS = 5;

interface Pending {
  pool: Queryable;
  row: OutputRow;
}

export class OutputWriter {
  private pending: Pending[] = [];
  private readonly nextSeq = new Map<number, number>();
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  /** Failed writes in a row of the oldest pending batch. */
  private failures = 0;

  constructor(
    private readonly log?: Logger,
    /** FLUSH_MS unless the runner set another (its `runs.outputFlushMs`). */
    private readonly flushMs = FLUSH_MS,
  ) {}

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
    try {
      await this.flush();
    } finally {
      this.nextSeq.delete(runId);
    }
  }

  /** Forgets a run whose verdict could not be reached (its numbering is not needed again). */
  forget(runId: number): void {
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
      this.timer = setTimeout(() => void this.flush(), this.flushMs);
      this.timer.unref();
    }
  }

  private async writePending(): Promise<void> {
    const taken = this.pending;
    this.pending = [];
    const all = [...batches(taken)];
    for (let i = 0; i < all.length; i++) {
      const batch = all[i]!;
      try {
        await insertOutput(
          batch[0]!.pool,
          batch.map((p) => p.row),
        );
        this.failures = 0;
      } catch (err) {
        // This batch and everything after it go back, in order: rows written out of `seq` order
        // would be missed by a reader following `seq > last seen`.
        this.failures++;
        const left = all.slice(i).flat();
        if (this.failures > MAX_ATTEMPTS) {
          this.log?.warn(
            { err: errorMessage(err), chunks: batch.length },
            'job output dropped: it could not be written',
          );
          this.failures = 0;
          left.splice(0, batch.length);
        } else if (this.failures === 1) {
          this.log?.warn({ err: errorMessage(err) }, 'could not write job output; will retry');
        }
        this.hold([...left, ...this.pending]);
        return;
      }
    }
  }

  /** Keeps `rows` for the next flush, the oldest dropped beyond RETRY_MAX_BYTES. */
  private hold(rows: Pending[]): void {
    let held = 0;
    let from = rows.length;
    while (from > 0 && held + rows[from - 1]!.row.data.length <= RETRY_MAX_BYTES) {
      held += rows[--from]!.row.data.length;
    }
    if (from > 0)
      this.log?.warn({ chunks: from }, 'job output dropped: too much waiting to be written');
    this.pending = rows.slice(from);
    if (this.pending.length > 0 && !this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.flushMs * 4);
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
