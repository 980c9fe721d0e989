/**
 * The daemon's HTTP endpoint (`baton start --http`), against real runner processes.
 *
 * - `/metrics`: two runners with one succeeding and one failing job. Every series of a loaded job
 *   is there at 0 before anything happened to it. The exposition passes `promtool check metrics`;
 *   once the jobs were paused, then reloaded onto a schedule that never fires, the counters
 *   summed over both runners equal the history table exactly: runs by job and status, skips by
 *   reason (`taken` by the other runner, `paused`), one fire-lag and one duration observation per
 *   run, one won contention per run; gauges say the database is up and name the runner, and the
 *   per-job timestamps equal the history's. A job reloaded away is no longer exported.
 * - `/healthz`: 200 while the loop and the database are fine; 503 with the reason within seconds
 *   of a PRIVATE mariadbd stopping; 200 again once it is back.
 * - The token: beyond loopback it is required (exit 64 before anything starts); when set, a
 *   request without it or with a wrong one gets 401, with it (Bearer or Basic) 200. Bad
 *   addresses and a port in use are refused with exit 64. Nothing but GET/HEAD is answered.
 */
import { writeFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { baton, startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort, startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { parseMetrics, promtoolCheck, total } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('http');

const TOKEN = 'test-token-0123456789abcdef';

/** A schedule with nothing due for the test's lifetime: the endpoint alone is under test. */
function quietSchedule(): string {
  return writeSchedule('jobs:\n  quiet:\n    schedule: "0 0 1 1 *"\n    command: ["true"]\n');
}

async function get(port: number, path: string, headers: Record<string, string> = {}) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

async function countRows(job: string, where: string): Promise<number> {
  const [row] = await fleet.db.query<{ n: number }>(
    `SELECT COUNT(*) AS n FROM baton_runs WHERE job = ? AND ${where}`,
    [job],
  );
  return Number(row!.n);
}

describe('/metrics', () => {
  it('passes promtool and its counters add up to the history, across two runners', async () => {
    const config = writeSchedule(`
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
  broken:
    schedule: "*/2 * * * * *"
    command: "echo nope; exit 3"
    shell: true
`);
    const ports = [await freePort(), await freePort()];
    const runners = await Promise.all(
      ['metrics-a', 'metrics-b'].map((host, i) =>
        fleet
          .start([host], { config, args: ['--http', `127.0.0.1:${ports[i]}`] })
          .then(([r]) => r!),
      ),
    );
    // Before any run: every series of both jobs, at 0 (a first failure is then an increase).
    const first = parseMetrics((await get(ports[0]!, '/metrics')).body);
    for (const baton_job of ['tick', 'broken']) {
      const series = (name: string) =>
        first.filter((s) => s.name === name && s.labels.baton_job === baton_job);
      expect(
        series('baton_runs_total')
          .map((s) => s.labels.status)
          .sort(),
      ).toEqual(['done', 'failed', 'interrupted', 'killed', 'lost', 'timeout']);
      expect(
        series('baton_skips_total')
          .map((s) => s.labels.reason)
          .sort(),
      ).toEqual(['overlap', 'paused', 'pool', 'taken', 'upstream']);
      expect(
        series('baton_fires_not_attempted_total')
          .map((s) => s.labels.reason)
          .sort(),
      ).toEqual(['error', 'late-wake', 'no-database', 'read-only', 'stale-schedule']);
      expect(series('baton_fires_missed_total')).toHaveLength(1);
    }
    // `tick` never fails: its failed series is there, and it is 0.
    expect(total(first, 'baton_runs_total', { baton_job: 'tick', status: 'failed' })).toBe(0);
    await waitFor('some runs of both jobs', async () => {
      return (
        (await countRows('tick', "status = 'done'")) >= 4 &&
        (await countRows('broken', "status = 'failed'")) >= 2
      );
    });
    // The fleet's tick count now; one more run happens before the pause, so the
    // counters are seen to move with the runs (checked at the end).
    const ticksBefore = (
      await Promise.all(ports.map(async (p) => parseMetrics((await get(p, '/metrics')).body)))
    ).reduce((n, samples) => n + total(samples, 'baton_runs_total', { baton_job: 'tick' }), 0);
    await waitFor(
      'a tick after the first scrape',
      async () => (await countRows('tick', "status = 'done'")) > ticksBefore,
    );

    // Pause both jobs, then wait until no row is running and the paused skips have arrived on
    // both runners: from then on, nothing moves.
    for (const job of ['tick', 'broken']) {
      expect(
        (await baton(['pause', job, '--config', config, '--database-url', fleet.db.url])).code,
      ).toBe(0);
    }
    await waitFor('both runners skipping as paused', async () => {
      const rows = await fleet.db.query<{ n: number }>(
        "SELECT COUNT(DISTINCT job, host) AS n FROM baton_runs WHERE reason LIKE 'paused by%'",
      );
      const running = await fleet.db.query<{ n: number }>(
        "SELECT COUNT(*) AS n FROM baton_runs WHERE status = 'running'",
      );
      return Number(rows[0]!.n) === 4 && Number(running[0]!.n) === 0;
    });
    // Then nothing fires any more: both runners reload the jobs onto a schedule with nothing due.
    const never = (job: string) => `  ${job}:\n    schedule: "0 0 1 1 *"\n    command: ["true"]\n`;
    // `settle: 0s`: the new times take effect at once (docs/schedules.md, "Changing a job's time").
    writeFileSync(
      config,
      `scheduleChanges: {settle: 0s}\njobs:\n${never('tick')}${never('broken')}`,
    );
    for (const runner of runners) {
      runner.child.kill('SIGHUP');
      await runner.waitForLog('schedule reloaded');
    }
    // A run's counter moves just after its row is written, and a fire already being contended
    // when the reload came still lands its row (and then its counter) after it: compare the
    // counters with the history until both sides agree, reading the rows and the scrapes together.
    // Once nothing fires any more they must; a counter that misses a row never gets there.
    // The metric's `reason` label folds the rows' kinds (docs/runbook.md), written out here
    // rather than taken from the code under test.
    const label: Record<string, string> = {
      taken: 'taken',
      'already-ran': 'taken',
      overlap: 'overlap',
      behind: 'overlap',
      paused: 'paused',
    };
    const fromHistory = async () => {
      const rows = await fleet.db.query<{ job: string; status: string; kind: string; n: number }>(
        `SELECT job, status, COALESCE(reason_kind, '') AS kind, COUNT(*) AS n FROM baton_runs
          WHERE status IN ('done', 'failed', 'skipped') GROUP BY job, status, kind`,
      );
      const count = (job: string, status: string, reason?: string) =>
        rows
          .filter((r) => r.job === job && r.status === status)
          .filter((r) => reason == null || label[r.kind] === reason)
          .reduce((n, r) => n + Number(r.n), 0);
      return {
        tickDone: count('tick', 'done'),
        brokenFailed: count('broken', 'failed'),
        runs: count('tick', 'done') + count('broken', 'failed'),
        skips: count('tick', 'skipped') + count('broken', 'skipped'),
        pausedTick: count('tick', 'skipped', 'paused'),
        takenTick: count('tick', 'skipped', 'taken'),
        overlapTick: count('tick', 'skipped', 'overlap'),
        pausedBroken: count('broken', 'skipped', 'paused'),
        takenBroken: count('broken', 'skipped', 'taken'),
        overlapBroken: count('broken', 'skipped', 'overlap'),
        fireLagTick: count('tick', 'done'),
        durationBroken: count('broken', 'failed'),
        lockWon: count('tick', 'done') + count('broken', 'failed'),
      };
    };
    const settled = await waitFor('the counters to equal the history', async () => {
      const history = await fromHistory();
      const texts = await Promise.all(ports.map(async (p) => (await get(p, '/metrics')).body));
      const scrapes = texts.map(parseMetrics);
      const sum = (name: string, labels: Record<string, string> = {}) =>
        scrapes.reduce((s, samples) => s + total(samples, name, labels), 0);
      // Counters are per runner; the fleet's figures are the sums.
      const counted = {
        tickDone: sum('baton_runs_total', { baton_job: 'tick', status: 'done' }),
        brokenFailed: sum('baton_runs_total', { baton_job: 'broken', status: 'failed' }),
        runs: sum('baton_runs_total'),
        skips: sum('baton_skips_total'),
        pausedTick: sum('baton_skips_total', { baton_job: 'tick', reason: 'paused' }),
        takenTick: sum('baton_skips_total', { baton_job: 'tick', reason: 'taken' }),
        overlapTick: sum('baton_skips_total', { baton_job: 'tick', reason: 'overlap' }),
        pausedBroken: sum('baton_skips_total', { baton_job: 'broken', reason: 'paused' }),
        takenBroken: sum('baton_skips_total', { baton_job: 'broken', reason: 'taken' }),
        overlapBroken: sum('baton_skips_total', { baton_job: 'broken', reason: 'overlap' }),
        // One observation per run (every run here is a scheduled fire).
        fireLagTick: sum('baton_fire_lag_seconds_count', { baton_job: 'tick' }),
        durationBroken: sum('baton_run_duration_seconds_count', { baton_job: 'broken' }),
        lockWon: sum('baton_lock_acquisition_seconds_count', { outcome: 'won' }),
      };
      // The history read again: nothing landed while the counters were read.
      const again = await fromHistory();
      if (isDeepStrictEqual(history, again) && isDeepStrictEqual(history, counted)) {
        return { texts, scrapes, history, counted };
      }
      // Not yet; said if the wait runs out.
      throw new Error(`counted ${JSON.stringify(counted)}, history ${JSON.stringify(again)}`);
    });
    const { texts, scrapes, history, counted } = settled;
    expect(counted).toEqual(history);
    for (const n of ['pausedTick', 'takenTick', 'pausedBroken', 'takenBroken'] as const) {
      expect(history[n], n).toBeGreaterThan(0);
    }
    // Every paused skip's sentence says who paused it.
    const [pausedRows] = await fleet.db.query<{ n: number }>(
      "SELECT COUNT(*) AS n FROM baton_runs WHERE reason_kind = 'paused' AND reason NOT LIKE 'paused by %'",
    );
    expect(Number(pausedRows!.n)).toBe(0);
    const checked = promtoolCheck(texts[0]!);
    expect(checked.output).toBe('');
    expect(checked.code).toBe(0);
    // The counters moved with the runs after the first scrape.
    expect(counted.tickDone).toBeGreaterThan(ticksBefore);

    for (const [i, samples] of scrapes.entries()) {
      expect(total(samples, 'baton_database_up')).toBe(1);
      expect(total(samples, 'baton_jobs_loaded')).toBe(2);
      expect(samples.some((s) => s.labels.job != null)).toBe(false);
      const info = samples.find((s) => s.name === 'baton_runner_info');
      expect(info?.labels).toMatchObject({ host: runners[i]!.host, namespace: 'default' });
      expect(samples.some((s) => s.name === 'baton_clock_offset_seconds')).toBe(true);
      expect(samples.some((s) => s.name === 'process_resident_memory_bytes')).toBe(true);
      const wake = total(samples, 'baton_scheduler_last_wake_timestamp_seconds');
      expect(Math.abs(Date.now() / 1000 - wake)).toBeLessThan(35);
    }

    // The fleet's truth per job, from the history, on every runner alike (read at most every
    // 5 s: wait for a read after the last run).
    const [latest] = await fleet.db.query<{ done: Date; failed: Date }>(
      `SELECT (SELECT MAX(finished_at) FROM baton_runs WHERE job = 'tick' AND status = 'done')
                AS done,
              (SELECT MAX(finished_at) FROM baton_runs WHERE job = 'broken' AND status = 'failed')
                AS failed`,
    );
    const seconds = (at: Date) => at.getTime() / 1000;
    const perJob = await waitFor('the per-job timestamps of the last runs', async () => {
      const scraped = await Promise.all(
        ports.map(async (p) => parseMetrics((await get(p, '/metrics')).body)),
      );
      const values = scraped.map((samples) => {
        const at = (name: string, job: string) =>
          samples.find((s) => s.name === `baton_job_${name}` && s.labels.baton_job === job)?.value;
        return {
          tickSuccess: at('last_success_timestamp_seconds', 'tick'),
          tickRun: at('last_run_timestamp_seconds', 'tick'),
          tickFailure: at('last_failure_timestamp_seconds', 'tick'),
          brokenFailure: at('last_failure_timestamp_seconds', 'broken'),
          brokenSuccess: at('last_success_timestamp_seconds', 'broken'),
          tickExpect: at('expect_seconds', 'tick'),
        };
      });
      // A read after tick's last run may still precede broken's (each job's runs end apart).
      const current = (v: (typeof values)[number]) =>
        v.tickSuccess === seconds(latest!.done) && v.brokenFailure === seconds(latest!.failed);
      return values.every(current) ? values : null;
    });
    for (const v of perJob) {
      expect(v.tickRun).toBe(seconds(latest!.done));
      expect(v.brokenFailure).toBe(seconds(latest!.failed));
      // Never failed, never succeeded: no series (not a 0, which would read as 1970).
      expect(v.tickFailure).toBeUndefined();
      expect(v.brokenSuccess).toBeUndefined();
      // The default dead-man window of a yearly job: two fires plus a grace of 10 %.
      expect(v.tickExpect).toBeGreaterThan(365 * 86_400);
    }

    // A job reloaded away is no longer exported; the counters of the one kept survive the reload
    // (compared with this runner's own count before it: the other runner may have won them all).
    const tickDoneOn = (body: string) =>
      total(parseMetrics(body), 'baton_runs_total', { baton_job: 'tick', status: 'done' });
    const before = tickDoneOn((await get(ports[0]!, '/metrics')).body);
    writeFileSync(config, `jobs:\n${never('tick')}`);
    runners[0]!.child.kill('SIGHUP');
    await waitFor('the second reload', () =>
      runners[0]!.lines.filter((l) => l.msg === 'schedule reloaded').length === 2 ? true : null,
    );
    const after = parseMetrics((await get(ports[0]!, '/metrics')).body);
    expect(after.filter((s) => s.labels.baton_job === 'broken')).toEqual([]);
    expect(tickDoneOn((await get(ports[0]!, '/metrics')).body)).toBeGreaterThanOrEqual(before);
  });
});

describe('/healthz', () => {
  let server: PrivateServer | undefined;
  let runner: RunnerProcess | undefined;
  afterEach(async () => {
    await runner?.stop('SIGKILL');
    await server?.destroy();
  });

  it('turns 503 with the reason when the database goes away, and 200 when it is back', async () => {
    server = await startPrivateServer();
    const port = await freePort();
    const config = quietSchedule();
    runner = startRunner({
      config,
      databaseUrl: `${server.url}/test`,
      host: 'health-a',
      args: ['--http', `127.0.0.1:${port}`, '--heartbeat', '500ms', '--heartbeat-deadline', '1s'],
    });
    await runner.ready();
    await waitFor('healthz 200', async () => (await get(port, '/healthz')).status === 200);
    expect(JSON.parse((await get(port, '/healthz')).body)).toEqual({ status: 'ok' });

    await server.stop();
    const down = await waitFor('healthz 503', async () => {
      const res = await get(port, '/healthz');
      return res.status === 503 ? res : null;
    });
    const body = JSON.parse(down.body) as { status: string; problems: string[] };
    expect(body.status).toBe('unhealthy');
    expect(body.problems.join('\n')).toMatch(/no usable connection to the database/);
    const metrics = parseMetrics((await get(port, '/metrics')).body);
    expect(total(metrics, 'baton_database_up')).toBe(0);

    await server.start();
    await waitFor('healthz 200 again', async () => (await get(port, '/healthz')).status === 200, {
      timeoutMs: 40_000,
    });
    expect(runner.child.exitCode).toBeNull();
  });
});

describe('before the database answers', () => {
  let runner: RunnerProcess | undefined;
  afterEach(async () => {
    await runner?.stop('SIGKILL');
  });

  it('serves 503 and metrics that say so: no offset yet, fires not attempted', async () => {
    const port = await freePort();
    const config = writeSchedule(`
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
`);
    runner = startRunner({
      config,
      // Nothing listens on port 1: the runner waits for its database, retrying.
      databaseUrl: 'mysql://root@127.0.0.1:1/nowhere',
      host: 'waiting-a',
      args: ['--http', `127.0.0.1:${port}`],
    });
    const res = await waitFor('healthz answers', () => get(port, '/healthz').catch(() => null));
    expect(res.status).toBe(503);
    expect(res.body).toContain('no usable connection to the database: not connected yet');
    const text = await waitFor('a fire counted as not attempted', async () => {
      const body = (await get(port, '/metrics')).body;
      const samples = parseMetrics(body);
      return total(samples, 'baton_fires_not_attempted_total', {
        baton_job: 'tick',
        reason: 'no-database',
      }) >= 2
        ? body
        : null;
    });
    // prom-client writes NaN as "Nan"; Prometheus parses it either way (promtool below).
    expect(text).toMatch(/^baton_clock_offset_seconds nan$/im);
    expect(text).toMatch(/^baton_database_up 0$/m);
    expect(promtoolCheck(text)).toEqual({ code: 0, output: '' });
  });
});

describe('the token and the address', () => {
  it('refuses requests without the token when one is set', async () => {
    const port = await freePort();
    const [runner] = await fleet.start(['token-a'], {
      config: quietSchedule(),
      args: ['--http', `127.0.0.1:${port}`],
      env: { BATON_HTTP_TOKEN: TOKEN },
    });
    for (const path of ['/metrics', '/healthz', '/', '/api/overview', '/nowhere']) {
      const res = await get(port, path);
      expect(res.status, path).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Basic realm="baton"/);
      expect(res.body).not.toContain(TOKEN);
      expect(
        (await get(port, path, { authorization: 'Bearer wrong-token-0123456789' })).status,
      ).toBe(401);
    }
    expect((await get(port, '/healthz', { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    const basic = `Basic ${Buffer.from(`anyone:${TOKEN}`).toString('base64')}`;
    expect((await get(port, '/metrics', { authorization: basic })).status).toBe(200);
    const post = await fetch(`http://127.0.0.1:${port}/healthz`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(post.status).toBe(405);
    expect(runner!.lines.map((l) => JSON.stringify(l)).join('\n')).not.toContain(TOKEN);
  });

  it('without a token: refuses a foreign Host (DNS rebinding); survives a malformed target', async () => {
    const port = await freePort();
    const [runner] = await fleet.start(['host-a'], {
      config: quietSchedule(),
      args: ['--http', `127.0.0.1:${port}`],
    });
    const raw = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.write(request));
        let reply = '';
        socket.on('data', (d: Buffer) => (reply += d.toString()));
        socket.on('end', () => resolve(reply));
        socket.on('error', reject);
      });
    for (const host of ['127.0.0.1', `127.0.0.1:${port}`, `localhost:${port}`, '[::1]:1']) {
      const reply = await raw(
        `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      );
      expect(reply, host).toMatch(/^HTTP\/1\.1 200 /);
    }
    for (const host of [
      'attacker.example',
      `attacker.example:${port}`,
      'localhost.attacker.example',
    ]) {
      const reply = await raw(
        `GET /api/overview HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      );
      expect(reply, host).toMatch(/^HTTP\/1\.1 421 /);
    }
    // A request target that is not a URL path: a 404, and the daemon lives on.
    const malformed = await raw(`GET //[ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    expect(malformed).toMatch(/^HTTP\/1\.1 404 /);
    expect((await get(port, '/healthz')).status).toBe(200);
    expect(runner!.child.exitCode).toBeNull();
  });

  it('refuses to listen beyond loopback without a token, and bad addresses', async () => {
    const port = await freePort();
    const cases: [string[], RegExp][] = [
      [['--http', `0.0.0.0:${port}`], /listens beyond this machine: set --http-token/],
      [['--http', `127.0.0.1:${port}`, '--http-token', 'short'], /shorter than 16 characters/],
      [['--http', 'localhost'], /--http "localhost": not a host and port/],
      [['--http', '127.0.0.1:70000'], /the port must be between 1 and 65535/],
    ];
    for (const [args, message] of cases) {
      const res = await baton([
        'start',
        '--config',
        quietSchedule(),
        '--database-url',
        fleet.db.url,
        ...args,
      ]);
      expect(res.code, args.join(' ')).toBe(64);
      expect(res.stderr).toMatch(message);
      expect(res.stderr).not.toMatch(/\n\s+at /);
    }
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(port, '127.0.0.1', r));
    try {
      const res = await baton([
        'start',
        '--config',
        quietSchedule(),
        '--database-url',
        fleet.db.url,
        '--http',
        `127.0.0.1:${port}`,
      ]);
      expect(res.code).toBe(64);
      expect(res.stderr).toMatch(/--http 127\.0\.0\.1:\d+: the address is already in use/);
    } finally {
      taken.close();
    }
  });
});
