/**
 * Skip reasons: each sentence a runner writes, the kind it carries (the `reason_kind` column),
 * and the label that kind gets on `baton_skips_total` — the same three labels as before kinds
 * existed (taken, overlap, paused), so dashboards and alerts keep working.
 */
import { describe, expect, it } from 'vitest';
import * as skips from '../../src/coordination/skip-reasons.js';
import { SKIP_LABEL } from '../../src/http/metrics.js';
import { SKIP_KINDS } from '../../src/run-status.js';
import type { Run } from '../../src/store/runs.js';

const T = new Date('2026-01-01T00:00:00.000Z');
const LATER = new Date('2026-01-01T00:01:00.000Z');
const EARLIER = new Date('2025-12-31T23:59:00.000Z');

function run(over: Partial<Run>): Run {
  return {
    id: 1,
    namespace: 'n',
    job: 'j',
    scheduledAt: T,
    winner: true,
    workerSlot: 1,
    trigger: 'schedule',
    status: 'running',
    reason: null,
    host: 'b',
    pid: 1,
    lockConnectionId: 7,
    startedAt: T,
    finishedAt: null,
    exitCode: null,
    attempts: 1,
    error: null,
    outputTail: null,
    ...over,
  } as Run;
}

describe('skip reasons', () => {
  it.each([
    [
      skips.fireHasWinner(run({ status: 'done' })),
      'already-ran',
      'this fire already ran on b (done)',
      true,
    ],
    [skips.fireHasWinner(null), 'already-ran', 'this fire already ran on another runner', false],
    [
      skips.fireHasWinner(run({})),
      'taken',
      'this fire is running on b (started 2026-01-01T00:00:00.000Z)',
      true,
    ],
    [
      skips.claimedElsewhere(run({ status: 'failed' })),
      'already-ran',
      'this fire already ran on b (failed)',
      true,
    ],
    [skips.claimedElsewhere(null), 'already-ran', 'this fire already ran on another runner', false],
    [
      skips.beingClaimed('b'),
      'taken',
      "this fire is being claimed by b (it holds the job's lock)",
      false,
    ],
    [
      skips.lockFreedMeanwhile(),
      'taken',
      'another run held the lock at this instant (it is free now)',
      false,
    ],
    [skips.sentAlready(false), 'taken', 'this fire is running on this runner already', false],
    [skips.sentAlready(true), 'already-ran', 'this fire already ran on this runner', false],
    [
      skips.slotAlreadyTaken(2),
      'already-ran',
      'this runner already took worker slot 2 of this fire',
      true,
    ],
    [
      skips.runningHere('a', EARLIER),
      'overlap',
      'an earlier run is still running on a (this runner; fire 2025-12-31T23:59:00.000Z)',
      false,
    ],
    [
      skips.heldByRun(run({ scheduledAt: EARLIER }), T),
      'overlap',
      'an earlier run is still running on b (fire 2025-12-31T23:59:00.000Z, started 2026-01-01T00:00:00.000Z)',
      false,
    ],
    [
      skips.heldByRun(run({ trigger: 'manual', scheduledAt: LATER }), T),
      'overlap',
      'a manual run is running on b (started 2026-01-01T00:00:00.000Z)',
      false,
    ],
    [
      skips.heldByRun(run({ scheduledAt: LATER }), T),
      'behind',
      'a later fire (2026-01-01T00:01:00.000Z) is already running on b; this runner is behind (check its clock)',
      false,
    ],
    [
      skips.heldByRun(run({}), T),
      'taken',
      'this fire is running on b (started 2026-01-01T00:00:00.000Z)',
      true,
    ],
    [
      skips.heldByUnknown(12),
      'overlap',
      'the lock is held by connection 12, which has no running row for this job',
      false,
    ],
    [
      skips.paused({ job: 'j', pausedBy: 'ops', pausedAt: T, reason: 'audit' }),
      'paused',
      'paused by ops at 2026-01-01T00:00:00.000Z: audit',
      false,
    ],
  ])('%o', (reason, kind, text, sawWinner) => {
    // sawWinner: the skip may be tallied (`skips: tally`) — only where a winner row was seen,
    // never where it was inferred (a holder still claiming may die before its row exists).
    expect(reason).toEqual({ kind, text, ...(sawWinner ? { sawWinner: true } : {}) });
  });

  it('a queued fire that gave up is an overlap, whatever held the lock', () => {
    const holder = skips.fireHasWinner(run({ status: 'done' }));
    expect(skips.gaveUpQueue(holder, { nextFire: LATER })).toEqual({
      kind: 'overlap',
      text:
        'waited in the queue until the next fire (2026-01-01T00:01:00.000Z) came first; ' +
        'this fire already ran on b (done)',
    });
    expect(skips.gaveUpQueue(holder, 'stopping').text).toMatch(
      /^waited in the queue until the runner is stopping; /,
    );
  });

  it('fan-out: overlap only when every slot was kept by another fire', () => {
    const earlier = skips.heldByRun(run({ scheduledAt: EARLIER }), T);
    const behind = skips.heldByRun(run({ scheduledAt: LATER }), T);
    const manual = skips.heldByRun(run({ trigger: 'manual' }), T);
    const taken = skips.fireHasWinner(run({}));
    expect(skips.allSlotsTaken([earlier, manual]).kind).toBe('overlap');
    expect(skips.allSlotsTaken([earlier, behind]).kind).toBe('overlap');
    expect(skips.allSlotsTaken([earlier, taken]).kind).toBe('taken');
    expect(skips.allSlotsTaken([taken, taken]).text).toBe(
      'all 2 worker slots are taken: 1: this fire is running on b (started 2026-01-01T00:00:00.000Z); ' +
        '2: this fire is running on b (started 2026-01-01T00:00:00.000Z)',
    );
  });

  it('every kind has a metrics label, and the labels are the five documented ones', () => {
    expect(Object.keys(SKIP_LABEL).sort()).toEqual([...SKIP_KINDS].sort());
    expect(SKIP_LABEL).toEqual({
      taken: 'taken',
      'already-ran': 'taken',
      overlap: 'overlap',
      behind: 'overlap',
      paused: 'paused',
      upstream: 'upstream',
      pool: 'pool',
      // Written by the calendar watch, never counted as a contention's skip.
      calendar: 'paused',
    });
  });
});

