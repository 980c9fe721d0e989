/**
 * Placement across real runner processes (docs/placement.md): three runners, one tagged `sftp`,
 * a per-second job with `runOn: {tags: [sftp]}` that records itself in a journal.
 * - While the tagged runner lives, the job runs there only, every fire, and the others write no
 *   row for it at all.
 * - `kill -9` of the tagged runner: once it is seen gone, `baton status` is CRITICAL with
 *   `no-eligible-runner`, every fire after the last one it ran gets exactly one `missed` row of
 *   kind `no-eligible-runner` (those of the seconds before it was seen gone too: they had no row
 *   at all), naming what the job needs and the live runners; and a webhook is told once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { writeSchedule } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { writeJournaledSchedule } from '../helpers/ground-truth.js';
import { baton } from '../helpers/cli-in-process.js';
import { inspectCli } from '../helpers/inspect.js';
import { status } from '../helpers/status-cli.js';
import { waitFor } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

let receiver: WebhookReceiver | null = null;
afterEach(async () => {
  await receiver?.down();
  receiver = null;
});

const fleet = useFleet('placement');

/** The companions looked at every 500 ms, the notifier's passes and evaluations quick. */
const QUICK = {
  fleetWatch: { companionsMs: 500 },
  notifier: { passMs: 200, evaluateMs: 500 },
};

interface Row {
  id: number;
  scheduled_at: Date;
  winner: number | null;
  status: string;
  reason_kind: string | null;
  reason: string | null;
  host: string;
}

