/**
 * The parts of the terminal views that need no terminal: the table that fits a width
 * (src/cli/fit.ts), when colour is wanted (src/cli/terminal.ts), the short times
 * (src/cli/times.ts) and how a fire's rows read as one line (src/cli/history-view.ts).
 * test/e2e/terminal.test.ts measures the real thing on pseudo-terminals.
 */
import { describe, expect, it } from 'vitest';
import { clip, fitTable, type Column } from '../../src/cli/fit.js';
import { groupFires, summarise } from '../../src/cli/history-view.js';
import { colourEnabled, painter } from '../../src/cli/terminal.js';
import { instantForm, relative, shortInstant, shortLocal } from '../../src/cli/times.js';
import type { Run } from '../../src/store/runs.js';

const paint = painter(true);
// eslint-disable-next-line no-control-regex
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');

describe('fitTable', () => {
  const columns: Column[] = [
    { head: 'WHEN' },
    { head: 'AGO', optional: 1 },
    { head: 'JOB', flex: { min: 6, keep: 1 } },
    { head: 'NOTE', flex: { min: 4 } },
  ];
  const rows = [
    ['12-03 11:45', '3m', 'a-rather-long-job-name-indeed', 'skipped by 2'],
    ['12-03 11:44', '4m', 'tick', ''],
  ];

  it('keeps every line within the width, cutting the least kept flexible column first', () => {
    const wide = fitTable(columns, rows, 80, paint).split('\n');
    expect(wide[1]).toBe('12-03 11:45  3m   a-rather-long-job-name-indeed  skipped by 2');
    const narrow = fitTable(columns, rows, 40, paint).trimEnd().split('\n');
    for (const l of narrow) expect(l.length).toBeLessThanOrEqual(40);
    // NOTE (keep 0) gave way to its minimum before JOB (keep 1) did.
    expect(narrow[1]).toBe('12-03 11:45  3m   a-rather-long-j…  ski…');
  });

  it('leaves an optional column out before cutting below the minimums, then cuts lines', () => {
    const tight = fitTable(columns, rows, 24, paint).trimEnd().split('\n');
    expect(tight[0]).toBe('WHEN         JOB     NO…');
    const tiny = fitTable(columns, rows, 10, paint).trimEnd().split('\n');
    for (const l of tiny) expect(l.length).toBeLessThanOrEqual(10);
    expect(tiny[1]).toBe('12-03 11:…');
  });

  it('paints after the layout: no escape code counts as width or is cut', () => {
    const out = fitTable(
      [{ head: 'OUTCOME' }, { head: 'HOST', flex: { min: 4 } }],
      [[{ text: 'failed', style: 'red' }, 'srv-01.example.internal']],
      20,
      paint,
    );
    const line = out.split('\n')[1]!;
    expect(line).toBe('\x1b[31mfailed\x1b[39m   srv-01.exa…');
    expect(plain(line).length).toBe(20);
  });

  it('shows control characters of names as ?, so they cannot move the cursor', () => {
    const out = fitTable([{ head: 'HOST' }], [['evil\x1b[2J\nhost']], 80, paint);
    expect(out).toBe('HOST\nevil?[2J?host\n');
  });

  it('clip cuts with an ellipsis, by code point', () => {
    expect(clip('srv-01', 6)).toBe('srv-01');
    expect(clip('srv-01', 5)).toBe('srv-…');
    expect(clip('🚀🚀🚀', 2)).toBe('🚀…');
  });
});

describe('colour', () => {
  const tty = { isTTY: true, columns: 80 } as const;
  const pipe = { isTTY: false, columns: 0 } as const;
  it('on a terminal, not into a pipe; NO_COLOR (not empty) off; FORCE_COLOR on, 0 off', () => {
    expect(colourEnabled(tty, {})).toBe(true);
    expect(colourEnabled(pipe, {})).toBe(false);
    expect(colourEnabled(tty, { TERM: 'dumb' })).toBe(false);
    expect(colourEnabled(tty, { NO_COLOR: '1' })).toBe(false);
    expect(colourEnabled(tty, { NO_COLOR: '' })).toBe(true);
    expect(colourEnabled(pipe, { FORCE_COLOR: '1' })).toBe(true);
    expect(colourEnabled(tty, { FORCE_COLOR: '0' })).toBe(false);
    expect(colourEnabled(pipe, { FORCE_COLOR: '1', NO_COLOR: '1' })).toBe(false);
  });
});

