/**
 * What `baton status` says of the timing versions (fleet/timing-status.ts): the switches to
 * come, each judged from the version in force just before it — with two pending, the second
 * switches from the first, not from the one in force now — and none for a version that a newer
 * one supersedes (it never takes effect).
 */
import { describe, expect, it } from 'vitest';
import { pendingSwitches, timingWarnings } from '../../src/fleet/timing-status.js';
import type { TimingRecord } from '../../src/store/timings.js';

const record = (version: number, effectiveAt: string, hour: number): TimingRecord => ({
  job: 'settle',
  version,
  print: `p${hour}`,
  schedule: `0 ${hour} * * *`,
  timezone: 'UTC',
  effectiveAt: new Date(effectiveAt),
  chosenBy: version === 1 ? 'first' : 'operator',
  recordedAt: new Date('2027-03-01T00:00:00Z'),
  recordedBy: 'srv-01',
});
const NOW = new Date('2027-03-01T12:00:00Z');

describe('the switches to come', () => {
  it('each from the version before it', () => {
    const records = [
      record(1, '1970-01-01T00:00:00Z', 3),
      record(2, '2027-03-02T03:00:00Z', 4),
      record(3, '2027-03-03T04:00:00Z', 5),
    ];
    expect(pendingSwitches(records, NOW).map((s) => [s.from?.version, s.to.version])).toEqual([
      [1, 2],
      [2, 3],
    ]);
    // Neither day is doubled or skipped: both are told, as information.
    expect(timingWarnings([], new Map([['settle', records]]), NOW).map((w) => w.kind)).toEqual([
      'timing-switch',
      'timing-switch',
    ]);
  });

  it('none for a version a newer one supersedes; a day run twice is a warning', () => {
    const records = [
      record(1, '1970-01-01T00:00:00Z', 3),
      record(2, '2027-03-03T03:00:00Z', 4),
      // Recorded later, effective earlier (03:30, after 03:00 ran): version 2 never takes effect.
      record(3, '2027-03-02T03:30:00Z', 5),
    ];
    expect(pendingSwitches(records, NOW).map((s) => [s.from?.version, s.to.version])).toEqual([
      [1, 3],
    ]);
    const [warning] = timingWarnings([], new Map([['settle', records]]), NOW);
    expect(warning).toMatchObject({ kind: 'switch-anomaly', job: 'settle' });
    expect(warning!.message).toContain('2027-03-02 runs it 2 time(s)');
  });
});
