/**
 * The command line as a person types it (issue 17, "The CLI in a terminal"), on the built CLI and
 * a real database:
 * - `history`'s filters may be repeated: one filter's values are OR, different filters AND, over
 *   planted rows; a bad value is 64 naming the option and its values; an option that takes one
 *   value given twice is 64, not an SQL error.
 * - A mistyped command or option is 64 with the closest known name, and no stack.
 * - `pause`, `resume` and `run` refuse a job they do not know (64, did-you-mean): the schedules
 *   file is the truth, `--force` pauses a job not in it yet; without a file of the namespace its
 *   history says which jobs exist; a paused job since removed from the file can be resumed.
 * - `--json` on run, pause, resume and migrate prints one JSON document on stdout (a job's own
 *   output goes to stderr); with `--json` every error is one JSON object on stderr, with the
 *   documented exit code: usage (64), unknown job, failed job (its code), database (69).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, writeSchedule, type CliResult } from '../helpers/cli.js';
import { createTestDatabase, plantRun, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
let config: string;
const ids: Record<string, number> = {};

const at = (minute: number) => new Date(Date.UTC(2026, 11, 1, 3, minute));

beforeAll(async () => {
  db = await createTestDatabase('cli_usage');
  config = writeSchedule(`
namespace: cli
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ["true"]
  report:
    schedule: "0 4 * * *"
    command: ["true"]
  archive:
    schedule: "0 5 * * *"
    command: ["true"]
  loud:
    schedule: "0 6 * * *"
    command: ["sh", "-c", "echo out-of-loud; echo err-of-loud >&2"]
  broken:
    schedule: "0 7 * * *"
    command: ["sh", "-c", "echo about to fail; exit 3"]
`);
  const migrated = await cli('migrate');
  expect(migrated.code, migrated.stderr).toBe(0);
  const plant = (name: string, run: Parameters<typeof plantRun>[1]) =>
    plantRun(db, run).then((id) => (ids[name] = id));
  await plant('settle-done', { namespace: 'cli', job: 'settle', scheduledAt: at(0), host: 'h1' });
  await plant('settle-failed', {
    namespace: 'cli',
    job: 'settle',
    scheduledAt: at(1),
    host: 'h2',
    status: 'failed',
    exitCode: 3,
  });
  await plant('settle-skip', {
    namespace: 'cli',
    job: 'settle',
    scheduledAt: at(1),
    host: 'h1',
    status: 'skipped',
    reason: 'lock held by h2',
    reasonKind: 'taken',
  });
  await plant('report-timeout', {
    namespace: 'cli',
    job: 'report',
    scheduledAt: at(2),
    host: 'h3',
    status: 'timeout',
  });
  await plant('archive-done', { namespace: 'cli', job: 'archive', scheduledAt: at(3), host: 'h2' });
  // Another namespace's row, which no filter of this one may show.
  await plant('other-ns', { namespace: 'elsewhere', job: 'settle', scheduledAt: at(4) });
});
afterAll(async () => {
  await db?.drop();
});

function cli(...args: string[]): Promise<CliResult> {
  return baton([...args, '--config', config, '--database-url', db.url]);
}

/** The ids `history --json <args>` prints, and that it printed nothing else. */
async function historyIds(...args: string[]): Promise<number[]> {
  const r = await cli('history', '--json', ...args);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { id: number }[]).map((row) => row.id).sort((a, b) => a - b);
}

const idsOf = (...names: string[]) => names.map((n) => ids[n]!).sort((a, b) => a - b);

/** A usage error: exit 64, the message on stderr, no stack trace, nothing on stdout. */
function expectUsage(r: CliResult, message: RegExp): void {
  expect(r.code, r.stderr).toBe(64);
  expect(r.stderr).toMatch(message);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  expect(r.stdout).toBe('');
}

