/**
 * Dependencies (`after:`, docs/dependencies.md), proven with three runners in the test process
 * (their jobs real processes) on a real server, and judged by the jobs' own journal:
 *
 * - a child runs once per instant its parent succeeded, with the parent's instant, after the
 *   parent's run ended; and is skipped once, as `upstream`, naming the parent, per instant it
 *   failed — nothing twice, whatever the number of runners that saw the parent finish;
 * - fan-in: a child after two parents runs only at instants both succeeded.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { baton } from '../helpers/cli-in-process.js';
import { allRuns, dbNow, type RunRow } from '../helpers/db.js';
import { writeJournaledSchedule, type JournalAttempt } from '../helpers/ground-truth.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { waitFor } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const fleet = useInProcessFleet('dependencies', { perTest: true });

/** Fails on instants whose second (of the minute) divided by 2 is odd: 2, 6, 10, … */
const FAIL_ON_ODD = 'test $(( $(date -u -d "$BATON_SCHEDULED_AT" +%-S) / 2 % 2 )) -eq 0';

/** The parent's shared fast timings: the children's fires looked at every 200 ms. */
const RUNNER = { timings: { dependents: { pollMs: 200, leadMs: 500, settleMs: 3_000 } } };

function attemptsOf(all: JournalAttempt[], job: string): JournalAttempt[] {
  return all.filter((a) => a.job === job);
}

describe('a child after one parent', () => {
  it('runs once per instant its parent succeeded, after it, at its instant; is skipped once as upstream per failure', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: chain
jobs:
  settle:
    schedule: "*/2 * * * * *"
    command: ${j.yaml({ work: `sleep 0.3; ${FAIL_ON_ODD}` })}
  report:
    after: {jobs: [settle], on: success}
    command: ${j.yaml({ work: 'sleep 0.1' })}
`,
    );
    await fleet.start(['c1', 'c2', 'c3'], { config, runner: RUNNER });

    // Eight of settle's instants decided (its verdict and its child's fate).
    const decided = async () => {
      const rows = await allRuns(fleet.db);
      const settled = rows.filter(
        (r) => r.job === 'settle' && r.winner === 1 && r.status !== 'running',
      );
      const fates = settled.filter((s) =>
        rows.some(
          (r) =>
            r.job === 'report' &&
            r.scheduled_at.getTime() === s.scheduled_at.getTime() &&
            ((r.winner === 1 && r.status !== 'running') || r.reason_kind === 'upstream'),
        ),
      );
      return fates.length >= 8 ? rows : null;
    };
    const rows = await waitFor('eight instants of the chain decided', decided, {
      timeoutMs: 60_000,
      intervalMs: 200,
    });
    const settles = rows.filter((r) => r.job === 'settle' && r.winner === 1);
    const reports = rows.filter((r) => r.job === 'report');
    for (const at of new Set(reports.map((r) => r.scheduled_at.getTime()))) {
      const winners = rowsAt(reports, 'report', at).filter((r) => (r.winner ?? 0) >= 1);
      expect(winners.length, `report's winners at ${new Date(at).toISOString()}`).toBeLessThan(2);
    }
    for (const s of settles.filter((r) => r.status === 'done' || r.status === 'failed')) {
      const at = s.scheduled_at.getTime();
      const runsThere = reports.filter((r) => r.scheduled_at.getTime() === at && r.winner === 1);
      const upstream = reports.filter(
        (r) => r.scheduled_at.getTime() === at && r.reason_kind === 'upstream',
      );
      if (upstream.length + runsThere.length === 0) continue; // decided after the wait above
      if (s.status === 'done') {
        expect(runsThere, `report at ${s.scheduled_at.toISOString()}`).toHaveLength(1);
        expect(runsThere[0]!.triggered_by).toBe('after');
        expect(upstream).toHaveLength(0);
        // Started after its parent's run ended (database time).
        expect(runsThere[0]!.started_at.getTime()).toBeGreaterThanOrEqual(s.finished_at!.getTime());
      } else {
        expect(runsThere).toHaveLength(0);
        expect(upstream, `upstream skip at ${s.scheduled_at.toISOString()}`).toHaveLength(1);
        expect(upstream[0]!.reason).toBe(`settle failed (run ${s.id})`);
      }
    }
    // The journal: each instant's report ran once, with the parent's instant, after it ended.
    const all = journal.attempts();
    const reported = attemptsOf(all, 'report');
    const perFire = new Map<number, number>();
    for (const a of reported) perFire.set(a.fire, (perFire.get(a.fire) ?? 0) + 1);
    expect([...perFire.values()].every((n) => n === 1)).toBe(true);
    for (const a of reported) {
      const parent = attemptsOf(all, 'settle').find((p) => p.fire === a.fire);
      expect(parent, `settle's attempt at ${a.fire}`).toBeDefined();
      expect(parent!.end).not.toBeNull();
      expect(a.start).toBeGreaterThanOrEqual(parent!.end!);
    }
    expect(reported.length).toBeGreaterThanOrEqual(3);
  });
});

