/**
 * `notify: {after: N}` as written (config/notify-schema.ts, notify-config.ts): a whole number of
 * failures in a row, 1 by default, laid over `defaults.notify` key by key like the other keys,
 * refused with its line; and as the writers of events carry it (config/notify-targets.ts).
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { eventTargets } from '../../src/config/notify-targets.js';
import { ConfigError } from '../../src/errors.js';

const FILE = '/etc/baton/schedules.yaml';
const file = (defaults: string, own: string) => `
notify:
  ops: {command: ["true"]}
${defaults}
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ["true"]
${own}`;

function problems(text: string): string[] {
  try {
    parseConfig(FILE, text);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.problems.map((p) => `${p.line}:${p.path}: ${p.message}`);
  }
  return [];
}

describe('notify: {after}', () => {
  it('is 1 unless given: every failure told, as before', () => {
    const job = parseConfig(FILE, file('', '    notify: {to: [ops]}')).jobs[0]!;
    expect(job.notify).toMatchObject({ to: ['ops'], after: 1 });
    // The writers of events see no streak to wait for.
    expect(eventTargets(job.notify).failuresInARow).toBeUndefined();
  });

  it("is the job's, or its defaults', key by key", () => {
    const own = parseConfig(FILE, file('', '    notify: {to: [ops], after: 3}')).jobs[0]!;
    expect(own.notify).toMatchObject({ after: 3 });
    expect(eventTargets(own.notify)).toEqual({
      failed: ['ops'],
      timeout: ['ops'],
      lost: ['ops'],
      recovered: ['ops'],
      // On by default too (soft limits): only a job with a `duration.warn` ever has it.
      slow: ['ops'],
      // On by default too: a blackout's start and end (docs/notifications.md).
      'blackout-started': ['ops'],
      'blackout-ended': ['ops'],
      failuresInARow: 3,
    });
    const inherited = parseConfig(
      FILE,
      file('defaults:\n  notify: {to: [ops], after: 2}', '    notify: {on: [failed]}'),
    ).jobs[0]!;
    expect(inherited.notify).toMatchObject({ on: ['failed'], to: ['ops'], after: 2 });
  });

  it('refuses anything but a whole number from 1 to 100, with its line', () => {
    expect(problems(file('', '    notify: {to: [ops], after: 0}'))).toEqual([
      '9:jobs.settle.notify.after: after must be 1 or more (1: every failure is told)',
    ]);
    expect(problems(file('', '    notify: {to: [ops], after: 2.5}'))[0]).toMatch(
      /^9:jobs\.settle\.notify\.after: expected int/,
    );
    expect(problems(file('', '    notify: {to: [ops], after: 101}'))).toEqual([
      '9:jobs.settle.notify.after: after must be at most 100',
    ]);
    expect(problems(file('', '    notify: {to: [ops], after: "3"}'))[0]).toMatch(
      /^9:jobs\.settle\.notify\.after: expected number/,
    );
    expect(problems(file('defaults:\n  notify:\n    to: [ops]\n    after: -1', ''))).toEqual([
      '7:defaults.notify.after: after must be 1 or more (1: every failure is told)',
    ]);
  });
});
