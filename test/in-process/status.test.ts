/**
 * `baton status` (and `history`, `explain`) against runners built in the test process
 * (in-process-fleet.ts): what an operator (or a monitor reading the exit code: 0 OK, 1 WARNING,
 * 2 CRITICAL, 3 UNKNOWN) learns about the fleet, and that each finding appears exactly when its
 * cause does. The commands under test are real `baton` processes, judged by their output and exit
 * codes; the human output's first line is the one a monitor shows. What needs the runner to be a
 * process of its own (a runner killed with SIGKILL, reported gone) is e2e/status.test.ts.
 *
 * - Identical schedules: live runners with pid and version, the run in progress (host, since,
 *   for how long), next fires from the schedules file, no warning, exit 0 and "OK: namespace …
 *   (from the schedules file …)"; a gracefully stopped runner is `stopped`, not gone, and still
 *   no warning; without a schedules file no next fires.
 * - A runner started with a changed definition of one job (and a job of its own): schedule-drift
 *   naming the job and both hosts, exit 1; read with a third schedules file, the drift also names
 *   "this file" beside the hosts, and a job of that file no live runner loaded is drift too.
 * - Two runners of one definition whose registered next fires differ (one row altered as a
 *   runner with other time-zone data would write it): schedule-drift naming both runners and
 *   the first fire that differs, exit 1.
 * - The dead-man's switch: a job that keeps failing (`false`, `expect: 3s`) and a job that never
 *   fires (`0 0 1 1 *`, `expect: 2s`) get no-success findings, critical (exit 2) — the second
 *   exactly once the runner has been up for longer than 2 s — while a succeeding job does not.
 * - A job added by a reload (`Runner.reload`, what SIGHUP calls) to a runner that has been up for
 *   longer than the job's `expect:`: no no-success warning until `expect` after the reload (the
 *   registry's `since`), not at once from the runner's start.
 * - A paused job: an informational paused finding while the pause row exists (exit 0), a
 *   warning with --warn-paused (exit 1); none once it is gone.
 * - A job failing every run with `expect: 1h`: a failing warning (exit 1) at once, with the
 *   count and the latest failure, long before the dead-man's switch could say anything.
 * - Every runner stopped gracefully: exit 2 and one "no runner alive" finding, not a
 *   schedule-drift per job of the file.
 * - The database unreachable (a loopback port just closed): exit 3, one UNKNOWN line, no stack
 *   trace, no password; bad usage of the check is UNKNOWN too.
 * - Run from an empty folder: the first line of status and history names the namespace read and
 *   why (the default without a schedules file, --namespace, BATON_NAMESPACE, --config), and
 *   finding nothing in the default namespace hints at --config/--namespace (stderr; --json stays
 *   JSON).
 * - On a history of 150,000 rows, the reads behind `status` and `explain` (latest success, first
 *   row, latest fire, hosts before a fire, latest failure) each read a handful of rows (ANALYZE:
 *   r_rows), through the keys they name, and the failure count stops at its cap; migration 0005's
 *   key exists after `baton migrate`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { RunnerEventMap } from '../../src/daemon/runner-events.js';
import {
  HOSTS_BEFORE_ROWS,
  HOSTS_BEFORE_SQL,
  LATEST_FIRE_SQL,
} from '../../src/store/fire-reads.js';
import {
  FAILED_STATUSES,
  FAILURE_COUNT_CAP,
  FAILURE_COUNT_SQL,
  FIRST_ROW_SQL,
  LAST_SUCCESS_SQL,
  LATEST_FAILURE_SQL,
} from '../../src/store/fleet-reads.js';
import { writeSchedule } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { GENERATED_RUN_FIELDS, plantRunsFrom } from '../helpers/db.js';
import { expectQuiet } from '../helpers/fleet.js';
import { useInProcessFleet, type InProcessRunner } from '../helpers/in-process-fleet.js';
import {
  escape,
  job,
  kinds,
  runnerOf,
  status,
  statusText,
  type StatusJson,
} from '../helpers/status-cli.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('status', { perTest: true });

/** The first event `name` for which `where` holds, on any of `runners` (from now on). */
async function nextEventOnAny<K extends keyof RunnerEventMap>(
  runners: readonly InProcessRunner[],
  name: K,
  where: (e: RunnerEventMap[K]) => boolean,
): Promise<RunnerEventMap[K]> {
  let seen: RunnerEventMap[K] | undefined;
  const offs = runners.map((r) =>
    r.runner.events.on(name, (e) => {
      if (seen === undefined && where(e)) seen = e;
    }),
  );
  try {
    return await waitFor(`event ${String(name)} on any runner`, () => seen);
  } finally {
    for (const off of offs) off();
  }
}

/** Resolves once `count` events `name` for which `where` holds have come (from now on). */
async function eventsSeen<K extends keyof RunnerEventMap>(
  runner: InProcessRunner,
  name: K,
  where: (e: RunnerEventMap[K]) => boolean,
  count: number,
): Promise<void> {
  let seen = 0;
  const off = runner.runner.events.on(name, (e) => {
    if (where(e)) seen++;
  });
  try {
    await waitFor(`${runner.host}: ${count} events ${String(name)}`, () => seen >= count);
  } finally {
    off();
  }
}

