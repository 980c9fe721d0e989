/**
 * The dispatcher's memory of the fires it sent (src/daemon/sent-fires.ts): kept while contended
 * or running and for a window after, holding nothing of the run once it is over; forgotten at
 * once when nothing was claimed, and all at once on a failover, saying why.
 */
import { describe, expect, it } from 'vitest';
import type { FireOutcome } from '../../src/fire/fire-types.js';
import { SentFires, type FireSettled } from '../../src/daemon/sent-fires.js';

const at = new Date('2026-01-01T03:00:00Z');
const later = new Date('2026-01-01T03:00:01Z');
const pending = () => new Promise<never>(() => {});

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const skipped: Extract<FireOutcome, { status: 'skipped' }> = {
  status: 'skipped',
  runId: 8,
  kind: 'taken',
  reason: 'this fire is running on h2 (started …)',
  contendMs: 3,
};

describe('SentFires', () => {
  it('keeps a fire while it goes and for the window after, then sweeps every job', async () => {
    let now = 0;
    const sent = new SentFires(() => now, 1_000);
    const contended = deferred<{ outcome: unknown }>();
    const settled = deferred<FireSettled>();
    sent.add('daily', at, contended.promise, settled.promise);
    const entry = sent.get('daily', at)!;
    expect(entry.settledAt).toBeNull();
    now = 5_000; // a long run: still kept
    contended.resolve({ outcome: 'the run, with its output tail' });
    settled.resolve({ forget: false, skipped: null });
    await settled.promise;
    expect(entry.settledAt).toBe(5_000);
    // Once over, nothing of the run is reachable from the entry.
    expect(await entry.contended).toBeUndefined();
    expect(await entry.over).toBeUndefined();
    // Within the window it stays.
    now = 5_900;
    sent.add('other', later, pending(), pending());
    expect(sent.get('daily', at)).toBe(entry);
    // Past it, any job's send sweeps it (a job that fires once a day, or was reloaded away,
    // sends nothing more itself) — sweeps come at most once per window, the last at 5,900 —
    // and fires still going are never swept.
    now = 6_100;
    sent.add('other', new Date(later.getTime() + 2_000), pending(), pending());
    expect(sent.get('daily', at)).toBe(entry);
    now = 7_000;
    sent.add('other', new Date(later.getTime() + 1_000), pending(), pending());
    expect(sent.get('daily', at)).toBeUndefined();
    expect(sent.get('other', later)).toBeDefined();
  });

  it('keeps a skip as it was told', async () => {
    const sent = new SentFires();
    const settled = Promise.resolve<FireSettled>({ forget: false, skipped });
    sent.add('job', at, Promise.resolve(), settled);
    await settled;
    expect(sent.get('job', at)?.skipped).toEqual(skipped);
  });

  it('forgets a fire nothing was claimed for, and every fire on a failover, saying why', async () => {
    const sent = new SentFires();
    const settled = Promise.resolve<FireSettled>({ forget: true, skipped: null });
    sent.add('job', at, Promise.resolve(), settled);
    const notAttempted = sent.get('job', at)!;
    await settled;
    expect(sent.get('job', at)).toBeUndefined();
    expect(notAttempted.forgotten).toBe('not-attempted');
    expect(sent.size).toBe(0);

    sent.add('job', at, pending(), pending());
    sent.add('other', at, pending(), pending());
    const going = sent.get('job', at)!;
    expect(sent.size).toBe(2);
    sent.forget();
    expect(sent.size).toBe(0);
    expect(going.forgotten).toBe('failover');
  });
});
