/**
 * `baton run --fire T`: a past fire run again with its own instant, as a new generation of the
 * fire (docs/history.md, "Re-runs"); and manual parameters (`--env K=V`, `-- args`, ctx.params).
 * Real CLI processes on a real database; the jobs write what they were given to files, the ground
 * truth of what ran.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';
import { writeJournaledSchedule } from '../helpers/ground-truth.js';
import { foregroundRuns } from '../helpers/foreground-runs.js';
import { createTestDatabase, plantRun, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';
import { jobLockName } from '../../src/lock-names.js';

let db: TestDatabase;
let config: string;
let dir: string;

/** Yesterday's 03:00 UTC: a past fire of every `0 3 * * *` job below. */
const FIRE = new Date(
  Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000 + 3 * 3_600_000,
);
const fireIso = FIRE.toISOString();

beforeAll(async () => {
  db = await createTestDatabase('rerun', { migrated: true });
  config = writeSchedule(
    `
namespace: ops
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ["sh", "-c", "echo \\"$BATON_SCHEDULED_AT $BATON_TRIGGER\\" >> settle.txt; [ -f ok ] || exit 3"]
  slow:
    schedule: "0 3 * * *"
    command: ["sh", "-c", "echo \\"$BATON_SCHEDULED_AT\\" >> slow.txt; sleep 2"]
`,
  );
  dir = path.dirname(config);
});
afterAll(async () => {
  await db.drop();
});

const { run, lines, rowsOf } = foregroundRuns(() => ({ config, dir, db }));

describe('baton run --fire', () => {
  it('re-runs a failed fire once with its original instant, then refuses it (75) unless --again', async () => {
    await plantRun(db, {
      namespace: 'ops',
      job: 'settle',
      scheduledAt: FIRE,
      status: 'failed',
      exitCode: 3,
      host: 'srv-01',
    });
    writeFileSync(path.join(dir, 'ok'), '');

    const first = await run('settle', ['--fire', fireIso, '--reason', 'bank file was late']);
    expect(first.stderr).toContain('settle done');
    expect(first.code).toBe(0);
    // Ground truth: the job ran once, with the fire's own instant, told it is a re-run.
    expect(lines('settle.txt')).toEqual([`${fireIso} rerun`]);
    expect(await rowsOf('settle')).toMatchObject([
      { rerun: 0, winner: 1, status: 'failed', host: 'srv-01' },
      { rerun: 1, winner: 1, status: 'done', triggered_by: 'rerun', host: 'ops-laptop' },
    ]);

    const refused = await run('settle', ['--fire', fireIso]);
    expect(refused.code).toBe(75);
    expect(refused.stderr).toMatch(
      /already ran: done on ops-laptop, finished .* \(run \d+, generation 1\)/,
    );
    expect(refused.stderr).toContain('--again');
    expect(lines('settle.txt')).toHaveLength(1);

    const again = await run('settle', ['--fire', fireIso, '--again']);
    expect(again.code).toBe(0);
    expect(lines('settle.txt')).toEqual([`${fireIso} rerun`, `${fireIso} rerun`]);
    expect((await rowsOf('settle')).map((r) => r.rerun)).toEqual([0, 1, 2]);

    // Every generation is in explain, and the audit says who and why.
    const explained = await baton([
      'explain',
      'settle',
      fireIso,
      '--config',
      config,
      '--database-url',
      db.url,
    ]);
    expect(explained.stdout).toContain('GEN');
    expect(explained.stdout).toMatch(/\[generation 1\].*\[generation 2\]/s);
    const audit = await db.query<{ action: string; reason: string | null; outcome: string }>(
      "SELECT action, reason, outcome FROM baton_audit WHERE job = 'settle' ORDER BY id",
    );
    expect(audit).toMatchObject([
      { action: 'rerun', reason: 'bank file was late', outcome: 'done' },
      { action: 'rerun', outcome: expect.stringMatching(/^refused: already ran/) },
      { action: 'rerun', outcome: 'done' },
    ]);
  });

  it('refuses an instant that is not a fire of the schedule (64), naming the nearest fires', async () => {
    const off = new Date(FIRE.getTime() + 60_000).toISOString();
    const result = await run('settle', ['--fire', off]);
    expect(result.code).toBe(64);
    expect(result.stderr).toContain(`is not a fire of settle`);
    expect(result.stderr).toContain(fireIso);
    const future = await run('settle', [
      '--fire',
      new Date(FIRE.getTime() + 2 * 86_400_000).toISOString(),
    ]);
    expect(future.code).toBe(64);
    expect(future.stderr).toContain('has not come yet');
  });

  it('two operators re-running a fire that never ran at once: one runs it as generation 0, the other is told who holds it (75)', async () => {
    const [a, b] = await Promise.all([
      run('slow', ['--fire', fireIso], 'op-anna'),
      run('slow', ['--fire', fireIso], 'op-bert'),
    ]);
    const codes = [a.code, b.code].sort();
    expect(codes).toEqual([0, 75]);
    const [winner, loser] = a.code === 0 ? [a, b] : [b, a];
    const winnerHost = winner === a ? 'op-anna' : 'op-bert';
    expect(loser.stderr).toContain(`not run: this fire is being run on ${winnerHost}`);
    expect(lines('slow.txt')).toEqual([fireIso]);
    const winners = (await rowsOf('slow')).filter((r) => r.winner === 1);
    expect(winners).toMatchObject([{ host: winnerHost, status: 'done', rerun: 0 }]);
  });
});

