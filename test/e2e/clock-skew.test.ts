/**
 * One clock for the fleet (issue 4): runners fire on the database's clock, whatever their own.
 *
 * 1. Three runners whose clocks are really off — −2 s, 0 and +1.5 s, through libfaketime around
 *    the runner process, not a switch inside baton — run an every-second 30 ms job. Once all have
 *    started: every fire has exactly one winner, which ran once by the job's own journal; every
 *    row of every host is written at or after its instant and well within a second of it by the
 *    database's clock (`started_at` is NOW(3)), so the fast host never comes early and the slow
 *    one never late — on its own clock each would be 1.5–2 s off; and
 *    `baton status --json` reports each runner's offset within 100 ms of the truth (how far its
 *    clock is ahead of the database's: −2000, 0, +1500) with a clock-offset warning for the two
 *    skewed runners (threshold 1 s), exit 1. Each runner logs its own offset past its own
 *    threshold (`baton start --clock-warn`): h1 at the default 1 s does, h3 at `--clock-warn 2s`
 *    does not.
 * 2. The fire key, which the session lock alone does not give: a runner frozen (SIGSTOP) across
 *    fires and thawed 1.5 s later reaches them after their 30 ms winners finished and released the
 *    lock. It must record `this fire already ran on <host> (done)` for them, and every fire still
 *    has one winner.
 * 3. No run before its instant by the database's clock, even when the runners' estimate of it is
 *    wrong: the database server's own clock is stepped back 2 s (NTP on the database host). A
 *    runner estimates that clock from its heartbeats, and learns of the step only at the first
 *    one after it (the link also gets 50 ms slower each way at the step, so that sample is no
 *    better than the ones before); the step comes 300 ms before an instant, so the runners
 *    contend for that fire 2 s before the server says it is due. The claim waits for the
 *    server's clock, and every winner still starts at or after its instant. The test checks that
 *    the runners really came early (skip rows written before the instant by the server's clock),
 *    stepping back again where a heartbeat came first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, startRunner, type RunnerProcess } from '../helpers/cli.js';
import { createTestDatabase, dbNow, runs, type TestDatabase } from '../helpers/db.js';
import { expectCompleteFires, expectOneWinnerPerFire } from '../helpers/fires.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import {
  expectHistoryMatchesJournal,
  expectNoOverlapInJournal,
  writeJournaledSchedule,
  type Journal,
} from '../helpers/ground-truth.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('skew', { perTest: true });

/** An every-second 30 ms job that journals itself. */
function tick(): { config: string; journal: Journal } {
  return writeJournaledSchedule(
    (j) => `
namespace: skew
jobs:
  tick:
    schedule: "* * * * * *"
    command: ${j.yaml({ work: 'sleep 0.03' })}
`,
  );
}

interface StatusJson {
  runners: { host: string; clockOffsetMs: number | null; alive: boolean }[];
  warnings: { kind: string; message: string; hosts?: string[] }[];
}

async function status(db: TestDatabase, config: string) {
  const res = await baton(['status', '--json', '--config', config, '--database-url', db.url]);
  if (res.code !== 0 && res.code !== 1) throw new Error(`status exited ${res.code}: ${res.stderr}`);
  return { code: res.code, json: JSON.parse(res.stdout) as StatusJson };
}

