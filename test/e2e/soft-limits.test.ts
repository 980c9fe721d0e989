/**
 * Soft duration limits (`duration: {warn, min}`, issue 39) with real runner processes, the shared
 * MariaDB and a real webhook receiver:
 *
 * - `warn: 2s` on a 6 s job on three runners: each run is told `slow` once — one outbox row,
 *   one delivery — by the runner running it; kill -9 of that runner after its warn: the reaper's
 *   `lost` finds the flag set and tells nothing more;
 * - a run whose runner is killed before its warn, found by another runner's reaper after it:
 *   told `slow` then, once, with its `lost`;
 * - `min: 1s` on a job that exits at once: one `too-short` per run; a run longer than `min` none;
 * - `warn: p95x3` with a history: the run's warn is computed from the job's last runs;
 * - a slow run in `baton status` (WARNING `slow`), `/metrics` (`baton_job_runs_overdue`), the
 *   dashboard's data, and the history afterwards.
 *
 * Everything waits for the events themselves (a row, a delivery, the database's clock passing an
 * instant), never for a guessed while.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { baton, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { plantRun } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort } from '../helpers/private-server.js';
import { parseMetrics, total } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/wait.js';
import { WebhookReceiver, type ReceivedRequest } from '../helpers/webhook-receiver.js';

/** Short notifier cadences (as notifications.test.ts) and a reaper every half second. */
const TIMINGS = {
  notifier: {
    passMs: 200,
    evaluateMs: 500,
    backoffFirstMs: 250,
    backoffMaxMs: 2_000,
    claimMarginMs: 1_000,
  },
  reaper: { intervalMs: 500 },
  metrics: { readReuseMs: 200 },
};

let receiver: WebhookReceiver | null = null;
// Registered before the fleet's afterEach, so run after it (vitest runs after-hooks as a stack).
afterEach(async () => {
  await receiver?.down();
  receiver = null;
});
const fleet = useFleet('soft-limits', { perTest: true });

interface RunRow {
  id: number;
  host: string;
  status: string;
  started_at: Date;
  finished_at: Date | null;
  warn_at: Date | null;
  slow_at: Date | null;
  too_short: number;
}

const runsOf = (job: string) =>
  fleet.db.query<RunRow>(
    `SELECT id, host, status, started_at, finished_at, warn_at, slow_at, too_short
       FROM baton_runs WHERE job = ? AND winner >= 1 ORDER BY id`,
    [job],
  );

interface NoticeRow {
  event: string;
  run_id: number;
  status: string;
  target: string;
}

const noticesOf = (event: string) =>
  fleet.db.query<NoticeRow>(
    'SELECT event, run_id, status, target FROM baton_notifications WHERE event = ? ORDER BY id',
    [event],
  );

/** Every row of the outbox told (none pending, sending or held). */
const allTold = async () =>
  (
    await fleet.db.query<{ n: number }>(
      "SELECT COUNT(*) AS n FROM baton_notifications WHERE status <> 'sent'",
    )
  )[0]!.n === 0;

const deliveries = (event: string, runId?: number): ReceivedRequest[] =>
  receiver!
    .accepted()
    .filter((r) => r.body.event === event && (runId == null || r.body.runId === runId));

const hookEnv = () => ({ HOOK_URL: receiver!.url('/hook') });

const NOTIFY = `notify:
  ops: {webhook: {urlFromEnv: HOOK_URL}, timeout: 3s}
`;

