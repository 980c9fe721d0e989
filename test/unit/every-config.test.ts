/**
 * `every: true` (docs/placement.md): what cannot go with it is refused at load, and a host's slot
 * is the smallest free one of the fire key's `winner` range.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';
import { firstFree, MAX_HOST_SLOTS } from '../../src/store/host-slots.js';

const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-every-')), 'schedules.yaml');

function problems(yaml: string): string[] {
  try {
    parseConfig(file, yaml);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.map((p) => `${p.path}: ${p.message}`);
    throw err;
  }
  return [];
}

const job = (extra: string) =>
  `jobs:\n  parent:\n    schedule: "* * * * *"\n    command: ["true"]\n  warm:\n    schedule: "* * * * *"\n    command: ["true"]\n    every: true\n${extra}`;

describe('every: true in schedules.yaml', () => {
  it('loads, with runOn', () => {
    const config = parseConfig(file, job('    runOn: { tags: [cache] }\n'));
    const warm = config.jobs.find((j) => j.name === 'warm')!;
    expect(warm.every).toBe(true);
    expect(warm.runOn).toEqual({ tags: ['cache'], hosts: [] });
    expect(config.jobs.find((j) => j.name === 'parent')!.every).toBeUndefined();
  });

  it('refuses workers, prefer and after with it', () => {
    expect(problems(job('    workers: 2\n'))).toEqual([
      'jobs.warm.every: `every` runs each fire once on every runner; it cannot also fan out with `workers`',
    ]);
    expect(problems(job('    prefer: [srv-01]\n'))).toEqual([
      'jobs.warm.prefer: `prefer` picks one runner; a job with `every` runs on all of them',
    ]);
    expect(problems(job('    after: { jobs: [parent] }\n')).join('\n')).toMatch(
      /jobs\.warm\.every: `every` cannot run after other jobs/,
    );
  });
});

describe('a host slot', () => {
  it('is the smallest one not taken, none past the winner column', () => {
    expect(firstFree([])).toBe(1);
    expect(firstFree([1, 2, 3])).toBe(4);
    expect(firstFree([2, 3])).toBe(1);
    expect(firstFree([1, 3, 4])).toBe(2);
    const all = Array.from({ length: MAX_HOST_SLOTS }, (_, i) => i + 1);
    expect(firstFree(all)).toBeNull();
    expect(firstFree(all.slice(0, -1))).toBe(MAX_HOST_SLOTS);
  });
});
