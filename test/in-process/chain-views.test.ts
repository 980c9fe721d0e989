/**
 * The operators' views of a chain (issue 37, `after:`), on rows planted in a database of the
 * file's own, as the runners write them: a parent's winner row, a child's run (`triggered_by =
 * 'after'`) or its `upstream` skip, and the child's row of `baton_dependent_fires`. The commands
 * run in the test process (helpers/cli-in-process.ts); no runner is needed.
 *
 * - `baton history`: a child's run names the parent runs that let it start (`after settle#N`,
 *   `upstream: {settle: N}` in --json), its `upstream` skip the one that stopped it; other rows
 *   say `upstream: null`. `baton show` likewise.
 * - `baton explain <child> [T]` follows the edge, for each state of the chain row: waiting for a
 *   parent that runs, waiting for a parent with no run of the instant yet (the latest instant
 *   without T), started by a parent's run (→ the child's run), skipped as `upstream`; `--json`
 *   says the same in `chain`.
 * - `baton prune` deletes the judged chain rows older than the runs' bound (never a `waiting`
 *   one, nor the row of a child's latest success) and counts them.
 * - The dashboard's data: the child's upstream skip is a fire of its own outcome, `upstream`, and
 *   the job page lists it among the runs.
 * - The outbox takes an `upstream` event as store/dependent-fires.ts enqueues it, and the
 *   throttle counts it as a failure.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { buildOverview } from '../../src/http/dashboard/overview.js';
import { jobPage } from '../../src/http/dashboard/run-pages.js';
import {
  decide,
  enqueueNotices,
  lastToldFailure,
  noticeId,
  upstreamNotice,
} from '../../src/store/notifications.js';
import { writeSchedule } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { createTestDatabase, dbNow, plantRun, type TestDatabase } from '../helpers/db.js';
import { inspectCli, json } from '../helpers/inspect.js';

const NS = 'chain';
const HOUR = 3_600_000;
const SECOND = 1_000;

let db: TestDatabase;
let config: string;
/** The instants: started, skipped, waiting on a running parent, waiting on no run (the latest). */
let t1: Date, t2: Date, t3: Date, t4: Date;
const ids = { settle1: 0, report1: 0, settle2: 0, skip2: 0, settle3: 0 };

interface Chained {
  id: number;
  job: string;
  status: string;
  reasonKind: string | null;
  upstream: Record<string, number> | null;
}

interface ChainJson {
  verdict: string;
  attempts: Chained[];
  missing: string[];
  chain: {
    after: { jobs: string[]; on: string; withinMs: number } | null;
    state: string;
    verdict: string;
    row: { status: string; runId: number | null; parentRuns: Record<string, number> | null } | null;
    parents: { job: string; state: string; run: { id: number } | null }[];
  } | null;
}

