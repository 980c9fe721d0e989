import { describe, expect, it } from 'vitest';
import { Batcher, type BatchResult } from '../../src/store/batcher.js';

/** A batcher that records each batch it is asked and answers each input doubled. */
function doubling(maxBatch?: number) {
  const batches: number[][] = [];
  const batcher = new Batcher<number, number>(async (inputs) => {
    batches.push(inputs);
    return inputs.map((n) => ({ value: n * 2 }));
  }, maxBatch);
  return { batcher, batches };
}

describe('Batcher', () => {
  it('answers the calls of one turn of the event loop with one batch, in order', async () => {
    const { batcher, batches } = doubling();
    const answers = await Promise.all([1, 2, 3].map((n) => batcher.load(n)));
    expect(answers).toEqual([2, 4, 6]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('batches calls made by continuations of the same answer together', async () => {
    // Contentions released by one answer ask for their next step in the same turn.
    const { batcher, batches } = doubling();
    const firsts = [1, 2, 3].map((n) => batcher.load(n).then((d) => batcher.load(d)));
    expect(await Promise.all(firsts)).toEqual([4, 8, 12]);
    expect(batches).toEqual([
      [1, 2, 3],
      [2, 4, 6],
    ]);
  });

  it('starts a new batch for calls of a later turn', async () => {
    const { batcher, batches } = doubling();
    await batcher.load(1);
    await new Promise((r) => setImmediate(r));
    await batcher.load(2);
    expect(batches).toEqual([[1], [2]]);
  });

  it('splits a turn larger than maxBatch', async () => {
    const { batcher, batches } = doubling(2);
    expect(await Promise.all([1, 2, 3, 4, 5].map((n) => batcher.load(n)))).toEqual([
      2, 4, 6, 8, 10,
    ]);
    expect(batches).toEqual([[1, 2], [3, 4], [5]]);
  });

  it('fails only the inputs answered with an error', async () => {
    const batcher = new Batcher<number, number>(async (inputs) =>
      inputs.map((n): BatchResult<number> =>
        n < 0 ? { error: new Error(`bad ${n}`) } : { value: n },
      ),
    );
    const results = await Promise.allSettled([1, -2, 3].map((n) => batcher.load(n)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toEqual(new Error('bad -2'));
  });

  it('fails every input of a batch whose statement failed, and goes on afterwards', async () => {
    let fail = true;
    const batcher = new Batcher<number, number>(async (inputs) => {
      if (fail) throw new Error('the statement failed');
      return inputs.map((value) => ({ value }));
    });
    const failed = await Promise.allSettled([1, 2].map((n) => batcher.load(n)));
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    expect(await batcher.load(3)).toBe(3);
  });

  it('fails the batch when it gets a wrong number of answers', async () => {
    const batcher = new Batcher<number, number>(async () => [{ value: 1 }]);
    await expect(Promise.all([batcher.load(1), batcher.load(2)])).rejects.toThrow(
      /1 answers for 2 inputs/,
    );
  });

  it('with maxInFlight 1, sends what is asked while a batch is out in the next one, together', async () => {
    const batches: number[][] = [];
    let answer!: () => void;
    const batcher = new Batcher<number, number>(
      async (inputs) => {
        batches.push(inputs);
        if (inputs[0] === 1) await new Promise<void>((r) => (answer = r));
        return inputs.map((value) => ({ value }));
      },
      250,
      1,
    );
    const first = batcher.load(1);
    await new Promise((r) => setImmediate(r));
    // Three turns while the first batch is out: one batch for them, once it is answered.
    const later: Promise<number>[] = [];
    for (const n of [2, 3, 4]) {
      later.push(batcher.load(n));
      await new Promise((r) => setImmediate(r));
    }
    expect(batches).toEqual([[1]]);
    answer();
    expect(await Promise.all([first, ...later])).toEqual([1, 2, 3, 4]);
    expect(batches).toEqual([[1], [2, 3, 4]]);
  });

  it('with maxInFlight 1, goes on after a batch whose statement failed', async () => {
    let fail = true;
    const batcher = new Batcher<number, number>(
      async (inputs) => {
        if (fail) throw new Error('the statement failed');
        return inputs.map((value) => ({ value }));
      },
      250,
      1,
    );
    await expect(batcher.load(1)).rejects.toThrow('the statement failed');
    fail = false;
    expect(await batcher.load(2)).toBe(2);
  });

  it('with maxInFlight 1, goes on after a batch answered with something that is not a result', async () => {
    let broken = true;
    const batcher = new Batcher<number, number>(
      async (inputs) =>
        broken
          ? (inputs.map(() => undefined) as unknown as BatchResult<number>[])
          : inputs.map((value) => ({ value })),
      250,
      1,
    );
    await expect(batcher.load(1)).rejects.toThrow('answer 0 of a batch is not a result');
    broken = false;
    expect(await batcher.load(2)).toBe(2);
  });
});
