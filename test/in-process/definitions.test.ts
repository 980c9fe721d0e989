/**
 * `baton definitions` and `baton definitions apply` (issue 40) on a real database, the CLI in the
 * test process (helpers/cli-in-process.ts), as the operator `ops` on host `ops-1`:
 * - the view and the transition preview of a daily 03:00 → 04:00 change: `--at 03:30` runs the
 *   job twice that day (warned, with its fires), the default instant (the old timing's next fire
 *   after the settle window) does not; 03:00 → 02:00 at 02:30 (Paris) skips the day. Instants
 *   exact, in the text and in `--json`;
 * - `apply --dry-run` writes nothing (the table and the audit unchanged); `apply --at` records a
 *   version and, again, moves its instant; a rollback re-proposes an earlier timing as a new
 *   version (which keeps a pending one from ever taking effect); each change has its audit row;
 * - the live runners' versions, from their registry rows: who has which, who will hold;
 * - a runner records a changed timing at the instant `apply --dry-run` showed (one rule for both:
 *   store/timing-proposal.ts), and the view lists it with its version;
 * - every refusal exits 64 (69 without the table) with its message, having written nothing.
 * The judgements themselves are unit-tested in test/unit/timing-preview.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeSchedule, type CliResult } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { createTestDatabase, dbNow, type TestDatabase } from '../helpers/db.js';
import { loadConfig } from '../../src/config/load.js';
import { registerRunner } from '../../src/store/runners.js';
import { InProcessRunner } from '../helpers/in-process-fleet.js';
import { waitFor } from '../helpers/wait.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('definitions', { migrated: true });
});

afterAll(async () => {
  await db?.drop();
});

/** `baton <args> --config <config> --database-url <db> --host ops-1`, as `ops`. */
function cli(config: string, ...args: string[]): Promise<CliResult> {
  return baton([...args, '--config', config, '--database-url', db.url, '--host', 'ops-1'], {
    env: { SUDO_USER: 'ops' },
  });
}

/** A schedules file of namespace `ns` with `settle` on `schedule` (and `report`, daily at 05:00). */
function file(ns: string, schedule: string, timezone = 'UTC'): string {
  return writeSchedule(`
namespace: ${ns}
jobs:
  settle:
    schedule: "${schedule}"
    timezone: ${timezone}
    command: ["true"]
  report:
    schedule: "0 5 * * *"
    command: ["true"]
  export:
    after: {jobs: [settle]}
    command: ["true"]
`);
}

function ok(r: CliResult): string {
  expect(r.stderr, r.stderr).toBe('');
  expect(r.code, r.stdout).toBe(0);
  return r.stdout;
}

function usage(r: CliResult, message: RegExp): void {
  expect(r.stdout).toBe('');
  expect(r.stderr).toMatch(message);
  expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
  expect(r.code).toBe(64);
}

/** The preview table of `text`: from its FIRE (UTC) line to the line after the table. */
function previewTable(text: string): string[] {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trim().startsWith('FIRE (UTC)'));
  expect(start, text).toBeGreaterThanOrEqual(0);
  const end = lines.findIndex((l, i) => i > start && !/^\s+\d{4}-\d{2}-\d{2} \d{2}:/.test(l));
  return lines.slice(start, end + 1).map((l) => l.trim());
}

interface VersionRow {
  version: number;
  schedule: string;
  effective_at: Date;
  chosen_by: string;
  recorded_by: string;
}

function versions(ns: string, job = 'settle'): Promise<VersionRow[]> {
  return db.query<VersionRow>(
    `SELECT version, schedule, effective_at, chosen_by, recorded_by FROM baton_timings
      WHERE namespace = ? AND job = ? ORDER BY version`,
    [ns, job],
  );
}

interface AuditRow {
  action: string;
  job: string;
  operator: string;
  host: string;
  reason: string | null;
  details: string;
  outcome: string;
}

function audits(ns: string): Promise<AuditRow[]> {
  return db.query<AuditRow>(
    `SELECT action, job, operator, host, reason, details, outcome FROM baton_audit
      WHERE namespace = ? ORDER BY id`,
    [ns],
  );
}