describe('baton status', () => {
  it('identical schedules: no warning, exit 0; shows runs in progress; a stopped runner is only stopped', async () => {
    const config = writeSchedule(`
namespace: fleet
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
  slow:
    schedule: "*/3 * * * * *"
    command: ["sleep", "2"]
`);
    const db = fleet.db;
    const runners = await fleet.start(['srv-01', 'srv-02'], { config });
    // The situation first, from the runners: slow started and tick ran successfully. Then status
    // (asked again only if slow's run ended before it read).
    await Promise.all([
      nextEventOnAny(runners, 'fire:won', (e) => e.fire.job === 'slow'),
      nextEventOnAny(runners, 'run:finished', (e) => e.fire.job === 'tick' && e.status === 'done'),
    ]);
    const seen = await waitFor(
      'status with slow running and a success of tick',
      async () => {
        const s = await status(db, ['--config', config]);
        return s.json.running.some((r) => r.job === 'slow') && job(s.json, 'tick')?.lastSuccessAt
          ? s
          : null;
      },
      { timeoutMs: 20_000, intervalMs: 300 },
    );
    expect(seen.code).toBe(0);
    expect(seen.json.healthy).toBe(true);
    expect(seen.json.warnings).toEqual([]);
    expect(seen.json.namespace).toBe('fleet');
    // Both runners live in this process: the registry shows its pid.
    expect(seen.json.runners.map((r) => [r.host, r.pid, r.state, r.alive])).toEqual([
      ['srv-01', process.pid, 'alive', true],
      ['srv-02', process.pid, 'alive', true],
    ]);
    for (const r of seen.json.runners) expect(r.version).toMatch(/^\d+\.\d+\.\d+/);

    const now = Date.parse(seen.json.now);
    const slow = seen.json.running.find((r) => r.job === 'slow')!;
    expect(['srv-01', 'srv-02']).toContain(slow.host);
    expect(Date.parse(slow.scheduledAt) % 3_000).toBe(0);
    expect(Date.parse(slow.startedAt)).toBeGreaterThanOrEqual(Date.parse(slow.scheduledAt));
    expect(slow.runningForMs).toBe(now - Date.parse(slow.startedAt));
    const [row] = await db.query<{ host: string; status: string }>(
      'SELECT host, status FROM baton_runs WHERE id = ?',
      [slow.runId],
    );
    expect(row).toMatchObject({ host: slow.host });

    // Next fires: the next whole second for tick, the next multiple of 3 s for slow.
    expect(Date.parse(job(seen.json, 'tick')!.nextFire!)).toBe(
      Math.floor(now / 1000) * 1000 + 1000,
    );
    expect(Date.parse(job(seen.json, 'slow')!.nextFire!)).toBe(
      Math.floor(now / 3000) * 3000 + 3000,
    );
    expect(job(seen.json, 'tick')!.loadedBy).toEqual(['srv-01', 'srv-02']);

    expect(seen.json).toMatchObject({
      state: 'OK',
      exitCode: 0,
      namespaceSource: { kind: 'file', file: config },
    });
    const human = await statusText(db, ['--config', config]);
    expect(human.code).toBe(0);
    expect(human.first).toMatch(
      new RegExp(
        `^OK: namespace "fleet" \\(from the schedules file ${escape(config)}\\), database time \\S+ \\S+ UTC$`,
      ),
    );
    expect(human.stdout).toMatch(/^RUNNERS: 2 alive, 0 gone, 0 stopped$/m);
    expect(human.stdout).toMatch(/^srv-01 +alive /m);
    expect(human.stdout).toMatch(/^no warnings$/m);

    // A graceful stop (SIGTERM's): shown as stopped, no warning, still exit 0.
    await runners[1]!.stop();
    await runners[1]!.waitForLog('runner stopped');
    expect(runners[1]!.errors()).toEqual([]);
    const drained = await status(db, ['--config', config]);
    expect(drained.code).toBe(0);
    expect(drained.json.warnings).toEqual([]);
    expect(runnerOf(drained.json, 'srv-02')).toMatchObject({ state: 'stopped', alive: false });
    expect(runnerOf(drained.json, 'srv-02')!.stoppedAt).not.toBeNull();
    expect(runnerOf(drained.json, 'srv-01')).toMatchObject({ state: 'alive', alive: true });

    // Without a schedules file (none in the folder, no --config): the fleet, but no next fires.
    const bare = mkdtempSync(path.join(os.tmpdir(), 'baton-status-'));
    const noFile = await status(db, ['--namespace', 'fleet'], bare);
    expect(noFile.code).toBe(0);
    expect(noFile.stderr).toContain('no schedules file');
    expect(noFile.json.jobs.map((j) => [j.name, j.nextFire, j.inConfig, j.loadedBy])).toEqual([
      ['slow', null, false, ['srv-01']],
      ['tick', null, false, ['srv-01']],
    ]);
    await runners[0]!.stop();
    expectQuiet(runners);
  });

  it('a runner with a changed definition of one job: schedule-drift naming the job and both hosts', async () => {
    const jobs = (command: string, extra = '') => `
namespace: fleet
jobs:
  tick:
    schedule: "* * * * * *"
    command: ${command}
  tock:
    schedule: "*/2 * * * * *"
    command: ["true"]
${extra}`;
    const configA = writeSchedule(jobs('["true"]'));
    const configB = writeSchedule(
      jobs(
        '["true", "v2"]',
        `  only-b:
    schedule: "*/5 * * * * *"
    command: ["true"]
`,
      ),
    );
    const db = fleet.db;
    const [d1] = await fleet.start(['srv-01'], { config: configA });
    const [d2] = await fleet.start(['srv-02'], { config: configB });

    // Also read with a third file: tick as on srv-01, tock changed, and a job nobody runs.
    const configC = writeSchedule(
      jobs(
        '["true"]',
        `  orphan:
    schedule: "*/5 * * * * *"
    command: ["true"]
`,
      ).replace('"*/2 * * * * *"', '"*/4 * * * * *"'),
    );
    // Both reads of the same fleet, asked at once.
    const [s, c] = await Promise.all([
      status(db, ['--config', configA]),
      status(db, ['--config', configC]),
    ]);
    expect(s.code).toBe(1);
    expect(s.json.healthy).toBe(false);
    expect(kinds(s.json)).toEqual([
      ['schedule-drift', 'only-b', ['srv-01', 'srv-02']],
      ['schedule-drift', 'tick', ['srv-01', 'srv-02']],
    ]);
    const [onlyB, tick] = s.json.warnings;
    expect(tick!.message).toMatch(
      new RegExp(
        '^schedule drift for job "tick": the runners loaded different definitions of it: ' +
          `definition [0-9a-f]{8} on srv-01 and in this file \\(${escape(configA)}\\); ` +
          'definition [0-9a-f]{8} on srv-02$',
      ),
    );
    expect(onlyB!.message).toMatch(
      /^schedule drift for job "only-b": only some runners loaded it: definition [0-9a-f]{8} on srv-02; not loaded on srv-01; not in this file \(\S+\)$/,
    );
    expect(job(s.json, 'only-b')).toMatchObject({ inConfig: false, nextFire: null });
    expect(job(s.json, 'tock')!.loadedBy).toEqual(['srv-01', 'srv-02']);

    // Read with the third file.
    expect(c.code).toBe(1);
    expect(kinds(c.json)).toEqual([
      ['schedule-drift', 'only-b', ['srv-01', 'srv-02']],
      ['schedule-drift', 'orphan', ['srv-01', 'srv-02']],
      ['schedule-drift', 'tick', ['srv-01', 'srv-02']],
      ['schedule-drift', 'tock', ['srv-01', 'srv-02']],
    ]);
    const byJob = Object.fromEntries(c.json.warnings.map((w) => [w.job, w.message]));
    expect(byJob.orphan).toBe(
      `schedule drift for job "orphan": it is in ${configC} but no live runner loaded it ` +
        '(live: srv-01, srv-02)',
    );
    expect(byJob.tock).toMatch(
      new RegExp(
        `^schedule drift for job "tock": this file \\(${escape(configC)}\\) ` +
          'has a different definition than the runners loaded: definition ([0-9a-f]{8}) on ' +
          'srv-01, srv-02; definition (?!\\1)[0-9a-f]{8} in this file$',
      ),
    );
    // Nobody loaded orphan and it has no history: no dead-man verdict, the drift says it.
    expect(job(c.json, 'orphan')).toMatchObject({
      inConfig: true,
      loadedBy: [],
      lastSuccessAt: null,
    });

    // Once srv-02 is stopped, the fleet agrees again.
    await d2!.stop();
    const agreed = await status(db, ['--config', configA]);
    expect(agreed.json.warnings).toEqual([]);
    expect(agreed.code).toBe(0);
    await d1!.stop();
    expectQuiet([d1!, d2!]);
  });

  it('runners computing other fires from one definition (other time-zone data): schedule-drift naming both and the first fire that differs', async () => {
    const config = writeSchedule(`
namespace: fleet
jobs:
  report:
    schedule: "30 * * * *"
    timezone: Asia/Kolkata
    command: ["true"]
`);
    const db = fleet.db;
    const [d1, d2] = await fleet.start(['srv-01', 'srv-02'], { config });
    type Registered = Record<string, { fp: string; next?: { after: string; at: string[] } }>;
    const rowOf = async (host: string) => {
      const [row] = await db.query<{ schedule: string }>(
        "SELECT schedule FROM baton_runners WHERE namespace = 'fleet' AND host = ?",
        [host],
      );
      return JSON.parse(row!.schedule) as Registered;
    };
    // Both runners registered the job's next fires: :30 in Kolkata (+05:30), on the UTC hour.
    const first = (await rowOf('srv-01')).report!.next!;
    expect(first.at).toHaveLength(3);
    for (const at of first.at) expect(at).toMatch(/T\d\d:00:00\.000Z$/);
    expect((await status(db, ['--config', config])).code).toBe(0);

    // srv-02's row as a runner whose time-zone data gave Kolkata +06:00 would write it: its fires
    // half an hour earlier, the definition the same. Written again (and status asked again) if
    // a runner counted from a new hour meanwhile (its registry tick rewrites the row).
    const earlier = (iso: string) => new Date(Date.parse(iso) - 1_800_000).toISOString();
    const s = await waitFor('status read the altered row', async () => {
      const mine = await rowOf('srv-01');
      const theirs = await rowOf('srv-02');
      const { after, at } = mine.report!.next!;
      theirs.report!.next = { after, at: at.map(earlier) };
      await db.query(
        "UPDATE baton_runners SET schedule = ? WHERE namespace = 'fleet' AND host = 'srv-02'",
        [JSON.stringify(theirs)],
      );
      const read = await status(db, ['--config', config]);
      const still = (await rowOf('srv-02')).report!.next!;
      const same = still.after === after && (await rowOf('srv-01')).report!.next!.after === after;
      return same ? { read, after, at } : null;
    });
    expect(s.read.code).toBe(1);
    expect(kinds(s.read.json)).toEqual([['schedule-drift', 'report', ['srv-01', 'srv-02']]]);
    expect(s.read.json.warnings[0]!.message).toBe(
      'schedule drift for job "report": the runners compute different fires from one ' +
        `definition of it (different time-zone data?): fire 1 after ${s.after} is ` +
        `${earlier(s.at[0]!)} on srv-02; ${s.at[0]} on srv-01`,
    );
    const text = await statusText(db, ['--config', config]);
    expect(text.code).toBe(1);
    expect(text.first).toMatch(/^WARNING/);
    await Promise.all([d1!.stop(), d2!.stop()]);
    expectQuiet([d1!, d2!]);
  });

  it("dead-man's switch: a job that keeps failing and one that never fires; not a job that succeeds", async () => {
    const config = writeSchedule(`
namespace: fleet
jobs:
  broken:
    schedule: "* * * * * *"
    command: ["false"]
    expect: 3s
  fine:
    schedule: "* * * * * *"
    command: ["true"]
    expect: 3s
  yearly:
    schedule: "0 0 1 1 *"
    command: ["true"]
    expect: 2s
`);
    const db = fleet.db;
    const [runner] = await fleet.start(['dm-1'], { config });

    const seen: StatusJson[] = [];
    const both = await waitFor(
      'no-success warnings for broken and yearly',
      async () => {
        const s = await status(db, ['--config', config]);
        seen.push(s.json);
        const named = s.json.warnings.filter((w) => w.kind === 'no-success').map((w) => w.job);
        return named.includes('broken') && named.includes('yearly') ? s : null;
      },
      { timeoutMs: 20_000, intervalMs: 300 },
    );
    expect(both.code).toBe(2);
    expect(both.json.state).toBe('CRITICAL');
    expect(kinds(both.json)).toEqual([
      ['no-success', 'broken', null],
      ['no-success', 'yearly', null],
      ['failing', 'broken', null],
    ]);
    expect(both.json.warnings.map((w) => w.severity)).toEqual(['critical', 'critical', 'warning']);
    expect(both.json.warnings[0]!.message).toMatch(/^job "broken" has never run successfully/);
    expect(both.json.warnings[1]!.message).toMatch(/^job "yearly" has never run successfully/);
    expect(job(both.json, 'fine')!.lastSuccessAt).not.toBeNull();
    expect(job(both.json, 'yearly')!.lastSuccessAt).toBeNull();
    const human = await statusText(db, ['--config', config]);
    expect(human.code).toBe(2);
    expect(human.first).toMatch(/^CRITICAL: "broken" overdue, "yearly" overdue, "broken" failing;/);
    expect(human.stdout).toMatch(/^CRITICAL no-success: job "yearly" has never run successfully/m);

    // yearly never has a row: it is judged from the runner's start, and warned about exactly
    // when the runner has been up for longer than its 2 s.
    expect(await db.query("SELECT id FROM baton_runs WHERE job = 'yearly'")).toEqual([]);
    for (const s of seen) {
      const up = Date.parse(s.now) - Date.parse(runnerOf(s, 'dm-1')!.startedAt);
      const warned = s.warnings.some((w) => w.kind === 'no-success' && w.job === 'yearly');
      expect(warned, `up ${up} ms`).toBe(up > 2_000);
      expect(s.warnings.filter((w) => w.job === 'fine')).toEqual([]);
    }
    await runner!.stop();
  });

  it('a paused job is informational (exit 0), a warning with --warn-paused, until it is resumed', async () => {
    const config = writeSchedule(`
namespace: fleet
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const db = fleet.db;
    const [runner] = await fleet.start(['p-1'], { config });
    await db.query(
      `INSERT INTO baton_pauses (namespace, job, reason, paused_by, paused_at)
       VALUES ('fleet', 'tick', 'bank holiday', 'ops@p-1', NOW(3))`,
    );
    const [paused, human, warned] = await Promise.all([
      status(db, ['--config', config]),
      statusText(db, ['--config', config]),
      status(db, ['--config', config, '--warn-paused']),
    ]);
    expect(paused.code).toBe(0);
    expect(paused.json).toMatchObject({ state: 'OK', healthy: true });
    expect(kinds(paused.json)).toEqual([['paused', 'tick', null]]);
    expect(paused.json.warnings[0]!.severity).toBe('info');
    expect(human.code).toBe(0);
    expect(human.first).toMatch(/^OK: "tick" paused; namespace "fleet" /);
    expect(human.stdout).toMatch(/^INFO paused: job "tick" is paused by ops@p-1/m);
    expect(warned.code).toBe(1);
    expect(warned.json).toMatchObject({ state: 'WARNING', healthy: false });
    expect(warned.json.warnings.map((w) => [w.kind, w.severity])).toEqual([['paused', 'warning']]);
    expect(paused.json.warnings[0]!.message).toMatch(
      /^job "tick" is paused by ops@p-1 since \S+: bank holiday;/,
    );
    expect(job(paused.json, 'tick')).toMatchObject({ paused: true });

    await db.query("DELETE FROM baton_pauses WHERE job = 'tick'");
    const resumed = await status(db, ['--config', config]);
    expect(resumed.code).toBe(0);
    expect(resumed.json.warnings).toEqual([]);
    expect(job(resumed.json, 'tick')).toMatchObject({ paused: false });
    await runner!.stop();
    expectQuiet([runner!]);
  });

  it('a job failing every run is a warning (exit 1) long before its expect window passes', async () => {
    const config = writeSchedule(`
namespace: fleet
jobs:
  broken:
    schedule: "* * * * * *"
    command: ["sh", "-c", "exit 3"]
    expect: 1h
  fine:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const db = fleet.db;
    const [runner] = await fleet.start(['f-1'], { config });
    // Two runs of broken failed (by the runner's account), then status says so.
    await eventsSeen(
      runner!,
      'run:finished',
      (e) => e.fire.job === 'broken' && e.status === 'failed',
      2,
    );
    const failing = await waitFor(
      'two failures of broken',
      async () => {
        const s = await status(db, ['--config', config]);
        return (job(s.json, 'broken')?.failuresSinceSuccess ?? 0) >= 2 ? s : null;
      },
      { timeoutMs: 20_000, intervalMs: 300 },
    );
    expect(failing.code).toBe(1);
    expect(failing.json.state).toBe('WARNING');
    expect(failing.json.warnings.map((w) => [w.kind, w.job, w.severity])).toEqual([
      ['failing', 'broken', 'warning'],
    ]);
    expect(failing.json.warnings[0]!.message).toMatch(
      /^job "broken" is failing: \d+ runs failed, timed out or were lost and it has never run successfully; the latest, the fire of \S+, ended failed$/,
    );
    const broken = job(failing.json, 'broken')!;
    expect(broken.lastFailure).toMatchObject({ status: 'failed' });
    const [counted] = await db.query<{ n: number }>(
      "SELECT COUNT(*) AS n FROM baton_runs WHERE job = 'broken' AND status = 'failed' AND winner = 1",
    );
    expect(broken.failuresSinceSuccess).toBeLessThanOrEqual(Number(counted!.n));
    expect(job(failing.json, 'fine')).toMatchObject({ failuresSinceSuccess: 0, lastFailure: null });
    const human = await statusText(db, ['--config', config]);
    expect(human.code).toBe(1);
    expect(human.first).toMatch(/^WARNING: "broken" failing; namespace "fleet" /);
    await runner!.stop();
  });

  it('every runner stopped: exit 2 and one "no runner alive" finding, no drift per job', async () => {
    const config = writeSchedule(`
namespace: fleet
jobs:
${['a', 'b', 'c', 'd'].map((name) => `  ${name}:\n    schedule: "* * * * * *"\n    command: ["true"]\n`).join('')}`);
    const db = fleet.db;
    const runners = await fleet.start(['s-1', 's-2'], { config });
    const up = await status(db, ['--config', config]);
    expect(up.code).toBe(0);
    // Both stopped gracefully (SIGTERM's stop), each saying so and nothing wrong.
    await Promise.all(runners.map((r) => r.stop()));
    for (const r of runners) {
      await r.waitForLog('runner stopped');
      expect(r.errors(), r.host).toEqual([]);
    }

    const [down, human] = await Promise.all([
      status(db, ['--config', config]),
      statusText(db, ['--config', config]),
    ]);
    expect(down.code).toBe(2);
    expect(down.json.state).toBe('CRITICAL');
    expect(kinds(down.json)).toEqual([['no-runner', null, ['s-1', 's-2']]]);
    expect(down.json.warnings[0]!.message).toMatch(
      /^no runner alive in namespace "fleet": stopped: s-1, s-2; the last one was seen [\d.]+m?s ago; no job runs until one starts$/,
    );
    expect(human.code).toBe(2);
    expect(human.first).toMatch(/^CRITICAL: no runner alive; namespace "fleet" /);
    expect(human.stdout).not.toContain('schedule-drift');
    expect(human.stdout.match(/^CRITICAL /gm)).toHaveLength(1);
    expectQuiet(runners);
  });

  it('the database unreachable: exit 3 UNKNOWN with a one-line message, no stack trace', async () => {
    // A loopback port that was just free: bound, then closed, so nothing listens on it.
    const port = await new Promise<number>((resolve, reject) => {
      const server = net.createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const { port: free } = server.address() as net.AddressInfo;
        server.close(() => resolve(free));
      });
    });
    const url = `mysql://root:s3cret@127.0.0.1:${port}/baton_status_down`;
    const config = writeSchedule(
      'namespace: fleet\njobs:\n  tick:\n    schedule: "* * * * *"\n    command: ["true"]\n',
    );
    // Read-only commands against nothing: asked at once.
    const [human, json, bad, unknownFlag] = await Promise.all([
      baton(['status', '--config', config, '--database-url', url]),
      baton(['status', '--json', '--config', config, '--database-url', url]),
      baton(['status', '--clock-threshold', 'soon', '--database-url', url]),
      baton(['status', '--bogus-flag', '--database-url', url]),
    ]);
    expect(human.code).toBe(3);
    expect(human.stdout).toBe(
      `UNKNOWN: cannot use the database at mysql://root:***@127.0.0.1:${port}/baton_status_down: ` +
        `connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
    expect(human.stderr).toContain('baton: cannot use the database at');
    expect(json.code).toBe(3);
    expect(JSON.parse(json.stdout)).toMatchObject({
      state: 'UNKNOWN',
      exitCode: 3,
      healthy: false,
      error: expect.stringContaining('ECONNREFUSED'),
    });
    for (const out of [human.stdout, human.stderr, json.stdout, json.stderr]) {
      expect(out).not.toMatch(/^\s+at /m);
      expect(out).not.toContain('s3cret');
    }
    // Bad usage of the check is UNKNOWN too, not 64.
    expect(bad.code).toBe(3);
    expect(bad.stdout).toMatch(/^UNKNOWN: --clock-threshold "soon": /);
    expect(unknownFlag.code).toBe(3);
    expect(unknownFlag.stdout).toMatch(/^UNKNOWN: unknown option --bogus-flag/);
  });

  it('outside the schedules folder: the first line says which namespace was read and why', async () => {
    const config = writeSchedule(`
namespace: fleet
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const db = fleet.db;
    const [runner] = await fleet.start(['n-1'], { config });
    await runner!.waitForLog('run finished');
    const empty = mkdtempSync(path.join(os.tmpdir(), 'baton-status-cwd-'));
    try {
      const hint =
        'baton: hint: nothing found in namespace "default", read because there is no schedules ' +
        'file at ./schedules.yaml: give --config <schedules.yaml> or --namespace <name>';
      const history = (args: string[]) =>
        baton(['history', '--database-url', db.url, ...args], { cwd: empty });
      // Nothing changes what they read (tick has run, and its runner stays up): asked at once.
      const [fallback, fallbackJson, byFlag, byEnv, byFile, none, noneJson, rows] =
        await Promise.all([
          statusText(db, [], empty),
          status(db, [], empty),
          statusText(db, ['--namespace', 'fleet'], empty),
          baton(['status', '--database-url', db.url], {
            cwd: empty,
            env: { BATON_NAMESPACE: 'fleet' },
          }),
          statusText(db, ['--config', config], empty),
          history([]),
          history(['--json']),
          history(['--namespace', 'fleet']),
        ]);
      // The fallback: namespace "default", nothing in it, and a hint at --config/--namespace.
      expect(fallback.first).toMatch(
        /^CRITICAL: no runner alive; namespace "default" \(the default: no schedules file at \.\/schedules\.yaml\), database time /,
      );
      expect(fallback.stderr).toContain(hint);
      expect(fallbackJson.json).toMatchObject({
        namespace: 'default',
        namespaceSource: { kind: 'default', file: './schedules.yaml' },
      });
      expect(fallbackJson.stderr).toContain(hint);

      expect(byFlag.code).toBe(0);
      expect(byFlag.first).toMatch(/^OK: namespace "fleet" \(from --namespace\), database time /);
      expect(byFlag.stderr).not.toContain('hint');
      expect(byEnv.stdout.split('\n')[0]).toMatch(
        /^OK: namespace "fleet" \(from BATON_NAMESPACE\)/,
      );
      expect(byFile.first).toMatch(
        new RegExp(`^OK: namespace "fleet" \\(from the schedules file ${escape(config)}\\)`),
      );

      // history: the same line first, the same hint; --json stays an array on stdout.
      expect(none.code).toBe(0);
      expect(none.stdout).toBe(
        'namespace "default" (the default: no schedules file at ./schedules.yaml)\n',
      );
      expect(none.stderr).toContain('no runs recorded in namespace "default"');
      expect(none.stderr).toContain(hint);
      expect(JSON.parse(noneJson.stdout)).toEqual([]);
      expect(noneJson.stderr).toContain(hint);
      expect(rows.stdout.split('\n')[0]).toBe('namespace "fleet" (from --namespace)');
      expect(rows.stdout.split('\n')[1]).toMatch(/^FIRE \(UTC\)\s+AGO\s+JOB/);
      expect(rows.stdout).toMatch(/\stick\s+done\s/m);
      expect(rows.stderr).toBe('');
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
    await runner!.stop();
  });

  it('a job added by a reload (SIGHUP) is judged from the reload, not from the runner start', async () => {
    const before = `
namespace: fleet
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
`;
    // The new job's `expect:` (3 s: long enough for several reports within it on a loaded
    // machine), and the runner's time up before the reload, longer than that.
    const expectMs = 3_000;
    const config = writeSchedule(before);
    const db = fleet.db;
    const [runner] = await fleet.start(['rl-1'], {
      config,
      runner: { timings: { registrar: { refreshMs: 1_000 } } },
    });
    // Up for longer than the new job's `expect:` before it is added (by the database's clock,
    // which status judges by).
    await waitFor(
      `rl-1 up for ${expectMs + 1_000} ms`,
      async () => {
        const [row] = await db.query<{ upMs: number }>(
          `SELECT TIMESTAMPDIFF(MICROSECOND, started_at, NOW(3)) / 1000 AS upMs
             FROM baton_runners WHERE namespace = 'fleet' AND host = 'rl-1'`,
        );
        return row !== undefined && Number(row.upMs) > expectMs + 1_000;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    writeFileSync(
      config,
      `${before}  yearly:
    schedule: "0 0 1 1 *"
    command: ["true"]
    expect: ${expectMs / 1000}s
`,
    );
    const [clock] = await db.query<{ now: Date }>('SELECT NOW(3) AS now');
    const reloadAfter = clock!.now;
    // What `baton start` does on SIGHUP (start.ts): the file read again, the runner reloaded.
    expect(runner!.runner.reload(loadConfig(config))).toEqual({
      added: ['yearly'],
      removed: [],
      changed: [],
    });

    const seen: StatusJson[] = [];
    const warned = await waitFor(
      'a no-success warning for yearly',
      async () => {
        const s = await status(db, ['--config', config]);
        seen.push(s.json);
        return s.json.warnings.some((w) => w.kind === 'no-success' && w.job === 'yearly')
          ? s
          : null;
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    // Every report taken once the registry showed the job, within `expect` of the reload, is
    // free of it (the runner had been up for longer than that: judged from its start, it was
    // overdue at once).
    const early = seen.filter(
      (s) =>
        job(s, 'yearly')!.loadedBy.includes('rl-1') &&
        Date.parse(s.now) - reloadAfter.getTime() <= expectMs,
    );
    expect(early.length, `reports within ${expectMs} ms of the reload`).toBeGreaterThan(0);
    for (const s of early) {
      const up = Date.parse(s.now) - Date.parse(runnerOf(s, 'rl-1')!.startedAt);
      expect(up, 'the runner had been up for longer than expect').toBeGreaterThan(expectMs);
      expect(s.warnings.filter((w) => w.job === 'yearly')).toEqual([]);
    }
    expect(Date.parse(warned.json.now) - reloadAfter.getTime()).toBeGreaterThan(expectMs);
    expect(kinds(warned.json)).toEqual([['no-success', 'yearly', null]]);
    expect(warned.json.warnings[0]!.message).toMatch(/^job "yearly" has never run successfully/);
    await runner!.stop();
    expectQuiet([runner!]);
  });

  it('the reads behind status and explain stay index lookups on a long history', async () => {
    const db = fleet.db;
    const config = writeSchedule(`
namespace: big
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const migrated = await baton(['migrate', '--config', config, '--database-url', db.url]);
    expect(migrated.code).toBe(0);
    const keys = await db.query<{ Key_name: string; Column_name: string; Seq_in_index: number }>(
      "SHOW INDEX FROM baton_runs WHERE Key_name = 'baton_runs_job_status'",
    );
    expect(keys.sort((a, b) => a.Seq_in_index - b.Seq_in_index).map((k) => k.Column_name)).toEqual([
      'namespace',
      'job',
      'status',
      'scheduled_at',
    ]);

    // 150,000 rows: tick (newest, 40,000 fires × 3 rows: failures and skips, its only successes
    // at the very start, a manual run every 1,000 fires), other (older: 25,000 successes) and rare
    // (oldest: 100 successes).
    const insert = (select: string) => plantRunsFrom(db, GENERATED_RUN_FIELDS, select);
    await insert(`SELECT 'big', 'tick', '2027-01-01' + INTERVAL seq SECOND, 1,
        IF(seq % 1000 = 7, 'manual', 'schedule'), IF(seq < 10, 'done', 'failed'), NULL, 'srv-01',
        1, '2027-01-01' + INTERVAL seq SECOND, '2027-01-01' + INTERVAL seq SECOND, 1
      FROM seq_0_to_39999`);
    await insert(`SELECT 'big', 'tick', '2027-01-01' + INTERVAL seq SECOND, NULL, 'schedule',
        'skipped', 'busy', h.host, 1, '2027-01-01' + INTERVAL seq SECOND,
        '2027-01-01' + INTERVAL seq SECOND, 0
      FROM seq_0_to_39999, (SELECT 'srv-02' AS host UNION ALL SELECT 'srv-03') h`);
    await insert(`SELECT 'big', 'other', '2026-12-01' + INTERVAL seq SECOND, 1, 'schedule', 'done',
        NULL, 'srv-01', 1, '2026-12-01' + INTERVAL seq SECOND,
        '2026-12-01' + INTERVAL seq SECOND + INTERVAL 1 SECOND, 1
      FROM seq_0_to_24999`);
    await insert(`SELECT 'big', 'rare', '2026-11-01' + INTERVAL seq HOUR, 1, 'schedule', 'done',
        NULL, 'srv-01', 1, '2026-11-01' + INTERVAL seq HOUR, '2026-11-01' + INTERVAL seq HOUR, 1
      FROM seq_0_to_99`);
    await db.query('ANALYZE TABLE baton_runs');

    /** Rows the statement really read, summed over its table accesses (ANALYZE's r_rows). */
    async function rowsRead(sql: string, params: unknown[]): Promise<number> {
      const [row] = await db.query<Record<string, string>>(`ANALYZE FORMAT=JSON ${sql}`, params);
      let total = 0;
      const walk = (node: unknown): void => {
        if (Array.isArray(node)) node.forEach(walk);
        else if (node && typeof node === 'object') {
          for (const [key, value] of Object.entries(node)) {
            if (key === 'r_rows' && typeof value === 'number') total += value;
            else walk(value);
          }
        }
      };
      walk(JSON.parse(Object.values(row!)[0]!));
      return total;
    }
    const iso = (text: string) => new Date(text);
    for (const name of ['tick', 'other', 'rare', 'none']) {
      expect(
        await rowsRead(LAST_SUCCESS_SQL, ['big', name, 'big', name]),
        `${name}: last success`,
      ).toBeLessThanOrEqual(2);
      expect(
        await rowsRead(FIRST_ROW_SQL, ['big', name]),
        `${name}: first row`,
      ).toBeLessThanOrEqual(1);
      expect(await rowsRead(LATEST_FIRE_SQL, ['big', name]), `${name}: latest fire`).toBeLessThan(
        5,
      );
      expect(
        await rowsRead(HOSTS_BEFORE_SQL, ['big', name, iso('2027-01-01T06:00:00Z')]),
        `${name}: hosts before a fire`,
      ).toBeLessThanOrEqual(HOSTS_BEFORE_ROWS);
      // tick failed 39,990 times after its last success: the latest is one entry per status,
      // the count stops at its cap (read once from the table, once from the derived table).
      const after = iso('2027-01-01T00:00:09Z');
      expect(
        await rowsRead(
          LATEST_FAILURE_SQL,
          FAILED_STATUSES.flatMap((st) => ['big', name, st, after]),
        ),
        `${name}: latest failure`,
      ).toBeLessThanOrEqual(FAILED_STATUSES.length * 2);
      expect(
        await rowsRead(FAILURE_COUNT_SQL, ['big', name, ...FAILED_STATUSES, after]),
        `${name}: failures counted`,
      ).toBeLessThanOrEqual(2 * FAILURE_COUNT_CAP + 1);
    }
    const [lastTick] = await db.query<{ finished_at: Date | null }>(LAST_SUCCESS_SQL, [
      'big',
      'tick',
      'big',
      'tick',
    ]);
    expect(lastTick!.finished_at).toEqual(iso('2027-01-01T00:00:09Z'));

    // And the commands answer from them (both asked at once).
    const [s, explained] = await Promise.all([
      status(db, ['--config', config]),
      baton([
        'explain',
        'other',
        '--json',
        '--namespace',
        'big',
        '--database-url',
        db.url,
        '--config',
        config,
      ]),
    ]);
    expect(job(s.json, 'tick')!.lastSuccessAt).toBe('2027-01-01T00:00:09.000Z');
    expect(job(s.json, 'tick')).toMatchObject({
      failuresSinceSuccess: FAILURE_COUNT_CAP,
      lastFailure: { status: 'failed', scheduledAt: '2027-01-01T11:06:39.000Z' },
    });
    // By kind: the planted history is of 2027-01-01, so from 00:01:11 UTC that day on, tick's
    // last success is overdue too and its no-success warning comes first.
    expect(s.json.warnings.find((w) => w.job === 'tick' && w.kind === 'failing')!.message).toMatch(
      /^job "tick" is failing: at least 1000 runs failed/,
    );
    expect(explained.stderr).toBe('');
    expect(JSON.parse(explained.stdout)).toMatchObject({
      scheduledAt: '2026-12-01T06:56:39.000Z',
      attempts: [{ host: 'srv-01', status: 'done' }],
    });
  });
});