describe('short times', () => {
  const now = new Date('2026-12-03T12:00:00Z');
  it('relative: how long ago, or how soon', () => {
    expect(relative(new Date('2026-12-03T11:57:00Z'), now)).toBe('3m ago');
    expect(relative(new Date('2026-12-03T11:57:00Z'), now, 'short')).toBe('3m');
    expect(relative(new Date('2026-12-03T14:00:00Z'), now)).toBe('in 2h');
    expect(relative(new Date('2026-12-02T00:00:00Z'), now)).toBe('36h ago');
    expect(relative(new Date('2026-12-01T00:00:00Z'), now)).toBe('2d ago');
    expect(relative(new Date('2026-11-01T00:00:00Z'), now)).toBe('32d ago');
    expect(relative(now, now)).toBe('now');
  });

  it('the year and the seconds only when some instant needs them', () => {
    const minutes = [new Date('2026-12-03T11:45:00Z')];
    expect(shortInstant(minutes[0]!, instantForm(minutes, now))).toBe('12-03 11:45');
    const old = [...minutes, new Date('2025-12-31T23:59:30Z')];
    expect(shortInstant(old[1]!, instantForm(old, now))).toBe('2025-12-31 23:59:30');
  });

  it("the job's clock with its offset, minutes only when it has some", () => {
    const at = new Date('2026-12-03T11:45:00Z');
    expect(shortLocal(at, 'America/New_York')).toBe('06:45-05');
    expect(shortLocal(at, 'Asia/Kolkata')).toBe('17:15+05:30');
    expect(shortLocal(new Date('2026-07-03T11:45:00Z'), 'Europe/Paris')).toBe('13:45+02');
  });
});

describe('a fire as one line', () => {
  const at = new Date('2026-12-03T11:45:00Z');
  const row = (over: Partial<Run>): Run => ({
    id: 1,
    namespace: 'ns',
    job: 'settle',
    scheduledAt: at,
    rerun: 0,
    params: null,
    pool: null,
    winner: false,
    workerSlot: null,
    trigger: 'schedule',
    status: 'skipped',
    reason: null,
    reasonKind: null,
    host: 'h',
    pid: null,
    lockConnectionId: null,
    startedAt: at,
    finishedAt: at,
    exitCode: null,
    attempts: 0,
    error: null,
    outputTail: null,
    ...over,
  });

  it("the winner's outcome, host and duration, and how many runners skipped it", () => {
    const fires = groupFires([
      row({ id: 3, host: 'srv-02', reasonKind: 'taken' }),
      row({
        id: 2,
        host: 'srv-01',
        winner: true,
        workerSlot: 1,
        status: 'failed',
        attempts: 2,
        finishedAt: new Date(at.getTime() + 1_500),
      }),
      row({ id: 4, host: 'srv-03', reasonKind: 'taken' }),
      row({ id: 5, job: 'other', status: 'done', winner: true, workerSlot: 1 }),
    ]);
    expect(fires.map((f) => f.job)).toEqual(['settle', 'other']);
    expect(summarise(fires[0]!)).toEqual({
      outcome: 'failed',
      attempts: 2,
      host: 'srv-01',
      durationMs: 1_500,
      skippedBy: 2,
      skipKind: null,
      manual: false,
      reruns: 0,
      slow: false,
      tooShort: false,
    });
  });

  it('worker slots: the worst outcome, the first host and how many more', () => {
    const [fire] = groupFires([
      row({ host: 'a', winner: true, workerSlot: 1, status: 'done' }),
      row({ host: 'b', winner: true, workerSlot: 2, status: 'timeout' }),
      row({ host: 'b', winner: true, workerSlot: 3, status: 'done' }),
    ]);
    expect(summarise(fire!)).toMatchObject({ outcome: 'timeout', host: 'a +1' });
  });

  it('nobody ran it: missed, or skipped with the kind', () => {
    const [missed] = groupFires([row({ status: 'missed', reasonKind: 'not-run' })]);
    expect(summarise(missed!)).toMatchObject({ outcome: 'missed', host: '', skipKind: null });
    const [paused] = groupFires([
      row({ host: 'a', reasonKind: 'paused' }),
      row({ host: 'b', reasonKind: 'paused' }),
    ]);
    expect(summarise(paused!)).toMatchObject({
      outcome: 'skipped',
      skippedBy: 2,
      skipKind: 'paused',
      durationMs: null,
    });
  });
});