/** What `definitions apply --json` prints (the fields the tests read). */
interface ApplyJson {
  namespace: string;
  now: string;
  dryRun: boolean;
  settleMs: number;
  changes: {
    job: string;
    kind: string;
    version: number;
    effectiveAt: string | null;
    chosenBy: string;
    previousAt: string | null;
    rollbackOf: number | null;
    supersedes: number[];
    notes: string[];
    applied: boolean;
    outcome: string | null;
    auditId: number | null;
    recorded: { version: number; effectiveAt: string | null; chosenBy: string } | null;
    preview: {
      from: { version: number; schedule: string; timezone: string } | null;
      to: { version: number; schedule: string; timezone: string };
      at: string;
      atLocal: string;
      day: string;
      same: boolean;
      fires: { at: string; local: string; timing: string; version: number; runs: boolean }[];
      anomaly: {
        kind: string;
        day: string;
        fires: string[];
        oldCount: number;
        newCount: number;
      } | null;
    } | null;
  }[];
}

const fireWords = (p: NonNullable<ApplyJson['changes'][number]['preview']>) =>
  p.fires.map((f) => `${f.at} v${f.version} ${f.runs ? 'runs' : '-'}`);

describe('a daily 03:00 → 04:00 change', () => {
  const ns = 'daily';
  const before = file(ns, '0 3 * * *');
  const after = file(ns, '0 4 * * *');

  it('records the first versions, then previews --at 03:30 (twice) without writing, then records it', async () => {
    const first = ok(await cli(before, 'definitions', 'apply'));
    expect(first).toContain(
      'settle: new to the fleet: "0 3 * * *" (UTC) becomes version 1, in force from the start\n' +
        '  recorded version 1, in force from the start (audit ',
    );
    expect((await versions(ns)).map((v) => [v.version, v.chosen_by, v.recorded_by])).toEqual([
      [1, 'first', 'ops@ops-1'],
    ]);
    expect((await audits(ns)).map((a) => [a.action, a.job, a.outcome])).toEqual([
      ['timing', 'settle', 'recorded version 1, in force from the start'],
      ['timing', 'report', 'recorded version 1, in force from the start'],
    ]);

    // The preview, on the deploy host with the new file: nothing written.
    const dry = ok(
      await cli(after, 'definitions', 'apply', '--at', '2030-01-01T03:30:00Z', '--dry-run'),
    );
    expect(dry).toContain('; dry run: nothing is written\n');
    expect(dry).toContain(
      'settle: change: "0 4 * * *" (UTC) becomes version 2, effective 2030-01-01 03:30:00.000 UTC (chosen with --at)',
    );
    expect(previewTable(dry)).toEqual([
      'FIRE (UTC)               VERSION 1 (OLD)  VERSION 2 (NEW)',
      '2029-12-31 03:00:00.000  runs',
      '2029-12-31 04:00:00.000                   not run',
      '2030-01-01 03:00:00.000  runs',
      '2030-01-01 03:30:00.000  ── switch ──     ── switch ──',
      '2030-01-01 04:00:00.000                   runs',
      '2030-01-02 03:00:00.000  not run',
      '2030-01-02 04:00:00.000                   runs',
      'warning: the switch runs settle twice on 2030-01-01 (UTC), at 03:00+00, 04:00+00: more ' +
        'than either timing (version 1 alone runs it once that day, version 2 once); choose ' +
        "another instant with --at (e.g. --at midnight: the day boundary in the job's zone)",
    ]);
    expect(dry).toContain('report: unchanged: "0 5 * * *" (UTC) is version 1, in force');
    expect(dry).toContain('  dry run: nothing written\n');
    expect(await versions(ns)).toHaveLength(1);
    expect(await audits(ns)).toHaveLength(2);

    // Recorded, as JSON.
    const applied = JSON.parse(
      ok(
        await cli(
          after,
          'definitions',
          'apply',
          'settle',
          '--at',
          '2030-01-01T03:30:00Z',
          '--reason',
          'batch window moves',
          '--json',
        ),
      ),
    ) as ApplyJson;
    expect(applied.dryRun).toBe(false);
    expect(applied.settleMs).toBe(600_000);
    expect(applied.changes).toHaveLength(1);
    const change = applied.changes[0]!;
    expect(change).toMatchObject({
      job: 'settle',
      kind: 'change',
      version: 2,
      effectiveAt: '2030-01-01T03:30:00.000Z',
      chosenBy: 'operator',
      previousAt: null,
      rollbackOf: null,
      supersedes: [],
      applied: true,
      outcome: 'recorded version 2, effective 2030-01-01T03:30:00.000Z',
      recorded: { version: 2, effectiveAt: '2030-01-01T03:30:00.000Z', chosenBy: 'operator' },
    });
    expect(change.preview).toMatchObject({
      from: { version: 1, schedule: '0 3 * * *', timezone: 'UTC' },
      to: { version: 2, schedule: '0 4 * * *', timezone: 'UTC' },
      at: '2030-01-01T03:30:00.000Z',
      atLocal: '2030-01-01T03:30:00+00:00',
      day: '2030-01-01',
      same: false,
      anomaly: {
        kind: 'twice',
        day: '2030-01-01',
        fires: ['2030-01-01T03:00:00.000Z', '2030-01-01T04:00:00.000Z'],
        oldCount: 1,
        newCount: 1,
      },
    });
    expect(fireWords(change.preview!)).toEqual([
      '2029-12-31T03:00:00.000Z v1 runs',
      '2029-12-31T04:00:00.000Z v2 -',
      '2030-01-01T03:00:00.000Z v1 runs',
      '2030-01-01T04:00:00.000Z v2 runs',
      '2030-01-02T03:00:00.000Z v1 -',
      '2030-01-02T04:00:00.000Z v2 runs',
    ]);
    const rows = await versions(ns);
    expect(rows.map((v) => [v.version, v.schedule, v.effective_at, v.chosen_by])).toEqual([
      [1, '0 3 * * *', new Date(0), 'first'],
      [2, '0 4 * * *', new Date('2030-01-01T03:30:00Z'), 'operator'],
    ]);
    const audit = (await audits(ns)).at(-1)!;
    expect(audit).toMatchObject({
      action: 'timing',
      job: 'settle',
      operator: 'ops',
      host: 'ops-1',
      reason: 'batch window moves',
      outcome: 'recorded version 2, effective 2030-01-01T03:30:00.000Z',
    });
    expect(JSON.parse(audit.details)).toEqual({
      change: 'change',
      version: 2,
      schedule: '0 4 * * *',
      timezone: 'UTC',
      effectiveAt: '2030-01-01T03:30:00.000Z',
      chosenBy: 'operator',
    });

    // The view says the same, as text and as JSON.
    const view = ok(await cli(after, 'definitions', 'settle'));
    expect(view).toMatch(
      /^settle: version 1 in force, "0 3 \* \* \*" \(UTC\); this schedules file has version 2$/m,
    );
    expect(view).toMatch(
      /^ {2}1 +0 3 \* \* \* +UTC +from the start +first +\S+ \S+ +ops@ops-1 +in-force$/m,
    );
    expect(view).toMatch(
      /^ {2}2 +0 4 \* \* \* +UTC +2030-01-01 03:30:00\.000 +operator +\S+ \S+ +ops@ops-1 +pending$/m,
    );
    expect(previewTable(view)).toEqual(previewTable(dry));
  });

  it('moves the pending version with --at (retime), which clears the warning', async () => {
    const auditsBefore = (await audits(ns)).length;
    const moved = ok(await cli(after, 'definitions', 'apply', '--at', '2030-01-01T00:00:00Z'));
    expect(moved).toContain(
      'settle: move version 2, "0 4 * * *" (UTC), from 2030-01-01 03:30:00.000 UTC to ' +
        '2030-01-01 00:00:00.000 UTC (chosen with --at)',
    );
    expect(previewTable(moved)).toEqual([
      'FIRE (UTC)               VERSION 1 (OLD)  VERSION 2 (NEW)',
      '2029-12-31 03:00:00.000  runs',
      '2029-12-31 04:00:00.000                   not run',
      '2030-01-01 00:00:00.000  ── switch ──     ── switch ──',
      '2030-01-01 03:00:00.000  not run',
      '2030-01-01 04:00:00.000                   runs',
      '2030-01-02 03:00:00.000  not run',
      '2030-01-02 04:00:00.000                   runs',
      "2030-01-01 (UTC), the switch's day, runs settle as often as one of the two timings " +
        'would: no day runs it twice or skips it',
    ]);
    expect(moved).toContain('  moved version 2 to 2030-01-01T00:00:00.000Z (audit ');
    // report is unchanged and not named: --at leaves it alone.
    expect(moved).toContain('report: unchanged');
    expect((await versions(ns)).map((v) => [v.version, v.effective_at, v.chosen_by])).toEqual([
      [1, new Date(0), 'first'],
      [2, new Date('2030-01-01T00:00:00Z'), 'operator'],
    ]);
    const written = (await audits(ns)).slice(auditsBefore);
    expect(written.map((a) => [a.action, a.job, a.outcome])).toEqual([
      ['retime', 'settle', 'moved version 2 to 2030-01-01T00:00:00.000Z'],
    ]);
    expect(JSON.parse(written[0]!.details)).toMatchObject({
      change: 'retime',
      previousAt: '2030-01-01T03:30:00.000Z',
      effectiveAt: '2030-01-01T00:00:00.000Z',
    });
    // Without --at, a pending version is shown, not written.
    const again = ok(await cli(after, 'definitions', 'apply'));
    expect(again).toContain(
      'settle: pending: "0 4 * * *" (UTC) is version 2, effective 2030-01-01 00:00:00.000 UTC (operator)',
    );
    expect(await audits(ns)).toHaveLength(auditsBefore + 1);
  });

  it('list and explain show the fleet’s fires, by the version in force at each instant, whichever file they read', async () => {
    // Versions now: 1, "0 3 * * *", from the start; 2, "0 4 * * *", from 2030-01-01 00:00 UTC.
    interface Listed {
      jobs: {
        name: string;
        nextFires: string[];
        timing: {
          inForce: number;
          file: number | null;
          switches: { version: number; at: string }[];
        };
      }[];
    }
    const fleetFires = [
      '2029-12-31T03:00:00.000Z',
      '2030-01-01T04:00:00.000Z',
      '2030-01-02T04:00:00.000Z',
      '2030-01-03T04:00:00.000Z',
    ];
    for (const [config, own] of [
      [before, 1],
      [after, 2],
    ] as const) {
      const listed = JSON.parse(
        ok(await cli(config, 'list', '--json', '--from', '2029-12-31', '--count', '4')),
      ) as Listed;
      const settle = listed.jobs.find((j) => j.name === 'settle')!;
      expect(settle.nextFires).toEqual(fleetFires);
      expect(settle.timing).toEqual({
        inForce: 1,
        file: own,
        switches: [
          {
            version: 2,
            at: '2030-01-01T00:00:00.000Z',
            schedule: '0 4 * * *',
            timezone: 'UTC',
          },
        ],
      });
    }
    // The compact view flags the switch to come; -o wide says it whole.
    const compact = ok(await cli(before, 'list', '--from', '2029-12-31'));
    expect(compact).toMatch(/settle .*v2 from /);
    const wide = ok(await cli(before, 'list', '-o', 'wide', '--from', '2029-12-31'));
    expect(wide).toContain('v1, v2 from 2030-01-01 00:00:00.000');

    // 03:00 on the switch's day is a fire of the old file, not of the fleet's.
    const explained = JSON.parse(
      ok(await cli(before, 'explain', 'settle', '2030-01-01T03:00:00Z', '--json')),
    ) as { notes: string[] };
    expect(explained.notes).toContain(
      '2030-01-01 03:00:00.000 is not a fire of timing version 2, "0 4 * * *" (UTC); the next ' +
        'fire after it is 2030-01-01 04:00:00.000 UTC',
    );
  });

  it('rolls back: the old file re-proposes version 1’s timing as version 3, before version 2 ever takes effect', async () => {
    const rolled = JSON.parse(
      ok(
        await cli(
          before,
          'definitions',
          'apply',
          'settle',
          '--at',
          '2029-06-01T00:00:00Z',
          '--json',
        ),
      ),
    ) as ApplyJson;
    expect(rolled.changes[0]).toMatchObject({
      kind: 'rollback',
      version: 3,
      rollbackOf: 1,
      supersedes: [2],
      effectiveAt: '2029-06-01T00:00:00.000Z',
      applied: true,
      preview: { from: { version: 1 }, to: { version: 3 }, same: true, anomaly: null },
    });
    expect((await versions(ns)).map((v) => [v.version, v.schedule])).toEqual([
      [1, '0 3 * * *'],
      [2, '0 4 * * *'],
      [3, '0 3 * * *'],
    ]);
    expect((await audits(ns)).at(-1)).toMatchObject({
      action: 'timing',
      outcome: 'recorded version 3, effective 2029-06-01T00:00:00.000Z',
    });
    const view = JSON.parse(ok(await cli(before, 'definitions', 'settle', '--json'))) as {
      jobs: { versions: { version: number; state: string }[]; file: { version: number } }[];
    };
    expect(view.jobs[0]!.versions.map((v) => [v.version, v.state])).toEqual([
      [1, 'in-force'],
      [2, 'superseded'],
      [3, 'pending'],
    ]);
    expect(view.jobs[0]!.file.version).toBe(3);
  });
});

