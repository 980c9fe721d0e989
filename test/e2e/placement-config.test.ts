/**
 * Placement's input (issue 38, docs/placement.md), through the built CLI: `baton validate` refuses
 * what cannot be meant — an empty `runOn`, `every` with `workers`, a preferred host its `runOn`
 * excludes, a lead as long as the period, a tag that is not one — with exit 78 and the file's
 * line, every problem at once, no stack trace; `baton start --tag` and BATON_TAGS refuse a word
 * that is not a tag (exit 64) before anything is started, whatever it looks like.
 */
import { describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';
import { createTestDatabase } from '../helpers/db.js';

describe('placement in the schedules file', () => {
  it('is refused whole, each problem of its shape with its line (exit 78)', async () => {
    const config = writeSchedule(`
namespace: placed
defaults:
  runOn: {}
jobs:
  d:
    schedule: "* * * * *"
    command: ["true"]
    runOn: { tags: ["--database-url=mysql://x@127.0.0.1:1/y"] }
  e:
    schedule: "* * * * *"
    command: ["true"]
    runOn: { tags: [sftp], where: [x] }
`);
    const r = await baton(['validate', '--config', config]);
    expect(r.code).toBe(78);
    expect(r.stdout).toBe('');
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(r.stderr).toContain('invalid configuration (3 problems)');
    expect(r.stderr).toMatch(/:4:\d+: defaults\.runOn: runOn needs `tags`, `hosts` or both/);
    expect(r.stderr).toMatch(/:9:\d+: jobs\.d\.runOn\.tags\.0: a tag is a name/);
    expect(r.stderr).toMatch(/:13:\d+: jobs\.e\.runOn\.where: unknown key "where"/);
  });

  it('is refused whole when its settings cannot go together, each at its line (exit 78)', async () => {
    const config = writeSchedule(`
namespace: placed
defaults:
  prefer: [srv-03]
jobs:
  b:
    schedule: "* * * * *"
    command: ["true"]
    every: true
    workers: 2
  c:
    schedule: "* * * * * *"
    command: ["true"]
    runOn: { hosts: [srv-01] }
    prefer: { hosts: [srv-02], lead: 1s }
  f:
    schedule: "* * * * *"
    command: ["true"]
    runOn: { hosts: [srv-01] }
`);
    const r = await baton(['validate', '--config', config]);
    expect(r.code).toBe(78);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.stderr).toMatch(/:9:\d+: jobs\.b\.every: `every` runs each fire once on every runner/);
    // `b` inherits prefer too: with every, said where it is written.
    expect(r.stderr).toMatch(
      /:4:\d+: defaults\.prefer: `prefer` picks one runner; a job with `every` runs on all of them \(inherited by jobs\.b\)/,
    );
    expect(r.stderr).toMatch(/:15:\d+: jobs\.c\.prefer: srv-02 may not run this job/);
    expect(r.stderr).toMatch(
      /jobs\.c\.prefer: the lead of `prefer` 1s is not shorter than the schedule's shortest period/,
    );
    expect(r.stderr).toMatch(
      /:4:\d+: defaults\.prefer: srv-03 may not run this job \(its runOn lists only srv-01\) \(inherited by jobs\.f\)/,
    );
  });

  it('refuses a job that runs on every runner as a parent in after: (exit 78)', async () => {
    const config = writeSchedule(`
namespace: placed
jobs:
  g:
    command: ["true"]
    after: { jobs: rotate }
  rotate:
    schedule: "0 * * * *"
    command: ["true"]
    every: true
`);
    const r = await baton(['validate', '--config', config]);
    expect(r.code).toBe(78);
    expect(r.stderr).toMatch(
      /:6:\d+: jobs\.g\.after.*rotate runs on every runner \(`every: true`\)/,
    );
  });

  it('accepts runOn, prefer (a list, or with its lead) and every, and says nothing else', async () => {
    const config = writeSchedule(`
namespace: placed
jobs:
  upload:
    schedule: "*/5 * * * *"
    command: ["true"]
    runOn: { tags: [sftp, region=eu] }
  settle:
    schedule: "0 3 * * *"
    command: ["true"]
    prefer: [srv-01, srv-02]
  rotate:
    schedule: "0 * * * *"
    command: ["true"]
    every: true
`);
    const r = await baton(['validate', '--config', config]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });
});

describe("a runner's tags", () => {
  const config = writeSchedule(`
namespace: placed
jobs:
  a: { schedule: "0 3 * * *", command: ["true"] }
`);
  const DB = 'mysql://root@127.0.0.1:1/never';

  it.each([
    [['--tag', 'a b'], '--tag: "a b" is not a tag'],
    [['--tag', '=eu'], '--tag: "=eu" is not a tag'],
    // Empty: it names no tag, and must not silently stand for none (nor hide BATON_TAGS).
    [['--tag', ''], '--tag: "" is not a tag'],
  ])('baton start %j is refused (exit 64) before anything starts', async (args, message) => {
    const r = await baton(['start', '--config', config, '--database-url', DB, ...args]);
    expect(r.code).toBe(64);
    expect(r.stderr).toContain(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('never takes an option-looking word after --tag as an option: refused, nothing connected', async () => {
    const steered = `baton_t_steered_${process.pid}`;
    const r = await baton(
      [
        'start',
        '--config',
        config,
        '--tag',
        `--database-url=mysql://root@127.0.0.1:3306/${steered}`,
      ],
      { env: { BATON_DATABASE_URL: DB } },
    );
    expect(r.code).toBe(64);
    expect(r.stderr).toContain('--tag needs a value');
    const db = await createTestDatabase('placement_probe');
    try {
      const rows = await db.query('SHOW DATABASES LIKE ?', [steered]);
      expect(rows).toEqual([]);
    } finally {
      await db.drop();
    }
  });

  it('BATON_TAGS is read comma-separated and checked the same way', async () => {
    const r = await baton(['start', '--config', config, '--database-url', DB], {
      env: { BATON_TAGS: 'sftp, bad tag' },
    });
    expect(r.code).toBe(64);
    expect(r.stderr).toContain('BATON_TAGS: " bad tag" is not a tag');
  });
});
