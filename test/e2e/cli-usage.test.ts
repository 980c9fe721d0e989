/**
 * The command line as a person types it (issue 17, "The CLI in a terminal"), on the built CLI and
 * a real database:
 * - `history`'s filters may be repeated: one filter's values are OR, different filters AND, over
 *   planted rows; a bad value is 64 naming the option and its values; an option that takes one
 *   value given twice is 64, not an SQL error.
 * - A mistyped command or option is 64 with the closest known name, and no stack.
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
    expectUsage(await cli('status', '--zzzzzz'), /^baton: unknown option --zzzzzz\n/);
  });
});