function rowsAt(rows: RunRow[], job: string, at: number): RunRow[] {
  return rows.filter((r) => r.job === job && r.scheduled_at.getTime() === at);
}

describe("within shorter than the parent's run (and than settleMs)", () => {
  it('the child never runs; each instant is one upstream skip saying the verdict came too late', async () => {
    // settle ends 1.5 s after its instant; report waits 500 ms. The child's first look was at
    // the instant + settleMs (3 s here), and a verdict was "due" whatever its time: it ran.
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: late
jobs:
  settle:
    schedule: "*/4 * * * * *"
    command: ${j.yaml({ work: 'sleep 1.5' })}
  report:
    after: {jobs: settle, within: 500ms}
    command: ${j.yaml({ work: 'true' })}
`,
    );
    await fleet.start(['l1', 'l2'], { config, runner: RUNNER });
    const rows = await waitFor(
      'two instants of settle done, report decided at each',
      async () => {
        const all = await allRuns(fleet.db);
        const done = all.filter((r) => r.job === 'settle' && r.winner === 1 && r.status === 'done');
        const decided = done.filter((s) =>
          all.some(
            (r) =>
              r.job === 'report' &&
              r.scheduled_at.getTime() === s.scheduled_at.getTime() &&
              (r.reason_kind === 'upstream' || (r.winner === 1 && r.status !== 'running')),
          ),
        );
        return decided.length >= 2 ? { all, decided } : null;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(journal.attempts('report')).toEqual([]);
    for (const s of rows.decided) {
      const skips = rows.all.filter(
        (r) =>
          r.job === 'report' &&
          r.scheduled_at.getTime() === s.scheduled_at.getTime() &&
          r.reason_kind === 'upstream',
      );
      expect(skips).toHaveLength(1);
      // Judged at the deadline (settle still running), or after its verdict came too late.
      expect(skips[0]!.reason).toMatch(
        new RegExp(
          `^settle( did not finish this fire within 500ms \\(run ${s.id} still running\\)|` +
            `'s verdict came too late: done \\(run ${s.id}\\) 1\\.\\ds after the instant, past within 500ms)$`,
        ),
      );
    }
  });
});