describe('slow: told once per run', () => {
  it('three runners, a 6 s job with warn 2s; kill -9 of its runner after the warn: still one', async () => {
    receiver = await WebhookReceiver.start();
    const config = writeSchedule(`namespace: soft
${NOTIFY}jobs:
  crawl:
    schedule: "*/10 * * * * *"
    command: [sleep, "6"]
    duration: {warn: 2s}
    notify: {to: [ops], on: [slow, lost]}
`);
    const runners = await fleet.start(['r1', 'r2', 'r3'], {
      config,
      env: hookEnv(),
      timings: TIMINGS,
    });

    // Two runs that ended, each told slow while it ran, and their events delivered.
    const ended = await waitFor(
      'two runs of crawl ended, told slow and delivered',
      async () => {
        const done = (await runsOf('crawl')).filter((r) => r.status === 'done');
        if (done.length < 2) return null;
        const told = done.every((r) => deliveries('slow', r.id).length > 0);
        return told && (await allTold()) ? done : null;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    for (const run of ended) {
      // Its warn is its start plus 2 s (the claim's one NOW(3)); told at or after it, by the
      // timer of the runner running it, before it ended.
      expect(run.warn_at!.getTime() - run.started_at.getTime()).toBe(2_000);
      expect(run.slow_at!.getTime()).toBeGreaterThanOrEqual(run.warn_at!.getTime());
      expect(run.slow_at!.getTime()).toBeLessThan(run.finished_at!.getTime());
      expect((await noticesOf('slow')).filter((n) => n.run_id === run.id)).toHaveLength(1);
      const [told] = deliveries('slow', run.id);
      expect(deliveries('slow', run.id)).toHaveLength(1);
      expect(told!.body).toMatchObject({
        event: 'slow',
        job: 'crawl',
        host: run.host,
        status: 'running',
        limitMs: 2_000,
      });
      expect(told!.body.durationMs as number).toBeGreaterThanOrEqual(2_000);
      expect(told!.body.text).toMatch(
        new RegExp(
          `^crawl is slow on ${run.host}: run ${run.id} has been running for .*, past its warn of 2s`,
        ),
      );
    }

    // A run past its warn, told slow: its runner is killed. The reapers of the two others
    // declare it lost; its flag is set, so none of them tells it slow again. Told means its
    // delivery recorded `sent`: a runner killed between a delivery and its record leaves the
    // claim to lapse, and the next runner tells it again — at least once, by design, with the
    // same event id (docs/notifications.md) — which is not what this test is about.
    const victim = await waitFor(
      'a running crawl told slow, its delivery recorded',
      async () => {
        const running = (await runsOf('crawl')).find(
          (r) => r.status === 'running' && r.slow_at != null && !ended.some((e) => e.id === r.id),
        );
        if (!running || deliveries('slow', running.id).length === 0) return null;
        const rows = (await noticesOf('slow')).filter((n) => n.run_id === running.id);
        return rows.length > 0 && rows.every((n) => n.status === 'sent') ? running : null;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const owner = runners.find((r) => r.host === victim.host)!;
    await owner.stop('SIGKILL');
    const lost = await waitFor(
      'the killed run declared lost and every event told',
      async () => {
        const row = (await runsOf('crawl')).find((r) => r.id === victim.id)!;
        return row.status === 'lost' &&
          deliveries('lost', victim.id).length > 0 &&
          deliveries('slow', victim.id).length > 0 &&
          (await allTold())
          ? row
          : null;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    expect(lost.slow_at).toEqual(victim.slow_at);
    expect((await noticesOf('slow')).filter((n) => n.run_id === victim.id)).toHaveLength(1);
    expect(deliveries('slow', victim.id)).toHaveLength(1);
    // Every slow event is one run's, once.
    const ids = deliveries('slow').map((r) => r.body.runId);
    expect(new Set(ids).size).toBe(ids.length);
    expect((await noticesOf('slow')).map((n) => n.run_id).sort()).toEqual([...new Set(ids)].sort());
  }, 150_000);

  it('a run whose runner died before its warn: the reaper that finds it after the warn tells it', async () => {
    receiver = await WebhookReceiver.start();
    const config = writeSchedule(`namespace: soft
${NOTIFY}jobs:
  hold:
    schedule: "*/5 * * * * *"
    command: [sleep, "30"]
    duration: {warn: 6s}
    notify: {to: [ops], on: [slow, lost]}
`);
    const [first] = await fleet.start(['k1'], { config, env: hookEnv(), timings: TIMINGS });
    const run = await waitFor(
      'a run of hold going on',
      async () => (await runsOf('hold')).find((r) => r.status === 'running' && r.warn_at != null),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    await first!.stop('SIGKILL');
    // Killed before its warn (the premise: its own timer never told it).
    const [before] = await fleet.db.query<{ early: number; slow_at: Date | null }>(
      'SELECT NOW(3) < warn_at AS early, slow_at FROM baton_runs WHERE id = ?',
      [run.id],
    );
    expect(before).toEqual({ early: 1, slow_at: null });

    // The database's clock passes its warn; only then does another runner come to look.
    await waitFor(
      'the warn instant passed by the database clock',
      async () =>
        (
          await fleet.db.query<{ past: number }>(
            'SELECT NOW(3) >= warn_at AS past FROM baton_runs WHERE id = ?',
            [run.id],
          )
        )[0]!.past === 1,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const runners: RunnerProcess[] = await fleet.start(['k2'], {
      config,
      env: hookEnv(),
      timings: TIMINGS,
    });
    expect(runners).toHaveLength(1);
    const reaped = await waitFor(
      'the run declared lost and told slow',
      async () => {
        const row = (await runsOf('hold')).find((r) => r.id === run.id)!;
        return row.status === 'lost' && deliveries('slow', run.id).length > 0 && (await allTold())
          ? row
          : null;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    expect(reaped.slow_at).not.toBeNull();
    expect(reaped.slow_at!.getTime()).toBeGreaterThanOrEqual(reaped.warn_at!.getTime());
    expect((await noticesOf('slow')).filter((n) => n.run_id === run.id)).toHaveLength(1);
    expect(deliveries('slow', run.id)).toHaveLength(1);
    expect(deliveries('lost', run.id)).toHaveLength(1);
    expect(deliveries('slow', run.id)[0]!.body).toMatchObject({
      event: 'slow',
      job: 'hold',
      host: 'k1',
      status: 'lost',
      limitMs: 6_000,
    });
    expect(deliveries('slow', run.id)[0]!.body.text).toMatch(
      new RegExp(`^hold was slow on k1: run ${run.id} ran .*, past its warn of 6s, and ended lost`),
    );
  }, 120_000);
});

describe('too-short', () => {
  it('min: 1s on a job that exits at once: one too-short per run; a longer run none', async () => {
    receiver = await WebhookReceiver.start();
    const config = writeSchedule(`namespace: soft
${NOTIFY}defaults:
  notify: {to: [ops], on: [too-short]}
  duration: {min: 1s}
jobs:
  quick:
    schedule: "*/2 * * * * *"
    command: [sh, -c, "exit 0"]
  steady:
    schedule: "*/2 * * * * *"
    command: [sleep, "1.5"]
`);
    const args = ['--config', config, '--database-url', fleet.db.url];
    await fleet.start(['s1'], { config, env: hookEnv(), timings: TIMINGS });
    const quick = await waitFor(
      'two quick runs told too short',
      async () => {
        const done = (await runsOf('quick')).filter((r) => r.status === 'done');
        const told = done.filter((r) => deliveries('too-short', r.id).length > 0);
        return told.length >= 2 && (await allTold()) ? told : null;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    for (const run of quick) {
      expect(run.too_short).toBe(1);
      expect(deliveries('too-short', run.id)).toHaveLength(1);
      expect((await noticesOf('too-short')).filter((n) => n.run_id === run.id)).toHaveLength(1);
      expect(deliveries('too-short', run.id)[0]!.body).toMatchObject({
        job: 'quick',
        status: 'done',
        limitMs: 1_000,
      });
    }
    // Every done quick run is flagged, in its verdict's transaction, with its one event.
    const doneQuick = (await runsOf('quick')).filter((r) => r.status === 'done');
    expect(doneQuick.every((r) => r.too_short === 1)).toBe(true);

    // A run of 1.5 s is judged by its verdict too: not short, no event (nothing else enqueues one).
    const steady = await waitFor(
      'a steady run done',
      async () => (await runsOf('steady')).find((r) => r.status === 'done'),
      { timeoutMs: 30_000 },
    );
    expect(steady.too_short).toBe(0);
    const steadyIds = new Set((await runsOf('steady')).map((r) => r.id));
    expect((await noticesOf('too-short')).filter((n) => steadyIds.has(n.run_id))).toEqual([]);

    // The history marks it: the fire's NOTE, and the run document.
    const history = await baton(['history', 'quick', '--limit', '5', ...args], {
      env: { COLUMNS: '160' },
    });
    expect(history.code).toBe(0);
    expect(history.stdout).toMatch(/too short/);
    const json = await baton(['history', 'quick', '--json', ...args]);
    const rows = JSON.parse(json.stdout) as { id: number; tooShort: boolean }[];
    expect(rows.find((r) => r.id === quick[0]!.id)).toMatchObject({ tooShort: true });
  }, 120_000);
});

describe('warn: p95x3', () => {
  it("a run's warn is three times the p95 of the job's last successful runs", async () => {
    const config = writeSchedule(`namespace: soft
jobs:
  nightly:
    schedule: "0 3 * * *"
    command: [sh, -c, 'while [ ! -f release ]; do sleep 0.1; done']
    duration: {warn: p95x3, warnFloor: 1s}
`);
    // Twenty successes of 100 ms, 200 ms, … 2 s (the p95 of them, by nearest rank: 1.9 s), and
    // older, longer ones past the window of twenty.
    const base = Date.now() - 86_400_000;
    for (let i = 0; i < 25; i++) {
      const scheduledAt = new Date(base + i * 60_000);
      const ms = i < 5 ? 600_000 : (i - 4) * 100;
      await plantRun(fleet.db, {
        namespace: 'soft',
        job: 'nightly',
        scheduledAt,
        startedAt: scheduledAt,
        finishedAt: new Date(scheduledAt.getTime() + ms),
      });
    }
    const run = baton(['run', 'nightly', '--config', config, '--database-url', fleet.db.url]);
    const row = await waitFor(
      'the manual run going on with its warn set',
      async () =>
        (await runsOf('nightly')).find((r) => r.status === 'running' && r.warn_at != null),
      { timeoutMs: 30_000 },
    );
    expect(row.warn_at!.getTime() - row.started_at.getTime()).toBe(5_700);
    writeFileSync(path.join(path.dirname(config), 'release'), '');
    expect((await run).code).toBe(0);
  }, 60_000);
});

describe('the views of a slow run', () => {
  it('status warns slow, the gauge counts it, the dashboard and the history show it', async () => {
    const config = writeSchedule(`namespace: soft
jobs:
  hold:
    schedule: "*/2 * * * * *"
    command: [sh, -c, 'while [ ! -f release ]; do sleep 0.1; done']
    duration: {warn: 1s}
`);
    const port = await freePort();
    await fleet.start(['v1'], {
      config,
      timings: TIMINGS,
      args: ['--http', `127.0.0.1:${port}`],
    });
    const args = ['--config', config, '--database-url', fleet.db.url];
    const run = await waitFor(
      'a run of hold told slow',
      async () => (await runsOf('hold')).find((r) => r.status === 'running' && r.slow_at != null),
      { timeoutMs: 30_000, intervalMs: 50 },
    );

    const status = await baton(['status', '--json', ...args]);
    expect(status.code).toBe(1);
    const report = JSON.parse(status.stdout) as {
      state: string;
      warnings: { kind: string; job?: string; severity: string; message: string }[];
      running: { runId: number; slow: boolean; warnAt: string }[];
    };
    expect(report.state).toBe('WARNING');
    expect(report.warnings.filter((w) => w.kind === 'slow')).toEqual([
      expect.objectContaining({ job: 'hold', severity: 'warning' }),
    ]);
    expect(report.warnings.find((w) => w.kind === 'slow')!.message).toMatch(
      new RegExp(
        `^job "hold" is slow: run ${run.id} on v1 has been running for .*, past its warn of 1s`,
      ),
    );
    expect(report.running.find((r) => r.runId === run.id)).toMatchObject({
      slow: true,
      warnAt: run.warn_at!.toISOString(),
    });
    const text = await baton(['status', ...args]);
    expect(text.stdout).toMatch(/^WARNING: "hold" slow;/);
    expect(text.stdout).toContain('WARNING slow: job "hold" is slow');

    const overdue = async () => {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      return total(parseMetrics(await res.text()), 'baton_job_runs_overdue', { baton_job: 'hold' });
    };
    await waitFor('the gauge counting the slow run', async () => (await overdue()) === 1);

    const overview = (await (await fetch(`http://127.0.0.1:${port}/api/overview`)).json()) as {
      jobs: { name: string; fires: { runs: { runId: number; slow: boolean }[] }[] }[];
    };
    const runs = overview.jobs.find((j) => j.name === 'hold')!.fires.flatMap((f) => f.runs);
    expect(runs.find((r) => r.runId === run.id)).toMatchObject({ slow: true });

    writeFileSync(path.join(path.dirname(config), 'release'), '');
    await waitFor(
      'the slow run done',
      async () => (await runsOf('hold')).find((r) => r.id === run.id)?.status === 'done',
    );
    await waitFor('the gauge back to 0', async () => (await overdue()) === 0);
    const json = await baton(['history', 'hold', '--json', ...args]);
    const rows = JSON.parse(json.stdout) as { id: number; slowAt: string | null }[];
    expect(rows.find((r) => r.id === run.id)!.slowAt).toBe(run.slow_at!.toISOString());
    const wide = await baton(['history', 'hold', '--attempts', ...args], {
      env: { COLUMNS: '200' },
    });
    expect(wide.stdout).toMatch(new RegExp(`\\b${run.id}\\b.*done slow`));
  }, 90_000);
});
