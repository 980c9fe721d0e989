/**
 * Notifications, told once whichever runner noticed (issue 19), with runners in the test process
 * (in-process-fleet.ts), the shared MariaDB and real receivers on 127.0.0.1 (HTTP, SMTP):
 * - 3 runners, a job failing every second: one delivery per failed fire, none twice; then it works
 *   again → one `recovered`. The webhook's secret (in its URL) is in no log, row, error or
 *   output. `baton notifications` and `baton notify test` are the CLI's own processes.
 * - The throttle: a job failing every second is told once, then in summaries whose counts add
 *   up to every failure, then `recovered`.
 * - A host name of 255 characters: its claims fit, its notifications are delivered.
 * - The receiver down (refused), then slow (answers after the timeout), then up: nothing lost,
 *   retries recorded, and a repeat only of what was received with its outcome unknown, under the
 *   same event id.
 * - The dead-man's switch with every runner stopped past `expect`: one `no-success`.
 *
 * What needs a process boundary (a runner killed with SIGKILL while delivering, `baton start
 * --timings`) is e2e/notifications.test.ts.
 *
 * The runners run with short notifier cadences (QUICK): nothing here waits for the 15 s
 * evaluation or a back-off grown to seconds, only for the events themselves. A negative check
 * ("told once", "no repeat") waits for more passes of every live runner's notifier, counted as
 * they end (helpers/notifier-passes.ts), never for a sleep.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { SMTPServer } from 'smtp-server';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runnerMetrics } from '../../src/http/runner-metrics.js';
import { writeSchedule } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { notifierPasses } from '../helpers/notifier-passes.js';
import { parseMetrics } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/wait.js';
import { WebhookReceiver, type ReceivedRequest } from '../helpers/webhook-receiver.js';

/** The notifier's pass for due rows (1 s by default). */
const PASS_MS = 100;
/**
 * Short cadences: a pass every PASS_MS, the evaluations without a verdict at every pass (15 s),
 * retries from 250 ms doubling up to 2 s (1 s up to 5 min) — so that a receiver down for 15 s
 * still costs fewer tries than MAX_ATTEMPTS (25) — and a claim that lapses 1 s after its
 * delivery's timeout (5 s).
 */
const QUICK = {
  notifier: {
    passMs: PASS_MS,
    evaluateMs: PASS_MS,
    backoffFirstMs: 250,
    backoffMaxMs: 2_000,
    claimMarginMs: 1_000,
  },
};
const SECRET = 'hook-s3cr3t-7f3a9c';
let receiver: WebhookReceiver | null = null;

// Registered before the fleet's own afterEach, so run after it (vitest runs after-hooks as a
// stack): the runners are stopped before their receiver and their environment go.
afterEach(async () => {
  await receiver?.down();
  receiver = null;
  vi.unstubAllEnvs();
});

const fleet = useInProcessFleet('notifications', { perTest: true });

/** Waits for more passes of runners' notifiers: the negative checks below. */

/** The notification targets' variables, as a runner process would have them in its environment. */
function setEnv(env: Record<string, string>): void {
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
}

interface NoticeRow {
  id: number;
  event: string;
  subject: string;
  fire: Date;
  target: string;
  status: string;
  attempts: number;
  last_error: string | null;
  details: string | null;
}

const notices = () => fleet.db.query<NoticeRow>('SELECT * FROM baton_notifications ORDER BY id');

const failedFires = async (job: string) =>
  (
    await fleet.db.query<{ scheduled_at: Date }>(
      `SELECT scheduled_at FROM baton_runs WHERE job = ? AND status = 'failed' ORDER BY scheduled_at`,
      [job],
    )
  ).map((r) => r.scheduled_at.toISOString());

/** A real SMTP server on a loopback port, keeping the raw mails it accepts. */
async function smtpServer(): Promise<{ port: number; mails: string[]; close(): Promise<void> }> {
  const mails: string[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === 'relay' && auth.password === SECRET) callback(null, { user: 'relay' });
      else callback(new Error('bad login'));
    },
    onData(stream, _session, callback) {
      let raw = '';
      stream.setEncoding('utf8');
      stream.on('data', (c: string) => (raw += c));
      stream.on('end', () => {
        mails.push(raw);
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as AddressInfo).port;
  return { port, mails, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/**
 * What this process writes to its stdout and stderr (and its console) from now on: a runner
 * process's output, which must not hold the secret either. Called through, unchanged.
 */
function captureOutput(): { text(): string; stop(): void } {
  let text = '';
  const spies: { mockRestore(): void }[] = [];
  const keep = (chunk: unknown) => {
    text += typeof chunk === 'string' ? chunk : Buffer.isBuffer(chunk) ? chunk.toString() : '';
  };
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
    spies.push(
      vi.spyOn(stream, 'write').mockImplementation((...args: unknown[]) => {
        keep(args[0]);
        return write(...args);
      }),
    );
  }
  for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    const original = console[method].bind(console);
    spies.push(
      vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
        text += args.map(String).join(' ');
        original(...args);
      }),
    );
  }
  return { text: () => text, stop: () => spies.forEach((s) => s.mockRestore()) };
}