/** A row of baton_dependent_fires, as store/dependent-fires.ts writes it. */
async function plantChainRow(r: {
  namespace?: string;
  job?: string;
  scheduledAt: Date;
  rerun?: number;
  status: 'waiting' | 'started' | 'skipped';
  checkAt?: Date;
  deadline?: Date;
  parentRuns?: Record<string, number> | null;
  runId?: number | null;
  reason?: string | null;
}): Promise<void> {
  await db.query(
    `INSERT INTO baton_dependent_fires (namespace, job, scheduled_at, rerun, status, check_at,
       deadline, parent_runs, run_id, reason, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      r.namespace ?? NS,
      r.job ?? 'report',
      r.scheduledAt,
      r.rerun ?? 0,
      r.status,
      r.checkAt ?? r.scheduledAt,
      r.deadline ?? new Date(r.scheduledAt.getTime() + 2 * HOUR),
      r.parentRuns == null ? null : JSON.stringify(r.parentRuns),
      r.runId ?? null,
      r.reason ?? null,
      r.scheduledAt,
      r.checkAt ?? r.scheduledAt,
    ],
  );
}

/**
 * The schedules file: `settle` hourly, `report` after it. A child without `schedule:` is what
 * issue 37's validation allows; a tree where `schedule:` is still required gets a yearly one,
 * which a child's views do not use (its instants are its parents').
 */
function chainSchedule(): string {
  const yaml = (schedule: string) => `namespace: ${NS}
jobs:
  settle:
    schedule: "0 * * * *"
    command: ["true"]
  report:
${schedule}    after: {jobs: [settle], on: success, within: 2h}
    command: ["true"]
`;
  const bare = writeSchedule(yaml(''));
  try {
    loadConfig(bare, { connectionVariables: 'ignore' });
    return bare;
  } catch {
    return writeSchedule(yaml('    schedule: "0 0 1 1 *"\n'));
  }
}

const at = (t: Date, ms: number) => new Date(t.getTime() + ms);
const cli = (...args: string[]) => inspectCli(db, config, ...args);

beforeAll(async () => {
  db = await createTestDatabase('chain_views', { migrated: true });
  config = chainSchedule();
  const now = await dbNow(db);
  t4 = new Date(Math.floor(now.getTime() / HOUR) * HOUR);
  [t1, t2, t3] = [3, 2, 1].map((h) => new Date(t4.getTime() - h * HOUR)) as [Date, Date, Date];
  const later = at(now, 10 * 60 * SECOND);

  // t1: settle done → report started and done.
  ids.settle1 = await plantRun(db, {
    namespace: NS,
    job: 'settle',
    scheduledAt: t1,
    host: 'srv-01',
    startedAt: at(t1, 10),
    finishedAt: at(t1, 4_200),
    exitCode: 0,
  });
  ids.report1 = await plantRun(db, {
    namespace: NS,
    job: 'report',
    scheduledAt: t1,
    trigger: 'after',
    host: 'srv-02',
    startedAt: at(t1, 4_400),
    finishedAt: at(t1, 5_600),
    exitCode: 0,
  });
  await plantChainRow({
    scheduledAt: t1,
    status: 'started',
    checkAt: at(t1, 4_300),
    parentRuns: { settle: ids.settle1 },
    runId: ids.report1,
  });

  // t2: settle failed → report skipped as upstream.
  ids.settle2 = await plantRun(db, {
    namespace: NS,
    job: 'settle',
    scheduledAt: t2,
    status: 'failed',
    host: 'srv-01',
    startedAt: at(t2, 10),
    finishedAt: at(t2, 2_000),
    exitCode: 3,
    error: 'exited with code 3',
  });
  const reason = `settle failed (run ${ids.settle2})`;
  ids.skip2 = await plantRun(db, {
    namespace: NS,
    job: 'report',
    scheduledAt: t2,
    trigger: 'after',
    status: 'skipped',
    reason,
    reasonKind: 'upstream',
    host: 'srv-02',
    startedAt: at(t2, 2_100),
  });
  await plantChainRow({
    scheduledAt: t2,
    status: 'skipped',
    checkAt: at(t2, 2_100),
    parentRuns: { settle: ids.settle2 },
    runId: ids.skip2,
    reason,
  });

  // t3: settle still running → report waiting for it.
  ids.settle3 = await plantRun(db, {
    namespace: NS,
    job: 'settle',
    scheduledAt: t3,
    status: 'running',
    host: 'srv-01',
    startedAt: at(t3, 10),
  });
  await plantChainRow({ scheduledAt: t3, status: 'waiting', checkAt: later });

  // t4: no run of settle yet → report waiting for one.
  await plantChainRow({ scheduledAt: t4, status: 'waiting', checkAt: later });
});

afterAll(async () => {
  await db?.drop();
});

describe('baton history and show: the parent runs behind a child', () => {
  it('--json names them on the child’s run and its upstream skip, null elsewhere', async () => {
    const rows = json<Chained[]>(await cli('history', 'report', 'settle', '--json'));
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(ids.report1)).toMatchObject({
      status: 'done',
      upstream: { settle: ids.settle1 },
    });
    expect(byId.get(ids.skip2)).toMatchObject({
      status: 'skipped',
      reasonKind: 'upstream',
      upstream: { settle: ids.settle2 },
    });
    for (const id of [ids.settle1, ids.settle2, ids.settle3]) {
      expect(byId.get(id)).toMatchObject({ job: 'settle', upstream: null });
    }
  });

  it('the fire view says `after settle#N` on a run and `stopped by settle#N` on an upstream skip', async () => {
    const r = await cli('history', 'report');
    expect(r.stderr).toBe('');
    const lines = r.stdout.split('\n');
    expect(lines.find((l) => /report +done/.test(l))).toContain(`after settle#${ids.settle1}`);
    expect(lines.find((l) => /report +skipped/.test(l))).toMatch(
      new RegExp(`\\(upstream\\) +stopped by settle#${ids.settle2}`),
    );
  });

  it('the wide view puts them beside the trigger, and the skip keeps its reason', async () => {
    const r = await cli('history', 'report', '--attempts');
    expect(r.stderr).toBe('');
    const row = (id: number) => r.stdout.split('\n').find((l) => l.startsWith(`${id} `));
    expect(row(ids.report1)).toContain(`after settle#${ids.settle1}`);
    expect(row(ids.skip2)).toContain(`after settle#${ids.settle2}`);
    expect(row(ids.skip2)).toContain(`settle failed (run ${ids.settle2})`);
  });

  it('baton show names them too', async () => {
    const text = await cli('show', String(ids.report1));
    expect(text.stdout).toMatch(
      new RegExp(`upstream: +settle#${ids.settle1} \\(the parent run that let it start\\)`),
    );
    const skip = await cli('show', String(ids.skip2), '--json');
    expect(json<Chained>(skip)).toMatchObject({ upstream: { settle: ids.settle2 } });
    const parent = await cli('show', String(ids.settle1), '--json');
    expect(json<Chained>(parent).upstream).toBeNull();
  });
});