describe('history filters', () => {
  it('ORs the values of one repeated filter and ANDs different filters', async () => {
    expect(await historyIds('--status', 'failed', '--status', 'timeout')).toEqual(
      idsOf('settle-failed', 'report-timeout'),
    );
    expect(await historyIds('--host', 'h1', '--host', 'h3')).toEqual(
      idsOf('settle-done', 'settle-skip', 'report-timeout'),
    );
    // Two jobs as positionals, and a filter on top.
    expect(await historyIds('settle', 'archive')).toEqual(
      idsOf('settle-done', 'settle-failed', 'settle-skip', 'archive-done'),
    );
    expect(await historyIds('settle', 'archive', '--host', 'h2')).toEqual(
      idsOf('settle-failed', 'archive-done'),
    );
    expect(
      await historyIds('--status', 'done', '--status', 'skipped', '--host', 'h1', '--host', 'h3'),
    ).toEqual(idsOf('settle-done', 'settle-skip'));
    expect(await historyIds('--reason-kind', 'taken', '--reason-kind', 'paused')).toEqual(
      idsOf('settle-skip'),
    );
    // The word after a repeatable option is a job, not a second value.
    expect(await historyIds('--status', 'done', 'archive')).toEqual(idsOf('archive-done'));
    // One value still works as it did.
    expect(await historyIds('--status', 'failed')).toEqual(idsOf('settle-failed'));
  });

  it('refuses a bad value naming the option and the values it takes', async () => {
    const r = await cli('history', '--status', 'failed', '--status', 'nonsense');
    expectUsage(r, /--status "nonsense": expected one of running, done, failed, timeout/);
    expect(r.stderr).toMatch(/Run "baton history --help" for usage/);
    expectUsage(
      await cli('history', '--reason-kind', 'sideways'),
      /--reason-kind "sideways": expected one of taken, already-ran/,
    );
  });

  it('refuses an option that takes one value given twice', async () => {
    expectUsage(await cli('history', '--limit', '1', '--limit', '2'), /--limit was given 2 times/);
    expectUsage(
      await cli('history', '--namespace', 'a', '--namespace', 'b'),
      /--namespace was given 2 times/,
    );
    expectUsage(
      await cli('status', '--gone-after', '3s', '--gone-after', '4s'),
      /--gone-after was given 2 times/,
    );
  });
});

describe('mistyped commands and options', () => {
  it('suggests the closest command', async () => {
    expectUsage(await cli('stauts'), /^baton: unknown command "stauts"; did you mean "status"\?/);
    expectUsage(await cli('histroy'), /did you mean "history"\?/);
    const nothing = await cli('frobnicate');
    expectUsage(nothing, /^baton: unknown command "frobnicate"\nRun "baton --help" for usage/);
  });

  it('refuses an unknown option with the closest known one', async () => {
    const r = await cli('history', '--stauts', 'failed');
    expectUsage(r, /^baton: unknown option --stauts; did you mean --status\?\n/);
    expect(r.stderr).toMatch(/Run "baton history --help" for usage/);
    expectUsage(await cli('list', '--jsno'), /unknown option --jsno; did you mean --json\?/);
    expectUsage(await cli('list', '--zzzzzz'), /^baton: unknown option --zzzzzz\n/);
    // `status` is a monitoring check: its bad usage is UNKNOWN (3), said on stdout.
    const check = await cli('status', '--jsno');
    expect(check.code).toBe(3);
    expect(check.stdout).toMatch(/^UNKNOWN: unknown option --jsno; did you mean --json\?/);
  });
});

describe('a reason is free text', () => {
  it('takes an option-looking reason as the reason, never as an option that steers the command', async () => {
    const other = await createTestDatabase('cli_usage_other');
    try {
      // The fleet's database by the environment: an option taken from the reason would win.
      const env = { BATON_DATABASE_URL: db.url };
      const steer = `--database-url=${other.url}`;
      for (const [command, reason] of [
        ['pause', steer],
        ['resume', steer],
        ['pause', '--force'],
      ] as const) {
        const r = await baton([command, 'archive', '--config', config, '--reason', reason], {
          env,
        });
        expect(r.code, r.stderr).toBe(0);
      }
      const audit = await db.query<{ action: string; reason: string }>(
        "SELECT action, reason FROM baton_audit WHERE job = 'archive' ORDER BY id",
      );
      expect(audit.slice(-3)).toEqual([
        { action: 'pause', reason: steer },
        { action: 'resume', reason: steer },
        { action: 'pause', reason: '--force' },
      ]);
      const tables = await other.query<{ n: number }>(
        'SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = ?',
        [other.name],
      );
      expect(Number(tables[0]!.n)).toBe(0);
      await cli('resume', 'archive');
    } finally {
      await other.drop();
    }
  });

  it('refuses a reason with nothing after it, or with a control character: 64, nothing written', async () => {
    const before = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM baton_audit');
    // (Anywhere else it takes the next word, whatever it is, as getopt does.) Last on the line,
    // yargs' parse error once escaped as a stack trace.
    expectUsage(
      await baton(['pause', 'archive', '--config', config, '--database-url', db.url, '--reason']),
      /^baton: --reason needs a value\n/,
    );
    expectUsage(
      await baton(['run', 'archive', '--config', config, '--database-url', db.url, '--env']),
      /^baton: --env needs a value\n/,
    );
    expectUsage(
      await cli('pause', 'archive', '--reason', 'one\n\u001b[2Jtwo'),
      /^baton: --reason contains a control character/,
    );
    const after = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM baton_audit');
    expect(after[0]!.n).toBe(before[0]!.n);
    expect(await pausedJobs('cli')).not.toContain('archive');
  });
});

