import { describe, expect, it } from 'vitest';
import { parseSince } from '../../src/cli/commands/history.js';
import { manualInstant } from '../../src/cli/commands/run.js';
import { formatDuration } from '../../src/config/duration.js';
import { jobLockName, LOCK_NAME_MAX, migrationLockName } from '../../src/lock-names.js';
import { OutputTail } from '../../src/execution/output-tail.js';
import { parseDatabaseUrl, redactUrl } from '../../src/config/database-url.js';
import { describeSchedule } from '../../src/schedule/describe.js';
import { closest, editDistance } from '../../src/text.js';
import { checkedReason, hasControlCharacter } from '../../src/operator.js';
import { characterCount, truncate } from '../../src/text.js';

describe('lock names', () => {
  it('stay within 64 characters, are ASCII, and differ by database, namespace and exact job name', () => {
    const long = 'j'.repeat(128);
    for (const job of ['a', long, 'Settle', 'settle']) {
      const name = jobLockName('baton', 'default', job);
      expect(name.length).toBeLessThanOrEqual(LOCK_NAME_MAX);
      expect(name).toMatch(/^[\x20-\x7e]+$/);
    }
    // MySQL compares lock names case-insensitively: the hash part must still tell these apart.
    const upper = jobLockName('baton', 'default', 'Settle').toLowerCase();
    const lower = jobLockName('baton', 'default', 'settle').toLowerCase();
    expect(upper).not.toBe(lower);
    expect(jobLockName('a', 'n', 'j')).not.toBe(jobLockName('b', 'n', 'j'));
    expect(jobLockName('a', 'n', 'j')).toBe(jobLockName('a', 'n', 'j'));
    expect(migrationLockName('x').length).toBeLessThanOrEqual(LOCK_NAME_MAX);
  });
});

describe('OutputTail', () => {
  it('keeps only the last bytes, marked as cut', () => {
    const tail = new OutputTail(10);
    for (let i = 0; i < 100; i++) tail.push(Buffer.from(`line ${i}\n`));
    const text = tail.toString();
    expect(text.startsWith('…')).toBe(true);
    expect(Buffer.byteLength(text.slice(1))).toBeLessThanOrEqual(10);
    expect(text.endsWith('line 99\n')).toBe(true);
  });

  it('keeps short output whole and never shows a broken multi-byte character', () => {
    const short = new OutputTail(100);
    short.push(Buffer.from('정산 완료\n'));
    expect(short.toString()).toBe('정산 완료\n');
    const cut = new OutputTail(4);
    cut.push(Buffer.from('정산')); // 6 bytes; the first character is cut in half
    expect(cut.toString()).toBe('…산');
  });
});

describe('database URLs', () => {
  it('parses and masks the password', () => {
    const t = parseDatabaseUrl('mysql://batch:s%40cret@db.internal:3307/baton_prod');
    expect(t.connection).toMatchObject({
      user: 'batch',
      password: 's@cret',
      host: 'db.internal',
      port: 3307,
    });
    expect(t.database).toBe('baton_prod');
    expect(t.display).toBe('mysql://batch:***@db.internal:3307/baton_prod');
    expect(redactUrl('mysql://u:p@h/d')).not.toContain(':p@');
  });

  it('refuses a URL without a usable database name, without echoing a password', () => {
    expect(() => parseDatabaseUrl('mysql://u:topsecret@h/')).toThrow(/must name a database/);
    expect(() => parseDatabaseUrl('mysql://u:topsecret@h/')).not.toThrow(/topsecret/);
    expect(() => parseDatabaseUrl('not a url topsecret')).not.toThrow(/topsecret/);
    expect(() => parseDatabaseUrl('postgres://h/d')).toThrow(/must start with mysql/);
  });
});