describe('the default instant', () => {
  it('is the old timing’s first fire past the settle window: the day is not doubled', async () => {
    const ns = 'default-instant';
    ok(await cli(file(ns, '0 3 * * *'), 'definitions', 'apply', 'settle'));
    const after = file(ns, '0 4 * * *');
    const dry = JSON.parse(
      ok(await cli(after, 'definitions', 'apply', 'settle', '--dry-run', '--json')),
    ) as ApplyJson;
    // The candidates are 03:00 (the old timing's, never doubled: the new 04:00 follows alone)
    // and 04:00 (always doubled: 03:00 ran): the first 03:00 UTC at least 10 minutes on.
    const firstThree = (now: string) => {
      const notBefore = new Date(Date.parse(now) + 600_000);
      const day = new Date(notBefore);
      day.setUTCHours(3, 0, 0, 0);
      if (day < notBefore) day.setUTCDate(day.getUTCDate() + 1);
      return day.toISOString();
    };
    expect(dry.changes[0]).toMatchObject({
      kind: 'change',
      version: 2,
      chosenBy: 'settle',
      effectiveAt: firstThree(dry.now),
      applied: false,
      auditId: null,
      preview: { anomaly: null },
    });
    const e = dry.changes[0]!.effectiveAt!;
    const dayBefore = new Date(Date.parse(e) - 86_400_000).toISOString();
    expect(fireWords(dry.changes[0]!.preview!)).toEqual([
      `${dayBefore} v1 runs`,
      `${new Date(Date.parse(dayBefore) + 3_600_000).toISOString()} v2 -`,
      `${e} v1 -`,
      `${new Date(Date.parse(e) + 3_600_000).toISOString()} v2 runs`,
      `${new Date(Date.parse(e) + 86_400_000).toISOString()} v1 -`,
      `${new Date(Date.parse(e) + 90_000_000).toISOString()} v2 runs`,
    ]);
    expect(await versions(ns)).toHaveLength(1);

    const text = ok(await cli(after, 'definitions', 'apply', 'settle'));
    expect(text).not.toContain('warning:');
    expect(text).toContain(
      '(the default: the first fire at least 10m from now whose day the switch neither doubles nor skips)',
    );
    const [, second] = await versions(ns);
    expect(second).toMatchObject({ version: 2, chosen_by: 'settle' });
    expect(second!.effective_at.toISOString()).toBe(firstThree((await dbNow(db)).toISOString()));
  });
});

