/**
 * The static views of the `after:` graph in the built CLI (docs/dependencies.md, "Configuring"):
 * `baton validate` prints each job's parents and the edges (and refuses a cycle with its file and
 * lines, exit 78), `baton list` shows `after settle` where a schedule would be and `--json` has
 * `after` and `children`; `baton run --fire` and `baton backfill` of a job with no schedule of its
 * own are refused (exit 64) before any database is asked. No database: these read the file only.
 */
import { describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';

const CONFIG = writeSchedule(`
namespace: after-views
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ["true"]
  import:
    schedule: "0 3 * * *"
    command: ["true"]
  fetch:
    command: ["true"]
    after: {jobs: settle}
  report:
    command: ["true"]
    after:
      jobs: [fetch, import]
      on: failure
      within: 2h
  audit:
    schedule: "30 3 * * *"
    command: ["true"]
    after: {jobs: settle, on: always}
`);

interface ListedJob {
  name: string;
  schedule: string | null;
  describe: string;
  after: { jobs: string[]; on: string; withinMs: number } | null;
  children: string[];
  nextFires: string[];
}

describe('the after: graph in the CLI', () => {
  it('baton validate prints each job with its parents, then the edges', async () => {
    const r = await baton(['validate', '--config', CONFIG]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines).toContain('  settle: "0 3 * * *" UTC → true');
    expect(lines).toContain('  fetch: after settle → true');
    expect(lines).toContain('  report: after fetch, import (on failure) → true');
    expect(lines).toContain('  audit: "30 3 * * *" UTC, and after settle (always) → true');
    expect(r.stdout).toContain(
      [
        'runs after (parent → child), 4 edge(s):',
        '  settle → fetch (on success, within 1d)',
        '  fetch → report (on failure, within 2h)',
        '  import → report (on failure, within 2h)',
        '  settle → audit (on always, within 1d)',
      ].join('\n'),
    );
  });

  it("baton validate --json has each job's after and the edges", async () => {
    const r = await baton(['validate', '--json', '--config', CONFIG]);
    expect(r.code).toBe(0);
    const verdict = JSON.parse(r.stdout) as {
      jobs: { name: string; schedule: string | null; after: unknown }[];
      edges: { parent: string; child: string; on: string; withinMs: number }[];
    };
    expect(verdict.jobs.find((j) => j.name === 'fetch')).toMatchObject({
      schedule: null,
      after: { jobs: ['settle'], on: 'success', withinMs: 86_400_000 },
    });
    expect(verdict.jobs.find((j) => j.name === 'settle')!.after).toBeNull();
    expect(verdict.edges).toEqual([
      { parent: 'settle', child: 'fetch', on: 'success', withinMs: 86_400_000 },
      { parent: 'fetch', child: 'report', on: 'failure', withinMs: 7_200_000 },
      { parent: 'import', child: 'report', on: 'failure', withinMs: 7_200_000 },
      { parent: 'settle', child: 'audit', on: 'always', withinMs: 86_400_000 },
    ]);
  });

  it('baton list --json: after and children, no fires of its own for an after-only job', async () => {
    const r = await baton(['list', '--json', '--config', CONFIG, '--from', '2027-01-01']);
    expect(r.code).toBe(0);
    const jobs = new Map(
      (JSON.parse(r.stdout) as { jobs: ListedJob[] }).jobs.map((j) => [j.name, j]),
    );
    expect(jobs.get('settle')).toMatchObject({
      schedule: '0 3 * * *',
      after: null,
      children: ['fetch', 'audit'],
      nextFires: [
        '2027-01-01T03:00:00.000Z',
        '2027-01-02T03:00:00.000Z',
        '2027-01-03T03:00:00.000Z',
      ],
    });
    expect(jobs.get('fetch')).toMatchObject({
      schedule: null,
      describe: 'after settle',
      after: { jobs: ['settle'], on: 'success', withinMs: 86_400_000 },
      children: ['report'],
      nextFires: [],
    });
    expect(jobs.get('report')).toMatchObject({
      after: { jobs: ['fetch', 'import'], on: 'failure', withinMs: 7_200_000 },
      children: [],
    });
    expect(jobs.get('audit')!.describe).toBe('At 03:30, and after settle (always)');
  });

  it('baton list: the schedule cell says after settle; -o wide has an AFTER column', async () => {
    // Fits 79 columns: the flags may be cut (…), the schedule cell never is.
    const r = await baton(['list', '--config', CONFIG, '--from', '2027-01-01']);
    expect(r.code).toBe(0);
    const row = (name: string) => r.stdout.split('\n').find((l) => l.startsWith(name + ' '));
    expect(row('fetch')).toMatch(/^fetch\s+after settle\s*$/);
    expect(row('report')).toMatch(/after fetch, import \(on failure\)/);
    // A job with a schedule and parents: the expression, and its parents among the flags.
    expect(row('audit')).toMatch(/30 3 \* \* \*.*after settle/);
    const wide = await baton(['list', '-o', 'wide', '--config', CONFIG]);
    expect(wide.code).toBe(0);
    expect(wide.stdout).toMatch(/AFTER/);
    expect(wide.stdout).toMatch(/fetch, import \(on failure\)/);
  });

  it('a cycle is refused whole: exit 78, once, at its first job with its line', async () => {
    const bad = writeSchedule(
      'jobs:\n  a:\n    command: ["true"]\n    after: {jobs: b}\n  b:\n    command: ["true"]\n    after: {jobs: a}\n',
    );
    const r = await baton(['validate', '--config', bad]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain(
      `${bad}:4:5: jobs.a.after: a cycle: a → b → a (each runs after the next): none of them would ever run`,
    );
    expect(r.stderr).not.toContain('jobs.b.after');
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('a cycle of 11,000 jobs: exit 78 and one short line, not a stack overflow (exit 70)', async () => {
    const n = 11_000;
    let y = `jobs:\n  j0:\n    after: {jobs: j${n - 1}}\n    command: ["true"]\n`;
    for (let i = 1; i < n; i++)
      y += `  j${i}:\n    after: {jobs: j${i - 1}}\n    command: ["true"]\n`;
    const bad = writeSchedule(y);
    const r = await baton(['validate', '--config', bad]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain(
      `${bad}:3:5: jobs.j0.after: a cycle: j0 → j10999 → j10998 → j10997 → j10996 → j10995 → ` +
        'j10994 → … 10991 more … → j2 → j1 → j0, 11000 jobs (each runs after the next)',
    );
    expect(r.stderr.length).toBeLessThan(2_000);
  });

  it('a within too long, Infinity or 0s: exit 78 with its line, a sentence for each', async () => {
    const bad = writeSchedule(
      `jobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["true"]\n` +
        `  a:\n    command: ["true"]\n    after: {jobs: settle, within: 5000000d}\n` +
        `  b:\n    command: ["true"]\n    after: {jobs: settle, within: ${'9'.repeat(400)}d}\n` +
        `  c:\n    command: ["true"]\n    after: {jobs: settle, within: 0s}\n` +
        `  d:\n    command: ["true"]\n    after: {jobs: [settle, settle]}\n`,
    );
    const r = await baton(['validate', '--config', bad]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain(
      `${bad}:7:27: jobs.a.after.within: must be at most 366d, got "5000000d"`,
    );
    expect(r.stderr).toMatch(/:10:27: jobs\.b\.after\.within: must be at most 366d, got "9+…9+d"/);
    expect(r.stderr).toContain(`${bad}:13:27: jobs.c.after.within: must be more than 0s, got "0s"`);
    expect(r.stderr).toContain(`${bad}:16:28: jobs.d.after.jobs.1: "settle" is named twice`);
    expect(r.stderr).not.toMatch(/Infinity/);
  });

  it('run --fire and backfill of a job with no schedule of its own: exit 64, no database asked', async () => {
    const message =
      'fetch has no schedule of its own: it runs after settle; backfill settle --with-dependents';
    const run = await baton(['run', 'fetch', '--fire', '2027-01-01T03:00:00Z', '--config', CONFIG]);
    expect(run.code).toBe(64);
    expect(run.stderr).toContain(message);
    const backfill = await baton([
      'backfill',
      'fetch',
      '--from',
      '2027-01-01',
      '--to',
      '2027-01-02',
      '--config',
      CONFIG,
    ]);
    expect(backfill.code).toBe(64);
    expect(backfill.stderr).toContain(message);
  });
});
