/**
 * Blackouts (`baton blackout`, actions/blackout.ts), with runners in the test process
 * (in-process-fleet.ts; the jobs are real processes that journal themselves) on the shared
 * MariaDB, and a real webhook receiver on 127.0.0.1:
 *
 * - 3 runners, a job every second: a blackout created from the CLI a few seconds ahead, for 6 s.
 *   No fire whose instant is in [from, until) ran (the journal, the jobs' own account); every
 *   such fire has a `paused` skip row from each runner naming the blackout, and no winner; the
 *   fires at either edge outside it ran, and so did a job it does not cover; the job runs again
 *   after it by itself. Its start and its end are told once each, in that order, at or after
 *   their instants; the audit names the operator and the host; `status` lists it.
 * - The command's refusals (64, the option named, nothing written), `list`, `cancel`, and a
 *   cancel's end of a blackout going on: the fires after it run again, its end is told then.
 *
 * Waits are for rows, journal lines and deliveries, never for wall time alone.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { buildOverview } from '../../src/http/dashboard/overview.js';
import { dashboardPage } from '../../dist/http/dashboard/page.js';
import { writeSchedule } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { byFire, dbNow, runs } from '../helpers/db.js';
import { writeJournaledSchedule } from '../helpers/ground-truth.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { notifierPasses } from '../helpers/notifier-passes.js';
import { waitFor } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

/** Short notifier cadences: a pass every 100 ms, the fleet evaluations every second. */
const QUICK = { notifier: { passMs: 100, evaluateMs: 1_000 } };
const AS_ALICE = { env: { SUDO_USER: 'alice' } };
const HOSTS = ['b1', 'b2', 'b3'];

let receiver: WebhookReceiver | null = null;
// Registered before the fleet's own afterEach, so run after it: runners stop before the receiver.
afterEach(async () => {
  await receiver?.down();
  receiver = null;
  vi.unstubAllEnvs();
});

const fleet = useInProcessFleet('blackout', { perTest: true });

const iso = (ms: number) => new Date(ms).toISOString();

/** The webhook bodies of blackout events, in the order they arrived. */
const blackoutBodies = () =>
  (receiver?.accepted() ?? [])
    .map((r) => ({ at: r.at, body: r.body }))
    .filter((r) => String(r.body.event).startsWith('blackout-'));

function scheduleWithJournal() {
  return writeJournaledSchedule(
    (j) => `
namespace: freeze
notify:
  ops:
    webhook: {urlFromEnv: HOOK_URL, format: json}
    timeout: 2s
jobs:
  tick:
    schedule: "* * * * * *"
    command: ${j.yaml()}
    notify: {to: [ops]}
  other:
    schedule: "* * * * * *"
    command: ${j.yaml()}
`,
  );
}

