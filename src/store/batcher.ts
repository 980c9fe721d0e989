/**
 * Coalesces calls made in the same turn of the event loop into one statement.
 *
 * Why: when 500 jobs fire on the same second, every runner contends for 500 fires at once, and
 * each contention is the same few statements (GET_LOCK, the pause and orphan reads, the skip
 * row). Sent one by one they cost the runner a socket write each and the server a parse each:
 * the storm was bound by statement count, not by work. Batched, a step of all those contentions
 * is one statement, and the contentions still read as one fire at a time (fire-protocol.ts).
 *
 * A batch is what was asked for before the event loop's next turn (`setImmediate`): contentions
 * that are released together by one answer ask for their next step together. A lone call waits
 * for one turn of the loop, well under a millisecond.
 *
 * With `maxInFlight`, a batcher sends at most that many batches at a time; what is asked for
 * meanwhile waits for one of them to be answered and goes in the next. A runner that is behind —
 * its fires no longer move in step, each asks for its steps in a turn of its own — then still
 * sends few statements, in larger batches, instead of one per fire: the more it has to do, the
 * less each fire costs, where one statement per step per fire made being behind its own cause.
 */
import { asError } from '../errors.js';

/** What `run` gives back for one input: its value, or an error for that input alone. */
export type BatchResult<Out> = { value: Out } | { error: Error };

/** A settled promise as a batch's answer to one caller (a rejection as its error). */
export function toBatchResult<Out>(settled: PromiseSettledResult<Out>): BatchResult<Out> {
  return settled.status === 'fulfilled'
    ? { value: settled.value }
    : { error: asError(settled.reason) };
}

interface Pending<In, Out> {
  input: In;
  resolve: (value: Out) => void;
  reject: (err: unknown) => void;
}

export class Batcher<In, Out> {
  private pending: Pending<In, Out>[] = [];
  private scheduled = false;
  /** Flushes sent and not yet answered (each may be several calls of `run`: see maxBatch). */
  private inFlight = 0;

  /**
   * @param run answers a batch: one result per input, in the same order. A rejection fails every
   *   input of the batch.
   * @param maxBatch inputs per call of `run` (bounds the statement's size); more are split.
   * @param maxInFlight flushes at a time (see the header); default: no bound.
   */
  constructor(
    private readonly run: (inputs: In[]) => Promise<BatchResult<Out>[]>,
    private readonly maxBatch = 250,
    private readonly maxInFlight = Infinity,
  ) {}

  load(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.pending.push({ input, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.pending.length === 0 || this.inFlight >= this.maxInFlight) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    const all = this.pending;
    this.pending = [];
    const answered: Promise<void>[] = [];
    for (let i = 0; i < all.length; i += this.maxBatch) {
      answered.push(this.answer(all.slice(i, i + this.maxBatch)));
    }
    this.inFlight++;
    // Settled, never rejected: a flush that failed must still free its place, or a batcher
    // bounded to one flush at a time would hold every later call for good.
    void Promise.allSettled(answered).then(() => {
      this.inFlight--;
      this.schedule();
    });
  }

  private async answer(batch: Pending<In, Out>[]): Promise<void> {
    try {
      const results = await this.run(batch.map((p) => p.input));
      if (results.length !== batch.length) {
        throw new Error(`internal error: ${results.length} answers for ${batch.length} inputs`);
      }
      batch.forEach((p, i) => {
        const r = results[i];
        if (r != null && typeof r === 'object' && 'error' in r) p.reject(r.error);
        else if (r != null && typeof r === 'object' && 'value' in r) p.resolve(r.value);
        else p.reject(new Error(`internal error: answer ${i} of a batch is not a result`));
      });
    } catch (err) {
      // Rejecting a call twice is a no-op: those answered above keep their answers.
      for (const p of batch) p.reject(err);
    }
  }
}