/**
 * Two operators run the same past fire again with its chain at once. Each command planned its
 * children before its parent's run; the verdict's transaction decides the child's generation
 * (store/dependent-fires.ts `dependentsWithVerdict`), so each parent run gets a child run of its
 * own, judged after it — never one row merged for both (report once, the other command told
 * `report waiting`).
 */
describe('two `--again --with-dependents` of one fire at once', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('rerun_chains');
  });
  afterAll(async () => {
    await db.drop();
  });

  it('each settle run gets its own report run, after it', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: reruns
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ${j.yaml({ work: 'sleep 1' })}
  report:
    after: {jobs: settle}
    command: ${j.yaml({ work: 'true' })}
`,
    );
    const T = '2026-11-15T03:00Z';
    const args = ['--config', config, '--database-url', db.url];
    expect((await baton(['run', 'settle', '--fire', T, '--with-dependents', ...args])).code).toBe(
      0,
    );
    const again = ['run', 'settle', '--fire', T, '--again', '--with-dependents', '--wait', '20'];
    // Both commands plan the same next generation while this test holds settle's lock (a run of
    // it elsewhere), and both wait for it: the second to take the lock must not meet the first's
    // row (it claims the generation after it), whatever the order the processes started in.
    const lock = jobLockName(db.name, 'reruns', 'settle');
    const [held] = await db.query<{ got: number }>('SELECT GET_LOCK(?, 0) AS got', [lock]);
    expect(Number(held!.got)).toBe(1);
    const pending = [baton([...again, ...args]), baton([...again, ...args])];
    await waitFor('both re-runs waiting for the lock of settle', async () => {
      const [row] = await db.query<{ n: number }>(
        `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST
          WHERE STATE = 'User lock' AND ID <> CONNECTION_ID() AND LOCATE(?, INFO) > 0`,
        [lock],
      );
      return Number(row!.n) === 2;
    });
    await db.query('SELECT RELEASE_LOCK(?)', [lock]);
    const ops = await Promise.all(pending);
    for (const op of ops) {
      expect(op.code, op.stderr).toBe(0);
      expect(op.stderr).toMatch(/^baton: report done \(run \d+, generation [12]\)$/m);
    }
    // The journal: settle ran three times, report three times, each report after a settle that
    // had ended, and no settle without its own report after it.
    const generations = await db.query<{ rerun: number }>(
      "SELECT rerun FROM baton_runs WHERE job = 'settle' AND winner = 1 ORDER BY rerun",
    );
    expect(generations.map((g) => g.rerun)).toEqual([0, 1, 2]);
    const settles = journal.attempts('settle').sort((a, b) => a.start - b.start);
    const reports = journal.attempts('report').sort((a, b) => a.start - b.start);
    expect(settles).toHaveLength(3);
    expect(reports).toHaveLength(3);
    // Each chain row names its own settle run, and its report run started after that one ended.
    const chain = await db.query<{ run_id: number; parent_runs: string }>(
      "SELECT run_id, parent_runs FROM baton_dependent_fires WHERE job = 'report' ORDER BY rerun",
    );
    const parents = chain.map((c) => (JSON.parse(c.parent_runs) as { settle: number }).settle);
    expect([...parents].sort()).toEqual(settles.map((s) => s.runId).sort());
    chain.forEach((c, i) => {
      const parent = settles.find((s) => s.runId === parents[i])!;
      const child = reports.find((r) => r.runId === Number(c.run_id));
      expect(child?.start, `report run ${c.run_id}`).toBeGreaterThanOrEqual(parent.end!);
    });
  });
});
