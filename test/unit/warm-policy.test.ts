/**
 * Which module jobs get warm hosts (src/daemon/warm-policy.ts): those firing at least every ten
 * minutes, by the median gap between their next fires; never a command job.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { loadSchedule, emptySchedule } from '../../src/daemon/loaded-schedule.js';
import { jobsWorthWarming } from '../../src/daemon/warm-policy.js';

const dir = mkdtempSync(path.join(tmpdir(), 'baton-warm-policy-'));
for (const file of ['a.mjs', 'a.ts'])
  writeFileSync(path.join(dir, file), 'export default () => {};\n');

function warmed(jobs: Record<string, string>, now = new Date('2030-01-07T12:00:00Z')): string[] {
  const yaml = Object.entries(jobs)
    .map(([name, body]) => `  ${name}:\n${body.replace(/^/gm, '    ')}`)
    .join('\n');
  const config = parseConfig(path.join(dir, 'schedules.yaml'), `jobs:\n${yaml}\n`);
  const loaded = loadSchedule(config, emptySchedule(config), now);
  return jobsWorthWarming(loaded.jobs.values(), loaded.schedules, now).map((j) => j.name);
}

describe('jobs worth warming', () => {
  it('warms module jobs that fire at least every ten minutes, not rarer ones', () => {
    expect(
      warmed({
        everySecond: 'schedule: "* * * * * *"\nmodule: a.mjs',
        everyFive: 'schedule: "*/5 * * * *"\nmodule: a.ts',
        everyTen: 'schedule: "*/10 * * * *"\nmodule: a.mjs',
        everyFifteen: 'schedule: "*/15 * * * *"\nmodule: a.mjs',
        hourly: 'schedule: "0 * * * *"\nmodule: a.mjs',
        nightly: 'schedule: "0 3 * * *"\nmodule: a.mjs',
        command: 'schedule: "* * * * * *"\ncommand: ["true"]',
      }),
    ).toEqual(['everySecond', 'everyFive', 'everyTen']);
  });

  it('judges by the median gap: business hours count as frequent even late in the day', () => {
    // 16:50 in UTC: two fires left before the night's gap, then the morning's.
    const lateAfternoon = new Date('2030-01-07T16:50:00Z');
    expect(
      warmed({ office: 'schedule: "*/5 9-16 * * *"\ntimezone: UTC\nmodule: a.mjs' }, lateAfternoon),
    ).toEqual(['office']);
  });
});