describe('history helpers', () => {
  it('parses --since as a duration or an instant', () => {
    const now = new Date('2026-11-30T12:00:00Z');
    expect(parseSince('2h', now)).toEqual(new Date('2026-11-30T10:00:00Z'));
    expect(parseSince('2026-11-01T00:00:00Z', now)).toEqual(new Date('2026-11-01T00:00:00Z'));
    expect(() => parseSince('soon', now)).toThrow(/expected a duration/);
  });

  it('formats durations and describes schedules', () => {
    expect(formatDuration(450, 'table')).toBe('450ms');
    expect(formatDuration(1500, 'table')).toBe('1.5s');
    expect(formatDuration(75_000, 'table')).toBe('1m15s');
    expect(formatDuration(3_723_000, 'table')).toBe('1h02m');
    expect(describeSchedule('0 3 * * *')).toBe('At 03:00');
    // The day fields in words as baton combines them: OR when both are restricted, else AND.
    expect(describeSchedule('0 12 1,15 * MON')).toBe(
      'At 12:00, on day 1 and 15 of the month, and on Monday',
    );
    expect(describeSchedule('0 12 */2 * MON')).toBe(
      'At 12:00, every 2 days in a month, only if it is Monday',
    );
  });

  it('writes a duration in each of its three styles, as each output has always shown it', () => {
    const styles = ['compact', 'table', 'brief'] as const;
    const cases: [number, string, string, string][] = [
      [450, '450ms', '450ms', '450ms'],
      [1_500, '2s', '1.5s', '1.5s'],
      [2_000, '2s', '2.0s', '2s'],
      [59_960, '1m', '60.0s', '60s'],
      [65_000, '1m5s', '1m05s', '1m5s'],
      [90_000, '1m30s', '1m30s', '1m30s'],
      [3_600_000, '1h', '1h00m', '1h'],
      [3_723_000, '1h2m3s', '1h02m', '1h2m'],
      [86_400_000 + 300_000 + 3_000, '1d5m3s', '24h05m', '1d5m'],
      [90_000_000, '1d1h', '25h00m', '1d1h'],
    ];
    for (const [ms, ...expected] of cases) {
      expect(styles.map((style) => formatDuration(ms, style))).toEqual(expected);
    }
    expect(formatDuration(90_000)).toBe('1m30s');
  });
});

describe('manual runs', () => {
  it('never take a whole-second instant, which belongs to cron fires', () => {
    expect(manualInstant(new Date('2026-11-30T03:00:00.000Z'))).toEqual(
      new Date('2026-11-30T03:00:00.001Z'),
    );
    expect(manualInstant(new Date('2026-11-30T03:00:00.250Z'))).toEqual(
      new Date('2026-11-30T03:00:00.250Z'),
    );
  });
});

describe('did-you-mean', () => {
  it('counts edits, a swap of neighbours as one', () => {
    expect(editDistance('status', 'status')).toBe(0);
    expect(editDistance('stauts', 'status')).toBe(1);
    expect(editDistance('setle', 'settle')).toBe(1);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('kitten', 'sitting')).toBe(3);
  });

  it('names the closest candidate only when it is close enough to be a typo', () => {
    expect(closest('stauts', ['start', 'status', 'show'])).toBe('status');
    expect(closest('Settle', ['report', 'settle'])).toBe('settle');
    expect(closest('frobnicate', ['status', 'history'])).toBeUndefined();
    // Within a third of the name's length: "ab" is one edit from "ax", not two from "xy".
    expect(closest('ab', ['xy'])).toBeUndefined();
    expect(closest('ab', ['ax'])).toBe('ax');
    expect(closest('x', [])).toBeUndefined();
  });
});

describe("an operator's reason", () => {
  it("is refused with a control character, which would reach other operators' terminals", () => {
    expect(checkedReason('  month end  ')).toBe('month end');
    expect(checkedReason('tab\tis fine')).toBe('tab\tis fine');
    for (const bad of ['two\nlines', 'bell\u0007', 'esc \u001b[2J', 'nul\u0000', 'c1\u009b31m']) {
      expect(hasControlCharacter(bad)).toBe(true);
      expect(() => checkedReason(bad)).toThrow(/control character/);
    }
    // Not mistaken for one: letters of every script.
    expect(hasControlCharacter('정산 재실행 — ünïcode')).toBe(false);
    // What reorders or breaks a line on a terminal though it is no C0/C1 control.
    for (const bad of ['right\u202eleft', 'line\u2028sep', 'iso\u2066late']) {
      expect(hasControlCharacter(bad), JSON.stringify(bad)).toBe(true);
    }
  });

  it('is counted in characters, as the VARCHAR(512) column counts them, and stored whole', () => {
    const emoji = '😀'.repeat(512);
    expect(emoji.length).toBe(1024);
    expect(characterCount(emoji)).toBe(512);
    expect(checkedReason(emoji)).toBe(emoji);
    expect(() => checkedReason(`${emoji}😀`)).toThrow(/513 characters long, more than 512/);
    // What the audit writes: the whole reason, or cut by characters, never inside a pair.
    expect(truncate(emoji, 512)).toBe(emoji);
    expect(truncate(`${emoji}😀`, 512)).toBe(`${'😀'.repeat(511)}…`);
    expect(truncate('é'.repeat(600), 512)).toBe(`${'é'.repeat(511)}…`);
    expect(truncate('short', 512)).toBe('short');
  });
});