describe('baton explain <child>: the chain', () => {
  it('started: by the parent run, and how the child’s run went', async () => {
    const r = await cli('explain', 'report', t1.toISOString());
    expect(r.stderr).toBe('');
    const [verdict] = r.stdout.split('\n');
    expect(verdict).toBe(
      `started by settle#${ids.settle1} (done) → run ${ids.report1}: ran on srv-02 (done in 1.2s)`,
    );
    expect(r.stdout).toContain('after:      settle (on success, within 2h)');
    expect(r.stdout).toMatch(/parents at this instant \(1\):\n.*\nsettle +done +\d+ +srv-01/);
    expect(r.stdout).not.toContain('left no attempt');

    const doc = json<ChainJson>(await cli('explain', 'report', t1.toISOString(), '--json'));
    expect(doc.verdict).toBe(verdict);
    expect(doc.missing).toEqual([]);
    expect(doc.attempts).toEqual([
      expect.objectContaining({ id: ids.report1, upstream: { settle: ids.settle1 } }),
    ]);
    expect(doc.chain).toMatchObject({
      after: { jobs: ['settle'], on: 'success', withinMs: 2 * HOUR },
      state: 'started',
      verdict,
      row: { status: 'started', runId: ids.report1, parentRuns: { settle: ids.settle1 } },
      parents: [{ job: 'settle', state: 'done', run: { id: ids.settle1 } }],
    });
  });

  it('skipped: upstream, with the reason', async () => {
    const r = await cli('explain', 'report', t2.toISOString());
    expect(r.stdout.split('\n')[0]).toBe(`skipped (upstream): settle failed (run ${ids.settle2})`);
    expect(r.stdout).toMatch(new RegExp(`settle +failed +${ids.settle2} +srv-01`));
    const doc = json<ChainJson>(await cli('explain', 'report', t2.toISOString(), '--json'));
    expect(doc.chain).toMatchObject({ state: 'skipped', row: { runId: ids.skip2 } });
  });

  it('waiting: for a parent that runs, until the deadline', async () => {
    const r = await cli('explain', 'report', t3.toISOString());
    const deadline = at(t3, 2 * HOUR)
      .toISOString()
      .replace('T', ' ')
      .replace('Z', '');
    const started = at(t3, 10).toISOString().replace('T', ' ').replace('Z', '');
    expect(r.stdout.split('\n')[0]).toMatch(
      new RegExp(
        `^waiting for settle: running on srv-01 since ${started}, for .+ \\(run ${ids.settle3}\\) — ` +
          `judged again at .+; skipped as upstream at ${deadline} if it has not ended by then$`,
      ),
    );
    const doc = json<ChainJson>(await cli('explain', 'report', t3.toISOString(), '--json'));
    expect(doc.chain).toMatchObject({
      state: 'waiting',
      parents: [{ job: 'settle', state: 'running', run: { id: ids.settle3 } }],
    });
  });

  it('waiting: for a parent with no run of the instant yet; without T, the latest instant', async () => {
    for (const args of [['report', t4.toISOString()], ['report']]) {
      const r = await cli('explain', ...args);
      expect(r.stderr).toBe('');
      expect(r.stdout.split('\n')[0]).toMatch(
        /^waiting for settle: no run of this instant yet — judged again at .+; skipped as upstream at .+ if it has not run by then$/,
      );
      expect(r.stdout).toContain(
        `fire:       ${t4.toISOString().replace('T', ' ').replace('Z', '')} UTC`,
      );
      // Nobody has the child in a live schedule here: nobody judges the row.
      expect(r.stdout).toContain('no live runner has report in its schedule');
    }
  });
});

