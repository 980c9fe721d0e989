/**
 * Calendars (docs/schedules.md, "Calendars"): the file's `calendars:` (dates, ranges, spans,
 * iCalendar files) carried into a job's timing line by `skipOn`, `onlyOn` and `shift`; what they
 * do to the fires, by hand-derived answers (the oracle comparison is compound-schedule.test.ts);
 * and every refusal, at the line that says it.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';
import { shortTiming } from '../../src/schedule/calendar.js';
import { parseSchedule } from '../../src/schedule/cron.js';
import { describeSchedule } from '../../src/schedule/describe.js';
import { switchedSchedule } from '../../src/schedule/timing-switch.js';
import { timingPrint } from '../../src/config/fingerprint.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-calendars-'));
const file = path.join(dir, 'schedules.yaml');

function problems(yaml: string): string[] {
  try {
    parseConfig(file, yaml);
  } catch (err) {
    if (err instanceof ConfigError) {
      return err.problems.map((p) => `${path.basename(p.file)}:${p.line}:${p.path}: ${p.message}`);
    }
    throw err;
  }
  return [];
}

const fires = (text: string, zone: string, from: string, count: number) =>
  parseSchedule(text, zone)
    .nextN(count, new Date(from))
    .map((d) => d.toISOString());

describe('a timing with calendars', () => {
  it('skips the days of a skip calendar in the job’s zone, and a range with both ends', () => {
    // 03:00 in Seoul is 18:00 UTC the day before: the skipped days are Seoul's.
    expect(
      fires(
        '0 3 * * *; skip hol 2027-01-02 2027-01-04..2027-01-05',
        'Asia/Seoul',
        '2027-01-01T00:00Z',
        3,
      ),
    ).toEqual(['2027-01-02T18:00:00.000Z', '2027-01-05T18:00:00.000Z', '2027-01-06T18:00:00.000Z']);
  });

  it('fires only on the days and spans of its only calendars, minus its skip ones', () => {
    expect(
      fires(
        '0 3 * * *; only biz 2027-01-04..2027-01-08; skip hol 2027-01-06',
        'UTC',
        '2027-01-01T00:00Z',
        5,
      ),
    ).toEqual([
      '2027-01-04T03:00:00.000Z',
      '2027-01-05T03:00:00.000Z',
      '2027-01-07T03:00:00.000Z',
      '2027-01-08T03:00:00.000Z',
    ]);
  });

  it('moves a skipped fire to the same wall time of the next or previous allowed day, once', () => {
    // Monthly on the 25th; Christmas moves to the 24th (previous) or the 27th (next: the 26th is
    // skipped too).
    const monthly = '0 3 25 * *; skip xmas 2027-12-25..2027-12-26';
    expect(fires(`${monthly}; shift previous`, 'UTC', '2027-12-01T00:00Z', 2)).toEqual([
      '2027-12-24T03:00:00.000Z',
      '2028-01-25T03:00:00.000Z',
    ]);
    expect(fires(`${monthly}; shift next`, 'UTC', '2027-12-01T00:00Z', 2)).toEqual([
      '2027-12-27T03:00:00.000Z',
      '2028-01-25T03:00:00.000Z',
    ]);
    // A daily job: the holiday's fire moved onto the next day's is that one fire (each instant
    // once), not two runs.
    expect(
      fires('0 3 * * *; skip hol 2027-01-02; shift next', 'UTC', '2027-01-01T00:00Z', 3),
    ).toEqual(['2027-01-01T03:00:00.000Z', '2027-01-03T03:00:00.000Z', '2027-01-04T03:00:00.000Z']);
    // A wall time moved onto a day the clocks skip it is the moment they jump, as the day's own
    // fixed-time fire is (02:30 on New York's spring-forward night is 03:00 EDT): a daily job's
    // moved fire meets that day's and is one run, not two.
    expect(
      fires(
        '30 2 * * *; skip s 2027-03-13; shift next',
        'America/New_York',
        '2027-03-12T12:00Z',
        3,
      ),
    ).toEqual(['2027-03-14T07:00:00.000Z', '2027-03-15T06:30:00.000Z', '2027-03-16T06:30:00.000Z']);
  });

  it('moves no fire across a timing switch: each version fires what comes from its own stretch', () => {
    // 2027-01-01 is a Friday. The holiday is added by a version in force from Friday 12:00: the
    // Friday fire ran under the old one; moved to Saturday it would run again.
    const plain = parseSchedule('0 3 * * 1-5', 'UTC');
    const shifted = parseSchedule('0 3 * * 1-5; skip hol 2027-01-01; shift next', 'UTC');
    const E = new Date('2027-01-01T12:00:00Z');
    const at = (s: ReturnType<typeof switchedSchedule>) =>
      s.nextN(3, new Date('2026-12-31T12:00:00Z')).map((d) => d.toISOString());
    const added = switchedSchedule(shifted, [
      { version: 1, from: new Date(0), schedule: plain },
      { version: 2, from: E, schedule: shifted },
    ]);
    expect(at(added)).toEqual([
      '2027-01-01T03:00:00.000Z',
      '2027-01-04T03:00:00.000Z',
      '2027-01-05T03:00:00.000Z',
    ]);
    // Removed after the holiday's fire was skipped: the move would land in the new version's
    // stretch, which does not make it; its row says skipped, not moved.
    const removed = switchedSchedule(plain, [
      { version: 1, from: new Date(0), schedule: shifted },
      { version: 2, from: E, schedule: plain },
    ]);
    expect(at(removed)[0]).toBe('2027-01-04T03:00:00.000Z');
    expect(
      removed.calendarSkips!(new Date('2026-12-31T00:00Z'), new Date('2027-01-05T00:00Z'), 10),
    ).toEqual([{ at: new Date('2027-01-01T03:00Z'), calendar: 'hol', why: 'skip', movedTo: null }]);
  });

  it('skips a span of wall times of the job’s zone, and a span of instants', () => {
    const everyHour = '0 * * * *';
    expect(
      fires(
        `${everyHour}; skip m 2027-06-01T10:00/2027-06-01T12:00`,
        'Europe/Berlin',
        '2027-06-01T07:30Z',
        3,
      ),
    ).toEqual(['2027-06-01T10:00:00.000Z', '2027-06-01T11:00:00.000Z', '2027-06-01T12:00:00.000Z']);
    expect(
      fires(
        `${everyHour}; skip m 2027-06-01T08:00Z/2027-06-01T10:00Z`,
        'Europe/Berlin',
        '2027-06-01T07:30Z',
        2,
      ),
    ).toEqual(['2027-06-01T10:00:00.000Z', '2027-06-01T11:00:00.000Z']);
  });

  it('tells which fires were skipped and where they went', () => {
    const s = parseSchedule('0 3 * * *; skip hol 2027-01-02; shift next', 'UTC');
    expect(
      s.calendarSkips!(new Date('2027-01-01T00:00Z'), new Date('2027-01-05T00:00Z'), 10),
    ).toEqual([
      {
        at: new Date('2027-01-02T03:00Z'),
        calendar: 'hol',
        why: 'skip',
        movedTo: new Date('2027-01-03T03:00Z'),
      },
    ]);
  });

  it('steps over a per-second job’s skipped day at once', () => {
    const started = performance.now();
    const next = fires(
      '* * * * * *; skip hol 2027-01-02..2027-01-09',
      'UTC',
      '2027-01-01T23:59:59Z',
      1,
    );
    expect(next).toEqual(['2027-01-10T00:00:00.000Z']);
    // Not a timed assertion of speed: a walk second by second would take minutes, not this.
    expect(performance.now() - started).toBeLessThan(60_000);
  });

  it('is shown with its items counted, not listed', () => {
    const line =
      '0 3 * * *; from 2027-01-01; skip kr 2027-01-01 2027-02-06..2027-02-09; shift next';
    expect(shortTiming(line)).toBe(
      '0 3 * * *; from 2027-01-01; skip kr (2 days and spans); shift next',
    );
    expect(describeSchedule(line)).toContain('skip kr (2 days and spans); shift next');
  });

  it('refuses what it cannot read, naming it', () => {
    const refused = (text: string) => () => parseSchedule(text, 'UTC');
    expect(refused('0 3 * * *; skip hol 2027-02-30')).toThrow(/no such date 2027-02-30/);
    expect(refused('0 3 * * *; skip hol 2027-02-09..2027-02-06')).toThrow(/last day is before/);
    expect(refused('0 3 * * *; skip hol 2027-01-01T10:00Z/2027-01-01T09:00Z')).toThrow(
      /end is not after/,
    );
    expect(refused('0 3 * * *; skip')).toThrow(/needs a calendar name/);
    expect(refused('0 3 * * *; shift sideways')).toThrow(/shift next, shift previous/);
    expect(refused('0 3 * * *; skip a 2027-01-01; shift next; shift previous')).toThrow(
      /shift twice/,
    );
  });
});

describe('calendars: in the schedules file', () => {
  const yaml = (calendars: string, job: string) =>
    `calendars:\n${calendars}jobs:\n  settle:\n    command: ["true"]\n    schedule: "0 3 * * *"\n${job}`;

  it('carries the calendar’s days into the job’s timing line: a changed day is a changed timing', () => {
    const config = parseConfig(
      file,
      yaml(
        '  kr-holidays:\n    dates: [2027-02-09, 2027-01-01, "2027-02-06..2027-02-08", {from: 2027-03-01T10:00Z, until: 2027-03-01T12:00Z}]\n',
        '    skipOn: [kr-holidays]\n    shift: next\n',
      ),
    );
    const job = config.jobs[0]!;
    expect(job.schedule).toBe(
      '0 3 * * *; skip kr-holidays 2027-01-01 2027-02-06..2027-02-08 2027-02-09 2027-03-01T10:00Z/2027-03-01T12:00Z; shift next',
    );
    const other = parseConfig(
      file,
      yaml('  kr-holidays:\n    dates: [2027-01-01]\n', '    skipOn: [kr-holidays]\n'),
    );
    expect(timingPrint(other.jobs[0]!)).not.toBe(timingPrint(job));
  });

  it('reads an iCalendar file: whole days, timed spans, floating times and recurrences', () => {
    writeFileSync(
      path.join(dir, 'bank.ics'),
      [
        'BEGIN:VCALENDAR',
        'VERSION:2.0',
        'PRODID:-//test//baton//EN',
        'BEGIN:VEVENT',
        'UID:a',
        'DTSTART;VALUE=DATE:20270101',
        'DTEND;VALUE=DATE:20270102',
        'SUMMARY:New Year',
        'END:VEVENT',
        'BEGIN:VEVENT',
        'UID:b',
        'DTSTART;VALUE=DATE:20270206',
        'DTEND;VALUE=DATE:20270210',
        'SUMMARY:Seollal',
        'END:VEVENT',
        'BEGIN:VEVENT',
        'UID:c',
        'DTSTART;TZID=Asia/Seoul:20270301T100000',
        'DTEND;TZID=Asia/Seoul:20270301T120000',
        'END:VEVENT',
        'BEGIN:VEVENT',
        'UID:d',
        'DTSTART:20270401T100000',
        'DTEND:20270401T110000',
        'RRULE:FREQ=YEARLY;COUNT=2',
        'END:VEVENT',
        'END:VCALENDAR',
        '',
      ].join('\r\n'),
    );
    const config = parseConfig(
      file,
      yaml('  bank:\n    file: bank.ics\n', '    skipOn: [bank]\n    timezone: Asia/Seoul\n'),
    );
    expect(config.jobs[0]!.schedule).toBe(
      '0 3 * * *; skip bank 2027-01-01 2027-02-06..2027-02-09 2027-03-01T01:00:00Z/2027-03-01T03:00:00Z ' +
        '2027-04-01T10:00:00/2027-04-01T11:00:00 2028-04-01T10:00:00/2028-04-01T11:00:00',
    );
  });

  it('explains a calendar file’s errors with its file and line', () => {
    writeFileSync(
      path.join(dir, 'broken.ics'),
      'BEGIN:VCALENDAR\nVERSION:2.0\nthis is not a line\nEND:VCALENDAR\n',
    );
    expect(problems(yaml('  bank:\n    file: broken.ics\n', '    skipOn: [bank]\n'))).toEqual([
      'broken.ics:3:: not iCalendar (RFC 5545): a line that is no NAME:value property',
    ]);
    // A path that points at another file: its line is named, never shown.
    writeFileSync(path.join(dir, 'secrets.env'), 'API_TOKEN=s3cr3t-value\n');
    const leaked = problems(yaml('  bank:\n    file: secrets.env\n', '    skipOn: [bank]\n'));
    expect(leaked).toHaveLength(1);
    expect(leaked[0]).toMatch(/^secrets\.env:(1|undefined)::/);
    expect(leaked[0]).not.toContain('s3cr3t');
    // ical.js quotes some lines in single quotes: none of them is repeated either.
    for (const text of [
      'token;SECRET-abc123\n',
      'BEGIN:VCALENDAR\nX;=SECRET-abc123:v\nEND:VCALENDAR\n',
    ]) {
      writeFileSync(path.join(dir, 'secrets2.txt'), text);
      const said = problems(yaml('  bank:\n    file: secrets2.txt\n', '    skipOn: [bank]\n'));
      expect(said).toHaveLength(1);
      expect(said[0]).not.toContain('SECRET');
    }
    writeFileSync(
      path.join(dir, 'zone.ics'),
      'BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nUID:x\nDTSTART;TZID=Mars/Olympus:20270101T100000\nEND:VEVENT\nEND:VCALENDAR\n',
    );
    expect(problems(yaml('  bank:\n    file: zone.ics\n', '    skipOn: [bank]\n'))).toEqual([
      'zone.ics:3:: its TZID is no IANA time zone this runtime knows',
    ]);
    expect(problems(yaml('  bank:\n    file: missing.ics\n', '    skipOn: [bank]\n'))).toEqual([
      'missing.ics:undefined:: cannot read the calendar file (ENOENT)',
    ]);
  });

  it('refuses an unknown calendar, a bad date, shift without calendars, and one that never lets it fire', () => {
    expect(problems(yaml('  hol:\n    dates: [2027-01-01]\n', '    skipOn: [holidays]\n'))).toEqual(
      ['schedules.yaml:8:jobs.settle.skipOn: unknown calendar "holidays" (calendars: hol)'],
    );
    expect(problems(yaml('  hol:\n    dates: [2027-13-01]\n', '    skipOn: [hol]\n'))[0]).toMatch(
      /^schedules\.yaml:3:calendars\.hol\.dates\.0: calendar item "2027-13-01": .*not a date|no such date/,
    );
    expect(problems(yaml('  hol:\n    dates: [2027-01-01]\n', '    shift: next\n'))).toEqual([
      'schedules.yaml:8:jobs.settle.shift: `shift` moves the fires a calendar skips; this job names none (skipOn, onlyOn)',
    ]);
    // Only on a day long past: never again.
    expect(problems(yaml('  once:\n    dates: [2020-01-01]\n', '    onlyOn: [once]\n'))[0]).toMatch(
      /^schedules\.yaml:8:jobs\.settle\.onlyOn: the schedule never fires within the next year on the days its calendars allow/,
    );
    // Longer than a timing version holds (baton_timings.schedule): refused, not left unrecorded.
    const spans = Array.from({ length: 1_700 }, (_, i) => {
      const a = Date.parse('2028-01-01T10:00:00Z') + i * 86_400_000;
      const at = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
      return `{from: ${at(a)}, until: ${at(a + 3_600_000)}}`;
    });
    expect(
      problems(yaml(`  maint:\n    dates: [${spans.join(', ')}]\n`, '    skipOn: [maint]\n')),
    ).toEqual([
      expect.stringMatching(
        /^schedules\.yaml:8:jobs\.settle\.skipOn: its calendars make its timing \d+ bytes long, more than the 60000/,
      ),
    ]);
    expect(problems(yaml('  hol:\n    dates: ["--all"]\n', '    skipOn: [hol]\n'))[0]).toMatch(
      /calendar item "--all"/,
    );
    expect(
      problems(yaml('  hol:\n    dates: ["2027-01-01; shift next"]\n', '    skipOn: [hol]\n'))[0],
    ).toMatch(/calendar item "2027-01-01; shift next"/);
  });
});
