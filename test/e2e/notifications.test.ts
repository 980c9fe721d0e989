/**
 * Notifications where a process boundary is the point (issue 19), against real runner processes,
 * the shared MariaDB and a real HTTP receiver on 127.0.0.1:
 * - `kill -9` of the runner that is delivering: another runner delivers it, once, under the same
 *   event id (the runners that deliver it instead are in the test process: what is killed is a
 *   process).
 * - `baton start --timings` (hidden, for tests): a bad key is 64 before anything starts; a short
 *   evaluation and gone-after tell `runner-gone` seconds after a kill -9, not half a minute.
 *
 * The rest (a fleet of three told once, the throttle, a long host name, a receiver down then
 * slow, the dead-man's switch) is in-process/notifications.test.ts.
 *
 * The runners run with short notifier cadences (QUICK, through --timings): nothing here waits
 * for the 15 s evaluation or a back-off grown to seconds, only for the events themselves.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { InProcessRunner } from '../helpers/in-process-fleet.js';
import { notifierPasses } from '../helpers/notifier-passes.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { WebhookReceiver, type ReceivedRequest } from '../helpers/webhook-receiver.js';

/** The notifier's pass for due rows (1 s by default). */
const PASS_MS = 200;
/**
 * Short cadences: a pass every PASS_MS, the evaluations without a verdict every 500 ms (15 s),
 * retries from 250 ms doubling up to 2 s (1 s up to 5 min), and a claim that lapses 1 s after
 * its delivery's timeout (5 s).
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
/** Runners in the test process beside the fleet's processes: stopped before its database goes. */
const inProcess: InProcessRunner[] = [];

// Registered before the fleet's afterEach, so run after it (vitest runs after-hooks as a stack).
afterEach(async () => {
  await receiver?.down();
  receiver = null;
  vi.unstubAllEnvs();
});

const fleet = useFleet('notifications', { perTest: true });

// Registered after the fleet's afterEach, so run before it: before the database is dropped.
afterEach(async () => {
  await Promise.all(inProcess.splice(0).map((r) => r.stop(true)));
});

interface NoticeRow {
  id: number;
  status: string;
  claimed_by: string | null;
}

const notices = () => fleet.db.query<NoticeRow>('SELECT * FROM baton_notifications ORDER BY id');

const envFor = (r: WebhookReceiver) => ({
  HOOK_URL: r.url(`/hook/${SECRET}`),
  SMTP_URL: 'smtp://127.0.0.1:9',
});
const bodies = (rs: ReceivedRequest[], event?: string) =>
  rs.map((r) => r.body).filter((b) => event == null || b.event === event);

describe('delivery through faults', () => {
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
    // k1 alone, a process: the delivery it is making is the one its kill -9 interrupts.
    const [k1] = await fleet.start(['k1'], { config, env: envFor(receiver), timings: QUICK });
    const first = await waitFor('the delivery to arrive', () => receiver!.requests[0], {
      timeoutMs: 15_000,
    });
    const [row] = await notices();
    expect(row!.status, 'the row is being sent').toBe('sending');
    expect(row!.claimed_by, 'the row is claimed by k1').toMatch(/^k1#/);
    receiver.mode = 'ok';
    await k1!.stop('SIGKILL');
    // Two more runners, in this process (their environment is this process's): the claim k1
    // left lapses, and one of them delivers the event. (That live runners leave a live claim
    // alone is notify-claims.test.ts's race; started before the kill here, they would meet k1's
    // own 3 s timeout on a loaded machine and deliver its retry.)
    for (const [name, value] of Object.entries(envFor(receiver))) vi.stubEnv(name, value);
    // Their passes twice as often: the ten below take a second.
    const timings = { notifier: { ...QUICK.notifier, passMs: PASS_MS / 2 } };
    const survivors = ['k2', 'k3'].map(
      (host) =>
        new InProcessRunner(host, { config, databaseUrl: fleet.db.url, host, runner: { timings } }),
    );
    inProcess.push(...survivors);
    await Promise.all(survivors.map((r) => r.start()));
    const second = await waitFor(
      'another runner delivering it',
      () => receiver!.accepted().find((r) => r !== first),
      { timeoutMs: 60_000 },
    );
    expect(second.body.id).toBe(first.body.id);
    // Anything further would be a repeat: ten passes of each, over the 2 s the test waited before.
    await notifierPasses(survivors, 10, { atLeastMs: 2_000 });
    expect(receiver.accepted()).toHaveLength(1);
    const [after] = await notices();
    expect(after!.status).toBe('sent');
  }, 90_000);
});

describe('baton start --timings (for tests: test/README.md)', () => {
  it('refuses a bad key with 64, naming it, before anything starts', async () => {
    const config = writeSchedule(`
namespace: notify
notify:
  ops:
    webhook: {urlFromEnv: HOOK_URL, format: json}
    timeout: 2s
  mail:
    email: {smtpFromEnv: SMTP_URL, from: baton@example.test, to: [ops@example.test]}
defaults:
  notify: {to: [ops], throttle: 0s}
jobs:
  flaky:
    schedule: "*/2 * * * * *"
    command: [sh, -c, 'echo "settling batch"; test -f ok || { echo "ledger locked" >&2; exit 3; }']
`);
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