describe('a blackout from the CLI while three runners run', () => {
  it('skips every fire inside it as paused, on every runner; runs again by itself; told twice', async () => {
    receiver = await WebhookReceiver.start();
    vi.stubEnv('HOOK_URL', receiver.url('/hook'));
    const { config, journal } = scheduleWithJournal();
    const runners = await fleet.start(HOSTS, { config, runner: { timings: QUICK } });
    await waitFor('tick ran', () => journal.attempts('tick').length >= 1, { timeoutMs: 20_000 });

    // From the next whole second at least 3 s away by the database's clock, for 6 s.
    const now = (await dbNow(fleet.db)).getTime();
    const from = Math.ceil((now + 3_000) / 1_000) * 1_000;
    const until = from + 6_000;
    const db = ['--config', config, '--database-url', fleet.db.url, '--host', 'ops-laptop'];
    const made = await baton(
      [
        'blackout',
        '--from',
        iso(from),
        '--until',
        iso(until),
        '--job',
        'tick',
        '--reason',
        'deploy freeze',
        '--json',
        ...db,
      ],
      AS_ALICE,
    );
    expect(made.code, made.stderr).toBe(0);
    const doc = JSON.parse(made.stdout) as {
      blackout: { id: number; state: string; jobs: string[]; createdBy: string };
      expectedSkips: { job: string; fires: number }[];
    };
    const id = doc.blackout.id;
    expect(doc.blackout).toMatchObject({
      state: 'upcoming',
      jobs: ['tick'],
      createdBy: 'alice@ops-laptop',
    });
    expect(doc.expectedSkips).toEqual([{ job: 'tick', fires: 6, more: false, first: iso(from) }]);

    // `status` lists it while it is to come.
    const status = await baton(['status', '--json', ...db]);
    const shown = (JSON.parse(status.stdout) as { blackouts: { id: number }[] }).blackouts;
    expect(shown.map((b) => b.id)).toEqual([id]);

    // Runs again by itself: a fire 2 s past its end ran, and both edges were told.
    await waitFor(
      'tick to run again after the blackout, and its end to be told',
      () =>
        journal.attempts('tick').some((a) => a.fire >= until + 2_000) &&
        blackoutBodies().length >= 2,
      { timeoutMs: until - Date.now() + 25_000 },
    );
    // Anything further would be a repeat: more passes of every notifier, evaluations included.
    await notifierPasses(runners, 3, { evaluated: true, atLeastMs: 1_500 });
    await Promise.all(runners.map((r) => r.stop()));

    // The jobs' own account: no run of a fire inside it; the fires at its edges ran; the job it
    // does not cover ran throughout.
    const ran = journal.attempts('tick').map((a) => a.fire);
    expect(ran.filter((f) => f >= from && f < until)).toEqual([]);
    expect(ran).toContain(from - 1_000);
    expect(ran).toContain(until);
    const other = journal.attempts('other').map((a) => a.fire);
    expect(other.filter((f) => f >= from && f < until)).toHaveLength(6);

    // The history: each fire inside has one `paused` skip per runner naming it, no winner.
    const fires = byFire(await runs(fleet.db, 'tick'));
    for (let at = from; at < until; at += 1_000) {
      const rows = fires.get(at) ?? [];
      expect(
        rows.filter((r) => r.winner != null),
        iso(at),
      ).toEqual([]);
      expect(rows.map((r) => r.host).sort(), iso(at)).toEqual(HOSTS);
      for (const r of rows) {
        expect(r).toMatchObject({ status: 'skipped', reason_kind: 'paused' });
        expect(r.reason).toBe(
          `paused by blackout #${id} (alice@ops-laptop) until ${iso(until)}: deploy freeze`,
        );
      }
    }
    for (const edge of [from - 1_000, until]) {
      expect(
        (fires.get(edge) ?? []).filter((r) => r.winner != null).map((r) => r.status),
        iso(edge),
      ).toEqual(['done']);
    }
    // `baton history` filters them by their kind (its --host filters rows: not given here).
    const history = await baton([
      'history',
      'tick',
      '--reason-kind',
      'paused',
      '--json',
      '--config',
      config,
      '--database-url',
      fleet.db.url,
    ]);
    expect(history.code, history.stderr).toBe(0);
    expect((JSON.parse(history.stdout) as unknown[]).length).toBe(6 * HOSTS.length);

    // Two notifications, the start then the end, each at or after its instant.
    const told = blackoutBodies();
    expect(told.map((t) => t.body.event)).toEqual(['blackout-started', 'blackout-ended']);
    expect(told[0]!.at).toBeGreaterThanOrEqual(from - 50);
    expect(told[1]!.at).toBeGreaterThanOrEqual(until - 50);
    expect(told.map((t) => t.body.fire)).toEqual([iso(from), iso(until)]);
    for (const t of told) {
      expect(t.body).toMatchObject({
        job: null,
        blackout: {
          id,
          from: iso(from),
          until: iso(until),
          jobs: ['tick'],
          reason: 'deploy freeze',
          by: 'alice@ops-laptop',
          cancelledBy: null,
        },
      });
    }
    expect(String(told[0]!.body.text)).toMatch(new RegExp(`^blackout #${id} began`));

    // The audit names the operator and the host.
    const audit = await fleet.db.query<Record<string, unknown>>(
      "SELECT operator, host, via, job, reason, outcome FROM baton_audit WHERE action = 'blackout'",
    );
    expect(audit).toEqual([
      {
        operator: 'alice',
        host: 'ops-laptop',
        via: 'cli',
        job: 'tick',
        reason: 'deploy freeze',
        outcome: `blackout #${id}: job tick from ${iso(from)} until ${iso(until)}`,
      },
    ]);
  });
});

