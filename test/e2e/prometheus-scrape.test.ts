/**
 * A real Prometheus (Debian's package) scraping two real runners every second, with the default
 * `honor_labels: false`, asked through its HTTP API — what an operator's alerts and dashboards see:
 *
 * - every baton series names its job as `baton_job`; `job` is Prometheus' own (the scrape job),
 *   and no series carries `exported_job`;
 * - a job's FIRST failure is seen by `increase()`: the job is added by a reload, its series start
 *   at 0 then, Prometheus scrapes the 0 while the run still goes (it fails after 2 s), then the 1;
 * - `baton_job_last_success_timestamp_seconds` of a job that succeeded equals the history's
 *   finish time of its latest `done` run on both runners, whichever ran it (the last failure's
 *   too);
 * - `baton_scheduler_last_wake_timestamp_seconds` is recent on both runners.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort } from '../helpers/private-server.js';
import { startPrometheus, type PrometheusServer } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('prometheus');
let prometheus: PrometheusServer | undefined;
const runners: RunnerProcess[] = [];

afterAll(async () => {
  await prometheus?.stop();
  await Promise.all(runners.map((r) => r.stop('SIGKILL')));
});

it('Prometheus sees baton_job labels, a first failure, the last success and the last wake', async () => {
  // `ok` succeeds every second until the reload below stops it.
  const config = writeSchedule(
    'jobs:\n  ok:\n    schedule: "* * * * * *"\n    command: ["true"]\n',
  );
  const flag = path.join(path.dirname(config), 'failed-once');
  const ports = [await freePort(), await freePort()];
  runners.push(
    ...(await Promise.all(
      ['prom-a', 'prom-b'].map((host, i) =>
        fleet
          .start([host], { config, args: ['--http', `127.0.0.1:${ports[i]}`] })
          .then(([r]) => r!),
      ),
    )),
  );
  prometheus = await startPrometheus(ports.map((p) => `127.0.0.1:${p}`));
  const prom = prometheus;
  await waitFor('both runners scraped, and a success of ok', async () => {
    const up = await prom.query('up == 1');
    const ok = await prom.query('sum(baton_runs_total{baton_job="ok", status="done"}) > 0');
    return up.length === 2 && ok.length === 1;
  });

  // The reload stops `ok` (never due) and adds `flaky`, which fails on its first fire (after 2 s:
  // Prometheus has scraped its 0 by then) and succeeds from then on. `settle: 0s`: the new time
  // of `ok` takes effect at its next instant (docs/schedules.md, "Changing a job's time").
  writeFileSync(
    config,
    `scheduleChanges: {settle: 0s}
jobs:
  ok:
    schedule: "0 0 1 1 *"
    command: ["true"]
  flaky:
    schedule: "*/3 * * * * *"
    command: 'if [ -e "${flag}" ]; then exit 0; fi; touch "${flag}"; sleep 2; exit 1'
    shell: true
`,
  );
  for (const runner of runners) {
    runner.child.kill('SIGHUP');
    await runner.waitForLog('schedule reloaded');
  }
  await waitFor('the zero of flaky scraped on both runners', async () => {
    const zero = await prom.query('baton_runs_total{baton_job="flaky", status="failed"} == 0');
    return zero.length === 2;
  });

  const increase = await waitFor(
    'the first failure seen by increase()',
    async () => {
      const result = await prom.query(
        'sum by (baton_job) (increase(baton_runs_total{status="failed"}[1m])) > 0',
      );
      return result.length > 0 ? result : null;
    },
    { timeoutMs: 15_000 },
  );
  expect(increase.map((r) => r.metric)).toEqual([{ baton_job: 'flaky' }]);
  expect(increase[0]!.value).toBeGreaterThan(0);
  // It was the job's first failure, and the only one.
  const [failures] = await fleet.db.query<{ n: number }>(
    "SELECT COUNT(*) AS n FROM baton_runs WHERE job = 'flaky' AND status = 'failed'",
  );
  expect(Number(failures!.n)).toBe(1);

  // The labels as stored: baton_job beside Prometheus' own job and instance, no exported_job.
  const stored = await prom.series('{__name__=~"baton_.+"}');
  expect(stored.length).toBeGreaterThan(0);
  expect(stored.filter((s) => 'exported_job' in s)).toEqual([]);
  expect(new Set(stored.map((s) => s.job))).toEqual(new Set(['baton']));
  const perJob = stored.filter((s) => s.__name__ === 'baton_runs_total');
  expect(new Set(perJob.map((s) => s.baton_job))).toEqual(new Set(['ok', 'flaky']));

  // ok's last success, as the history has it, once ok no longer fires: its yearly time took
  // effect at the instant the first runner recorded (docs/schedules.md, "Changing a job's
  // time"), and its last run before it is over. Read until they agree: the runners read the
  // history at most every 5 s.
  const [switched] = await fleet.db.query<{ at: Date }>(
    "SELECT effective_at AS at FROM baton_timings WHERE job = 'ok' AND version = 2",
  );
  await waitFor('ok switched to its yearly time, its last run over', async () => {
    const [state] = await fleet.db.query<{ now: Date; running: number }>(
      "SELECT NOW(3) AS now, (SELECT COUNT(*) FROM baton_runs WHERE job = 'ok' AND status = 'running') AS running",
    );
    return state!.now.getTime() > switched!.at.getTime() + 1_000 && Number(state!.running) === 0;
  });
  const [row] = await fleet.db.query<{ at: Date }>(
    "SELECT MAX(finished_at) AS at FROM baton_runs WHERE job = 'ok' AND status = 'done'",
  );
  const finished = row!.at.getTime() / 1000;
  const lastSuccess = await waitFor('the last success of ok on both runners', async () => {
    const series = await prom.query('baton_job_last_success_timestamp_seconds{baton_job="ok"}');
    return series.length === 2 && series.every((s) => Math.abs(s.value - finished) < 1)
      ? series
      : null;
  });
  expect(lastSuccess.map((s) => s.metric.instance).sort()).toEqual(
    ports.map((p) => `127.0.0.1:${p}`).sort(),
  );
  // And flaky's failure, whichever runner ran it: both export the fleet's time.
  const [failed] = await fleet.db.query<{ at: Date }>(
    "SELECT finished_at AS at FROM baton_runs WHERE job = 'flaky' AND status = 'failed'",
  );
  await waitFor('the last failure of flaky on both runners', async () => {
    const series = await prom.query('baton_job_last_failure_timestamp_seconds{baton_job="flaky"}');
    return (
      series.length === 2 &&
      series.every((s) => Math.abs(s.value - failed!.at.getTime() / 1000) < 1)
    );
  });

  const wakeAge = await prom.query('time() - baton_scheduler_last_wake_timestamp_seconds');
  expect(wakeAge).toHaveLength(2);
  for (const s of wakeAge) expect(Math.abs(s.value)).toBeLessThan(10);
});