describe('baton prune: the chain rows go with the runs', () => {
  it('deletes judged rows older than the bound and waiting ones past their deadline too, keeps the latest success’s', async () => {
    const ns = 'chain-prune';
    const now = await dbNow(db);
    const ago = (days: number) =>
      new Date(Math.floor(now.getTime() / HOUR) * HOUR - days * 86_400_000);
    const plant = (job: string, days: number, status: 'waiting' | 'started' | 'skipped') =>
      plantChainRow({ namespace: ns, job, scheduledAt: ago(days), status });
    // report's latest success is a day old; digest's only one is 40 days old.
    await plantRun(db, { namespace: ns, job: 'report', scheduledAt: ago(1), trigger: 'after' });
    await plantRun(db, { namespace: ns, job: 'digest', scheduledAt: ago(40), trigger: 'after' });
    await plant('report', 40, 'started');
    await plant('report', 41, 'skipped');
    // Waiting, its deadline 2 hours after it (42 days ago): never judged (a removed child).
    await plant('report', 42, 'waiting');
    // Waiting with a deadline within the bound (`within: 45d`): still judged some day, kept.
    await plantChainRow({
      namespace: ns,
      job: 'report',
      scheduledAt: ago(43),
      status: 'waiting',
      deadline: ago(-2),
    });
    await plant('report', 1, 'started');
    await plant('digest', 40, 'started');
    const chainRows = async () =>
      (
        await db.query<{ job: string; scheduled_at: Date }>(
          'SELECT job, scheduled_at FROM baton_dependent_fires WHERE namespace = ? ORDER BY job, scheduled_at',
          [ns],
        )
      ).map(
        (r) => `${r.job} ${Math.round((now.getTime() - r.scheduled_at.getTime()) / 86_400_000)}d`,
      );
    const prune = (...extra: string[]) =>
      baton(
        [
          'prune',
          '--older-than',
          '30d',
          '--namespace',
          ns,
          '--no-catch-up-check',
          '--database-url',
          db.url,
          ...extra,
        ],
        {},
      );

    const dry = await prune('--dry-run', '--json');
    expect(json<{ dependentFires: number }>(dry).dependentFires).toBe(3);
    expect(await chainRows()).toHaveLength(6);

    const done = await prune();
    expect(done.stderr).toBe('');
    expect(done.stdout).toContain('3 chain rows');
    expect(await chainRows()).toEqual(['digest 40d', 'report 43d', 'report 1d']);
  });
});

describe('the dashboard: an upstream skip is a fire of its own', () => {
  it('on the timeline (the last outcome) and on the job page', async () => {
    const source = {
      pool: db.conn,
      namespace: NS,
      config: loadConfig(config, { connectionVariables: 'ignore' }),
      host: 'srv-01',
      now: await dbNow(db),
      nextFire: () => null,
      database: db.name,
    };
    const report = (await buildOverview(source)).jobs.find((j) => j.name === 'report')!;
    expect(report.fires.map((f) => [f.scheduledAt, f.outcome])).toEqual([
      [t1.toISOString(), 'done'],
      [t2.toISOString(), 'upstream'],
    ]);
    expect(report.lastOutcome).toMatchObject({
      outcome: 'upstream',
      reason: `settle failed (run ${ids.settle2})`,
    });
    const page = await jobPage(source, 'report');
    expect(page!.runs.map((r) => [r.id, r.status, r.reasonKind])).toEqual([
      [ids.skip2, 'skipped', 'upstream'],
      [ids.report1, 'done', null],
    ]);
  });
});

describe('the outbox: an upstream event', () => {
  it('is enqueued as the chain enqueues it, and the throttle counts it as a failure', async () => {
    const scope = { namespace: NS, subject: 'report', fire: t2 };
    const details = {
      parent: 'settle',
      parentRunId: ids.settle2,
      parentStatus: 'failed',
      reason: `settle failed (run ${ids.settle2})`,
    };
    expect(
      await enqueueNotices(db.conn, [upstreamNotice(scope, ['ops'], ids.skip2, details)]),
    ).toBe(1);
    const [row] = await db.query<{ event: string; run_id: number; details: string }>(
      'SELECT event, run_id, details FROM baton_notifications WHERE namespace = ?',
      [NS],
    );
    expect(row).toMatchObject({ event: 'upstream', run_id: ids.skip2 });
    expect(JSON.parse(row!.details)).toEqual(details);
    const id = await noticeId(db.conn, { ...scope, event: 'upstream', target: 'ops' });
    await decide(db.conn, id!, false);
    expect(await lastToldFailure(db.conn, NS, 'report', 'ops')).toBeInstanceOf(Date);
  });
});
