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
 */

/** What `run` gives back for one input: its value, or an error for that input alone. */
export type BatchResult<Out> = { value: Out } | { error: Error };

interface Pending<In, Out> {
  input: In;
  resolve: (value: Out) => void;
  reject: (err: unknown) => void;
}

export class Batcher<In, Out> {
  private pending: Pending<In, Out>[] = [];
  private scheduled = false;

  /**
   * @param run answers a batch: one result per input, in the same order. A rejection fails every
   *   input of the batch.
   * @param maxBatch inputs per call of `run` (bounds the statement's size); more are split.
   */
  constructor(
    private readonly run: (inputs: In[]) => Promise<BatchResult<Out>[]>,
    private readonly maxBatch = 250,
  ) {}

  load(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.pending.push({ input, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const all = this.pending;
    this.pending = [];
    for (let i = 0; i < all.length; i += this.maxBatch) {
      void this.answer(all.slice(i, i + this.maxBatch));
    }
  }

  private async answer(batch: Pending<In, Out>[]): Promise<void> {
    let results: BatchResult<Out>[];
    try {
      results = await this.run(batch.map((p) => p.input));
      if (results.length !== batch.length) {
        throw new Error(`internal error: ${results.length} answers for ${batch.length} inputs`);
      }
    } catch (err) {
      for (const p of batch) p.reject(err);
      return;
    }
    batch.forEach((p, i) => {
      const r = results[i]!;
      if ('error' in r) p.reject(r.error);
      else p.resolve(r.value);
    });
  }
}
