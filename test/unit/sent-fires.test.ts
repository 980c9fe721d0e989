/**
 * The dispatcher's memory of the fires it sent (src/daemon/sent-fires.ts): kept while contended
 * or running and for a window after, as a small record; forgotten at once when not attempted or
 * stopped, and all at once on a failover.
 */
import { describe, expect, it } from 'vitest';
import type { FireOutcome } from '../../src/fire/fire-types.js';
import { SentFires } from '../../src/daemon/sent-fires.js';

const at = new Date('2026-01-01T03:00:00Z');
const later = new Date('2026-01-01T03:00:01Z');

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const ran: FireOutcome = {
  status: 'ran',
  runId: 7,
  result: { outputTail: 'x'.repeat(8_192) } as never,
  attempts: 1,
  recorded: true,
};
const skipped: FireOutcome = {
  status: 'skipped',
  runId: 8,
  kind: 'taken',
  reason: 'this fire is running on h2 (started …)',
  contendMs: 3,
};

describe('SentFires', () => {
  it('keeps a fire while it goes and for the window after; a run as its time, not its result', async () => {
    let now = 0;
    const sent = new SentFires(() => now, 1_000);
    const outcome = deferred<FireOutcome | null>();
    sent.add('job', at, Promise.resolve(), outcome.promise);
    expect(sent.get('job', at)?.settledAt).toBeNull();
    now = 5_000; // a long run: still kept
    outcome.resolve(ran);
    await outcome.promise;
    const entry = sent.get('job', at)!;
    expect(entry.settledAt).toBe(5_000);
    expect(entry.skipped).toBeNull();
    expect(Object.values(entry).some((v) => v === ran)).toBe(false);
    // Within the window it stays; a later send of the job prunes what is past it.
    now = 5_900;
    sent.add('job', later, Promise.resolve(), new Promise(() => {}));
    expect(sent.get('job', at)).toBe(entry);
    now = 6_100;
    sent.add('other', later, Promise.resolve(), new Promise(() => {}));
    expect(sent.get('job', at)).toBe(entry); // another job's send prunes only its own
    sent.add('job', new Date(later.getTime() + 1_000), Promise.resolve(), new Promise(() => {}));
    expect(sent.get('job', at)).toBeUndefined();
    expect(sent.get('job', later)).toBeDefined(); // still going: never pruned
  });

  it('keeps a skip as it was told', async () => {
    const sent = new SentFires();
    const outcome = Promise.resolve<FireOutcome | null>(skipped);
    sent.add('job', at, Promise.resolve(), outcome);
    await outcome;
    expect(sent.get('job', at)?.skipped).toEqual(skipped);
  });

  it('forgets a fire not attempted, stopped or given up at once, and every fire on a failover', async () => {
    const sent = new SentFires();
    for (const [i, o] of [
      { status: 'not-attempted', cause: 'no-session' },
      { status: 'stopped' },
      null,
    ].entries()) {
      const when = new Date(at.getTime() + i * 1_000);
      const outcome = Promise.resolve(o as FireOutcome | null);
      sent.add('job', when, Promise.resolve(), outcome);
      await outcome;
      await Promise.resolve();
      expect(sent.get('job', when), JSON.stringify(o)).toBeUndefined();
    }
    expect(sent.size).toBe(0);
    sent.add('job', at, Promise.resolve(), new Promise(() => {}));
    sent.add('other', at, Promise.resolve(), new Promise(() => {}));
    expect(sent.size).toBe(2);
    sent.forget();
    expect(sent.size).toBe(0);
  });
});
