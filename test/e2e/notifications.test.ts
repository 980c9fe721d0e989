/**
 * Notifications, told once whichever runner noticed (issue 19), against real runners, the shared
 * MariaDB and a real HTTP receiver on 127.0.0.1:
 * - 3 runners, a job failing every 2 s: one delivery per failed fire, none twice; then it works
 *   again → one `recovered`. The webhook's secret (in its URL) is in no log, row or error.
 * - The throttle: a job failing every second is told once, then in summaries whose counts add
 *   up to every failure, then `recovered`.
 * - The receiver down (refused), then slow (answers after the timeout), then up: nothing lost,
 *   retries recorded, and a repeat only of what was received with its outcome unknown, under the
 *   same event id.
 * - `kill -9` of the runner that is delivering: another runner delivers it.
 * - The dead-man's switch with every runner stopped past `expect`: one `no-success`.
 * - `baton start --timings` (hidden, for tests): a bad key is 64 before anything starts; a short
 *   evaluation and gone-after tell `runner-gone` seconds after a kill -9, not half a minute.
 *
 * The runners run with short notifier cadences (QUICK, through --timings): nothing here waits
 * for the 15 s evaluation or a back-off grown to seconds, only for the events themselves.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterEach, describe, expect, it } from 'vitest';
import { baton, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort } from '../helpers/private-server.js';
import { parseMetrics } from '../helpers/prometheus.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { WebhookReceiver, type ReceivedRequest } from '../helpers/webhook-receiver.js';

const fleet = useFleet('notifications', { perTest: true });
/** The notifier's pass for due rows (1 s by default). */
const PASS_MS = 200;
/**
 * Short cadences: a pass every PASS_MS, the evaluations without a verdict every 500 ms (15 s),
 * retries from 250 ms doubling up to 2 s (1 s up to 5 min) — so that a receiver down for 15 s
 * still costs fewer tries than MAX_ATTEMPTS (25) — and a claim that lapses 1 s after its
 * delivery's timeout (5 s).
 */
const QUICK = {
  notifier: {
    passMs: PASS_MS,
    evaluateMs: 500,
    backoffFirstMs: 250,
    backoffMaxMs: 2_000,
    claimMarginMs: 1_000,
  },
};
const SECRET = 'hook-s3cr3t-7f3a9c';
let receiver: WebhookReceiver | null = null;

afterEach(async () => {
  await receiver?.down();
  receiver = null;
});

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

function flakySchedule(throttle: string, extra = '', to = '[ops]'): string {
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
    schedule: "*/2 * * * * *"
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
    const config = flakySchedule('0s', '', '[ops, mail]');
    const env = { ...envFor(receiver), SMTP_URL: `smtp://relay:${SECRET}@127.0.0.1:${smtp.port}` };
    const runners = await fleet.start(['n1', 'n2', 'n3'], { config, env, timings: QUICK });
    await waitFor('three failed fires', async () => (await failedFires('flaky')).length >= 3, {
      timeoutMs: 20_000,
    });
    writeFileSync(path.join(path.dirname(config), 'ok'), '');
    await waitFor(
      'the recovery told',
      () => bodies(receiver!.accepted(), 'recovered').length >= 1 || undefined,
      { timeoutMs: 15_000 },
    );
    await sleep(5 * PASS_MS); // anything further would be a repeat (five passes of each runner)
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
    // the secret, and no row holds it.
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
    await fleet.start(['t1', 't2'], { config, env: envFor(receiver), timings: QUICK });
    await waitFor(
      'a first summary',
      () => bodies(receiver!.accepted(), 'summary').length >= 2 || undefined,
      {
        timeoutMs: 20_000,
      },
    );
    writeFileSync(path.join(path.dirname(config), 'ok'), '');
    await waitFor(
      'the recovery',
      () => bodies(receiver!.accepted(), 'recovered').length >= 1 || undefined,
      {
        timeoutMs: 15_000,
      },
    );
    await sleep(1_500);
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
    await fleet.start([host], {
      config: flakySchedule('0s'),
      env: envFor(receiver),
      timings: QUICK,
    });
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
    const http = await freePort();
    await fleet.start(['f1'], {
      config,
      env: envFor(receiver),
      timings: QUICK,
      args: ['--http', `127.0.0.1:${http}`],
    });
    await fleet.start(['f2'], { config, env: envFor(receiver), timings: QUICK });
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
        const metrics = parseMetrics(
          await (await fetch(`http://127.0.0.1:${http}/metrics`)).text(),
        );
        const age = metrics.find(
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
    await waitFor('a slow answer timed out', () => receiver!.requests.length >= 1 || undefined, {
      timeoutMs: 20_000,
    });
    await sleep(2_500);
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

  it('kill -9 of the delivering runner: another one delivers the event', async () => {
    receiver = await WebhookReceiver.start();
    receiver.mode = 'hang';
    const config = writeSchedule(`
namespace: notify
notify:
  ops: {webhook: {urlFromEnv: HOOK_URL}, timeout: 3s}
jobs:
  once:
    schedule: "*/2 * * * * *"
    command: [sh, -c, 'test -f done && exit 0; touch done; exit 4']
    notify: {to: [ops], on: [failed]}
`);
    const runners = await fleet.start(['k1', 'k2', 'k3'], {
      config,
      env: envFor(receiver),
      timings: QUICK,
    });
    const first = await waitFor('the delivery to arrive', () => receiver!.requests[0], {
      timeoutMs: 15_000,
    });
    const [row] = await notices();
    const holder = runners.find(
      (r) =>
        row!.status === 'sending' &&
        String((row as unknown as { claimed_by: string }).claimed_by).startsWith(`${r.host}#`),
    ) as RunnerProcess;
    expect(holder, 'the row is claimed by one of the runners').toBeTruthy();
    receiver.mode = 'ok';
    await holder.stop('SIGKILL');
    const second = await waitFor(
      'another runner delivering it',
      () => receiver!.accepted().find((r) => r !== first),
      { timeoutMs: 60_000 },
    );
    expect(second.body.id).toBe(first.body.id);
    await sleep(2_000);
    expect(receiver.accepted()).toHaveLength(1);
    const [after] = await notices();
    expect(after!.status).toBe('sent');
  }, 90_000);

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
    const [a, b] = await fleet.start(['d1', 'd2'], {
      config,
      env: envFor(receiver),
      timings: QUICK,
    });
    await waitFor(
      'a success',
      async () =>
        (await fleet.db.query(`SELECT 1 FROM baton_runs WHERE status = 'done'`)).length > 0,
    );
    await Promise.all([a!.stop(), b!.stop()]);
    // Back, but failing: no success resets the switch before it is judged.
    writeFileSync(path.join(path.dirname(config), 'broken'), '');
    await sleep(4_000);
    await fleet.start(['d3'], { config, env: envFor(receiver), timings: QUICK });
    await waitFor('no-success told', () => bodies(receiver!.accepted(), 'no-success')[0], {
      timeoutMs: 20_000,
    });
    await sleep(3_000);
    expect(bodies(receiver.accepted(), 'no-success')).toHaveLength(1);
  });
});

