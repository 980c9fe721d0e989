/**
 * OpenTelemetry traces (issue 42, docs/tracing.md), with real runner processes and a real OTLP/HTTP
 * receiver in this process (helpers/otlp-receiver.ts): three runners, one fire → one trace whose
 * id every runner derived from the fire's key on its own; in it the root `baton.fire` span (sent
 * by the winner), three `baton.attempt` spans (one won, two skipped) under it, the winner's
 * `baton.run` span, and the job's own span under that — a command job that read TRACEPARENT and
 * sent its span to the same collector. A collector that is down breaks nothing: the runs go on,
 * the log tells it once, without the exporter's headers, and the stop is not held.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fireTraceIds } from '../../src/trace-context.js';
import { ROOT, writeSchedule } from '../helpers/cli.js';
import { runs } from '../helpers/db.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { waitFor } from '../helpers/wait.js';

const NAMESPACE = 'traces';
const HOSTS = ['trace-1', 'trace-2', 'trace-3'];
const JOB_SCRIPT = path.join(ROOT, 'test/fixtures/traced-job.mjs');
/** A token the exporter sends as a header: it must never reach a log. */
const TOKEN = 'otlp-token-do-not-print';

const fleet = useFleet('traces', { perTest: true });
let receiver: OtlpReceiver;

beforeAll(async () => {
  receiver = await OtlpReceiver.start();
});

afterAll(async () => {
  await receiver?.stop();
});

function schedule(): string {
  return writeSchedule(`
namespace: ${NAMESPACE}
jobs:
  traced:
    schedule: "*/2 * * * * *"
    command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(JOB_SCRIPT)}]
`);
}

/** A fire's trace once it is whole: the root, an attempt from every runner, the run, the job's span. */
function wholeTrace(spans: ReceivedSpan[]): boolean {
  const named = (n: string) => spans.filter((s) => s.name === n);
  return (
    named('baton.fire').length === 1 &&
    named('baton.attempt').length === HOSTS.length &&
    named('baton.run').length === 1 &&
    named('job.work').length === 1
  );
}

