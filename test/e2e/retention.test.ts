/**
 * History retention: `baton prune` and `retention:` delete exactly the rows older than the bound
 * (by `scheduled_at`, against the database's clock) and nothing else:
 *
 * - rows just past the bound go, rows just inside it stay, `running` rows stay however old, each
 *   job keeps its latest success, other namespaces are untouched; the work is done in batches
 *   (`--batch-size 3` takes several), and `--dry-run` counts the same rows and deletes none;
 * - `retention: { runs, skips }` prunes the two kinds at their own bounds;
 * - bad input (`--older-than 5`, less than a day, `retention: forever`) is refused with a plain
 *   message and its exit code, and deletes nothing;
 * - every read is an index range or a single index dive (EXPLAIN), never a scan of the table;
 * - a user without DELETE gets a clear database error.
 *
 * The command is what is judged here, as a real process (its output and exit codes); no runner
 * takes part. The daemon's side — `RetentionSchedule`, and a runner with `retention:` pruning by
 * itself — is in-process/retention.test.ts.
 *
 * Rows are written with SQL at known ages (`NOW(3) - INTERVAL n SECOND`) into one namespace per
 * test, in the file's own database.
 */
import { randomBytes } from 'node:crypto';
import type { RowDataPacket } from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import {
  COUNT_SQL,
  LATEST_DONE_SQL,
  NEXT_JOB_SQL,
  SELECT_BATCH_SQL,
} from '../../src/store/prune.js';
import { baton, writeSchedule } from '../helpers/cli.js';
import { plantAgedRuns, runIdsOf, type AgedRun } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';

const fleet = useFleet('retention');
const SECOND = 1;
const HOUR = 3_600;
const DAY = 86_400;

function prune(args: string[]) {
  return baton(['prune', '--database-url', fleet.db.url, ...args]);
}

/** A bound printed by prune is the database's now minus the retention (the clocks agree here). */
function expectBound(iso: string | null, retentionSeconds: number): void {
  expect(iso).not.toBeNull();
  const expected = Date.now() - retentionSeconds * 1_000;
  expect(Math.abs(Date.parse(iso!) - expected)).toBeLessThan(60_000);
}

const JOB_FILE = (namespace: string, extra = '') =>
  writeSchedule(
    `namespace: ${namespace}\njobs:\n  a:\n    schedule: "@yearly"\n    command: ["true"]\n${extra}`,
  );