describe('a full pool', () => {
  const use = {
    used: 2,
    slots: 2,
    runs: [
      { id: 12, job: 'load-a', host: 'p-1', startedAt: new Date('2026-12-01T10:00:00.004Z') },
      { id: 13, job: 'load-b', host: 'p-2', startedAt: new Date('2026-12-01T10:00:00.010Z') },
    ],
    claiming: [],
  };
  it('names the pool, its size and every holder', () => {
    expect(skips.poolFull({ name: 'db', slots: 2, scope: 'fleet' }, use)).toEqual({
      kind: 'pool',
      text:
        'pool db (2 slots) is full (2 of 2 taken): load-a on p-1 (run 12, started ' +
        '2026-12-01T10:00:00.004Z), load-b on p-2 (run 13, started 2026-12-01T10:00:00.010Z)',
    });
  });
  it('says whose host for a host pool, what a queued fire waited for, and counts holders past four', () => {
    const many = {
      used: 6,
      slots: 6,
      runs: [],
      claiming: ['a', 'b', 'c', 'd', 'e'].map((holder) => ({ holder, slots: 1 })),
    };
    const at = new Date('2026-12-01T10:00:02.000Z');
    const reason = skips.poolFull({ name: 'sftp', slots: 6, scope: 'host' }, many, {
      host: 'h-1',
      gaveUp: { nextFire: at },
    });
    expect(reason.kind).toBe('pool');
    expect(reason.text).toBe(
      'waited for a slot until the next fire (2026-12-01T10:00:02.000Z) came first; pool sftp ' +
        '(6 slots per host) is full on h-1 (6 of 6 taken): a (taking a slot), b (taking a slot), ' +
        'c (taking a slot), d (taking a slot), 1 more',
    );
  });
});

describe('a wait for a pool slot that ended', () => {
  const pool = { name: 'db', slots: 1, scope: 'fleet' as const };
  const use = { used: 1, slots: 1, runs: [], claiming: [{ holder: 'srv-02', slots: 1 }] };
  it("says what ended it: a reload, an operator's --wait, a stop", () => {
    const text = (gaveUp: skips.PoolWaitEnd) => skips.poolFull(pool, use, { gaveUp }).text;
    expect(text('changed')).toBe(
      "waited for a slot until a reload changed the job's pool; pool db (1 slot) is full (1 of 1 " +
        'taken): srv-02 (taking a slot)',
    );
    expect(text({ waitedUntil: new Date('2026-12-01T10:00:03.000Z') })).toMatch(
      /^waited for a slot until the end of its --wait \(2026-12-01T10:00:03\.000Z\); pool db/,
    );
    expect(text('stopping')).toMatch(/^waited for a slot until the runner is stopping; pool db/);
  });
  it('tells a full pool apart from the other pool skips (isPoolFull)', () => {
    expect(skips.isPoolFull(skips.poolFull(pool, use).text)).toBe(true);
    expect(skips.isPoolFull(skips.poolFull(pool, use, { gaveUp: 'changed' }).text)).toBe(false);
    expect(skips.isPoolFull(skips.poolSlotLost('db', 'srv-01', 'load').text)).toBe(false);
    expect(skips.isPoolFull(null)).toBe(false);
  });
});