describe('fan-in', () => {
  it('a child after two parents runs only at instants both succeeded', async () => {
    const { config } = writeJournaledSchedule(
      (j) => `
namespace: fanin
jobs:
  settle:
    schedule: "*/2 * * * * *"
    command: ${j.yaml({ work: FAIL_ON_ODD })}
  import:
    schedule: "*/2 * * * * *"
    command: ${j.yaml({ work: 'sleep 0.2' })}
  report:
    after: {jobs: [settle, import]}
    command: ${j.yaml()}
`,
    );
    await fleet.start(['f1', 'f2', 'f3'], { config, runner: RUNNER });
    const rows = await waitFor(
      'eight decided instants of report',
      async () => {
        const all = await allRuns(fleet.db);
        const decided = all.filter(
          (r) =>
            r.job === 'report' &&
            ((r.winner === 1 && r.status !== 'running') || r.reason_kind === 'upstream'),
        );
        return decided.length >= 8 ? all : null;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const instants = new Set(
      rows.filter((r) => r.job === 'report').map((r) => r.scheduled_at.getTime()),
    );
    for (const at of instants) {
      const settle = rowsAt(rows, 'settle', at).find((r) => r.winner === 1)!;
      const imported = rowsAt(rows, 'import', at).find((r) => r.winner === 1)!;
      const report = rowsAt(rows, 'report', at);
      const both = settle?.status === 'done' && imported?.status === 'done';
      expect(report.filter((r) => r.winner === 1)).toHaveLength(both ? 1 : 0);
      if (!both && settle?.status === 'failed') {
        expect(report.filter((r) => r.reason_kind === 'upstream')).toHaveLength(1);
      }
    }
  });
});

describe("an operator's chain (--with-dependents)", () => {
  it('`baton run` runs the children and theirs after the parent, at its instant; `backfill` runs each instant’s chain in order, none twice', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: ops
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ${j.yaml({ work: 'sleep 0.1' })}
  report:
    after: {jobs: [settle]}
    command: ${j.yaml()}
  export:
    after: {jobs: [report]}
    command: ${j.yaml()}
`,
    );
    const cli = (args: string[]) =>
      baton([...args, '--config', config, '--database-url', fleet.db.url, '--host', 'laptop']);

    const ran = await cli(['run', 'settle', '--with-dependents']);
    expect(ran.stderr).toContain('baton: report done (run ');
    expect(ran.stderr).toContain('baton: export done (run ');
    expect(ran.code).toBe(0);
    const rows = await allRuns(fleet.db);
    const settle = rows.find((r) => r.job === 'settle')!;
    for (const job of ['report', 'export']) {
      const child = rows.filter((r) => r.job === job);
      expect(child, job).toHaveLength(1);
      expect(child[0]).toMatchObject({ triggered_by: 'after', status: 'done', winner: 1 });
      expect(child[0]!.scheduled_at.getTime()).toBe(settle.scheduled_at.getTime());
    }
    // Without the flag, an operator's run starts no child.
    await cli(['run', 'settle']);
    expect((await allRuns(fleet.db)).filter((r) => r.job === 'report')).toHaveLength(1);

    // Ten past instants of settle, each with its chain, in order; then the last three again.
    const now = Date.now();
    const day = 86_400_000;
    const to = new Date(Math.floor((now - day) / day) * day + 3 * 3600_000);
    const from = new Date(to.getTime() - 9 * day);
    const backfill = (start: Date, extra: string[] = []) =>
      cli([
        'backfill',
        'settle',
        '--from',
        start.toISOString(),
        '--to',
        to.toISOString(),
        '--with-dependents',
        '--json',
        ...extra,
      ]);
    const first = await backfill(from);
    expect(first.code, first.stderr).toBe(0);
    const lines = first.stdout
      .trim()
      .split('\n')
      .map(
        (l) => JSON.parse(l) as { fire?: string; dependents?: { job: string; status: string }[] },
      );
    const fireLines = lines.filter((l) => l.fire);
    expect(fireLines).toHaveLength(10);
    for (const l of fireLines) {
      expect(l.dependents?.map((d) => `${d.job} ${d.status}`)).toEqual([
        'report done',
        'export done',
      ]);
    }
    const lastThree = new Date(to.getTime() - 2 * day);
    const again = await backfill(lastThree, ['--again']);
    expect(again.code, again.stderr).toBe(0);

    // The journal: per instant, settle then report then export, each started after the one
    // before ended; a second generation of the last three, never two runs of one generation.
    const attempts = journal.attempts(undefined, { from, until: to });
    for (let i = 0; i < 10; i++) {
      const at = from.getTime() + i * day;
      const of = (job: string) =>
        attempts.filter((a) => a.job === job && a.fire === at).sort((a, b) => a.start - b.start);
      const generations = at >= lastThree.getTime() ? 2 : 1;
      for (const job of ['settle', 'report', 'export'])
        expect(of(job), `${job} at ${at}`).toHaveLength(generations);
      for (let generation = 0; generation < generations; generation++) {
        const [s, r, e] = ['settle', 'report', 'export'].map((job) => of(job)[generation]!);
        expect(r!.start).toBeGreaterThanOrEqual(s!.end!);
        expect(e!.start).toBeGreaterThanOrEqual(r!.end!);
      }
      // The next instant's parent starts after this instant's chain ended.
      const next = attempts.find((a) => a.job === 'settle' && a.fire === at + day);
      if (next) expect(next.start).toBeGreaterThanOrEqual(of('export')[0]!.end!);
    }
    const generations = (await allRuns(fleet.db)).filter(
      (r) => r.job === 'report' && r.winner === 1 && r.scheduled_at >= from && r.scheduled_at <= to,
    );
    expect(generations.map((r) => (r as RunRow & { rerun: number }).rerun).sort()).toEqual([
      ...Array<number>(10).fill(0),
      1,
      1,
      1,
    ]);
  });
});

describe("an operator's chain after a failure", () => {
  it('running the failed parent fire again runs the child it had skipped, as its next generation', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: again
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ${j.yaml({ work: 'test -f "$J/../ok"' })}
  report:
    after: {jobs: [settle]}
    command: ${j.yaml()}
`,
    );
    const cli = (args: string[]) =>
      baton([...args, '--config', config, '--database-url', fleet.db.url, '--host', 'laptop']);
    const day = 86_400_000;
    const at = new Date(Math.floor((Date.now() - day) / day) * day + 3 * 3600_000).toISOString();
    const failed = await cli(['run', 'settle', '--fire', at, '--with-dependents']);
    expect(failed.code).toBe(1);
    const skipped = (await allRuns(fleet.db, 'report')).filter((r) => r.reason_kind === 'upstream');
    expect(skipped).toHaveLength(1);
    expect(skipped[0]!.reason).toMatch(/^settle failed \(run \d+\)$/);

    writeFileSync(path.join(path.dirname(config), 'ok'), '');
    const again = await cli(['run', 'settle', '--fire', at, '--with-dependents', '--json']);
    expect(again.code, again.stderr).toBe(0);
    const doc = JSON.parse(again.stdout) as {
      rerun: number;
      dependents: { job: string; rerun: number; status: string }[];
    };
    expect(doc.rerun).toBe(1);
    expect(doc.dependents).toEqual([
      expect.objectContaining({ job: 'report', rerun: 1, status: 'done' }),
    ]);
    expect(journal.attempts().filter((a) => a.job === 'report')).toHaveLength(1);
  });
});

