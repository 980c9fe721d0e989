/**
 * Calendars in the operator's views, before they happen (docs/schedules.md, "Calendars"): `baton
 * list --from` names each instant a calendar skips among the fires it shows and where `shift`
 * moves it, in words and in `--json`; `baton explain` of such an instant says it is no fire and
 * why; `baton validate` shows the timing with its calendars counted. Real `baton` processes.
 */
import { describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';

const config = writeSchedule(`
namespace: views
calendars:
  kr-holidays:
    dates: [2027-01-01, "2027-02-06..2027-02-09"]
jobs:
  settle:
    schedule: "0 3 * * *"
    timezone: Asia/Seoul
    skipOn: [kr-holidays]
    shift: next
    command: ["true"]
`);

describe('calendars in list, explain and validate', () => {
  it('list --from shows the skipped instants and where they moved', async () => {
    const args = ['list', '--config', config, '--from', '2026-12-30', '--count', '4'];
    const text = await baton(args);
    expect(text.code, text.stderr).toBe(0);
    // 03:00 in Seoul on 2027-01-01 is 2026-12-31 18:00 UTC; moved to the next day's 03:00.
    expect(text.stdout).toContain(
      'settle: 2026-12-31 18:00:00.000 skipped (calendar kr-holidays), moved to 2027-01-01 18:00:00.000',
    );
    expect(text.stdout).toContain('skip kr-holidays (2 days and spans); shift next');
    const json = await baton([...args, '--json']);
    const [job] = (JSON.parse(json.stdout) as { jobs: Record<string, unknown>[] }).jobs;
    expect(job!.calendarSkips).toEqual([
      {
        at: '2026-12-31T18:00:00.000Z',
        calendar: 'kr-holidays',
        movedTo: '2027-01-01T18:00:00.000Z',
      },
    ]);
    // The moved fire is among the fires; the skipped instant is not.
    expect(job!.nextFires).toContain('2027-01-01T18:00:00.000Z');
    expect(job!.nextFires).not.toContain('2026-12-31T18:00:00.000Z');
  });

  it('explain says a skipped instant is no fire, and where it went', async () => {
    const out = await baton(['explain', 'settle', '2027-02-05T18:00Z', '--config', config]);
    expect(out.stdout).toContain(
      '2027-02-05 18:00:00.000 is on calendar kr-holidays: no fire; moved to 2027-02-09 18:00:00.000 UTC (shift)',
    );
  });

  it('validate shows the timing with its calendars counted', async () => {
    const out = await baton(['validate', '--config', config]);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toContain(
      'settle: "0 3 * * *; skip kr-holidays (2 days and spans); shift next" Asia/Seoul',
    );
  });
});
