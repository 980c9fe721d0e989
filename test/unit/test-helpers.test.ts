/**
 * The suite's own judges, judged: the fire assertions (helpers/fires.ts) on the skip reasons baton
 * really writes (src/coordination/fire-protocol.ts, src/store/pauses.ts), the journal of
 * ground-truth.ts on a real shell, and waitFor's handling of a failed assertion. A judge that
 * passes everything would make every guarantee test pass with it.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { createTestDatabase, type RunRow, type TestDatabase } from '../helpers/db.js';
import {
  expectCompleteFires,
  expectNoOverlapInHistory,
  expectOneWinnerPerFire,
  LOST_END_RESOLUTION_MS,
  skipKindOf,
} from '../helpers/fires.js';
import {
  expectHistoryMatchesJournal,
  expectNoOverlapInJournal,
  journal,
} from '../helpers/ground-truth.js';
import { sleep, waitFor } from '../helpers/wait.js';

const T = Date.parse('2026-12-01T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

let nextId = 1;
function row(over: Partial<RunRow>): RunRow {
  return {
    id: nextId++,
    job: 'j',
    scheduled_at: new Date(T),
    winner: null,
    triggered_by: 'schedule',
    status: 'skipped',
    reason: null,
    reason_kind: null,
    host: 'a',
    pid: 1,
    started_at: new Date(T + 5),
    finished_at: new Date(T + 5),
    exit_code: null,
    error: null,
    output_tail: null,
    ...over,
  };
}

function winner(at: number, host: string, start: number, end: number | null): RunRow {
  return row({
    scheduled_at: new Date(at),
    winner: 1,
    status: end == null ? 'running' : 'done',
    host,
    started_at: new Date(start),
    finished_at: end == null ? null : new Date(end),
    exit_code: end == null ? null : 0,
  });
}

describe('skipKindOf, on the sentences baton writes', () => {
  it.each([
    ['this fire is running on a (started 2026-12-01T10:00:00.004Z)', 'taken'],
    ['this fire already ran on a (done)', 'taken'],
    ["this fire is being claimed by a (it holds the job's lock)", 'claiming'],
    ['another run held the lock at this instant (it is free now)', 'claiming'],
    [
      'an earlier run is still running on a (fire 2026-12-01T09:59:59.000Z, started 2026-12-01T09:59:59.003Z)',
      'overlap',
    ],
    [
      'an earlier run is still running on b (this runner; fire 2026-12-01T09:59:59.000Z)',
      'overlap',
    ],
    ['a manual run is running on a (started 2026-12-01T09:59:58.000Z)', 'overlap'],
    [
      'waited in the queue until the next fire (2026-12-01T10:00:02.000Z) came first; an earlier run is still running on a (fire 2026-12-01T09:59:59.000Z, started 2026-12-01T09:59:59.003Z)',
      'overlap',
    ],
    [
      'waited in the queue until the runner is stopping; this fire is running on a (started 2026-12-01T10:00:00.004Z)',
      'taken',
    ],
    ['paused by ops-1 at 2026-12-01T09:00:00.000Z: maintenance window', 'paused'],
    [
      'all 2 worker slots are taken: 1: this fire is running on a (started x); 2: this fire is running on b (started y)',
      'taken',
    ],
    [
      'a later fire (2026-12-01T10:00:01.000Z) is already running on a; this runner is behind (check its clock)',
      'behind',
    ],
    [
      'waited in the queue until the runner is stopping; the lock is held by connection 7, which has no running row for this job',
      'ghost',
    ],
    [
      'pool db (2 slots) is full (2 of 2 taken): load-a on p-1 (run 12, started 2026-12-01T10:00:00.004Z), p-2 (taking a slot)',
      'pool',
    ],
    [
      'waited for a slot until the next fire (2026-12-01T10:00:02.000Z) came first; pool one (1 slot per host) is full on h-1 (1 of 1 taken): hog on h-1 (run 3, started x)',
      'pool',
    ],
    ['something new', 'other'],
  ])('%s → %s', (reason, kind) => {
    expect(skipKindOf(reason)).toBe(kind);
  });
});

describe('expectOneWinnerPerFire', () => {
  it('passes one winner per fire, and a lone missed row', () => {
    expectOneWinnerPerFire(
      [
        winner(T, 'a', T + 4, T + 30),
        row({ host: 'b', reason: 'this fire already ran on a (done)' }),
        row({ scheduled_at: new Date(T + 1_000), winner: 0, status: 'missed', host: 'b' }),
      ],
      'ok',
    );
  });

  it('fails two winners, two rows of one runner, and a fire with only skips', () => {
    expect(() =>
      expectOneWinnerPerFire([winner(T, 'a', T + 4, T + 30), winner(T, 'b', T + 5, T + 31)], 'x'),
    ).toThrow(/worker slots won/);
    expect(() =>
      expectOneWinnerPerFire([winner(T, 'a', T + 4, T + 30), row({ host: 'a' })], 'x'),
    ).toThrow(/one row per runner/);
    const orphan = [
      row({ host: 'a', reason: "this fire is being claimed by b (it holds the job's lock)" }),
      row({ host: 'b', reason: 'this fire already ran on a (done)' }),
    ];
    expect(() => expectOneWinnerPerFire(orphan, 'x')).toThrow(/has no winner/);
  });

  it('accepts an overlap only when the run it names was going', () => {
    const earlier = winner(T - 1_000, 'a', T - 996, T + 1_500);
    const skip = row({
      host: 'b',
      reason: `an earlier run is still running on a (fire ${iso(T - 1_000)}, started ${iso(T - 996)})`,
    });
    const own = row({
      host: 'a',
      reason: `an earlier run is still running on a (this runner; fire ${iso(T - 1_000)})`,
    });
    expectOneWinnerPerFire([earlier, skip, own], 'ok', { noWinner: ['overlap'] });
    expect(() => expectOneWinnerPerFire([earlier, skip, own], 'x')).toThrow(/has no winner/);
    // The run named had ended long before the fire: the reason is not true.
    const ended = winner(T - 1_000, 'a', T - 996, T - 900);
    expect(() =>
      expectOneWinnerPerFire([ended, skip, own], 'x', { noWinner: ['overlap'], slackMs: 500 }),
    ).toThrow(/still going/);
    // A run that is not in the history at all.
    expect(() => expectOneWinnerPerFire([skip], 'x', { noWinner: ['overlap'] })).toThrow(
      /is in the history/,
    );
  });

  it('accepts a lock on its way back only when the named holder ended a run about the instant', () => {
    const fire = [
      winner(T - 3_000, 'b', T - 2_997, T + 20),
      row({ host: 'a', reason: "this fire is being claimed by b (it holds the job's lock)" }),
      row({
        host: 'b',
        reason: `an earlier run is still running on b (this runner; fire ${iso(T - 3_000)})`,
      }),
    ];
    expectOneWinnerPerFire(fire, 'ok', { noWinner: ['overlap', 'lock-being-released'] });
    const otherHost = fire.map((r) => (r.winner === 1 ? { ...r, host: 'c' } : r));
    expect(() =>
      expectOneWinnerPerFire(otherHost, 'x', { noWinner: ['overlap', 'lock-being-released'] }),
    ).toThrow();
  });

  it('accepts a lock held by a runner still claiming an earlier fire it then ran', () => {
    // e2e/network-faults, 2026-12-06: the slow runner's claim of 10:59:59 took seconds over its
    // lossy link; the others met its lock at 10:00:00 and named it as claiming "this fire".
    const claimedLate = winner(T - 1_000, 'slow', T + 4_800, T + 5_100);
    const fire = [
      claimedLate,
      row({ host: 'a', reason: "this fire is being claimed by slow (it holds the job's lock)" }),
      row({
        host: 'slow',
        reason: `an earlier run is still running on slow (this runner; fire ${iso(T - 1_000)})`,
        started_at: new Date(T + 5_500),
      }),
    ];
    expectOneWinnerPerFire(fire, 'ok', { noWinner: ['overlap', 'lock-being-released'] });
    // A claim whose run had started and ended long before this fire was decided is no such
    // evidence.
    const before = winner(T - 1_000, 'slow', T - 3_000, T - 2_500);
    expect(() =>
      expectOneWinnerPerFire([before, fire[1]!], 'x', {
        noWinner: ['overlap', 'lock-being-released'],
      }),
    ).toThrow(/or its claimer was still claiming an earlier fire/);
  });

  it('accepts a runner that was behind only when the later run it names had started', () => {
    const reason = `a later fire (${iso(T + 1_000)}) is already running on a; this runner is behind (check its clock)`;
    const later = winner(T + 1_000, 'a', T + 1_002, T + 1_300);
    const skip = row({ host: 'b', reason, started_at: new Date(T + 1_100) });
    expectOneWinnerPerFire([later, skip], 'ok', { noWinner: ['behind'] });
    expect(() => expectOneWinnerPerFire([later, skip], 'x', { noWinner: ['overlap'] })).toThrow(
      /has no winner/,
    );
    // The run it names is not in the history, or started long after the skip was written.
    expect(() => expectOneWinnerPerFire([skip], 'x', { noWinner: ['behind'] })).toThrow(
      /is in the history/,
    );
    const afterwards = winner(T + 1_000, 'a', T + 4_000, T + 4_300);
    expect(() =>
      expectOneWinnerPerFire([afterwards, skip], 'x', { noWinner: ['behind'], slackMs: 500 }),
    ).toThrow(/had started/);
  });

  it('accepts a paused fire only when asked to', () => {
    const paused = [row({ reason: 'paused by ops at 2026-12-01T09:00:00.000Z' })];
    expectOneWinnerPerFire(paused, 'ok', { noWinner: ['paused'] });
    expect(() => expectOneWinnerPerFire(paused, 'x', { noWinner: ['overlap'] })).toThrow(
      /has no winner/,
    );
  });
});

describe('expectNoOverlapInHistory and expectCompleteFires', () => {
  it('fail a run that started before the last one finished, and a missing fire', () => {
    expectNoOverlapInHistory(
      [winner(T, 'a', T + 1, T + 900), winner(T + 1_000, 'b', T + 1_001, T + 1_500)],
      'ok',
    );
    expect(() =>
      expectNoOverlapInHistory(
        [winner(T, 'a', T + 1, T + 1_200), winner(T + 1_000, 'b', T + 1_001, T + 1_500)],
        'x',
      ),
    ).toThrow(/started before run/);
    // A lost run's end is its runner's estimate: within the history's resolution, not an overlap;
    // a done run's end, or a lost one's beyond it, is.
    const lost = (end: number) => ({ ...winner(T, 'a', T + 1, end), status: 'lost' as const });
    const next = winner(T + 1_000, 'b', T + 1_001, T + 1_500);
    expectNoOverlapInHistory([lost(T + 1_001 + 11), next], 'lost, 11 ms');
    expectNoOverlapInHistory([lost(T + 1_001 + LOST_END_RESOLUTION_MS), next], 'lost, at it');
    expect(() =>
      expectNoOverlapInHistory([lost(T + 1_001 + LOST_END_RESOLUTION_MS + 1), next], 'x'),
    ).toThrow(/started before run/);
    expect(() =>
      expectNoOverlapInHistory([winner(T, 'a', T + 1, T + 1_001 + 11), next], 'x'),
    ).toThrow(/started before run/);
    const rows = [
      winner(T, 'a', T + 1, T + 9),
      row({ host: 'b' }),
      winner(T + 2_000, 'a', T + 2_001, T + 2_009),
      row({ host: 'b', scheduled_at: new Date(T + 2_000) }),
    ];
    const window = {
      from: new Date(T),
      until: new Date(T + 2_000),
      everyMs: 1_000,
      hosts: ['a', 'b'],
    };
    expect(() => expectCompleteFires(rows, 'x', window)).toThrow(/the fires of the window/);
  });
});

describe('the journal', () => {
  const fire = {
    PATH: process.env.PATH!,
    BATON_JOB: 'j',
    BATON_HOST: 'a',
    BATON_SCHEDULED_AT: iso(T),
    BATON_RUN_ID: '1',
    BATON_ATTEMPT: '1',
  };
  function runJob(j: ReturnType<typeof journal>, env: Record<string, string>, work = '') {
    const [file, ...args] = j.command({ work });
    try {
      execFileSync(file!, args, { env: { ...fire, ...env } });
    } catch {
      // a job that fails is journaled all the same
    }
  }

  it('records start and end of every attempt, also of a failing one, and reads them back', () => {
    const j = journal(mkdtempSync(path.join(tmpdir(), 'baton-journal-')));
    runJob(j, {});
    runJob(j, { BATON_RUN_ID: '2', BATON_SCHEDULED_AT: iso(T + 1_000) }, 'exit 3');
    const attempts = j.attempts('j');
    expect(attempts.map((a) => [a.runId, a.fire, a.host, a.attempt, a.slot, a.overlapped])).toEqual(
      [
        [1, T, 'a', 1, 1, false],
        [2, T + 1_000, 'a', 1, 1, false],
      ],
    );
    for (const a of attempts) expect(a.end).toBeGreaterThanOrEqual(a.start);
    expectNoOverlapInJournal(attempts, 'ok');
    expectHistoryMatchesJournal(
      [
        winner(T, 'a', T, T + 10),
        { ...winner(T + 1_000, 'a', T, T + 10), id: 2, status: 'failed', exit_code: 3 },
      ].map((r, i) => ({ ...r, id: i + 1 })),
      attempts,
      'ok',
    );
    // A fire journaled under a second run: started twice.
    runJob(j, { BATON_RUN_ID: '3' });
    expect(() =>
      expectHistoryMatchesJournal(
        [1, 2, 3].map((id) => ({ ...winner(id === 2 ? T + 1_000 : T, 'a', T, T + 10), id })),
        j.attempts('j'),
        'x',
      ),
    ).toThrow(/started by runs 1 and 3/);
  });

  it('sees a run that starts while another one of the job lives', async () => {
    const j = journal(mkdtempSync(path.join(tmpdir(), 'baton-journal-')));
    const [file, ...longArgs] = j.command({ work: 'sleep 1' });
    const first = new Promise((resolve) =>
      execFile(file!, longArgs, { env: { ...fire, BATON_RUN_ID: '1' } }, resolve),
    );
    await waitFor('the first run to start', () => j.attempts('j').length === 1, { intervalMs: 10 });
    runJob(j, { BATON_RUN_ID: '2', BATON_SCHEDULED_AT: iso(T + 1_000) });
    await first;
    const attempts = j.attempts('j');
    expect(attempts.map((a) => [a.runId, a.overlapped])).toEqual([
      [1, false],
      [2, true],
    ]);
    expect(() => expectNoOverlapInJournal(attempts, 'x')).toThrow(/while another run/);
  });
});

describe('waitFor', () => {
  it('polls while the check says not yet, or throws an ordinary error', async () => {
    let n = 0;
    const value = await waitFor(
      'n to reach 3',
      () => {
        n++;
        if (n === 1) throw new Error('not there yet');
        return n >= 3 ? n : null;
      },
      { intervalMs: 1 },
    );
    expect(value).toBe(3);
  });

  it('fails at once on an assertion that fails inside the check', async () => {
    let polls = 0;
    const started = Date.now();
    await expect(
      waitFor(
        'never',
        () => {
          polls++;
          expect(polls, 'the assertion').toBe(0);
          return true;
        },
        { timeoutMs: 5_000, intervalMs: 1 },
      ),
    ).rejects.toThrow(/the assertion/);
    expect(polls).toBe(1);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('reports the last error when it times out', async () => {
    await expect(
      waitFor(
        'the impossible',
        async () => {
          await sleep(1);
          throw new Error('still broken');
        },
        { timeoutMs: 30, intervalMs: 5 },
      ),
    ).rejects.toThrow(/timed out after 30 ms waiting for the impossible: Error: still broken/);
  });
});

describe('a migrated test database', () => {
  // A copy that drifted from a migration (a lost index, a default, a column's type) would let
  // every test that copies it pass against a schema baton never makes.
  it('has the schema and ledger a migration of its own gives', async () => {
    const copy = await createTestDatabase('tmpl_copy', { migrated: true });
    const fresh = await createTestDatabase('tmpl_fresh');
    try {
      await migrate(fresh.conn as never, fresh.name);
      const schema = async (db: TestDatabase) => {
        const tables = await db.query<{ name: string }>(
          'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = ? ORDER BY 1',
          [db.name],
        );
        const out: Record<string, string> = {};
        for (const { name } of tables) {
          const [row] = await db.query<Record<string, string>>('SHOW CREATE TABLE ??', [name]);
          out[name] = row!['Create Table']!.replace(/ AUTO_INCREMENT=\d+/, '');
        }
        return out;
      };
      const copied = await schema(copy);
      expect(Object.keys(copied)).toContain('baton_runs');
      expect(copied).toEqual(await schema(fresh));
      const ledger = (db: TestDatabase) =>
        db.query('SELECT version, name, checksum FROM baton_migrations ORDER BY version');
      expect(await ledger(copy)).toEqual(await ledger(fresh));
      expect(await ledger(copy)).toHaveLength(loadMigrations().length);
    } finally {
      await Promise.all([copy.drop(), fresh.drop()]);
    }
  });
});