describe('a daily 03:00 → 02:00 change in Paris switched at 02:30', () => {
  it('skips that day, and the preview shows the job’s wall clock', async () => {
    const ns = 'paris';
    ok(await cli(file(ns, '0 3 * * *', 'Europe/Paris'), 'definitions', 'apply', 'settle'));
    const r = ok(
      await cli(
        file(ns, '0 2 * * *', 'Europe/Paris'),
        'definitions',
        'apply',
        'settle',
        '--at',
        '2030-01-01T02:30:00+01:00',
      ),
    );
    expect(r).toContain(
      '  switch of settle to version 2, "0 2 * * *" (Europe/Paris) at 2030-01-01 01:30:00.000 UTC ' +
        '(02:30+01 Europe/Paris), in ',
    );
    expect(previewTable(r)).toEqual([
      'FIRE (UTC)               LOCAL (Europe/Paris)  VERSION 1 (OLD)  VERSION 2 (NEW)',
      '2029-12-31 01:00:00.000  02:00+01                               not run',
      '2029-12-31 02:00:00.000  03:00+01              runs',
      '2030-01-01 01:00:00.000  02:00+01                               not run',
      '2030-01-01 01:30:00.000  02:30+01              ── switch ──     ── switch ──',
      '2030-01-01 02:00:00.000  03:00+01              not run',
      '2030-01-02 01:00:00.000  02:00+01                               runs',
      '2030-01-02 02:00:00.000  03:00+01              not run',
      'warning: the switch skips settle on 2030-01-01 (Europe/Paris): no fire that day, fewer ' +
        'than either timing (version 1 alone runs it once that day, version 2 once); choose ' +
        "another instant with --at (e.g. --at midnight: the day boundary in the job's zone)",
    ]);
    // The view warns of the same day until the instant moves.
    const view = JSON.parse(
      ok(await cli(file(ns, '0 2 * * *', 'Europe/Paris'), 'definitions', '--json')),
    ) as {
      jobs: { job: string; switches: ApplyJson['changes'][number]['preview'][] }[];
    };
    const settle = view.jobs.find((j) => j.job === 'settle')!;
    expect(settle.switches[0]).toMatchObject({
      at: '2030-01-01T01:30:00.000Z',
      atLocal: '2030-01-01T02:30:00+01:00',
      anomaly: { kind: 'skipped', day: '2030-01-01', fires: [], oldCount: 1, newCount: 1 },
    });
    // --at <date>: that day's start in Paris (23:00 UTC the day before).
    const moved = JSON.parse(
      ok(
        await cli(
          file(ns, '0 2 * * *', 'Europe/Paris'),
          'definitions',
          'apply',
          'settle',
          '--at',
          '2030-01-01',
          '--json',
        ),
      ),
    ) as ApplyJson;
    expect(moved.changes[0]).toMatchObject({
      kind: 'retime',
      effectiveAt: '2029-12-31T23:00:00.000Z',
      preview: { anomaly: null },
    });
  });
});

