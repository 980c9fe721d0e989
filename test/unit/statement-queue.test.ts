import { describe, expect, it } from 'vitest';
import { MAX_IN_FLIGHT, StatementQueue } from '../../src/coordination/statement-queue.js';

/**
 * A stand-in for the driver: each statement records that it was handed over and is answered
 * only when the test says so.
 */
function fakeDriver() {
  const started: string[] = [];
  const answers = new Map<string, { resolve(v: string): void; reject(e: Error): void }>();
  const statement = (name: string) => () => {
    started.push(name);
    return new Promise<string>((resolve, reject) => answers.set(name, { resolve, reject }));
  };
  const answer = (name: string) => answers.get(name)!.resolve(`answer of ${name}`);
  return {
    started,
    statement,
    answer,
    fail: (name: string, e: Error) => answers.get(name)!.reject(e),
  };
}

/** Lets every settled promise run its callbacks. */
const settle = () => new Promise((r) => setImmediate(r));

const gone = () => new Error('the lock session is gone (test)');

describe('StatementQueue', () => {
  it(`hands the driver at most ${MAX_IN_FLIGHT} statements, the rest in order as turns free up`, async () => {
    const driver = fakeDriver();
    const queue = new StatementQueue(gone);
    const results = ['a', 'b', 'c', 'd'].map((n) => queue.run(driver.statement(n)));
    await settle();
    expect(driver.started).toEqual(['a', 'b']);
    driver.answer('b');
    await settle();
    expect(driver.started).toEqual(['a', 'b', 'c']);
    driver.answer('a');
    driver.answer('c');
    await settle();
    expect(driver.started).toEqual(['a', 'b', 'c', 'd']);
    driver.answer('d');
    expect(await Promise.all(results)).toEqual([
      'answer of a',
      'answer of b',
      'answer of c',
      'answer of d',
    ]);
  });

  it('puts a statement that goes first before every waiting one, not before those in flight', async () => {
    const driver = fakeDriver();
    const queue = new StatementQueue(gone);
    for (const n of ['a', 'b', 'c', 'd']) void queue.run(driver.statement(n));
    const beat = queue.run(driver.statement('heartbeat'), 'first');
    await settle();
    expect(driver.started).toEqual(['a', 'b']);
    driver.answer('a');
    await settle();
    expect(driver.started).toEqual(['a', 'b', 'heartbeat']);
    driver.answer('heartbeat');
    expect(await beat).toBe('answer of heartbeat');
  });

  it("gives each caller its own statement's failure, and goes on with the next", async () => {
    const driver = fakeDriver();
    const queue = new StatementQueue(gone, 1);
    const a = queue.run(driver.statement('a'));
    const b = queue.run(driver.statement('b'));
    await settle();
    driver.fail('a', new Error('deadlock'));
    await expect(a).rejects.toThrow('deadlock');
    await settle();
    driver.answer('b');
    expect(await b).toBe('answer of b');
  });

  it('once closed, fails every statement not answered yet and every later one at once', async () => {
    const driver = fakeDriver();
    const queue = new StatementQueue(gone);
    const results = ['a', 'b', 'c', 'd'].map((n) => queue.run(driver.statement(n)));
    await settle();
    const outcomes: string[] = [];
    for (const r of results) {
      void r.then(
        (v) => outcomes.push(v),
        (e: Error) => outcomes.push(e.message),
      );
    }
    queue.close();
    await settle();
    // In flight (a, b) and waiting (c, d) alike, at once: nobody waits on a connection that is
    // gone (nor out a deadline).
    expect(outcomes).toEqual(Array(4).fill('the lock session is gone (test)'));
    await expect(queue.run(driver.statement('e'))).rejects.toThrow('is gone');
    // The driver's late answers change nothing, and the waiting statements never get a turn.
    driver.answer('a');
    driver.answer('b');
    await settle();
    expect(driver.started).toEqual(['a', 'b']);
  });
});