interface PauseJson {
  job: string;
  namespace: string;
  paused: boolean;
  renewed: boolean;
  forced: boolean;
  pause: { pausedBy: string; pausedAt: string; reason: string | null };
}

interface ResumeJson {
  job: string;
  namespace: string;
  resumed: boolean;
  wasPaused: { pausedBy: string; pausedAt: string; reason: string | null } | null;
}

function parsed<T>(r: CliResult): T {
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as T;
}

const pausedJobs = async (namespace: string) =>
  (
    await db.query<{ job: string }>(
      'SELECT job FROM baton_pauses WHERE namespace = ? ORDER BY job',
      [namespace],
    )
  ).map((r) => r.job);

describe('unknown jobs', () => {
  it('pause refuses a job not in the schedules file unless --force, and resume lifts any pause', async () => {
    const typo = await cli('pause', 'setle');
    expectUsage(typo, /"setle" is not a job of \S+schedules\.yaml; did you mean "settle"\?/);
    expect(typo.stderr).toMatch(/nothing was paused \(--force pauses it anyway/);
    expect(await pausedJobs('cli')).toEqual([]);

    const paused = parsed<PauseJson>(
      await cli('pause', 'settle', '--json', '--host', 'ops-1', '--reason', 'ledger frozen'),
    );
    expect(paused).toMatchObject({
      job: 'settle',
      namespace: 'cli',
      paused: true,
      renewed: false,
      forced: false,
      // `operator@host`: the OS user (SUDO_USER under sudo) and --host.
      pause: { pausedBy: expect.stringMatching(/^\S+@ops-1$/), reason: 'ledger frozen' },
    });
    expect(Date.parse(paused.pause.pausedAt)).not.toBeNaN();
    expect(parsed<PauseJson>(await cli('pause', 'settle', '--json')).renewed).toBe(true);

    // A job not in the file yet: --force, and it says so.
    const forced = await cli('pause', 'nightly', '--force');
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stderr).toContain('"nightly" is not a known job; paused it anyway (--force)');
    expect(await pausedJobs('cli')).toEqual(['nightly', 'settle']);

    // resume: a name nothing knows is refused and says nothing was paused under it.
    const nothing = await cli('resume', 'setle');
    expectUsage(nothing, /nothing is paused under "setle" in namespace "cli"/);
    expect(nothing.stderr).toMatch(/did you mean "settle"\?.*\(paused: nightly, settle\)/);
    // A job of the file that is not paused: nothing to do, not an error.
    const report = parsed<ResumeJson>(await cli('resume', 'report', '--json'));
    expect(report).toEqual({
      job: 'report',
      namespace: 'cli',
      resumed: false,
      wasPaused: null,
      auditId: expect.any(Number),
    });
    const settle = parsed<ResumeJson>(await cli('resume', 'settle', '--json'));
    expect(settle).toMatchObject({ job: 'settle', resumed: true, wasPaused: { reason: null } });
    // Paused, not in the file (removed since, or forced): resume still lifts it.
    const removed = await cli('resume', 'nightly');
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toMatch(/^resumed nightly in namespace "cli"/);
    expect(await pausedJobs('cli')).toEqual([]);
  });

  it("without the namespace's schedules file, its history says which jobs exist", async () => {
    const known = await cli('pause', 'settle', '--namespace', 'elsewhere');
    expect(known.code, known.stderr).toBe(0);
    const unknown = await cli('pause', 'report', '--namespace', 'elsewhere');
    expectUsage(unknown, /"report" is not a job of the history of namespace "elsewhere"/);
    expect(await pausedJobs('elsewhere')).toEqual(['settle']);
    expect((await cli('resume', 'settle', '--namespace', 'elsewhere')).code).toBe(0);
  });

  it('run refuses a mistyped job with the closest name', async () => {
    const r = await cli('run', 'reprot');
    expectUsage(
      r,
      /unknown job "reprot" in \S+; did you mean "report"\? \(jobs: settle, report, archive, loud, broken\)/,
    );
  });
});