describe('the live runners', () => {
  it('are listed by the version their registry rows say, with who will hold', async () => {
    const ns = 'runners';
    const after = file(ns, '0 4 * * *');
    ok(await cli(file(ns, '0 3 * * *'), 'definitions', 'apply', 'settle'));
    ok(await cli(after, 'definitions', 'apply', 'settle', '--at', '2030-01-01T00:00:00Z'));
    const since = new Date().toISOString();
    for (const [host, tv] of [
      ['srv-01', 2],
      ['srv-02', 1],
      ['srv-03', undefined],
    ] as const) {
      await registerRunner(db.conn, {
        namespace: ns,
        host,
        pid: 1,
        version: '0.1.0',
        clockOffsetMs: 0,
        lockConnectionId: null,
        dbServer: null,
        detached: null,
        schedule: { settle: { fp: 'f', since, ...(tv ? { tv } : {}) } },
      });
    }
    const text = ok(await cli(after, 'definitions'));
    expect(text).toMatch(/^ {2}1 .* in-force +srv-02$/m);
    expect(text).toMatch(/^ {2}2 .* pending +srv-01$/m);
    expect(text).toContain(
      '  srv-02 has version 1: it holds settle from 2030-01-01 00:00:00.000 UTC unless it ' +
        'loads the new schedules file before\n',
    );
    expect(text).toContain(
      '  srv-03 does not say which version it has (not recorded yet, or an older baton)\n',
    );
    // The file's job without a schedule of its own is left out; report has no version here.
    expect(text).not.toContain('export');
    expect(text).toContain(
      'report: no timing version recorded; this schedules file\'s timing, "0 5 * * *" (UTC), is not recorded',
    );
    const doc = JSON.parse(ok(await cli(after, 'definitions', 'settle', '--json'))) as {
      namespace: string;
      now: string;
      jobs: {
        job: string;
        inForce: number;
        runners: unknown[];
        versions: { version: number; runners: string[]; effectiveAt: string | null }[];
      }[];
    };
    expect(doc.namespace).toBe(ns);
    expect(doc.jobs[0]!.inForce).toBe(1);
    expect(doc.jobs[0]!.runners).toEqual([
      { host: 'srv-01', version: 2, held: false, holdsFrom: null },
      { host: 'srv-02', version: 1, held: false, holdsFrom: '2030-01-01T00:00:00.000Z' },
      { host: 'srv-03', version: null, held: false, holdsFrom: null },
    ]);
    expect(doc.jobs[0]!.versions.map((v) => [v.version, v.effectiveAt, v.runners])).toEqual([
      [1, null, ['srv-02']],
      [2, '2030-01-01T00:00:00.000Z', ['srv-01']],
    ]);
  });
});

