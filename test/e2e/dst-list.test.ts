/**
 * `baton list --from` lets an operator check a daylight-saving transition before it happens
 * (docs/schedules.md): the built CLI shows the fires as UTC instants (the fire keys) and as each
 * job's wall clock with its offset, and shows the same instants whatever the host's TZ.
 * No database: `list` only reads the schedules file.
 */
import { describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';

const CONFIG = writeSchedule(`
jobs:
  ny-report:
    schedule: "30 2 * * *"
    timezone: America/New_York
    command: ["true"]
  ny-tick:
    schedule: "*/30 * * * *"
    timezone: America/New_York
    command: ["true"]
  berlin-weekly:
    schedule: "30 2 * * 0"
    timezone: Europe/Berlin
    command: ["true"]
  utc-nightly:
    schedule: "0 3 * * *"
    command: ["true"]
`);

interface Listed {
  jobs: { name: string; nextFires: string[]; nextFiresLocal: string[] }[];
}

async function listJson(from: string, count: number, tz: string): Promise<Listed> {
  const r = await baton(
    ['list', '--config', CONFIG, '--from', from, '--count', String(count), '--json'],
    { env: { TZ: tz } },
  );
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as Listed;
}

function byName(listed: Listed): Record<string, { utc: string[]; local: string[] }> {
  return Object.fromEntries(
    listed.jobs.map((j) => [j.name, { utc: j.nextFires, local: j.nextFiresLocal }]),
  );
}

describe('baton list --from', () => {
  it('shows the spring-forward fires, the same under TZ=UTC and TZ=Asia/Seoul', async () => {
    const [utcHost, seoulHost] = await Promise.all([
      listJson('2027-03-13T00:00:00Z', 3, 'UTC'),
      listJson('2027-03-13T00:00:00Z', 3, 'Asia/Seoul'),
    ]);
    expect(seoulHost).toEqual(utcHost);
    const jobs = byName(utcHost);
    // 02:30 does not exist in New York on 03-14: the fire is at 03:00 EDT, once.
    expect(jobs['ny-report']).toEqual({
      utc: ['2027-03-13T07:30:00.000Z', '2027-03-14T07:00:00.000Z', '2027-03-15T06:30:00.000Z'],
      local: [
        '2027-03-13T02:30:00-05:00',
        '2027-03-14T03:00:00-04:00',
        '2027-03-15T02:30:00-04:00',
      ],
    });
    // Berlin springs forward two weeks later; the Sunday job there runs at 03:00 CEST.
    expect(jobs['berlin-weekly']).toEqual({
      utc: ['2027-03-14T01:30:00.000Z', '2027-03-21T01:30:00.000Z', '2027-03-28T01:00:00.000Z'],
      local: [
        '2027-03-14T02:30:00+01:00',
        '2027-03-21T02:30:00+01:00',
        '2027-03-28T03:00:00+02:00',
      ],
    });
    expect(jobs['utc-nightly']).toEqual({
      utc: ['2027-03-13T03:00:00.000Z', '2027-03-14T03:00:00.000Z', '2027-03-15T03:00:00.000Z'],
      local: [
        '2027-03-13T03:00:00+00:00',
        '2027-03-14T03:00:00+00:00',
        '2027-03-15T03:00:00+00:00',
      ],
    });
  });

  it('shows both 01:30s of the repeated hour for */30 and one for the daily job', async () => {
    const [utcHost, seoulHost] = await Promise.all([
      listJson('2027-11-07T05:00:00Z', 4, 'UTC'),
      listJson('2027-11-07T05:00:00Z', 4, 'Asia/Seoul'),
    ]);
    expect(seoulHost).toEqual(utcHost);
    const jobs = byName(utcHost);
    // --from is inclusive: the 05:00Z fire itself is listed.
    expect(jobs['ny-tick']).toEqual({
      utc: [
        '2027-11-07T05:00:00.000Z',
        '2027-11-07T05:30:00.000Z',
        '2027-11-07T06:00:00.000Z',
        '2027-11-07T06:30:00.000Z',
      ],
      local: [
        '2027-11-07T01:00:00-04:00',
        '2027-11-07T01:30:00-04:00',
        '2027-11-07T01:00:00-05:00',
        '2027-11-07T01:30:00-05:00',
      ],
    });
    expect(jobs['ny-report']!.local[0]).toBe('2027-11-07T02:30:00-05:00');
  });

  it('prints local times with offsets in the table, for non-UTC jobs only', async () => {
    const r = await baton(
      ['list', '-o', 'wide', '--config', CONFIG, '--from', '2027-11-07T05:00:00Z', '--count', '4'],
      { env: { TZ: 'Asia/Seoul' } },
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const row = (job: string) => r.stdout.split('\n').find((l) => l.startsWith(`${job} `)) ?? '';
    expect(row('ny-tick')).toContain(
      '2027-11-07 05:30:00.000 (2027-11-07 01:30:00-04:00), ' +
        '2027-11-07 06:00:00.000 (2027-11-07 01:00:00-05:00), ' +
        '2027-11-07 06:30:00.000 (2027-11-07 01:30:00-05:00)',
    );
    expect(row('utc-nightly')).toContain(
      '2027-11-08 03:00:00.000, 2027-11-09 03:00:00.000, 2027-11-10 03:00:00.000',
    );
    expect(row('utc-nightly')).not.toContain('(');
  });

  it('reads a date alone as 00:00 UTC and an instant with an offset exactly', async () => {
    const [date, offset] = await Promise.all([
      listJson('2027-03-13', 1, 'Asia/Seoul'),
      listJson('2027-03-13T02:30:00-05:00', 1, 'Asia/Seoul'),
    ]);
    expect(byName(date)['utc-nightly']!.utc).toEqual(['2027-03-13T03:00:00.000Z']);
    expect(byName(offset)['ny-report']!.utc).toEqual(['2027-03-13T07:30:00.000Z']);
  });

  it('refuses a bad --from with exit 64 and says what it expects', async () => {
    for (const bad of ['tomorrow', '2027-02-30', '2027-03-13T02:30']) {
      const r = await baton(['list', '--config', CONFIG, '--from', bad]);
      expect(r.code, bad).toBe(64);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain(`--from "${bad}"`);
      expect(r.stderr).toContain('2027-03-13T02:00:00-05:00');
    }
    const noOffset = await baton(['list', '--config', CONFIG, '--from', '2027-03-13T02:30']);
    expect(noOffset.stderr).toContain('no offset');
  });
});