describe('traces', () => {
  it('puts every runner’s attempt at one fire into one trace, with the run and the job’s own span', async () => {
    const runners = await fleet.start(HOSTS, {
      config: schedule(),
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer ${TOKEN}`,
        // Exported a tenth of a second after they end (the default waits 5 s).
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
    });
    const [traceId, spans] = await waitFor(
      'a fire traced by all three runners, with its run and the job’s span',
      () => [...receiver.traces()].find(([, s]) => wholeTrace(s)),
      { timeoutMs: 40_000 },
    );
    const one = (name: string) => spans.find((s) => s.name === name)!;
    const fire = one('baton.fire');
    const run = one('baton.run');
    const job = one('job.work');
    const attempts = spans.filter((s) => s.name === 'baton.attempt');

    // The trace id is the fire key's, as every runner derived it on its own.
    const scheduledAt = new Date(String(fire.attributes['baton.fire.scheduled_at']));
    expect(fire.attributes).toMatchObject({ 'baton.namespace': NAMESPACE, 'baton.job': 'traced' });
    const ids = fireTraceIds({ namespace: NAMESPACE, job: 'traced', scheduledAt, generation: 0 });
    expect(traceId).toBe(ids.traceId);
    expect(fire.spanId).toBe(ids.fireSpanId);
    expect(fire.parentSpanId).toBe('');

    // One attempt per runner, each under the root; one won, two skipped with their kind.
    expect(attempts.map((a) => a.attributes['baton.runner.host']).sort()).toEqual(HOSTS);
    for (const a of attempts) expect(a.parentSpanId).toBe(fire.spanId);
    const won = attempts.filter((a) => a.attributes['baton.attempt.outcome'] === 'won');
    const skipped = attempts.filter((a) => a.attributes['baton.attempt.outcome'] === 'skipped');
    expect(won).toHaveLength(1);
    expect(skipped).toHaveLength(2);
    for (const s of skipped) expect(s.attributes['baton.skip.kind']).toEqual(expect.any(String));

    // The run under the winner's attempt, the job's own span under the run (TRACEPARENT).
    expect(run.parentSpanId).toBe(won[0]!.spanId);
    expect(job.parentSpanId).toBe(run.spanId);
    const processes = spans.filter((s) => s.name === 'baton.process');
    expect(processes.map((p) => p.parentSpanId)).toEqual([run.spanId]);
    expect(processes[0]!.attributes['process.exit.code']).toBe(0);
    expect(spans.filter((s) => s.name === 'baton.verdict').map((v) => v.parentSpanId)).toEqual([
      run.spanId,
    ]);
    expect(run.attributes).toMatchObject({ 'baton.run.status': 'done', 'baton.run.attempts': 1 });
    // The winner's row is the run the span names.
    const rows = await runs(fleet.db, 'traced');
    const row = rows.find(
      (r) => r.winner === 1 && r.scheduled_at.getTime() === scheduledAt.getTime(),
    );
    expect(row?.host).toBe(won[0]!.attributes['baton.runner.host']);
    expect(run.attributes['baton.run.id']).toBe(row?.id);
    expect(job.attributes['job.run_id']).toBe(String(row?.id));

    // No fire has more than one winner or more attempts than runners, and every attempt of every
    // trace names its fire's root span.
    for (const [id, s] of receiver.traces()) {
      const as = s.filter((x) => x.name === 'baton.attempt');
      expect(as.length, id).toBeLessThanOrEqual(HOSTS.length);
      expect(
        as.filter((a) => a.attributes['baton.attempt.outcome'] === 'won').length,
        id,
      ).toBeLessThanOrEqual(1);
      expect(new Set(as.map((a) => a.parentSpanId)).size, id).toBe(1);
    }
    // The runners' exporter sent its configured headers (the job's own sends do not carry them:
    // they are not passed on to jobs); the runners' logs never hold the token.
    expect(receiver.headers.map((h) => h.authorization)).toContain(`Bearer ${TOKEN}`);
    expect(receiver.refused).toEqual([]);
    for (const r of runners) expect(await r.stop('SIGTERM'), r.host).toBe(0);
    for (const r of runners) {
      expect(JSON.stringify(r.lines) + r.stderr, r.host).not.toContain(TOKEN);
      expect(r.lines.some((l) => l.msg === 'tracing: spans are exported over OTLP/HTTP')).toBe(
        true,
      );
    }
    expectQuiet(runners);
  });

  it('puts a fire nobody could attempt into its trace: a missed attempt, from the runner that recorded it', async () => {
    // No runner has the tag the job asks for: the one up records each fire `missed`
    // (no-eligible-runner, daemon/placement-watch.ts) — and, traced, that record is its attempt.
    const [runner] = await fleet.start(['trace-untagged'], {
      config: writeSchedule(`
namespace: ${NAMESPACE}
jobs:
  placed:
    schedule: "* * * * * *"
    runOn: {tags: [gpu]}
    command: ["true"]
`),
      timings: { fleetWatch: { companionsMs: 500 } },
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY: '100' },
    });
    const missedRows = () =>
      fleet.db.query<{ scheduled_at: Date; reason_kind: string }>(
        "SELECT scheduled_at, reason_kind FROM baton_runs WHERE job = 'placed' AND status = 'missed'",
      );
    const missedSpans = () =>
      receiver.spans.filter(
        (s) =>
          s.attributes['baton.job'] === 'placed' &&
          s.attributes['baton.attempt.outcome'] === 'missed',
      );
    const [row] = await waitFor(
      'a missed row whose span came',
      async () => {
        const rows = await missedRows();
        return rows.length > 0 && missedSpans().length > 0 ? rows : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(row!.reason_kind).toBe('no-eligible-runner');
    await runner!.stop('SIGTERM');
    // Each recorded fire's span is in that fire's trace, and says who recorded it and why.
    const recorded = await missedRows();
    const spans = missedSpans();
    for (const span of spans) {
      const at = new Date(String(span.attributes['baton.fire.scheduled_at']));
      expect(recorded.some((r) => r.scheduled_at.getTime() === at.getTime())).toBe(true);
      expect(span.traceId).toBe(
        fireTraceIds({ namespace: NAMESPACE, job: 'placed', scheduledAt: at, generation: 0 })
          .traceId,
      );
      expect(span.attributes).toMatchObject({
        'baton.runner.host': 'trace-untagged',
        'baton.missed.kind': 'no-eligible-runner',
      });
    }
  });

  it('with its collector down, runs every fire, says so once without the headers, and stops', async () => {
    const down = await OtlpReceiver.start();
    const deadEndpoint = down.endpoint;
    await down.stop();
    const [runner] = await fleet.start(['trace-dead'], {
      config: schedule(),
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: deadEndpoint,
        OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer ${TOKEN}`,
        OTEL_BSP_SCHEDULE_DELAY: '100',
        // The exporter's retries of a refused export end within this (default 10 s).
        OTEL_EXPORTER_OTLP_TIMEOUT: '2000',
      },
    });
    await runner!.waitForLog(
      'tracing: spans could not be exported (told once until exports work again)',
      undefined,
      30_000,
    );
    // Fires go on: two more runs finish, each done (the job itself got its TRACEPARENT, and its
    // own send to the dead collector fails it — so the job here is judged by the row's start).
    const finished = () => runner!.lines.filter((l) => l.msg === 'run finished').length;
    const before = finished();
    await waitFor('two more runs after the export failed', () => finished() >= before + 2, {
      timeoutMs: 30_000,
    });
    expect(await runner!.stop('SIGTERM')).toBe(0);
    const told = runner!.lines.filter((l) =>
      l.msg.startsWith('tracing: spans could not be exported'),
    );
    expect(told).toHaveLength(1);
    expect(JSON.stringify(runner!.lines) + runner!.stderr).not.toContain(TOKEN);
  });

  it('with a collector that takes requests and never answers, exits at its stop’s bound; the headers reach no job', async () => {
    // (An attacker's find: the runner said it gave up the last spans at 3 s, yet its process
    // lived on until the exporter's own timeout, held by the open request.)
    const sockets: Socket[] = [];
    const silent = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      socket.resume();
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = silent.address() as AddressInfo;
      const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-silent-otlp-'));
      const envFile = path.join(dir, 'env.txt');
      const [runner] = await fleet.start(['trace-silent'], {
        config: writeSchedule(`
namespace: ${NAMESPACE}
jobs:
  envy:
    schedule: "* * * * * *"
    command: ["sh", "-c", "env > ${envFile}.tmp && mv ${envFile}.tmp ${envFile}"]
`),
        env: {
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
          OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer ${TOKEN}`,
          OTEL_EXPORTER_OTLP_TRACES_HEADERS: `x-tenant=${TOKEN}`,
          OTEL_BSP_SCHEDULE_DELAY: '100',
          // Far beyond the stop's bound (3 s) and the wait below: only the bound can end it.
          OTEL_EXPORTER_OTLP_TIMEOUT: '300000',
          OTEL_BSP_EXPORT_TIMEOUT: '300000',
        },
      });
      await waitFor('an export the collector never answers', () => sockets.length > 0, {
        timeoutMs: 30_000,
      });
      await waitFor('a run that wrote its environment', () => existsSync(envFile), {
        timeoutMs: 30_000,
      });
      // Exit code 0, not the harness's SIGKILL at 60 s (null): the process ended by itself.
      expect(await runner!.stop('SIGTERM', 60_000)).toBe(0);
      expect(runner!.lines.map((l) => l.msg)).toContain(
        'tracing: gave up sending the last spans at the stop',
      );
      const env = readFileSync(envFile, 'utf8');
      expect(env).toMatch(/^TRACEPARENT=00-[0-9a-f]{32}-[0-9a-f]{16}-01$/m);
      expect(env).toContain(`OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:${port}`);
      expect(env).not.toContain(TOKEN);
      expect(JSON.stringify(runner!.lines) + runner!.stderr).not.toContain(TOKEN);
      expect(JSON.stringify(await fleet.db.query('SELECT * FROM baton_runs'))).not.toContain(TOKEN);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  }, 120_000);
});
