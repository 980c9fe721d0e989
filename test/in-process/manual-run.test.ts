/**
 * `baton run`: a manual trigger goes through the same lock as scheduled fires, records a
 * `manual` row, passes the fire to the job, and maps outcomes to the documented exit codes; and
 * `baton history` reads what it left. `baton run` is the CLI under test, a process of its own (the
 * foreground session is the command's); the one scheduled runner it meets (the lock held by a
 * scheduled run: exit 75, then `--wait` once the runner stops) is built in the test process
 * (in-process-fleet.ts), its job a real process. That `baton start` exits 0 after such a stop is
 * e2e/runner-death.test.ts's.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { jobLockName } from '../../src/lock-names.js';
import { writeSchedule } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { runs } from '../helpers/db.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { alive, pidFile } from '../helpers/procfs.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('manual');
let config: string;
let dir: string;

beforeAll(() => {
  config = writeSchedule(
    `
namespace: ops
jobs:
  busy:
    schedule: "* * * * * *"
    command: ["sh", "-c", "echo $$ > busy-$BATON_RUN_ID.pid; exec sleep \${BUSY_SECONDS:-30}"]
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

const run = (job: string, extra: string[] = [], env: Record<string, string> = {}) =>
  baton(
    [
      'run',
      job,
      '--config',
      config,
      '--database-url',
      fleet.db.url,
      '--host',
      'ops-laptop',
      ...extra,
    ],
    {
      env,
    },
  );

describe('baton run', () => {
  it('runs a free job now: exit 0 and a manual winner row', async () => {
    const result = await run('quick');
    expect(result.stderr).toContain('quick done');
    expect(result.code).toBe(0);
    const [row] = await runs(fleet.db, 'quick');
    expect(row).toMatchObject({
      winner: 1,
      triggered_by: 'manual',
      status: 'done',
      host: 'ops-laptop',
      exit_code: 0,
    });
  });

  it('gives the job its fire in the environment (command) and in ctx (module)', async () => {
    // Two commands at once (each writes a file of its own): a process start is most of the cost.
    const [fireEnv, moduleEnv] = await Promise.all([run('fire-env'), run('module-env')]);
    expect(fireEnv.code).toBe(0);
    const [row] = await runs(fleet.db, 'fire-env');
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
      // The run's fence (issue 43) and where baton's tables are, to check it against.
      BATON_FENCE: String(row!.id),
      BATON_FENCE_DATABASE: fleet.db.name,
    });

    expect(moduleEnv.code).toBe(0);
    const [mrow] = await runs(fleet.db, 'module-env');
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
    const [row] = await runs(fleet.db, 'broken');
    expect(row).toMatchObject({ status: 'failed', exit_code: 3, error: 'exited with code 3' });
    expect(row!.output_tail).toContain('about to fail');
  });

  it('records a module that throws, and a command that does not exist, as failed runs (exit 1)', async () => {
    const [thrown, missing] = await Promise.all([run('throws'), run('missing')]);
    expect(thrown.code).toBe(1);
    const [t] = await runs(fleet.db, 'throws');
    expect(t).toMatchObject({
      status: 'failed',
      exit_code: 1,
      error: 'settlement total does not balance',
    });

    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('command not found: /nonexistent/settle.sh');
    expect(missing.stderr).not.toMatch(/\n\s+at /);
    const [m] = await runs(fleet.db, 'missing');
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
    // A 30 s job: the lock is certainly held while `baton run` tries. The runner's grace is
    // short, so stopping it interrupts the job and frees the lock for the waiting manual run.
    const [runner] = await fleet.start(['srv-01'], { config: enabled, graceMs: 200 });
    const running = await waitFor('a scheduled run of busy', async () => {
      const rows = await runs(fleet.db, 'busy');
      return rows.find(
        (r) => r.winner === 1 && r.status === 'running' && r.triggered_by === 'schedule',
      );
    });
    const jobPid = await pidFile(dir, `busy-${running.id}.pid`);
    expect(alive(jobPid), 'the scheduled run of busy').toBe(true);
    const result = await run('busy');
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(/busy not run: an earlier run is still running on srv-01/);
    const skip = (await runs(fleet.db, 'busy')).find((r) => r.triggered_by === 'manual');
    expect(skip).toMatchObject({ winner: null, status: 'skipped', host: 'ops-laptop' });
    expect(skip!.reason).toContain(`fire ${running.scheduled_at.toISOString()}`);

    // A manual run that waits: its GET_LOCK waits on the server while the scheduled run holds
    // the lock (seen there, not hoped for) ...
    const waited = run('busy', ['--wait', '10'], { BUSY_SECONDS: '0.2' });
    const lock = jobLockName(fleet.db.name, 'ops', 'busy');
    await waitFor('the manual run waiting for the lock of busy', async () => {
      const [row] = await fleet.db.query<{ n: number }>(
        `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST
          WHERE STATE = 'User lock' AND ID <> CONNECTION_ID() AND LOCATE(?, INFO) > 0`,
        [lock],
      );
      return Number(row!.n) > 0;
    });
    expect(alive(jobPid), 'the scheduled run of busy, while the manual run waits').toBe(true);
    // ... and gets it once the scheduled run is done: the runner stops (as on SIGTERM) and
    // interrupts it.
    await runner!.stop(false, 'SIGTERM');
    expect(runner!.lines.some((l) => l.msg === 'runner stopped')).toBe(true);
    expect(alive(jobPid), 'the interrupted run of busy').toBe(false);
    expect((await waited).code).toBe(0);
    const interrupted = (await runs(fleet.db, 'busy')).find((r) => r.id === running.id);
    expect(interrupted).toMatchObject({ status: 'interrupted' });
    expect(interrupted!.error).toBe('interrupted: the runner stopped (SIGTERM)');
    const manualWinner = (await runs(fleet.db, 'busy')).find(
      (r) => r.triggered_by === 'manual' && r.winner === 1,
    );
    expect(manualWinner).toMatchObject({ status: 'done', host: 'ops-laptop' });
    expect(manualWinner!.started_at.getTime()).toBeGreaterThanOrEqual(
      (await runs(fleet.db, 'busy'))
        .filter((r) => r.triggered_by === 'schedule' && r.winner === 1)
        .at(-1)!
        .finished_at!.getTime(),
    );
    expect(runner!.errors()).toEqual([]);
  });
});

describe('baton history', () => {
  /** `baton history <args>` of the file's namespace. */
  const history = (...args: string[]) =>
    baton(['history', ...args, '--config', config, '--database-url', fleet.db.url]);

  it('prints JSON with the documented fields, newest first, and filters', async () => {
    // Every read at once: the history no longer changes (the runner has stopped), and a process
    // start is most of each command's cost. By kind: the manual run met the scheduled run of an
    // earlier fire holding the lock.
    const byKind = (kind: string) =>
      history('busy', '--host', 'ops-laptop', '--reason-kind', kind, '--json');
    const [all, filtered, overlapping, paused, bogus, limited, future] = await Promise.all([
      history('--json', '--limit', '500'),
      history('busy', '--host', 'ops-laptop', '--status', 'skipped', '--since', '1h', '--json'),
      byKind('overlap'),
      byKind('paused'),
      byKind('sideways'),
      history('--limit', '2', '--json'),
      history('--since', '2999-01-01T00:00:00Z', '--json'),
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

    const skips = JSON.parse(filtered.stdout) as Record<string, unknown>[];
    expect(skips.length).toBeGreaterThanOrEqual(1);
    for (const s of skips)
      expect(s).toMatchObject({
        job: 'busy',
        host: 'ops-laptop',
        status: 'skipped',
        winner: false,
      });

    const overlaps = JSON.parse(overlapping.stdout) as Record<string, unknown>[];
    expect(overlaps.map((r) => r.id).sort()).toEqual(
      skips
        .filter((s) => s.reasonKind === 'overlap')
        .map((r) => r.id)
        .sort(),
    );
    expect(overlaps.length).toBeGreaterThanOrEqual(1);
    for (const s of overlaps) expect(s).toMatchObject({ status: 'skipped', reasonKind: 'overlap' });
    expect(JSON.parse(paused.stdout)).toEqual([]);
    expect(bogus.code).toBe(64);
    expect(bogus.stderr).toMatch(/reason-kind/);

    expect(JSON.parse(limited.stdout)).toHaveLength(2);

    expect(JSON.parse(future.stdout)).toEqual([]);
  });

  it('prints a readable table, and refuses a bad --since with exit 64', async () => {
    const [table, bad] = await Promise.all([
      history('broken', '--attempts'),
      history('--since', 'yesterday-ish'),
    ]);
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toBe(`namespace "ops" (from the schedules file ${config})`);
    expect(table.stdout.split('\n')[1]).toMatch(
      /^ID\s+JOB\s+SCHEDULED \(UTC\)\s+HOST\s+WINNER\s+TRIGGER\s+STATUS/,
    );
    expect(table.stdout).toMatch(
      /broken\s+\S+ \S+\s+ops-laptop\s+yes\s+manual\s+failed\s+\S+\s+3\s+exited with code 3/,
    );

    expect(bad.code).toBe(64);
    expect(bad.stderr).toContain('--since "yesterday-ish"');
  });
});
