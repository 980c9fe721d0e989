/**
 * How a runner paces a storm of fires: at most N contentions at once, the rest in arrival order,
 * and the fires of one instant taken in an order of the runner's own (never across instants);
 * a storm's fires dispatched a slice per turn of the event loop, groups in order.
 */
import { describe, expect, it } from 'vitest';
import { Limiter } from '../../src/fire/limiter.js';
import { groupByLead, shuffleWithinInstant } from '../../src/daemon/dispatcher.js';
import { DISPATCH_SLICE, DispatchQueue } from '../../src/daemon/dispatch-queue.js';
import type { DueFire } from '../../src/schedule/fire-schedule.js';

describe('Limiter', () => {
  it('lets at most max holders in, then the waiting ones in arrival order', async () => {
    const limiter = new Limiter(2);
    const order: string[] = [];
    const releases = new Map<string, () => void>();
    const take = (name: string) =>
      limiter.acquire().then((release) => {
        order.push(name);
        releases.set(name, release);
      });
    const all = ['a', 'b', 'c', 'd', 'e'].map(take);
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['a', 'b']);
    releases.get('b')!();
    releases.get('b')!(); // a second release of the same place changes nothing
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['a', 'b', 'c']);
    releases.get('a')!();
    releases.get('c')!();
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['a', 'b', 'c', 'd', 'e']);
    releases.get('d')!();
    releases.get('e')!();
    await Promise.all(all);
    // Every place is free again: two new holders get in at once.
    const again: string[] = [];
    await Promise.all(['x', 'y'].map((n) => limiter.acquire().then(() => again.push(n))));
    expect(again).toEqual(['x', 'y']);
  });
});

describe('shuffleWithinInstant', () => {
  const fire = (job: string, second: number): DueFire => ({
    job,
    scheduledAt: new Date(Date.UTC(2026, 0, 1, 0, 0, second)),
    lateMs: 0,
  });

  it('reorders the fires of one instant, never across instants', () => {
    const due = [
      ...Array.from({ length: 50 }, (_, i) => fire(`a${i}`, 0)),
      ...Array.from({ length: 50 }, (_, i) => fire(`b${i}`, 1)),
    ];
    const orders = new Set<string>();
    for (let n = 0; n < 20; n++) {
      const out = shuffleWithinInstant(due);
      expect(out.slice(0, 50).every((f) => f.job.startsWith('a'))).toBe(true);
      expect(out.slice(50).every((f) => f.job.startsWith('b'))).toBe(true);
      expect(new Set(out.map((f) => f.job)).size).toBe(100);
      orders.add(out.map((f) => f.job).join());
    }
    // Twenty shuffles of 50! orders: all different (a fixed order would give one).
    expect(orders.size).toBe(20);
    expect(due[0]!.job).toBe('a0'); // the input is left as it was
  });
});

describe('groupByLead', () => {
  const fire = (job: string, second: number): DueFire => ({
    job,
    scheduledAt: new Date(Date.UTC(2026, 0, 1, 0, 0, second)),
    lateMs: 0,
  });
  const names = (fires: DueFire[]) => fires.map((f) => `${f.job}@${f.scheduledAt.getUTCSeconds()}`);
  const grouped = (due: DueFire[], leadOf: (f: DueFire) => number) =>
    groupByLead(due, leadOf).map((g) => [g.leadMs, names(g.fires)]);

  it("keeps a job's fires in order: after one waits for the lead, its later ones wait too", () => {
    // A late wake holds two fires of `a`: this runner asks first for the later one only.
    const due = [fire('a', 1), fire('b', 1), fire('a', 2), fire('b', 2)];
    const firstFor = new Set(['a@2', 'b@1', 'b@2']);
    expect(grouped(due, (f) => (firstFor.has(names([f])[0]!) ? 0 : 50))).toEqual([
      [0, ['b@1', 'b@2']],
      [50, ['a@1', 'a@2']],
    ]);
  });

  it('contends at once for every fire it asks first for while none of its job waits', () => {
    const due = [fire('a', 1), fire('a', 2), fire('b', 2)];
    expect(grouped(due, (f) => (f.job === 'a' ? 0 : 50))).toEqual([
      [0, ['a@1', 'a@2']],
      [50, ['b@2']],
    ]);
  });

  it("groups by each job's own lead (a preferred runner's), shortest first; a job's later fires never wait less", () => {
    const due = [fire('p', 1), fire('a', 1), fire('p', 2), fire('a', 2)];
    // `p` waits a preferred runner's 2 s at its first fire; its second, by itself 50 ms, waits too.
    const lead = (f: DueFire) =>
      f.job === 'p' ? (f.scheduledAt.getUTCSeconds() === 1 ? 2000 : 50) : 0;
    expect(grouped(due, lead)).toEqual([
      [0, ['a@1', 'a@2']],
      [2000, ['p@1', 'p@2']],
    ]);
  });
});

describe('DispatchQueue', () => {
  const fires = (prefix: string, n: number) =>
    Array.from({ length: n }, (_, i) => ({ job: `${prefix}${i}` }));
  const turn = () => new Promise<void>((r) => setImmediate(r));
  const queue = (signal = new AbortController().signal) => {
    const sent: string[] = [];
    return { sent, q: new DispatchQueue<{ job: string }>((f) => sent.push(f.job), signal) };
  };

  it('dispatches a slice in the pushing turn and one more each turn after, in order', async () => {
    const { sent, q } = queue();
    const asked = fires('a', 2 * DISPATCH_SLICE + 10);
    q.push(asked);
    // The first slice before the wake's turn ends: its statements go out with that turn.
    expect(sent).toHaveLength(DISPATCH_SLICE);
    await turn();
    expect(sent).toHaveLength(2 * DISPATCH_SLICE);
    await turn();
    expect(sent).toEqual(asked.map((f) => f.job));
  });

  it('a wake that comes while slices wait goes behind them: a job’s fires stay in order', async () => {
    const { sent, q } = queue();
    const first = fires('a', DISPATCH_SLICE + 5);
    q.push(first);
    // The next wake (the job a0's next fire among them) before the first wake's tail went out.
    const next = [{ job: 'a260' }, { job: 'a0' }];
    q.push(next);
    expect(sent).toHaveLength(DISPATCH_SLICE);
    await turn();
    expect(sent).toEqual([...first, ...next].map((f) => f.job));
  });

  it('tells which jobs have a fire waiting (an operator’s fire must not pass it)', async () => {
    const { q } = queue();
    q.push(fires('a', DISPATCH_SLICE + 2));
    expect(q.has('a0')).toBe(false); // dispatched in the pushing turn
    expect(q.has(`a${DISPATCH_SLICE}`)).toBe(true);
    await turn();
    expect(q.has(`a${DISPATCH_SLICE}`)).toBe(false);
  });

  it('drops what waits once the runner stops, and takes nothing after', async () => {
    const stop = new AbortController();
    const { sent, q } = queue(stop.signal);
    q.push(fires('a', 3 * DISPATCH_SLICE));
    stop.abort();
    await turn();
    expect(sent).toHaveLength(DISPATCH_SLICE);
    expect(q.has(`a${DISPATCH_SLICE}`)).toBe(false);
    q.push(fires('b', 1));
    expect(sent).toHaveLength(DISPATCH_SLICE);
  });
});