describe('baton start --timings (for tests: test/README.md)', () => {
  it('refuses a bad key with 64, naming it, before anything starts', async () => {
    const config = flakySchedule('0s');
    const env = { HOOK_URL: 'http://127.0.0.1:9/', SMTP_URL: 'smtp://127.0.0.1:9' };
    // A database that refuses: a runner that started would wait for it, not exit.
    const args = ['start', '--config', config, '--database-url', 'mysql://root@127.0.0.1:9/x'];
    const bad = await baton([...args, '--timings', '{"notifier":{"evaluateMs":500,"everyMs":1}}'], {
      env,
      timeoutMs: 15_000,
    });
    expect(bad.code).toBe(64);
    expect(bad.stderr).toContain('timings.notifier.everyMs: unknown key');
    expect(bad.stdout).not.toContain('runner');
    const zero = await baton([...args, '--timings', '{"fleetWatch":{"companionsMs":0}}'], { env });
    expect(zero.code).toBe(64);
    expect(zero.stderr).toContain('timings.fleetWatch.companionsMs: must be a positive');
    const notJson = await baton([...args, '--timings', 'notifier.evaluateMs=500'], { env });
    expect(notJson.code).toBe(64);
    expect(notJson.stderr).toContain('--timings: not JSON');
  });

  it('a short evaluation and gone-after take effect: runner-gone seconds after a kill -9', async () => {
    receiver = await WebhookReceiver.start();
    const config = writeSchedule(`
namespace: notify
notify:
  ops: {webhook: {urlFromEnv: HOOK_URL}}
jobs:
  quiet:
    schedule: "0 0 1 1 *"
    command: [sh, -c, 'true']
    notify: {to: [ops], on: [runner-gone]}
`);
    // With the defaults this takes 15 s of silence (gone-after), then up to 15 s more for the
    // next evaluation: well past the bound below.
    const timings = {
      notifier: { ...QUICK.notifier, goneAfterMs: 2_000 },
      registrar: { refreshMs: 500 },
    };
    const [watcher, victim] = await fleet.start(['w1', 'v1'], {
      config,
      env: envFor(receiver),
      timings,
    });
    expect(watcher).toBeTruthy();
    await victim!.stop('SIGKILL');
    const killedAt = Date.now();
    const told = await waitFor(
      'runner-gone told',
      () => bodies(receiver!.accepted(), 'runner-gone')[0],
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(Date.now() - killedAt).toBeLessThan(8_000);
    expect(told).toMatchObject({ event: 'runner-gone', host: 'v1' });
    await sleep(4 * 500); // four more evaluations: still told once
    expect(bodies(receiver.accepted(), 'runner-gone')).toHaveLength(1);
  });
});
