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
});
