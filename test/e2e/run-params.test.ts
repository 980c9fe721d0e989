/**
 * Manual parameters of `baton run`: `--env K=V` and `-- args` reach the job (ctx.params for a
 * module job) and its row records them with the job's `secretEnv` values masked. Real CLI
 * processes on a real database; the jobs write what they were given to files.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';
import { foregroundRuns } from '../helpers/foreground-runs.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let config: string;
let dir: string;

/** Yesterday's 03:00 UTC: a past fire of every `0 3 * * *` job below. */
const FIRE = new Date(
  Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000 + 3 * 3_600_000,
);
const fireIso = FIRE.toISOString();

beforeAll(async () => {
  db = await createTestDatabase('params');
  config = writeSchedule(
    `
namespace: ops
jobs:
  report:
    schedule: "0 3 * * *"
    command: ["sh", "-c", "echo \\"$TOKEN|$MODE|$*\\" > report.txt", "sh"]
    secretEnv: [TOKEN]
  script:
    schedule: "0 3 * * *"
    shell: true
    command: "echo hi"
  mod:
    schedule: "0 3 * * *"
    module: params.mjs
`,
    {
      'params.mjs': `import { writeFileSync } from 'node:fs';
export default async (ctx) => { writeFileSync('ctx-params.json', JSON.stringify({ params: ctx.params, fire: ctx.fire.scheduledAt.toISOString(), trigger: ctx.trigger })); };
`,
    },
  );
  dir = path.dirname(config);
});
afterAll(async () => {
  await db.drop();
});

const { run, lines, rowsOf } = foregroundRuns(() => ({ config, dir, db }));

describe('manual parameters', () => {
  it('--env and -- args reach a command job, and the row records them with secretEnv masked', async () => {
    const result = await run('report', [
      '--env',
      'TOKEN=hunter2',
      '--env',
      'MODE=full',
      '--json',
      '--',
      '--day',
      '2026-12-01',
    ]);
    expect(result.code).toBe(0);
    expect(lines('report.txt')).toEqual(['hunter2|full|--day 2026-12-01']);
    const doc = JSON.parse(result.stdout) as { params: unknown };
    const recorded = { env: { TOKEN: '***', MODE: 'full' }, args: ['--day', '2026-12-01'] };
    expect(doc.params).toEqual(recorded);
    const [row] = await rowsOf('report');
    expect(JSON.parse(row!.params!)).toEqual(recorded);
    const history = await baton([
      'history',
      'report',
      '--json',
      '--config',
      config,
      '--database-url',
      db.url,
    ]);
    expect(JSON.parse(history.stdout)[0].params).toEqual(recorded);
    const shown = await baton([
      'show',
      String(row!.id),
      '--config',
      config,
      '--database-url',
      db.url,
    ]);
    expect(shown.stdout).toContain('"TOKEN":"***"');
    // The secret is nowhere in the database.
    const leaks = await db.query(
      `SELECT id FROM baton_runs WHERE CONCAT_WS('|', params, output_tail, error) LIKE '%hunter2%'
       UNION ALL SELECT id FROM baton_audit WHERE CONCAT_WS('|', details, outcome) LIKE '%hunter2%'`,
    );
    expect(leaks).toEqual([]);
  });

  it('a module job gets --env as ctx.params; extra args are refused for a shell job', async () => {
    const result = await run('mod', ['--env', 'REGION=eu', '--fire', fireIso]);
    expect(result.code).toBe(0);
    expect(JSON.parse(readFileSync(path.join(dir, 'ctx-params.json'), 'utf8'))).toEqual({
      params: { REGION: 'eu' },
      fire: fireIso,
      trigger: 'rerun',
    });
    const refused = await run('script', ['--', 'x']);
    expect(refused.code).toBe(64);
    expect(refused.stderr).toContain('extra arguments after -- are for command jobs only');
    const bad = await run('report', ['--env', 'no-equals']);
    expect(bad.code).toBe(64);
    expect(bad.stderr).toContain('expected NAME=VALUE');
  });

  const count = async (table: string) =>
    Number((await db.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))[0]!.n);
  const written = async () => ({
    runs: await count('baton_runs'),
    audit: await count('baton_audit'),
    pauses: await count('baton_pauses'),
  });

  it('refuses parameters too large to record with 64 naming --env or the arguments and the limit; nothing is written', async () => {
    const before = await written();
    const huge = 'x'.repeat(70_000);

    const env = await run('report', ['--env', `MODE=${huge}`]);
    expect(env.code, env.stderr).toBe(64);
    expect(env.stderr).toMatch(/--env: \d+ bytes as recorded, more than 32768/);
    const args = await run('report', ['--fire', fireIso, '--again', '--', huge]);
    expect(args.code, args.stderr).toBe(64);
    expect(args.stderr).toContain('the arguments after --:');
    // A job of no schedules file here (a library replica's) is refused the same, before asking.
    const fleet = await run('elsewhere', ['--env', `MODE=${huge}`]);
    expect(fleet.code, fleet.stderr).toBe(64);
    expect(fleet.stderr).toContain('--env:');
    for (const r of [env, args, fleet]) expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(await written()).toEqual(before);
  });

  it('one rule for --reason: over 512 characters is 64 naming it and the limit, by every command; nothing is written', async () => {
    const before = await written();
    const long = 'why '.repeat(130);
    const where = ['--config', config, '--database-url', db.url];
    const reasons = [
      await run('report', ['--reason', long]),
      await run('report', ['--fire', fireIso, '--again', '--reason', long]),
      await baton([
        'backfill',
        'report',
        '--from',
        fireIso,
        '--to',
        fireIso,
        ...where,
        '--reason',
        long,
      ]),
      await baton(['kill', '1', ...where, '--reason', long]),
      await baton(['pause', 'report', ...where, '--reason', long]),
    ];
    for (const r of reasons) {
      expect(r.code, r.stderr).toBe(64);
      expect(r.stderr).toContain(
        `--reason is ${long.trim().length} characters long, more than 512`,
      );
    }
    expect(await written()).toEqual(before);
  });
});