describe('runOn: {tags: [sftp]}', () => {
  it('runs only on the tagged runner; with it gone, status is critical, each fire gets one missed row, told once', async () => {
    receiver = await WebhookReceiver.start();
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: placement
notify:
  ops: {webhook: {urlFromEnv: HOOK_URL}}
jobs:
  upload:
    schedule: "* * * * * *"
    runOn: {tags: [sftp]}
    command: ${j.yaml()}
    notify: {to: [ops], on: [no-eligible-runner]}
`,
    );
    const env = { HOOK_URL: receiver.url('/hook') };
    // The tagged runner first: plain ones alone would rightly record the fires before it came.
    const [tagged] = await fleet.start(['tagged'], {
      config,
      env,
      timings: QUICK,
      args: ['--tag', 'sftp'],
    });
    // …and running: "started" comes before it has registered, and a plain runner that looked at
    // the registry before that would rightly mark the fires nobody ran meanwhile.
    await waitFor('a first run of upload', () => journal.attempts('upload').length > 0, {
      timeoutMs: 20_000,
    });
    const plain = await fleet.start(['plain-a', 'plain-b'], { config, env, timings: QUICK });
    const rows = () =>
      fleet.db.query<Row>(
        `SELECT id, scheduled_at, winner, status, reason_kind, reason, host FROM baton_runs
          WHERE job = 'upload' ORDER BY scheduled_at, id`,
      );

    // The tagged runner runs it, fire after fire; nobody else writes a row for it.
    await waitFor('five runs of upload', () => journal.attempts('upload').length >= 5, {
      timeoutMs: 20_000,
    });
    // explain: the untagged runners stood aside by design, not "left no attempt" — for a fire
    // after both of them registered (on a loaded machine they may start seconds after it ran).
    const [{ since }] = (await fleet.db.query<{ since: Date }>(
      `SELECT MAX(started_at) AS since FROM baton_runners WHERE host IN ('plain-a', 'plain-b')`,
    )) as [{ since: Date }];
    const explainedRun = await waitFor(
      'a run of upload after the plain runners registered',
      () => journal.attempts('upload').find((a) => a.fire > since.getTime() + 1_000),
      { timeoutMs: 20_000 },
    );
    const fire = new Date(explainedRun.fire).toISOString();
    const explained = await inspectCli(fleet.db, config, 'explain', 'upload', fire);
    expect(explained.code, explained.stderr).toBe(0);
    expect(explained.stdout).toContain('ran on tagged');
    expect(explained.stdout).toContain('plain-a: not eligible here (needs tag sftp)');
    expect(explained.stdout).toContain('plain-b: not eligible here (needs tag sftp)');
    expect(explained.stdout).toContain('runs only on runners tagged sftp: tagged');
    expect(explained.stdout).not.toContain('left no attempt');
    await tagged!.stop('SIGKILL');
    const ran = journal.attempts('upload');
    expect(new Set(ran.map((a) => a.host))).toEqual(new Set(['tagged']));
    const fires = ran.map((a) => a.fire);
    for (let i = 1; i < fires.length; i++)
      expect(fires[i]! - fires[i - 1]!, 'every fire').toBe(1000);
    const lastRan = Math.max(...fires);

    // Gone (seen after its heartbeat is 15 s old): the fires from then on, and those before it,
    // get their missed rows.
    const missed = await waitFor(
      'missed rows for fires after the kill',
      async () => {
        const all = await rows();
        const late = all.filter(
          (r) => r.status === 'missed' && r.scheduled_at.getTime() > lastRan + 20_000,
        );
        return late.length >= 3 ? all : null;
      },
      { timeoutMs: 40_000 },
    );
    const lastWin = Math.max(
      ...missed
        .filter((r) => r.winner != null && r.winner >= 1)
        .map((r) => r.scheduled_at.getTime()),
    );
    expect(lastWin).toBeGreaterThanOrEqual(lastRan);
    // From its first run up to then, the tagged runner's rows only: the others neither contended
    // nor skipped. (Before its first run, its own start-up look-back may rightly record a fire
    // of the seconds it was connecting as `not-run`.)
    const firstRan = Math.min(...fires);
    const before = missed.filter(
      (r) => r.scheduled_at.getTime() >= firstRan && r.scheduled_at.getTime() <= lastWin,
    );
    expect(before.filter((r) => r.host !== 'tagged')).toEqual([]);
    expect(before.filter((r) => r.status === 'missed' || r.status === 'skipped')).toEqual([]);
    const after = missed.filter((r) => r.scheduled_at.getTime() > lastWin);
    const newest = Math.max(...after.map((r) => r.scheduled_at.getTime()));
    // Exactly one row per fire, every fire from the last one run to the newest recorded.
    const byFire = new Map<number, Row[]>();
    for (const r of after)
      byFire.set(r.scheduled_at.getTime(), [...(byFire.get(r.scheduled_at.getTime()) ?? []), r]);
    for (let at = lastWin + 1000; at <= newest; at += 1000) {
      const those = byFire.get(at) ?? [];
      expect(those.length, `rows of the fire at ${new Date(at).toISOString()}`).toBe(1);
      expect(those[0]).toMatchObject({
        status: 'missed',
        winner: 0,
        reason_kind: 'no-eligible-runner',
      });
      expect(['plain-a', 'plain-b']).toContain(those[0]!.host);
      expect(those[0]!.reason).toContain('needs tag sftp');
      expect(those[0]!.reason).toContain('live runners: plain-a, plain-b');
    }

    const { code, json } = await status(fleet.db, ['--namespace', 'placement']);
    expect(code, 'CRITICAL').toBe(2);
    expect(json.state).toBe('CRITICAL');
    const finding = json.warnings.find((w) => w.kind === 'no-eligible-runner');
    expect(finding).toMatchObject({ severity: 'critical', job: 'upload' });
    expect(finding!.message).toContain('needs tag sftp');
    const runners = json.runners as unknown as { host: string; tags: string[] }[];
    expect(runners.find((r) => r.host === 'tagged')?.tags).toEqual(['sftp']);
    expect(runners.find((r) => r.host === 'plain-a')?.tags).toEqual([]);

    // Told once: the event, then more fires missed and more evaluations — no second one.
    const told = await waitFor(
      'the no-eligible-runner notification',
      () => receiver!.accepted().find((r) => r.body.event === 'no-eligible-runner'),
      { timeoutMs: 15_000 },
    );
    expect(told.body.job).toBe('upload');
    expect(String(told.body.text)).toContain('needs tag sftp');
    const toldAt = (await rows()).filter((r) => r.status === 'missed').length;
    await waitFor('three more fires missed', async () => {
      const now = (await rows()).filter((r) => r.status === 'missed').length;
      return now >= toldAt + 3;
    });
    expect(receiver.requests.filter((r) => r.body.event === 'no-eligible-runner')).toHaveLength(1);
    const outbox = await fleet.db.query<{ n: number }>(
      `SELECT COUNT(*) AS n FROM baton_notifications WHERE event = 'no-eligible-runner'`,
    );
    expect(Number(outbox[0]!.n)).toBe(1);
    for (const r of plain) expect(r.errors(), r.host).toEqual([]);
  }, 60_000);
});

describe('catch-up beside a no-eligible-runner mark', () => {
  it('a tagged runner back catches up the fire its gap left, marked by an untagged one meanwhile', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: placement-cu
jobs:
  upload:
    schedule: "*/5 * * * * *"
    runOn: {tags: [sftp]}
    catchUp: {window: 1m, fires: all}
    command: ${j.yaml()}
`,
    );
    await fleet.start(['plain-cu'], { config, timings: QUICK });
    const [tagged] = await fleet.start(['tagged-cu'], {
      config,
      timings: QUICK,
      args: ['--tag', 'sftp'],
    });
    await waitFor('a run of upload', () => journal.attempts('upload').length > 0, {
      timeoutMs: 20_000,
    });
    expect(await tagged!.stop('SIGTERM')).toBe(0);
    // The untagged runner marks the next fire: no runner that may run it was alive.
    await waitFor(
      'a no-eligible-runner mark',
      async () => {
        const rows = await fleet.db.query<{ scheduled_at: Date }>(
          `SELECT scheduled_at FROM baton_runs
            WHERE job = 'upload' AND reason_kind = 'no-eligible-runner'`,
        );
        return rows.length > 0 ? rows : null;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // Back: its recovery catches up the fires of its gap, marked ones included (before, a mark
    // counted as an attempt, and a marked fire was never run).
    await fleet.start(['tagged-cu'], { config, timings: QUICK, args: ['--tag', 'sftp'] });
    const [caught] = await waitFor(
      'a marked fire caught up',
      async () => {
        const rows = await fleet.db.query<{ scheduled_at: Date; host: string }>(
          `SELECT w.scheduled_at, w.host FROM baton_runs AS w
             JOIN baton_runs AS m ON m.namespace = w.namespace AND m.job = w.job
              AND m.scheduled_at = w.scheduled_at AND m.reason_kind = 'no-eligible-runner'
            WHERE w.job = 'upload' AND w.winner = 1 AND w.triggered_by = 'catchup'`,
        );
        return rows.length > 0 ? rows : null;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(caught!.host).toBe('tagged-cu');
    // By the job's own journal: it ran that fire, there, once.
    const ofFire = () =>
      journal.attempts('upload').filter((x) => x.fire === caught!.scheduled_at.getTime());
    await waitFor('the caught-up run journaled', () => ofFire().length > 0, { timeoutMs: 10_000 });
    expect(ofFire().map((x) => x.host)).toEqual(['tagged-cu']);
  });
});

describe('baton list', () => {
  it('says where each job may run', async () => {
    const config = writeSchedule(`
namespace: placement-list
jobs:
  anywhere:
    schedule: "0 * * * *"
    command: ['true']
  upload:
    schedule: "0 * * * *"
    runOn: {tags: [sftp, region=eu]}
    command: ['true']
  report:
    schedule: "0 * * * *"
    runOn: {hosts: [srv-01, srv-02]}
    prefer: {hosts: [srv-02], lead: 2s}
    command: ['true']
`);
    const listed = await baton(['list', '--json', '--config', config]);
    expect(listed.code, listed.stderr).toBe(0);
    const jobs = (JSON.parse(listed.stdout) as { jobs: { name: string; runsOn: string }[] }).jobs;
    expect(Object.fromEntries(jobs.map((j) => [j.name, j.runsOn]))).toEqual({
      anywhere: 'any runner',
      upload: 'runners tagged sftp and region=eu',
      report: 'srv-01, srv-02; srv-02 first, the others after 2s',
    });
    const wide = await baton(['list', '-o', 'wide', '--config', config]);
    expect(wide.code, wide.stderr).toBe(0);
    expect(wide.stdout).toContain('RUNS ON');
    expect(wide.stdout).toContain('runners tagged sftp and region=eu');
    const compact = await baton(['list', '--config', config], { env: { COLUMNS: '200' } });
    expect(compact.stdout).toContain('on runners tagged sftp and region=eu');
    expect(compact.stdout).not.toMatch(/anywhere.*on any runner/);
  });
});