function flakySchedule(throttle: string, extra = '', to = '[ops]', every = '*/2'): string {
  return writeSchedule(`
namespace: notify
notify:
  ops:
    webhook: {urlFromEnv: HOOK_URL, format: json}
    timeout: 2s
  mail:
    email: {smtpFromEnv: SMTP_URL, from: baton@example.test, to: [ops@example.test]}
defaults:
  notify: {to: ${to}, throttle: ${throttle}}
jobs:
  flaky:
    schedule: "${every} * * * * *"
    command: [sh, -c, 'echo "settling batch"; test -f ok || { echo "ledger locked" >&2; exit 3; }']
${extra}`);
}

// SMTP_URL: the mail target is in every schedule; only the first test sends to it.
const envFor = (r: WebhookReceiver) => ({
  HOOK_URL: r.url(`/hook/${SECRET}`),
  SMTP_URL: 'smtp://127.0.0.1:9',
});
const bodies = (rs: ReceivedRequest[], event?: string) =>
  rs.map((r) => r.body).filter((b) => event == null || b.event === event);

describe('notifications from a fleet of three', () => {
  it('tells each failed fire once, whichever runner ran it, then one recovery; no secret leaks', async () => {
    receiver = await WebhookReceiver.start();
    const smtp = await smtpServer();
    const config = flakySchedule('0s', '', '[ops, mail]', '*');
    const env = { ...envFor(receiver), SMTP_URL: `smtp://relay:${SECRET}@127.0.0.1:${smtp.port}` };
    setEnv(env);
    const output = captureOutput();
    const runners = await fleet.start(['n1', 'n2', 'n3'], { config, runner: { timings: QUICK } });
    await waitFor('three failed fires', async () => (await failedFires('flaky')).length >= 3, {
      timeoutMs: 20_000,
    });
    writeFileSync(path.join(path.dirname(config), 'ok'), '');
    await waitFor(
      'the recovery told',
      () => bodies(receiver!.accepted(), 'recovered').length >= 1 || undefined,
      { timeoutMs: 15_000 },
    );
    // Anything further would be a repeat: five passes of each runner, and at least the second
    // the old e2e test waited.
    await notifierPasses(runners, 5, { atLeastMs: 1_000 });
    const fires = await failedFires('flaky');
    const told = bodies(receiver.accepted(), 'failed');
    expect(told.map((b) => b.fire).sort()).toEqual(fires);
    expect(new Set(told.map((b) => b.id)).size).toBe(told.length);
    expect(bodies(receiver.accepted(), 'recovered')).toHaveLength(1);
    const first = told[0]!;
    expect(first).toMatchObject({ version: 1, event: 'failed', job: 'flaky', exitCode: 3 });
    expect(String(first.output)).toContain('ledger locked');
    const request = receiver.accepted()[0]!;
    expect(request.headers['idempotency-key']).toBe(first.id);
    // Every runner delivered at least its share of the work? Not required — but no runner logged
    // the secret, nothing was printed with it, and no row holds it.
    for (const r of runners) expect(JSON.stringify(r.lines) + r.stderr).not.toContain(SECRET);
    const rows = await notices();
    expect(JSON.stringify(rows)).not.toContain(SECRET);
    const history = await fleet.db.query('SELECT * FROM baton_runs');
    expect(JSON.stringify(history)).not.toContain(SECRET);
    // The same events by mail, through a real SMTP server, the output excerpt in the body.
    await waitFor('a mail per event', () => smtp.mails.length >= fires.length + 1 || undefined);
    expect(smtp.mails.filter((m) => /^Subject: \[baton\] flaky failed/m.test(m))).toHaveLength(
      fires.length,
    );
    expect(smtp.mails[0]).toContain('ledger locked');
    await smtp.close();
    await waitFor(
      'every row sent',
      async () => (await notices()).every((r) => r.status === 'sent') || undefined,
    );
    output.stop();
    expect(output.text()).not.toContain(SECRET);
    const listed = await baton([
      'notifications',
      '--json',
      '--database-url',
      fleet.db.url,
      '--namespace',
      'notify',
    ]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).not.toContain(SECRET);
    // `baton notify test`: one test event from this host, now; a target that is down is 69.
    const before = receiver.accepted().length;
    const test = await baton(['notify', 'test', 'ops', '--config', config], { env });
    expect(test.code, test.stderr).toBe(0);
    expect(
      receiver
        .accepted()
        .slice(before)
        .map((r) => r.body.event),
    ).toEqual(['test']);
    await receiver.down();
    const down = await baton(['notify', 'test', 'ops', '--config', config], { env });
    expect(down.code).toBe(69);
    expect(down.stderr).toMatch(/webhook "ops": connection refused/);
    expect(down.stderr + down.stdout + test.stdout).not.toContain(SECRET);
  });

  it('throttles a job failing every second into summaries that count every failure', async () => {
    receiver = await WebhookReceiver.start();
    const config = writeSchedule(`
namespace: notify
notify:
  ops: {webhook: {urlFromEnv: HOOK_URL}}
jobs:
  flaky:
    schedule: "* * * * * *"
    command: [sh, -c, 'test -f ok || exit 1']
    notify: {to: [ops], throttle: 4s}
`);
    setEnv(envFor(receiver));
    const runners = await fleet.start(['t1', 't2'], { config, runner: { timings: QUICK } });
    await waitFor(
      'a first summary',
      () => bodies(receiver!.accepted(), 'summary').length >= 2 || undefined,
      { timeoutMs: 20_000 },
    );
    writeFileSync(path.join(path.dirname(config), 'ok'), '');
    await waitFor(
      'the recovery',
      () => bodies(receiver!.accepted(), 'recovered').length >= 1 || undefined,
      { timeoutMs: 15_000 },
    );
    // Anything further would be told by now: eight passes, and the 1.5 s it would come in.
    await notifierPasses(runners, 8, { atLeastMs: 1_500 });
    const accepted = receiver.accepted().map((r) => r.body);
    const failedTold = accepted.filter((b) => b.event === 'failed').length;
    const summed = accepted
      .filter((b) => b.event === 'summary')
      .reduce((n, b) => n + Number(b.count), 0);
    const recovered = accepted.find((b) => b.event === 'recovered')!;
    const folded = /after (\d+) more failure/.exec(String(recovered.text))?.[1] ?? '0';
    expect(failedTold).toBe(1);
    // Every failure is told once: singly, in a summary, or in the recovery's "after N more".
    expect(failedTold + summed + Number(folded)).toBe((await failedFires('flaky')).length);
    // Summaries at most once per window.
    const at = receiver.accepted().map((r) => r.at);
    for (let i = 1; i < at.length - 1; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThan(2_500);
  });
});

describe('a runner with the longest host name allowed', () => {
  it('delivers its notifications: the outbox claim fits (issue 34, item 6)', async () => {
    // 255 characters, the limit of --host: the claimant `host#pid#token` used to overflow
    // claimed_by VARCHAR(255), so that every pass failed and nothing was ever delivered.
    receiver = await WebhookReceiver.start();
    const host = `${'long-host-'.repeat(25)}12345`;
    expect(host).toHaveLength(255);
    setEnv(envFor(receiver));
    await fleet.start([host], { config: flakySchedule('0s'), runner: { timings: QUICK } });
    await waitFor(
      'a failed fire told',
      () => bodies(receiver!.accepted(), 'failed').length >= 1 || undefined,
      { timeoutMs: 20_000 },
    );
    const told = bodies(receiver.accepted(), 'failed')[0]!;
    expect(told).toMatchObject({ event: 'failed', job: 'flaky', host });
  });
});

describe('delivery through faults', () => {
  it('loses nothing while the receiver is down, then slow; repeats carry the same id', async () => {
    receiver = await WebhookReceiver.start();
    await receiver.down();
    const config = flakySchedule('0s');
    setEnv(envFor(receiver));
    // f1's /metrics, as `baton start --http` serves them (http/runner-metrics.ts), each scrape
    // reading the outbox afresh (scrapes share a read for 5 s by default).
    const [f1] = await fleet.start(['f1'], {
      config,
      runner: { timings: { ...QUICK, metrics: { readReuseMs: PASS_MS } } },
    });
    const metrics = runnerMetrics(
      { host: 'f1', namespace: 'notify', version: 'test' },
      () => f1!.runner,
      pino({ base: { host: 'f1' } }),
    );
    const runners = [f1!, ...(await fleet.start(['f2'], { config, runner: { timings: QUICK } }))];
    await waitFor(
      'a retry recorded',
      async () => (await notices()).some((n) => n.attempts >= 2 && n.status === 'pending'),
      { timeoutMs: 15_000 },
    );
    const pending = await baton([
      'notifications',
      '--json',
      '--status',
      'pending',
      '--database-url',
      fleet.db.url,
      '--namespace',
      'notify',
    ]);
    const listed = JSON.parse(pending.stdout) as {
      notifications: { lastError: string | null; attempts: number }[];
    };
    // The newest may not have been tried yet; one that was says why it waits.
    const tried = listed.notifications.find((n) => n.attempts > 0);
    expect(tried?.lastError).toMatch(/refused|connect/i);
    // Down for a while; meanwhile the metrics show how long the oldest one has waited (the
    // row's age: real time, whatever the cadences).
    await waitFor(
      'the oldest pending row over 8 s old in the metrics',
      async () => {
        const age = parseMetrics(await metrics.render()).find(
          (m) =>
            m.name === 'baton_notifications_oldest_pending_seconds' && m.labels.target === 'ops',
        );
        return (age?.value ?? 0) > 8;
      },
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    receiver.mode = 'slow';
    receiver.slowMs = 4_000; // past the target's 2 s timeout: received, the answer never seen
    await receiver.up();
    await waitFor('a slow request received', () => receiver!.requests.length >= 1 || undefined, {
      timeoutMs: 20_000,
    });
    // Its sender gave up waiting for the answer: the outcome is unknown, the row retried.
    await waitFor('a slow answer timed out', () =>
      runners
        .flatMap((r) => r.lines)
        .find(
          (l) =>
            l.msg === 'notification not delivered' &&
            /waiting for the answer/.test(String(l.error)),
        ),
    );
    writeFileSync(path.join(path.dirname(config), 'ok'), '');
    receiver.mode = 'ok';
    await waitFor(
      'every failed fire received and every row sent',
      async () => {
        const rows = await notices();
        return rows.length > 0 && rows.every((r) => r.status === 'sent') ? rows : undefined;
      },
      { timeoutMs: 40_000 },
    );
    const fires = await failedFires('flaky');
    const received = receiver.requests.filter((r) => r.body.event === 'failed');
    expect([...new Set(received.map((r) => r.body.fire))].sort()).toEqual(fires);
    // A repeat only of a delivery that was received but whose answer never came, same id.
    const byId = new Map<string, ReceivedRequest[]>();
    for (const r of received)
      byId.set(String(r.body.id), [...(byId.get(String(r.body.id)) ?? []), r]);
    for (const [id, copies] of byId) {
      expect(copies.filter((c) => c.answered != null).length, id).toBeLessThanOrEqual(1);
      expect(new Set(copies.map((c) => c.body.fire)).size).toBe(1);
    }
    expect(readFileSync(config, 'utf8')).not.toContain(SECRET);
  });

  it('the dead-man switch: every runner stopped past expect → one no-success', async () => {
    receiver = await WebhookReceiver.start();
    const config = writeSchedule(`
namespace: notify
notify:
  ops: {webhook: {urlFromEnv: HOOK_URL}}
jobs:
  nightly:
    schedule: "*/2 * * * * *"
    expect: 3s
    command: [sh, -c, 'test ! -f broken']
    notify: {to: [ops], on: [no-success]}
`);
    setEnv(envFor(receiver));
    const [a, b] = await fleet.start(['d1', 'd2'], { config, runner: { timings: QUICK } });
    await waitFor(
      'a success',
      async () =>
        (await fleet.db.query(`SELECT 1 FROM baton_runs WHERE status = 'done'`)).length > 0,
    );
    await Promise.all([a!.stop(), b!.stop()]);
    // Back, but failing: no success resets the switch before it is judged.
    writeFileSync(path.join(path.dirname(config), 'broken'), '');
    // Every runner stays stopped until the job is overdue by the database's clock: its last
    // success (a run's end, as the switch measures it) plus `expect`.
    await waitFor(
      'the job overdue while no runner runs',
      async () =>
        (
          await fleet.db.query<{ overdue: number }>(
            `SELECT NOW(3) >= MAX(finished_at) + INTERVAL 3 SECOND AS overdue
               FROM baton_runs WHERE status = 'done'`,
          )
        )[0]?.overdue === 1,
      { intervalMs: 100 },
    );
    const [c] = await fleet.start(['d3'], { config, runner: { timings: QUICK } });
    await waitFor('no-success told', () => bodies(receiver!.accepted(), 'no-success')[0], {
      timeoutMs: 20_000,
    });
    // Six more evaluations, over the 3 s of the job's `expect` (a new episode would be told
    // within one): still told once.
    await notifierPasses([c!], 6, { evaluated: true, atLeastMs: 3_000 });
    expect(bodies(receiver.accepted(), 'no-success')).toHaveLength(1);
  });
});