describe('not run, and why', () => {
  it('a paused parent, a parent slower than `within`, `on: failure` after a success: one upstream skip each, naming the parent, told once to a real receiver; the skip cascades to the grandchild', async () => {
    const receiver = await WebhookReceiver.start();
    onTestFinished(() => receiver.down());
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: why
notify:
  ops:
    webhook: {url: "${receiver.url()}", format: json}
jobs:
  held:
    schedule: "*/2 * * * * *"
    command: ${j.yaml()}
  after-held:
    after: {jobs: [held]}
    command: ${j.yaml()}
  slow:
    schedule: "*/4 * * * * *"
    command: ${j.yaml({ work: 'sleep 3' })}
  after-slow:
    after: {jobs: [slow], within: 1s}
    command: ${j.yaml()}
  fine:
    schedule: "*/2 * * * * *"
    command: ${j.yaml()}
  alarm:
    after: {jobs: [fine], on: failure}
    command: ${j.yaml()}
    notify: {on: [upstream], to: [ops]}
  after-alarm:
    after: {jobs: [alarm], on: always}
    command: ${j.yaml()}
`,
    );
    await baton(['pause', 'held', '--config', config, '--database-url', fleet.db.url]);
    await fleet.start(['w1', 'w2'], {
      config,
      runner: {
        timings: { dependents: { pollMs: 200, leadMs: 500, settleMs: 1_000, recheckMs: 500 } },
      },
    });
    const skipOf = (rows: RunRow[], job: string) =>
      rows.filter((r) => r.job === job && r.reason_kind === 'upstream');
    const rows = await waitFor(
      'an upstream skip of each child and the grandchild',
      async () => {
        const all = await allRuns(fleet.db);
        const ok = ['after-held', 'after-slow', 'alarm', 'after-alarm'].every(
          (job) => skipOf(all, job).length > 0,
        );
        return ok ? all : null;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const held = skipOf(rows, 'after-held')[0]!;
    expect(held.reason).toMatch(/^held did not run this fire: paused \(run \d+\)$/);
    expect(held.triggered_by).toBe('after');
    const slow = skipOf(rows, 'after-slow')[0]!;
    // Judged at its deadline while the run went on, or once its verdict came (past within):
    // which depends on when a judge looked, the skip does not.
    expect(slow.reason).toMatch(
      /^slow( did not finish this fire within 1s \(run \d+ still running\)|'s verdict came too late: done \(run \d+\) [\d.]+s after the instant, past within 1s)$/,
    );
    const alarm = skipOf(rows, 'alarm')[0]!;
    expect(alarm.reason).toMatch(/^fine succeeded \(run \d+\); it runs only after a failure$/);
    const cascade = skipOf(rows, 'after-alarm').find(
      (r) => r.scheduled_at.getTime() === alarm.scheduled_at.getTime(),
    );
    expect(cascade?.reason).toBe(`alarm did not run this fire: upstream (run ${alarm.id})`);
    // One skip row per child's fire, whatever the number of runners that judged it.
    for (const job of ['after-held', 'after-slow', 'alarm', 'after-alarm']) {
      const fires = skipOf(rows, job).map((r) => r.scheduled_at.getTime());
      expect(new Set(fires).size, job).toBe(fires.length);
    }
    // None of the children ran.
    const ran = journal.attempts().filter((a) => a.job.startsWith('after-') || a.job === 'alarm');
    expect(ran).toEqual([]);
    // Told: each of alarm's upstream skips once, with its parent and the reason.
    const told = await waitFor(
      "the receiver told of alarm's first upstream skip",
      () => {
        const got = receiver.accepted().filter((r) => r.body.event === 'upstream');
        return got.length > 0 ? got : null;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    const first = told.find((r) => r.body.fire === alarm.scheduled_at.toISOString());
    expect(first?.body).toMatchObject({
      job: 'alarm',
      upstream: { parent: 'fine', parentStatus: 'done', reason: alarm.reason },
    });
    const ids = receiver.accepted().map((r) => r.body.id);
    expect(new Set(ids).size, 'each event once').toBe(ids.length);
  });
});

describe('a chain added to a running fleet', () => {
  it('starts with the parent’s next fire: a reload that adds a child runs it for no instant before the reload', async () => {
    const { config } = writeJournaledSchedule(
      (j) => `
namespace: added
jobs:
  settle:
    schedule: "* * * * * *"
    command: ${j.yaml()}
`,
    );
    const [runner] = await fleet.start(['a1'], {
      config,
      runner: {
        timings: { dependents: { pollMs: 200, leadMs: 300, settleMs: 500, recheckMs: 500 } },
      },
    });
    // Some of settle's fires run before the child exists.
    await waitFor(
      'three runs of settle',
      async () => ((await allRuns(fleet.db, 'settle')).length >= 3 ? true : null),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    writeFileSync(
      config,
      readFileSync(config, 'utf8') +
        `  report:\n    after: {jobs: [settle]}\n    command: ["true"]\n`,
    );
    const reloadedAt = await dbNow(fleet.db);
    runner!.runner.reload(loadConfig(config));
    const reports = await waitFor(
      'three runs of report',
      async () => {
        const rows = (await allRuns(fleet.db, 'report')).filter((r) => r.winner === 1);
        return rows.length >= 3 ? rows : null;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    // Give a backfill every chance to show: judged rows of past instants would be due by now.
    await new Promise((r) => setTimeout(r, 1_500));
    const all = await allRuns(fleet.db, 'report');
    const before = all.filter((r) => r.scheduled_at < reloadedAt);
    // At most the instant the reload landed in (its parent may end after the reload).
    expect(
      before.length,
      before.map((r) => r.scheduled_at.toISOString()).join(' '),
    ).toBeLessThanOrEqual(1);
    expect(reports.length).toBeGreaterThanOrEqual(3);
  });
});

describe('library mode', () => {
  it('scheduler.job with after: runs the child handler once per successful parent instant across two replicas, with the parent’s instant', async () => {
    const { createScheduler } = await import('../../src/index.js');
    const seen: { job: string; at: number; host: string }[] = [];
    const replicas = ['lib1', 'lib2'].map((host) => {
      const s = createScheduler({
        databaseUrl: fleet.db.url,
        host,
        namespace: 'lib',
        log: pino({ level: 'silent' }),
        timings: { dependents: { pollMs: 200, leadMs: 500 } },
      });
      s.job('settle', { schedule: '* * * * * *' }, (ctx) => {
        seen.push({ job: 'settle', at: ctx.scheduledAt.getTime(), host });
      });
      s.job('report', { after: { jobs: ['settle'] } }, (ctx) => {
        seen.push({ job: 'report', at: ctx.scheduledAt.getTime(), host });
      });
      return s;
    });
    await Promise.all(replicas.map((s) => s.start()));
    onTestFinished(() => Promise.all(replicas.map((s) => s.stop())).then(() => {}));
    await waitFor(
      'four reports',
      () => (seen.filter((s) => s.job === 'report').length >= 4 ? true : null),
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    const reports = seen.filter((s) => s.job === 'report');
    const instants = reports.map((r) => r.at);
    expect(new Set(instants).size, 'once per instant').toBe(instants.length);
    for (const r of reports) {
      expect(
        seen.some((s) => s.job === 'settle' && s.at === r.at),
        `settle at ${r.at}`,
      ).toBe(true);
    }
    const rows = (await allRuns(fleet.db, 'report')).filter((r) => r.winner === 1);
    expect(rows.every((r) => r.triggered_by === 'after')).toBe(true);
  });
});