describe('runners whose clocks are off by -2 s, 0 and +1.5 s', () => {
  it('fire on database time: on the instant, never early, one winner; status shows the offsets', async () => {
    const { config, journal } = tick();
    const db = fleet.db;
    // h3 warns only beyond 2 s (`--clock-warn`): its 1.5 s stays unlogged while h1's 2 s, past
    // the default 1 s, is logged. The status warnings below have a threshold of their own.
    const runners = (
      await Promise.all([
        fleet.start(['h1', 'h2'], { config }, { h1: '-2' }),
        fleet.start(['h3'], { config, args: ['--clock-warn', '2s'] }, { h3: '+1.5' }),
      ])
    ).flat();
    // Start-up fires (a runner fires by its own clock until its first offset measurement) are
    // left out: the window opens a couple of seconds after every runner started.
    const from = new Date((await dbNow(db)).getTime() + 2_000);

    // The registry gets each offset at the runner's next registry heartbeat (every 5 s).
    const truth: Record<string, number> = { h1: -2_000, h2: 0, h3: 1_500 };
    const measured = await waitFor(
      'status with every runner offset measured',
      async () => {
        const s = await status(db, config);
        return s.json.runners.length === 3 && s.json.runners.every((r) => r.clockOffsetMs != null)
          ? s
          : null;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    const until = new Date(Math.max(from.getTime() + 8_000, (await dbNow(db)).getTime()));
    await waitFor(
      'eight seconds of fires after start-up',
      async () =>
        (await db.query('SELECT id FROM baton_runs WHERE winner = 1 AND scheduled_at > ?', [until]))
          .length > 0,
      { timeoutMs: 30_000 },
    );
    // A second look, after several more heartbeats: the offsets stay right.
    const later = await status(db, config);
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    // Each runner checks its clock before each registry heartbeat, so all had checked by the
    // time status showed their offsets; only h1 is past its threshold.
    const clockWarnings = (r: RunnerProcess) =>
      r.lines
        .filter(
          (l) =>
            l.msg ===
            "this host's clock is off from the database's: fires still run on database time",
        )
        .map((l) => [r.host, l.thresholdMs]);
    expect(runners.flatMap(clockWarnings)).toEqual([['h1', 1_000]]);

    for (const s of [measured, later]) {
      expect(s.code).toBe(1);
      for (const r of s.json.runners) {
        expect(r.alive, r.host).toBe(true);
        expect(
          Math.abs(r.clockOffsetMs! - truth[r.host]!),
          `${r.host}: ${r.clockOffsetMs}`,
        ).toBeLessThanOrEqual(100);
      }
      expect(s.json.warnings.map((w) => [w.kind, w.hosts])).toEqual([
        ['clock-offset', ['h1']],
        ['clock-offset', ['h3']],
      ]);
      expect(s.json.warnings[0]!.message).toMatch(/^runner h1's clock is 2s behind the database's/);
      expect(s.json.warnings[1]!.message).toMatch(/^runner h3's clock is 1\.5s ahead of/);
    }

    const rows = (await runs(db, 'tick')).filter(
      (r) => r.scheduled_at >= from && r.scheduled_at <= until,
    );
    // No second of the window is missing, every host attempted every fire, one winner each —
    // and the job's own journal agrees: each fire started once, never twice at a time.
    const hosts = ['h1', 'h2', 'h3'];
    expectCompleteFires(rows, 'tick', { from, until, everyMs: 1_000, hosts });
    // A fire may meet the previous second's run still going, or its lock on the way back (a
    // full suite on two cores has slowed a 30 ms job past the next instant): then its skips must
    // name that run, and it must really have been going or just ended (the judge checks both
    // against the history), as in the other fleets' tests.
    expectOneWinnerPerFire(rows, 'tick', { noWinner: ['overlap', 'lock-being-released'] });
    const attempts = journal.attempts('tick', { from, until });
    expectNoOverlapInJournal(attempts, 'tick');
    expectHistoryMatchesJournal(rows, attempts, 'tick');
    // Every host woke on the database's clock: its row is written at or after the instant, and
    // well within a second of it (on its own clock a host would be 1.5 or 2 s off). The winners'
    // lag itself is measured in the bench (fire-lag), not bounded here.
    const off = rows
      .map((r) => ({
        at: r.scheduled_at.toISOString(),
        host: r.host,
        winner: r.winner,
        lateMs: r.started_at.getTime() - r.scheduled_at.getTime(),
      }))
      .filter((r) => r.lateMs < 0 || r.lateMs > 750);
    expect(off).toEqual([]);
    expect(
      rows.filter((r) => r.winner === 1 && r.triggered_by === 'schedule').length,
    ).toBeGreaterThanOrEqual(8);
    expectQuiet(runners);
  });
});

describe('a runner frozen across fires (SIGSTOP, then SIGCONT 1.5 s later)', () => {
  it('meets the fire key for fires whose winner finished: "this fire already ran", one winner', async () => {
    const { config, journal } = tick();
    const db = fleet.db;
    const runners = await fleet.start(['a', 'b', 'late'], { config });
    const late = runners[2]!;
    const pid = late.child.pid!;
    const from = new Date((await dbNow(db)).getTime() + 1_000);

    try {
      for (let cycle = 0; cycle < 4; cycle++) {
        // Freeze 150 ms before a fire (by the database's clock), thaw 1.5 s later: the runner
        // then finds two fires due whose 30 ms winners have finished.
        const now = (await dbNow(db)).getTime();
        const freezeAt = Math.ceil(now / 1000) * 1000 + 850;
        await sleep(freezeAt - now);
        process.kill(pid, 'SIGSTOP');
        await sleep(1_500);
        process.kill(pid, 'SIGCONT');
        await sleep(1_200);
      }
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const until = await dbNow(db);
    await waitFor(
      'the last fire attempted by all three',
      async () =>
        (
          await db.query('SELECT id FROM baton_runs WHERE scheduled_at = ?', [
            new Date(Math.floor(until.getTime() / 1000) * 1000),
          ])
        ).length === 3,
    );
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));

    const rows = (await runs(db, 'tick')).filter(
      (r) => r.scheduled_at >= from && r.scheduled_at <= until,
    );
    // The fire right after a thaw has its winner too: the thawed runner looks up the stale fires'
    // winners before it asks for the job's lock (issue 15), so it does not hold the lock at the
    // next instant while the fire key refuses an old fire.
    expectOneWinnerPerFire(rows, 'tick');
    const attempts = journal.attempts('tick', { from, until });
    expectNoOverlapInJournal(attempts, 'tick');
    expectHistoryMatchesJournal(rows, attempts, 'tick');
    const keyed = rows.filter(
      (r) =>
        r.host === 'late' &&
        r.winner === null &&
        /^this fire already ran on (a|b) \(done\)$/.test(r.reason ?? ''),
    );
    // Two fires per freeze; some may have met a lock still held instead.
    expect(keyed.length, JSON.stringify(rows.filter((r) => r.host === 'late'))).toBeGreaterThan(3);
    // Those were really reached late, after the winner had finished.
    for (const skip of keyed) {
      const winner = rows.find(
        (r) => r.winner === 1 && r.scheduled_at.getTime() === skip.scheduled_at.getTime(),
      )!;
      expect(winner.status).toBe('done');
      expect(skip.started_at.getTime()).toBeGreaterThanOrEqual(winner.finished_at!.getTime());
    }
    expectQuiet(runners);
  });
});

describe("the database server's clock stepped back 2 s under running runners", () => {
  let server: PrivateServer | undefined;
  let proxy: TcpProxy | undefined;
  let db: TestDatabase | undefined;
  const runners: RunnerProcess[] = [];
  beforeAll(async () => {
    server = await startPrivateServer({ steppableClock: true });
    proxy = await startTcpProxy({ host: '127.0.0.1', port: server.port });
    db = await createTestDatabase('skew_step', server.url);
  });
  afterAll(async () => {
    await Promise.all(runners.splice(0).map((r) => r.stop('SIGKILL')));
    await db?.conn.end().catch(() => undefined);
    await proxy?.close();
    await server?.destroy();
  });

  it("starts no run before its instant by the server's clock, though the runners come early", async () => {
    const { config, journal } = tick();
    // Through the proxy, which slows down at the step.
    const databaseUrl = proxy!.url(db!.name);
    for (const host of ['s1', 's2']) runners.push(startRunner({ config, databaseUrl, host }));
    await Promise.all(runners.map((r) => r.ready()));
    // A few fires on an unstepped clock, then the step, just after an instant.
    await waitFor(
      'three fires done',
      async () =>
        (await db!.query("SELECT id FROM baton_runs WHERE winner = 1 AND status = 'done'"))
          .length >= 3,
    );
    // The step, 300 ms before an instant by the server's clock before it (the runners' estimate),
    // so that they contend for that instant before their next heartbeat tells them of the step
    // (clock-offset.ts follows a step at the first sample after it). A heartbeat that comes in
    // between (or a runner slow to wake) puts that fire on time: then the server steps back again
    // (2 s more each time), until a loser's skip row shows that both runners came early.
    const nowMs = async () => (await dbNow(db!)).getTime();
    const earlyRows = async () =>
      db!.query('SELECT id FROM baton_runs WHERE winner IS NULL AND started_at < scheduled_at');
    let stepped!: Date;
    for (let step = 1; step <= 8; step++) {
      const now = await nowMs();
      const instant = Math.ceil((now + 400) / 1_000) * 1_000;
      await sleep(instant - now - 300);
      server!.stepClock(-2 * step);
      proxy!.setLatency({ upMs: 50, downMs: 50 });
      stepped = await dbNow(db!);
      await waitFor(
        'both runners recorded the instant after the step',
        async () =>
          (await db!.query('SELECT id FROM baton_runs WHERE scheduled_at = ?', [new Date(instant)]))
            .length >= 2,
        { timeoutMs: 20_000 },
      );
      if ((await earlyRows()).length > 0) break;
    }
    // Eight seconds of the server's new time: the runners' estimate caught up meanwhile.
    await waitFor(
      'fires past the step done',
      async () =>
        (
          await db!.query(
            "SELECT id FROM baton_runs WHERE winner = 1 AND status = 'done' AND scheduled_at > ?",
            [new Date(stepped.getTime() + 8_000)],
          )
        ).length > 0,
      { timeoutMs: 30_000 },
    );
    expect(await Promise.all(runners.map((r) => r.stop('SIGTERM')))).toEqual([0, 0]);

    const rows = await runs(db!, 'tick');
    // The situation: runners contended for fires before the server said they were due (a loser's
    // skip row, written with NOW(3), predates its fire's instant).
    const early = rows.filter((r) => r.winner === null && r.started_at < r.scheduled_at);
    expect(early.length, 'skip rows written before their instant').toBeGreaterThan(0);
    // The guarantee: no winner started before its instant by the server's clock.
    expect(
      rows
        .filter((r) => r.winner === 1 && r.started_at < r.scheduled_at)
        .map((r) => [r.scheduled_at.toISOString(), r.started_at.toISOString(), r.host]),
    ).toEqual([]);
    // Fires pile up while the runners wait for the server's clock: some find the last one still
    // going, and a runner whose estimate (or queue of fires) lags the other's may reach a fire
    // after the next one started (`behind`, seen in a clean-clone CI run). Their times are off
    // by the step too (a run's end is the runner's clock corrected by its estimate), hence the
    // slack.
    expectOneWinnerPerFire(rows, 'tick', {
      noWinner: ['overlap', 'lock-being-released', 'behind'],
      slackMs: 3_000,
    });
    const attempts = journal.attempts('tick');
    expectNoOverlapInJournal(attempts, 'tick');
    expectHistoryMatchesJournal(rows, attempts, 'tick');
    expectQuiet(runners);
  });
});