describe('a runner and the operator', () => {
  it('agree on the default instant: the runner records the one the dry run showed', async () => {
    const ns = 'runner-rule';
    const before = file(ns, '0 3 * * *');
    const after = file(ns, '0 4 * * *');
    const runner = new InProcessRunner('srv-01', {
      config: before,
      databaseUrl: db.url,
      host: 'srv-01',
    });
    try {
      await runner.start();
      await waitFor(
        'version 1 recorded by the runner',
        async () => (await versions(ns)).length === 1,
      );
      expect((await versions(ns))[0]).toMatchObject({ chosen_by: 'first', recorded_by: 'srv-01' });

      const dry = JSON.parse(
        ok(await cli(after, 'definitions', 'apply', 'settle', '--dry-run', '--json')),
      ) as ApplyJson;
      runner.runner.reload(loadConfig(after));
      await waitFor(
        'version 2 recorded by the runner',
        async () => (await versions(ns)).length === 2,
      );
      const [, second] = await versions(ns);
      expect(second).toMatchObject({ version: 2, chosen_by: 'settle', recorded_by: 'srv-01' });
      // The same rule: the instant the dry run showed, unless a candidate passed in between.
      const [row] = await db.query<{ recorded_at: Date }>(
        `SELECT recorded_at FROM baton_timings WHERE namespace = ? AND version = 2`,
        [ns],
      );
      const firstThreeAfter = (t: Date) => {
        const notBefore = new Date(t.getTime() + 600_000);
        const day = new Date(notBefore);
        day.setUTCHours(3, 0, 0, 0);
        if (day < notBefore) day.setUTCDate(day.getUTCDate() + 1);
        return day;
      };
      expect(second!.effective_at).toEqual(firstThreeAfter(row!.recorded_at));
      if (firstThreeAfter(new Date(dry.now)).getTime() === second!.effective_at.getTime()) {
        expect(dry.changes[0]!.effectiveAt).toBe(second!.effective_at.toISOString());
      }

      // The registry says so once the runner re-registers: it has version 2, nobody holds.
      const view = await waitFor('srv-01 listed with version 2', async () => {
        const doc = JSON.parse(ok(await cli(after, 'definitions', 'settle', '--json'))) as {
          jobs: { runners: { host: string; version: number | null; holdsFrom: string | null }[] }[];
        };
        const r = doc.jobs[0]!.runners.find((x) => x.host === 'srv-01');
        return r?.version === 2 ? doc : undefined;
      });
      expect(view.jobs[0]!.runners).toEqual([
        { host: 'srv-01', version: 2, held: false, holdsFrom: null },
      ]);
      // Its file matches the latest version: apply has nothing to do.
      expect(ok(await cli(after, 'definitions', 'apply', 'settle'))).toContain(
        'settle: pending: "0 4 * * *" (UTC) is version 2',
      );
    } finally {
      await runner.stop();
    }
  });
});

