/**
 * `baton run`: a manual trigger goes through the same lock as scheduled fires, records a
 * `manual` row, passes the fire to the job, and maps outcomes to the documented exit codes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, startRunner, writeSchedule } from '../helpers/cli.js';
import { createTestDatabase, runs, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

let db: TestDatabase;
let config: string;
let dir: string;

beforeAll(async () => {
  db = await createTestDatabase('manual');
  config = writeSchedule(
    `
namespace: ops
jobs:
  busy:
    schedule: "* * * * * *"
    command: ["sh", "-c", "sleep \${BUSY_SECONDS:-30}"]
    enabled: false
  quick:
    schedule: "0 3 * * *"
    command: ["sleep", "0.1"]
  fire-env:
    schedule: "0 3 * * *"
    command: ["sh", "-c", "env | grep ^BATON_ | sort > fire-env.txt"]
  module-env:
    schedule: "0 3 * * *"
    module: job.ts
  broken:
    schedule: "0 3 * * *"
    command: ["sh", "-c", "echo about to fail >&2; exit 3"]
  throws:
    schedule: "0 3 * * *"
    module: throws.mjs
  missing:
    schedule: "0 3 * * *"
    command: ["/nonexistent/settle.sh"]
`,
    {
      'job.ts': `import { writeFileSync } from 'node:fs';
export default async (ctx: { job: string; runId: number; scheduledAt: Date; trigger: string; host: string; attempt: number }) => {
  writeFileSync('module-fire.json', JSON.stringify({ job: ctx.job, runId: ctx.runId, scheduledAt: ctx.scheduledAt.toISOString(), trigger: ctx.trigger, host: ctx.host, attempt: ctx.attempt }));
};
`,
      'throws.mjs': `export default async () => { throw new Error('settlement total does not balance'); };\n`,
    },
  );
  dir = path.dirname(config);
});
afterAll(async () => {
  await db.drop();
});

const run = (job: string, extra: string[] = [], env: Record<string, string> = {}) =>
  baton(
    ['run', job, '--config', config, '--database-url', db.url, '--host', 'ops-laptop', ...extra],
    {
      env,
    },
  );

describe('baton run', () => {
  it('runs a free job now: exit 0 and a manual winner row', async () => {
    const result = await run('quick');
    expect(result.stderr).toContain('quick done');
    expect(result.code).toBe(0);
    const [row] = await runs(db, 'quick');
    expect(row).toMatchObject({
      winner: 1,
      triggered_by: 'manual',
      status: 'done',
      host: 'ops-laptop',
      exit_code: 0,
    });
  });

  it('gives the job its fire in the environment (command) and in ctx (module)', async () => {
    expect((await run('fire-env')).code).toBe(0);
    const [row] = await runs(db, 'fire-env');
    const env = Object.fromEntries(
      readFileSync(path.join(dir, 'fire-env.txt'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(/=(.*)/s).slice(0, 2)),
    );
    expect(env).toEqual({
      BATON_HOST: 'ops-laptop',
      BATON_JOB: 'fire-env',
      BATON_RUN_ID: String(row!.id),
      BATON_SCHEDULED_AT: row!.scheduled_at.toISOString(),
      BATON_TRIGGER: 'manual',
      BATON_ATTEMPT: '1',
      BATON_WORKER: '1',
      BATON_WORKERS: '1',
    });

    expect((await run('module-env')).code).toBe(0);
    const [mrow] = await runs(db, 'module-env');
    expect(JSON.parse(readFileSync(path.join(dir, 'module-fire.json'), 'utf8'))).toEqual({
      job: 'module-env',
      runId: mrow!.id,
      scheduledAt: mrow!.scheduled_at.toISOString(),
      trigger: 'manual',
      host: 'ops-laptop',
      attempt: 1,
    });
  });

  it("exits with the job's own exit code and records the failure", async () => {
    const result = await run('broken');
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('about to fail');
    expect(result.stderr).toContain('broken failed: exited with code 3');
    const [row] = await runs(db, 'broken');
    expect(row).toMatchObject({ status: 'failed', exit_code: 3, error: 'exited with code 3' });
    expect(row!.output_tail).toContain('about to fail');
  });

  it('records a module that throws, and a command that does not exist, as failed runs (exit 1)', async () => {
    const thrown = await run('throws');
    expect(thrown.code).toBe(1);
    const [t] = await runs(db, 'throws');
    expect(t).toMatchObject({
      status: 'failed',
      exit_code: 1,
      error: 'settlement total does not balance',
    });

    const missing = await run('missing');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('command not found: /nonexistent/settle.sh');
    expect(missing.stderr).not.toMatch(/\n\s+at /);
    const [m] = await runs(db, 'missing');
    expect(m).toMatchObject({
      status: 'failed',
      exit_code: null,
      error: 'command not found: /nonexistent/settle.sh',
    });
  });

  it('refuses an unknown job with exit 64', async () => {
    const result = await run('no-such-job');
    expect(result.code).toBe(64);
    expect(result.stderr).toContain('unknown job "no-such-job"');
  });

  it('exits 75 with a skip row while a scheduled run holds the lock, and waits with --wait', async () => {
    const enabled = path.join(dir, 'enabled.yaml');
    // busy alone: with the nightly jobs, a runner up at 03:00:00 UTC would run them too, and
    // broken's newest row (baton history, below) would be that scheduled fire, not the manual run.
    const busyOnly = readFileSync(config, 'utf8').split('\n  quick:\n')[0]!;
    writeFileSync(enabled, `${busyOnly.replace('enabled: false', 'enabled: true')}\n`);
    // A 30 s job: the lock is certainly held while `baton run` tries. The runner's grace is 1 s,
    // so stopping it interrupts the job and frees the lock for the waiting manual run.
    const runner = startRunner({
      config: enabled,
      databaseUrl: db.url,
      host: 'srv-01',
      args: ['--grace', '1'],
    });
    try {
      await runner.ready();
      const running = await waitFor('a scheduled run of busy', async () => {
        const rows = await runs(db, 'busy');
        return rows.find(
          (r) => r.winner === 1 && r.status === 'running' && r.triggered_by === 'schedule',
        );
      });
      const result = await run('busy');
      expect(result.code).toBe(75);
      expect(result.stderr).toMatch(/busy not run: an earlier run is still running on srv-01/);
      const skip = (await runs(db, 'busy')).find((r) => r.triggered_by === 'manual');
      expect(skip).toMatchObject({ winner: null, status: 'skipped', host: 'ops-laptop' });
      expect(skip!.reason).toContain(`fire ${running.scheduled_at.toISOString()}`);

      // Stop the runner; a manual run that waits gets the lock once the scheduled run is done.
      const stopped = runner.stop('SIGTERM');
      const waited = await run('busy', ['--wait', '10'], { BUSY_SECONDS: '0.2' });
      expect(await stopped).toBe(0);
      expect(waited.code).toBe(0);
      const interrupted = (await runs(db, 'busy')).find((r) => r.id === running.id);
      expect(interrupted).toMatchObject({ status: 'interrupted' });
      expect(interrupted!.error).toBe('interrupted: the runner stopped (SIGTERM)');
      const manualWinner = (await runs(db, 'busy')).find(
        (r) => r.triggered_by === 'manual' && r.winner === 1,
      );
      expect(manualWinner!.started_at.getTime()).toBeGreaterThanOrEqual(
        (await runs(db, 'busy'))
          .filter((r) => r.triggered_by === 'schedule' && r.winner === 1)
          .at(-1)!
          .finished_at!.getTime(),
      );
    } finally {
      await runner.stop('SIGKILL');
    }
  });
});

describe('baton history', () => {
  it('prints JSON with the documented fields, newest first, and filters', async () => {
    const all = await baton([
      'history',
      '--json',
      '--config',
      config,
      '--database-url',
      db.url,
      '--limit',
      '500',
    ]);
    expect(all.code).toBe(0);
    const rows = JSON.parse(all.stdout) as Record<string, unknown>[];
    expect(rows.length).toBeGreaterThan(5);
    expect(Object.keys(rows[0]!)).toEqual(
      expect.arrayContaining([
        'id',
        'job',
        'scheduledAt',
        'winner',
        'trigger',
        'status',
        'reason',
        'reasonKind',
        'host',
        'pid',
        'startedAt',
        'finishedAt',
        'durationMs',
        'exitCode',
        'attempts',
        'error',
      ]),
    );
    const times = rows.map((r) => Date.parse(r.scheduledAt as string));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    const broken = rows.find((r) => r.job === 'broken')!;
    expect(broken).toMatchObject({
      winner: true,
      trigger: 'manual',
      status: 'failed',
      exitCode: 3,
      attempts: 1,
      host: 'ops-laptop',
    });
    expect(broken.durationMs).toBe(
      Date.parse(broken.finishedAt as string) - Date.parse(broken.startedAt as string),
    );

    const filtered = await baton([
      'history',
      'busy',
      '--host',
      'ops-laptop',
      '--status',
      'skipped',
      '--since',
      '1h',
      '--json',
      '--config',
      config,
      '--database-url',
      db.url,
    ]);
    const skips = JSON.parse(filtered.stdout) as Record<string, unknown>[];
    expect(skips.length).toBeGreaterThanOrEqual(1);
    for (const s of skips)
      expect(s).toMatchObject({
        job: 'busy',
        host: 'ops-laptop',
        status: 'skipped',
        winner: false,
      });

    // By kind: the manual run met the scheduled run of an earlier fire holding the lock.
    const byKind = async (kind: string) =>
      baton([
        'history',
        'busy',
        '--host',
        'ops-laptop',
        '--reason-kind',
        kind,
        '--json',
        '--config',
        config,
        '--database-url',
        db.url,
      ]);
    const overlaps = JSON.parse((await byKind('overlap')).stdout) as Record<string, unknown>[];
    expect(overlaps.map((r) => r.id).sort()).toEqual(
      skips
        .filter((s) => s.reasonKind === 'overlap')
        .map((r) => r.id)
        .sort(),
    );
    expect(overlaps.length).toBeGreaterThanOrEqual(1);
    for (const s of overlaps) expect(s).toMatchObject({ status: 'skipped', reasonKind: 'overlap' });
    expect(JSON.parse((await byKind('paused')).stdout)).toEqual([]);
    const bogus = await byKind('sideways');
    expect(bogus.code).toBe(64);
    expect(bogus.stderr).toMatch(/reason-kind/);

    const limited = await baton([
      'history',
      '--limit',
      '2',
      '--json',
      '--config',
      config,
      '--database-url',
      db.url,
    ]);
    expect(JSON.parse(limited.stdout)).toHaveLength(2);

    const future = await baton([
      'history',
      '--since',
      '2999-01-01T00:00:00Z',
      '--json',
      '--config',
      config,
      '--database-url',
      db.url,
    ]);
    expect(JSON.parse(future.stdout)).toEqual([]);
  });

  it('prints a readable table, and refuses a bad --since with exit 64', async () => {
    const table = await baton([
      'history',
      'broken',
      '--attempts',
      '--config',
      config,
      '--database-url',
      db.url,
    ]);
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toBe(`namespace "ops" (from the schedules file ${config})`);
    expect(table.stdout.split('\n')[1]).toMatch(
      /^ID\s+JOB\s+SCHEDULED \(UTC\)\s+HOST\s+WINNER\s+TRIGGER\s+STATUS/,
    );
    expect(table.stdout).toMatch(
      /broken\s+\S+ \S+\s+ops-laptop\s+yes\s+manual\s+failed\s+\S+\s+3\s+exited with code 3/,
    );

    const bad = await baton([
      'history',
      '--since',
      'yesterday-ish',
      '--config',
      config,
      '--database-url',
      db.url,
    ]);
    expect(bad.code).toBe(64);
    expect(bad.stderr).toContain('--since "yesterday-ish"');
  });
});
