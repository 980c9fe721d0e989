/**
 * The semi-sync series (daemon/semi-sync.ts): when a failover's window counts as settled. The
 * samples are what `SHOW GLOBAL STATUS` gives; the end-to-end proof on real semi-sync replication
 * is e2e/failover-semisync.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { SemiSyncSeries, type SemiSyncSample } from '../../src/daemon/semi-sync.js';

const S = 'server_id 1';
const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
const good = (s: number, extra: Partial<SemiSyncSample> = {}): SemiSyncSample => ({
  at: at(s),
  enabled: true,
  afterSync: true,
  on: true,
  noTimes: 0,
  noTx: 0,
  ...extra,
});

describe('SemiSyncSeries', () => {
  it('vouches from the first of unbroken good samples, up to a recent one', () => {
    const series = new SemiSyncSeries();
    for (const s of [0, 1, 2, 3]) series.note(S, good(s));
    expect(series.vouchedSince(S, at(5), 6_000)).toEqual(at(0));
    // Another server, or a last sample too old before the loss: nothing vouched.
    expect(series.vouchedSince('server_id 2', at(5), 6_000)).toBeNull();
    expect(series.vouchedSince(S, at(10), 6_000)).toBeNull();
  });

  it('vouches for nothing once the primary fell back to asynchronous (status OFF)', () => {
    const series = new SemiSyncSeries();
    series.note(S, good(0));
    series.note(S, good(1, { on: false, noTimes: 1, noTx: 3 }));
    expect(series.vouchedSince(S, at(2), 6_000)).toBeNull();
    // Acknowledged again: a new series, from its first sample.
    series.note(S, good(2, { noTimes: 1, noTx: 3 }));
    expect(series.vouchedSince(S, at(3), 6_000)).toEqual(at(2));
  });

  it('restarts the series when a fallback came and went between two samples', () => {
    const series = new SemiSyncSeries();
    series.note(S, good(0));
    series.note(S, good(1, { noTimes: 1, noTx: 2 }));
    expect(series.vouchedSince(S, at(2), 6_000)).toEqual(at(1));
  });

  it('does not vouch for AFTER_COMMIT, nor for semi-sync switched off', () => {
    const series = new SemiSyncSeries();
    series.note(S, good(0, { afterSync: false }));
    expect(series.vouchedSince(S, at(1), 6_000)).toBeNull();
    series.note(S, good(1, { enabled: false, on: false }));
    expect(series.vouchedSince(S, at(2), 6_000)).toBeNull();
  });
});