describe('refusals', () => {
  const ns = 'refusals';
  const before = file(ns, '0 3 * * *');
  const after = file(ns, '0 4 * * *');

  beforeAll(async () => {
    ok(await cli(before, 'definitions', 'apply'));
  });

  it('write nothing and exit 64, naming the place', async () => {
    const table = async () => [await versions(ns), await versions(ns, 'report'), await audits(ns)];
    const was = await table();
    const apply = (...args: string[]) => cli(after, 'definitions', 'apply', ...args);

    usage(
      await apply('setle'),
      /^baton: unknown job "setle" in \S+schedules\.yaml; did you mean "settle"\?\nnothing was written\n$/,
    );
    usage(
      await apply('export'),
      /^baton: export: no schedule of its own in \S+ \(it runs after its parents\): it has no timing to apply\nnothing was written\n$/,
    );
    usage(await apply('--all'), /^baton: unknown option --all\n/);
    usage(await apply('-x'), /^baton: unknown option -x\n/);
    usage(
      // What follows `--` is a job name too (the common options before it).
      await baton(
        ['definitions', 'apply', '--config', after, '--database-url', db.url, '--', '--all'],
        { env: { SUDO_USER: 'ops' } },
      ),
      /^baton: job "--all": job name may contain only letters, digits, '.', '_' and '-', and must start with a letter or digit \(it looks like an option: see --help\)\n$/,
    );
    usage(
      await apply('--at', 'tomorrow'),
      /^baton: --at "tomorrow": expected an ISO-8601 instant with Z or an offset/,
    );
    usage(
      await apply('--at', '2030-01-01T03:00:00'),
      /^baton: --at "2030-01-01T03:00:00": expected an ISO-8601 instant with Z or an offset/,
    );
    usage(
      await apply('--at', '2020-01-01T00:00:00Z'),
      /^baton: settle: --at "2020-01-01T00:00:00Z" is 2020-01-01T00:00:00.000Z, in the past by the database's clock \(now \S+\)\nnothing was written\n$/,
    );
    const soon = new Date((await dbNow(db)).getTime() + 20_000).toISOString();
    usage(
      await apply('--at', soon),
      /less than 60 s from now .*choose a later one\nnothing was written\n$/,
    );
    usage(
      await apply('--namespace', 'other'),
      /^baton: --namespace "other" is not the namespace of \S+ \("refusals"\): apply records that file's timings in its own namespace/,
    );
    // One job that cannot move refuses the job that could: nothing half-applied.
    usage(
      await apply('settle', 'report', '--at', '2030-01-01T00:00:00Z'),
      /^baton: report: version 1, this file's timing, is in force from the start: an instant in force does not move \(--at\); nothing to change\nnothing was written\n$/,
    );
    usage(
      await cli(after, 'definitions', 'settl'),
      /^baton: "settl" has no timing versions in namespace "refusals" nor a job of \S+; did you mean "settle"\?\n$/,
    );
    // With --json, the refusal is one JSON object on stderr.
    const asJson = await apply('setle', '--json');
    expect(asJson.code).toBe(64);
    expect(JSON.parse(asJson.stderr)).toEqual({
      error: {
        exitCode: 64,
        code: 'USAGE',
        message: expect.stringMatching(/^unknown job "setle" in /) as unknown,
      },
    });
    expect(await table()).toEqual(was);
  });

  it('too late to move: a version whose instant is within 60 s', async () => {
    // Recorded a minute and a half ahead (as a runner might, with a short settle window), then
    // let it come within the margin by moving it in the table: the move is refused.
    ok(await cli(after, 'definitions', 'apply', 'settle', '--at', '2030-01-01T00:00:00Z'));
    await db.query(
      `UPDATE baton_timings SET effective_at = NOW(3) + INTERVAL 30 SECOND
        WHERE namespace = ? AND job = 'settle' AND version = 2`,
      [ns],
    );
    usage(
      await cli(after, 'definitions', 'apply', 'settle', '--at', '2030-01-02T00:00:00Z'),
      /^baton: settle: version 2 takes effect at \S+, less than 60 s from now \(database time \S+\): too late to move it, the runners may be switching already\nnothing was written\n$/,
    );
  });

  it('a database without the table is 69, said plainly', async () => {
    const bare = await createTestDatabase('definitions_bare');
    try {
      for (const args of [['definitions'], ['definitions', 'apply', '--dry-run']]) {
        const r = await baton([...args, '--config', after, '--database-url', bare.url]);
        expect(r.code).toBe(69);
        expect(r.stderr).toMatch(
          /^baton: the database at mysql:\/\/\S+ has no baton_timings table yet: run `baton migrate` \(or start a runner, which migrates\) first\n$/,
        );
      }
    } finally {
      await bare.drop();
    }
  });
});