describe('baton blackout, list and cancel', () => {
  const count = async (table: string) =>
    Number((await fleet.db.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))[0]!.n);

  it('refuses bad input with 64, naming the option, and writes nothing', async () => {
    const config = writeSchedule(
      'namespace: freeze\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["true"]\n',
    );
    const db = ['--config', config, '--database-url', fleet.db.url];
    const now = (await dbNow(fleet.db)).getTime();
    const soon = iso(now + 3_600_000);
    const later = iso(now + 7_200_000);
    const cases: [string[], RegExp][] = [
      [['--from', later, '--until', soon, '--all'], /--until .* is not after --from/],
      [['--from', soon, '--until', soon, '--all'], /--until .* is not after --from/],
      [
        ['--from', '2020-01-01T00:00:00Z', '--until', '2020-01-02T00:00:00Z', '--all'],
        /--until .* is in the past/,
      ],
      [['--from', 'now', '--until', '+91d', '--all'], /longer than a blackout may last \(90d\)/],
      [['--from', 'soon', '--until', later, '--all'], /--from: .*"soon" is not an ISO-8601/],
      [['--from', soon, '--until', '+', '--all'], /--until "\+": a duration/],
      [['--until', later, '--all'], /--from is required/],
      [['--from', soon, '--until', later], /--job J .* or --all/],
      [['--from', soon, '--until', later, '--all', '--job', 'settle'], /either --job .* or --all/],
      [
        ['--from', soon, '--until', later, '--job', 'setle'],
        /--job "setle" is not a job of .*did you mean "settle"/,
      ],
      [['--from', soon, '--until', later, '--job', '--all'], /--job/],
      [
        ['--from', soon, '--until', later, '--job', 'settle', '--reason', '   '],
        /--reason is required/,
      ],
    ];
    for (const [args, message] of cases) {
      const withReason = args.includes('--reason') ? args : [...args, '--reason', 'freeze'];
      const r = await baton(['blackout', ...withReason, ...db]);
      expect(r.code, args.join(' ')).toBe(64);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
    const noReason = await baton(['blackout', '--from', soon, '--until', later, '--all', ...db]);
    expect(noReason.code).toBe(64);
    expect(noReason.stderr).toMatch(/--reason is required/);
    expect(await count('baton_blackouts')).toBe(0);
    expect(await count('baton_audit')).toBe(0);
    // --force takes a name the file does not have.
    const forced = await baton([
      'blackout',
      '--from',
      soon,
      '--until',
      later,
      '--job',
      'later-job',
      '--force',
      '--reason',
      'x',
      ...db,
    ]);
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stderr).toMatch(/warning: .*--force/);
    expect(await count('baton_blackouts')).toBe(1);
  });

  it('lists one to come, shows it in status, cancels it; a cancel ends one going on', async () => {
    receiver = await WebhookReceiver.start();
    vi.stubEnv('HOOK_URL', receiver.url('/hook'));
    const { config, journal } = scheduleWithJournal();
    const db = ['--config', config, '--database-url', fleet.db.url, '--host', 'ops-laptop'];
    const now = (await dbNow(fleet.db)).getTime();
    const upcoming = await baton(
      [
        'blackout',
        '--from',
        iso(now + 3_600_000),
        '--until',
        '+2h',
        '--all',
        '--reason',
        'db upgrade',
        ...db,
      ],
      AS_ALICE,
    );
    expect(upcoming.code, upcoming.stderr).toBe(0);
    const id = Number(/blackout #(\d+) recorded/.exec(upcoming.stdout)?.[1]);
    expect(upcoming.stdout).toContain('every job');
    expect(upcoming.stdout).toContain('(2h; starts in 1h)');

    const list = await baton(['blackout', 'list', '--json', ...db]);
    expect(list.code, list.stderr).toBe(0);
    const listed = JSON.parse(list.stdout) as { blackouts: Record<string, unknown>[] };
    expect(listed.blackouts).toEqual([
      expect.objectContaining({ id, state: 'upcoming', jobs: null, reason: 'db upgrade' }),
    ]);
    const text = await baton(['blackout', 'list', ...db]);
    expect(text.stdout).toMatch(
      new RegExp(`#${id} +upcoming .*every job +alice@ops-laptop +db upgrade`),
    );
    const status = await baton(['status', ...db]);
    expect(status.stdout).toMatch(/BLACKOUTS: 1/);
    // The dashboard's overview lists it.
    const overview = await buildOverview({
      pool: fleet.db.conn,
      namespace: 'freeze',
      config: loadConfig(config, { connectionVariables: 'ignore' }),
      host: 'b1',
      now: await dbNow(fleet.db),
      nextFire: () => null,
      database: fleet.db.name,
    });
    expect(overview.blackouts).toEqual([
      expect.objectContaining({ id, state: 'upcoming', jobs: null, createdBy: 'alice@ops-laptop' }),
    ]);
    // The page (the built one: it inlines the compiled script) has the panel that shows them.
    const page = dashboardPage().html;
    expect(page).toContain('id="blackouts-body"');
    expect(page).toContain("$('blackouts-panel').hidden = o.blackouts.length === 0");

    const cancel = await baton(
      ['blackout', 'cancel', String(id), '--reason', 'moved', ...db],
      AS_ALICE,
    );
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(cancel.stdout).toMatch(/it had not begun; it covers nothing/);
    const again = await baton(['blackout', 'cancel', String(id), ...db]);
    expect(again.stdout).toMatch(/is cancelled already/);
    expect((await baton(['blackout', 'cancel', '999', ...db])).code).toBe(64);
    expect((await baton(['blackout', 'cancel', 'x', ...db])).code).toBe(64);
    expect(JSON.parse((await baton(['blackout', 'list', '--json', ...db])).stdout)).toMatchObject({
      blackouts: [],
    });
    const cancels = await fleet.db.query<{ operator: string; outcome: string }>(
      "SELECT operator, outcome FROM baton_audit WHERE action = 'blackout-cancel' ORDER BY id",
    );
    expect(cancels.map((c) => c.operator)).toEqual(['alice', expect.any(String)]);
    expect(cancels[0]!.outcome).toBe(`cancelled blackout #${id} before it began`);

    // One going on, cancelled: the fires after the cancel run again, and its end is told then
    // (a cancelled one that never began was told nothing).
    const runners = await fleet.start(HOSTS, { config, runner: { timings: QUICK } });
    const on = await baton(
      [
        'blackout',
        '--from',
        'now',
        '--until',
        '+1h',
        '--job',
        'tick',
        '--reason',
        'incident',
        '--json',
        ...db,
      ],
      AS_ALICE,
    );
    expect(on.code, on.stderr).toBe(0);
    const onId = (JSON.parse(on.stdout) as { blackout: { id: number } }).blackout.id;
    await waitFor('a paused skip of tick', async () =>
      (await runs(fleet.db, 'tick')).some((r) =>
        r.reason?.startsWith(`paused by blackout #${onId}`),
      ),
    );
    const stopped = await baton(['blackout', 'cancel', String(onId), '--json', ...db], AS_ALICE);
    expect(stopped.code, stopped.stderr).toBe(0);
    const cancelledAt = Date.parse(
      (JSON.parse(stopped.stdout) as { blackout: { cancelledAt: string } }).blackout.cancelledAt,
    );
    await waitFor(
      'tick to run again after the cancel, and the end to be told',
      () =>
        journal.attempts('tick').some((a) => a.fire > cancelledAt + 1_000) &&
        blackoutBodies().some((b) => b.body.event === 'blackout-ended'),
      { timeoutMs: 20_000 },
    );
    await notifierPasses(runners, 3, { evaluated: true, atLeastMs: 1_500 });
    await Promise.all(runners.map((r) => r.stop()));
    const told = blackoutBodies().map((b) => b.body);
    expect(told.map((b) => [b.event, (b.blackout as { id: number }).id])).toEqual([
      ['blackout-started', onId],
      ['blackout-ended', onId],
    ]);
    expect(told[1]).toMatchObject({
      fire: iso(cancelledAt),
      blackout: { cancelledBy: 'alice@ops-laptop' },
    });
    // Judged by the fire's instant: nothing ran inside [from, cancel), everything after it did.
    const ran = journal.attempts('tick').map((a) => a.fire);
    const onFrom = Date.parse(
      (JSON.parse(on.stdout) as { blackout: { from: string } }).blackout.from,
    );
    expect(ran.filter((f) => f >= onFrom && f < cancelledAt)).toEqual([]);
    const skipped = (await runs(fleet.db, 'tick')).filter((r) => r.reason_kind === 'paused');
    expect(skipped.every((r) => r.scheduled_at.getTime() < cancelledAt)).toBe(true);
  });
});