interface ErrorJson {
  error: { exitCode: number; code: string; message: string };
}

/** The last line of stderr as a JSON error (a job's own output may come before it). */
function errorOf(r: CliResult): ErrorJson['error'] {
  const last = r.stderr.trimEnd().split('\n').at(-1)!;
  const { error } = JSON.parse(last) as ErrorJson;
  expect(error.exitCode).toBe(r.code);
  return error;
}

describe('--json', () => {
  it("run prints the run's history row; the job's output goes to stderr", async () => {
    const r = await cli('run', 'loud', '--json', '--host', 'ops-json');
    expect(r.code, r.stderr).toBe(0);
    const row = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(row).toMatchObject({
      job: 'loud',
      trigger: 'manual',
      status: 'done',
      winner: true,
      host: 'ops-json',
      exitCode: 0,
      attempts: 1,
      paused: null,
    });
    expect(row.durationMs).toEqual(expect.any(Number));
    expect(await historyIds('loud')).toEqual([row.id]);
    expect(r.stderr).toContain('out-of-loud');
    expect(r.stderr).toContain('err-of-loud');
  });

  it("run of a failing job: the row on stdout, the error as JSON on stderr, the job's exit code", async () => {
    const r = await cli('run', 'broken', '--json');
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ job: 'broken', status: 'failed', exitCode: 3 });
    expect(r.stderr).toContain('about to fail');
    expect(errorOf(r)).toMatchObject({
      code: 'JOB_FAILED',
      message: expect.stringMatching(/^broken failed: /),
    });
  });

  it('migrate says what it applied, and that a migrated database is up to date', async () => {
    const fresh = `${db.url}_m`;
    try {
      const first = await baton(['migrate', '--json', '--database-url', fresh]);
      expect(first.code, first.stderr).toBe(0);
      const doc = JSON.parse(first.stdout) as {
        database: string;
        applied: string[];
        upToDate: boolean;
      };
      expect(doc.database).toBe(fresh);
      expect(doc.applied[0]).toBe('0001_create_baton_runs');
      expect(doc.upToDate).toBe(false);
      const again = await baton(['migrate', '--json', '--database-url', fresh]);
      expect(JSON.parse(again.stdout)).toEqual({ database: fresh, applied: [], upToDate: true });
    } finally {
      await db.conn.query('DROP DATABASE IF EXISTS ??', [`${db.name}_m`]);
    }
  });

  it('reports errors as one JSON object on stderr, with the documented exit code', async () => {
    const usage = await cli('history', '--status', 'nonsense', '--json');
    expect(usage.code).toBe(64);
    expect(usage.stdout).toBe('');
    expect(JSON.parse(usage.stderr)).toEqual({
      error: {
        exitCode: 64,
        code: 'USAGE',
        message: expect.stringMatching(/^--status "nonsense": expected one of running, done/),
      },
    });
    const typo = await cli('stauts', '--json');
    expect(JSON.parse(typo.stderr).error).toMatchObject({
      exitCode: 64,
      message: expect.stringContaining('did you mean "status"'),
    });
    const unknownJob = await cli('pause', 'setle', '--json');
    expect(unknownJob.code).toBe(64);
    expect(JSON.parse(unknownJob.stderr).error.message).toMatch(/did you mean "settle"/);
    const down = await baton([
      'history',
      '--json',
      '--config',
      config,
      '--database-url',
      'mysql://root:secret@127.0.0.1:1/x',
    ]);
    expect(down.code).toBe(69);
    expect(down.stdout).toBe('');
    expect(JSON.parse(down.stderr).error).toMatchObject({
      exitCode: 69,
      code: 'DATABASE_UNAVAILABLE',
    });
    expect(down.stderr).not.toContain('secret');
    // Without --json the same error is prose.
    expect((await cli('history', '--status', 'nonsense')).stderr).toMatch(/^baton: --status/);
  });
});