describe('baton prune --older-than', () => {
  it('deletes exactly the rows older than the bound, in batches; --dry-run counts them and deletes nothing', async () => {
    const ns = 'ret';
    const gone: AgedRun[] = [
      // Seven skips of `a` past the bound: three batches of at most three.
      ...[
        31 * DAY,
        30 * DAY + SECOND,
        30 * DAY + 2 * SECOND,
        32 * DAY,
        33 * DAY,
        34 * DAY,
        90 * DAY,
      ].map((age) => ({ namespace: ns, job: 'a', status: 'skipped', age })),
      // One row of each finished status of `a`: a newer success exists, so the old one goes.
      { namespace: ns, job: 'a', status: 'done', age: 31 * DAY },
      { namespace: ns, job: 'a', status: 'failed', age: 40 * DAY },
      { namespace: ns, job: 'a', status: 'timeout', age: 35 * DAY },
      { namespace: ns, job: 'a', status: 'interrupted', age: 32 * DAY },
      { namespace: ns, job: 'a', status: 'lost', age: 33 * DAY },
      { namespace: ns, job: 'a', status: 'missed', age: 45 * DAY },
      // `b` has succeeded only long ago: its latest success stays, the one before goes.
      { namespace: ns, job: 'b', status: 'done', age: 60 * DAY },
      { namespace: ns, job: 'b', status: 'skipped', age: 50 * DAY },
    ];
    const kept: AgedRun[] = [
      { namespace: ns, job: 'a', status: 'skipped', age: 29 * DAY + 23 * HOUR },
      { namespace: ns, job: 'a', status: 'skipped', age: DAY },
      { namespace: ns, job: 'a', status: 'failed', age: 29 * DAY + 23 * HOUR },
      { namespace: ns, job: 'a', status: 'done', age: DAY },
      // A run going on now is never deleted, however old its fire.
      { namespace: ns, job: 'a', status: 'running', age: 40 * DAY + 5 * SECOND },
      { namespace: ns, job: 'b', status: 'running', age: 35 * DAY },
      { namespace: ns, job: 'b', status: 'done', age: 50 * DAY },
    ];
    await plantAgedRuns(fleet.db, gone);
    const keptIds = await plantAgedRuns(fleet.db, kept);
    // Another namespace on the same database is not this prune's business.
    const otherIds = await plantAgedRuns(fleet.db, [
      { namespace: 'ret-other', job: 'a', status: 'skipped', age: 40 * DAY },
    ]);
    const config = JOB_FILE(ns);
    const all = await runIdsOf(fleet.db, ns);
    const expected = { runs: 7, skips: 8, batches: 6 + 3 + 1 + 1 };

    const dry = await prune([
      '--config',
      config,
      '--older-than',
      '30d',
      '--batch-size',
      '3',
      '--dry-run',
      '--json',
    ]);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
    const counted = JSON.parse(dry.stdout) as Record<string, unknown>;
    expect(counted).toMatchObject({ namespace: ns, dryRun: true, ...expected });
    expect(counted.skipsBefore).toBe(counted.runsBefore);
    expectBound(counted.runsBefore as string, 30 * DAY);
    expect(await runIdsOf(fleet.db, ns)).toEqual(all);

    const real = await prune(['--config', config, '--older-than', '30d', '--batch-size', '3']);
    expect(real.stderr).toBe('');
    expect(real.code).toBe(0);
    const said =
      /^deleted 7 runs and 8 skips scheduled before (\S+) in namespace "ret" \(11 batches\)\n$/.exec(
        real.stdout,
      );
    expect(said, real.stdout).not.toBeNull();
    expectBound(said![1]!, 30 * DAY);
    expect(await runIdsOf(fleet.db, ns)).toEqual([...keptIds].sort((x, y) => x - y));
    expect(await runIdsOf(fleet.db, 'ret-other')).toEqual(otherIds);

    // Nothing is left to delete.
    const again = await prune(['--config', config, '--older-than', '30d', '--dry-run']);
    expect(again.stdout).toMatch(
      /^would delete 0 runs and 0 skips scheduled before \S+ in namespace "ret" \(0 batches\)\n$/,
    );
  });

  it('honours retention: { runs, skips } of the schedules file, each at its own bound', async () => {
    const ns = 'ret2';
    const [, skip6d, , failed60d, , done2d, running200d] = await plantAgedRuns(fleet.db, [
      { namespace: ns, job: 'a', status: 'skipped', age: 8 * DAY },
      { namespace: ns, job: 'a', status: 'skipped', age: 6 * DAY },
      { namespace: ns, job: 'a', status: 'failed', age: 91 * DAY },
      { namespace: ns, job: 'a', status: 'failed', age: 60 * DAY },
      { namespace: ns, job: 'a', status: 'done', age: 100 * DAY },
      { namespace: ns, job: 'a', status: 'done', age: 2 * DAY },
      { namespace: ns, job: 'a', status: 'running', age: 200 * DAY },
    ]);
    const config = JOB_FILE(ns, 'retention:\n  runs: 90d\n  skips: 7d\n');

    const result = await prune(['--config', config]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const said =
      /^deleted 2 runs scheduled before (\S+) and 1 skip scheduled before (\S+) in namespace "ret2" \(3 batches\)\n$/.exec(
        result.stdout,
      );
    expect(said, result.stdout).not.toBeNull();
    expectBound(said![1]!, 90 * DAY);
    expectBound(said![2]!, 7 * DAY);
    expect(await runIdsOf(fleet.db, ns)).toEqual([skip6d, failed60d, done2d, running200d]);

    // The flags replace the file's retention: skips alone, runs kept.
    const skipsOnly = await prune(['--config', config, '--skips-older-than', '5d', '--dry-run']);
    expect(skipsOnly.stdout).toMatch(
      /^would delete 1 skip scheduled before \S+ in namespace "ret2" \(1 batch\); runs are kept\n$/,
    );
    expect(await runIdsOf(fleet.db, ns)).toEqual([skip6d, failed60d, done2d, running200d]);
  });

  it('refuses bad input with a plain message and its exit code, and deletes nothing', async () => {
    const ns = 'ret3';
    await plantAgedRuns(fleet.db, [{ namespace: ns, job: 'a', status: 'skipped', age: 400 * DAY }]);
    const before = await runIdsOf(fleet.db, ns);
    const config = JOB_FILE(ns);
    const cases: { args: string[]; code: number; message: RegExp }[] = [
      {
        args: ['--older-than', '5'],
        code: 64,
        message: /^baton: --older-than "5": expected a duration: write a number with a unit/,
      },
      {
        args: ['--older-than', '2h'],
        code: 64,
        message: /^baton: --older-than 2h: 2h is shorter than 1d: baton keeps at least a day/,
      },
      {
        args: ['--older-than', '30d', '--batch-size', '0'],
        code: 64,
        message: /^baton: --batch-size must be a whole number from 1 to 10000/,
      },
      {
        args: [],
        code: 64,
        message:
          /^baton: say how old history must be to be deleted: --older-than 30d, or `retention:`.*it has no `retention:`/,
      },
    ];
    const forever = JOB_FILE(ns, 'retention: forever\n');
    // Each case on its own: asked at once.
    const [results, invalid] = await Promise.all([
      Promise.all(cases.map((c) => prune(['--config', config, ...c.args]))),
      prune(['--config', forever]),
    ]);
    for (const [i, c] of cases.entries()) {
      const result = results[i]!;
      expect(result.stderr, c.args.join(' ')).toMatch(c.message);
      expect(result.stderr).not.toMatch(/\n\s+at /);
      expect(result.stdout).toBe('');
      expect(result.code, c.args.join(' ')).toBe(c.code);
    }

    expect(invalid.code).toBe(78);
    expect(invalid.stderr).toContain(
      `${forever}:6:1: retention: expected a duration, got "forever": write a number with a unit`,
    );
    expect(invalid.stderr).not.toMatch(/\n\s+at /);
    expect(await runIdsOf(fleet.db, ns)).toEqual(before);
  });

  it('reads through indexes only: no statement scans the table (EXPLAIN)', async () => {
    const ns = 'ret-explain';
    await plantAgedRuns(
      fleet.db,
      Array.from({ length: 30 }, (_, i) => ({
        namespace: ns,
        job: `j${i % 3}`,
        status: i % 2 ? 'skipped' : 'done',
        age: (31 + i) * DAY,
      })),
    );
    const explain = (sql: string, values: unknown[]) =>
      fleet.db.query<RowDataPacket>(`EXPLAIN ${sql}`, values);
    const bound = new Date(Date.now() - 30 * DAY * 1_000);
    for (const [sql, values] of [
      [SELECT_BATCH_SQL, [ns, 'j1', 'skipped', bound, 3]],
      [COUNT_SQL, [ns, 'j1', 'skipped', bound]],
    ] as const) {
      const [plan] = await explain(sql, [...values]);
      expect(plan, sql).toMatchObject({ type: 'range', key: 'baton_runs_job_status' });
    }
    for (const [sql, values] of [
      [NEXT_JOB_SQL, [ns, 'j0']],
      [LATEST_DONE_SQL, [ns, 'j1']],
    ] as const) {
      const [plan] = await explain(sql, [...values]);
      expect(plan!.Extra, sql).toBe('Select tables optimized away');
    }
    const [remove] = await explain(
      "DELETE FROM baton_runs WHERE id IN (?) AND status <> 'running'",
      [[1, 2, 3]],
    );
    expect(remove).toMatchObject({ type: 'range', key: 'PRIMARY' });
  });

  it('needs DELETE: a user without it gets a clear database error, and no password is shown', async () => {
    const ns = 'ret4';
    const [old] = await plantAgedRuns(fleet.db, [
      { namespace: ns, job: 'a', status: 'skipped', age: 40 * DAY },
    ]);
    const user = `baton_t_${randomBytes(3).toString('hex')}`;
    const password = `pw-${randomBytes(8).toString('hex')}`;
    await fleet.db.query('CREATE USER ?@? IDENTIFIED BY ?', [user, '%', password]);
    try {
      await fleet.db.query('GRANT SELECT, INSERT, UPDATE ON ??.* TO ?@?', [
        fleet.db.name,
        user,
        '%',
      ]);
      const url = `mysql://${user}:${password}@127.0.0.1:3306/${fleet.db.name}`;
      const args = ['prune', '--database-url', url, '--namespace', ns, '--older-than', '30d'];
      // Without the namespace's schedules file its catchUp windows cannot be checked.
      const unchecked = await baton(args);
      expect(unchecked.code).toBe(64);
      expect(unchecked.stderr).toMatch(
        /^baton: cannot check the catchUp windows of namespace "[^"]+" without its schedules file .*--no-catch-up-check/,
      );
      args.push('--no-catch-up-check');
      const denied = await baton(args);
      expect(denied.code).toBe(69);
      expect(denied.stderr).toMatch(/^baton: database error: DELETE command denied/);
      expect(denied.stderr + denied.stdout).not.toContain(password);
      expect(await runIdsOf(fleet.db, ns)).toEqual([old]);

      await fleet.db.query('GRANT DELETE ON ??.baton_runs TO ?@?', [fleet.db.name, user, '%']);
      const allowed = await baton(args);
      expect(allowed.stdout).toMatch(/^deleted 0 runs and 1 skip /);
      expect(allowed.code).toBe(0);
      expect(await runIdsOf(fleet.db, ns)).toEqual([]);
    } finally {
      await fleet.db.query('DROP USER IF EXISTS ?@?', [user, '%']);
    }
  });
});
