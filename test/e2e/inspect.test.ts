/**
 * `baton explain` about runners that need a process boundary (issue 4): one killed with SIGKILL,
 * one frozen with SIGSTOP. Only those runners are processes; their companions are built in the
 * test process (in-process-fleet.ts) on the same database. The rest of the inspection and
 * controls (pause/resume, explain of a whole fleet, show) is in in-process/inspect.test.ts.
 * - After one runner of three is killed with SIGKILL, a later fire lists two attempts and names
 *   the killed runner as missing and gone (so does the latest fire, and an instant with no rows);
 *   once it is restarted, that fire still names it — as `restarted` (its registry row now starts
 *   after the fire), and the restarted runner takes its host's row back without a clash.
 * - `baton explain --gone-after`: a frozen runner (SIGSTOP: its lock session still open) is alive,
 *   lagging, within the default 15 s, and gone with `--gone-after 3s`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { writeSchedule, type CliResult } from '../helpers/cli.js';
import { dbNow } from '../helpers/db.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { InProcessRunner, type InProcessRunnerOptions } from '../helpers/in-process-fleet.js';
import {
  firesBetween,
  fireWithRows,
  inspectCli,
  json,
  untilPast,
  type ExplainJson,
} from '../helpers/inspect.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['srv-01', 'srv-02', 'srv-03'];
const fleet = useFleet('inspect', { perTest: true });

/** Runners in the test process on the fleet's database, stopped after each test (before it). */
const inProcess: InProcessRunner[] = [];
afterEach(async () => {
  await Promise.all(inProcess.splice(0).map((r) => r.stop(true)));
});

async function startInProcess(
  hosts: string[],
  options: Omit<InProcessRunnerOptions, 'host' | 'databaseUrl'>,
): Promise<InProcessRunner[]> {
  const started = hosts.map(
    (host) => new InProcessRunner(host, { ...options, host, databaseUrl: fleet.db.url }),
  );
  inProcess.push(...started);
  await Promise.all(started.map((r) => r.start()));
  return started;
}

/** `baton <args> --config <config> --database-url <the fleet's>`, as the operator `ops`. */
function cli(config: string, ...args: string[]): Promise<CliResult> {
  return inspectCli(fleet.db, config, ...args);
}

describe('baton explain', () => {
  it('names a runner killed before a later fire as gone, and as restarted once it is back', async () => {
    const config = writeSchedule(`
namespace: explain-test
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["sleep", "0.03"]
`);
    // srv-03 is the one killed: a process. Its companions are in the test process.
    const [[srv01, srv02], [srv03]] = await Promise.all([
      startInProcess(['srv-01', 'srv-02'], { config }),
      fleet.start(['srv-03'], { config }),
    ]);
    // A fire all three took part in (e.g. in-process/inspect.test.ts judges such a fire).
    await fireWithRows(fleet.db, 'tick', await dbNow(fleet.db), 3);

    // srv-03 dies without a word; a later fire has two attempts and names it.
    await srv03!.stop('SIGKILL');
    const killedAt = await dbNow(fleet.db);
    const [fire2, rows2] = await fireWithRows(
      fleet.db,
      'tick',
      new Date(killedAt.getTime() + 1_000),
      2,
    );
    expect(new Set(rows2.map((r) => r.host))).toEqual(new Set(['srv-01', 'srv-02']));
    const latestBefore = await dbNow(fleet.db);
    // An instant with no rows at all: nobody attempted it; the runners there are listed.
    const between = new Date(fire2.getTime() + 500);
    await untilPast(fleet.db, between);
    const [j2Result, text2, j3Result, j4Result] = await Promise.all([
      cli(config, 'explain', 'tick', fire2.toISOString(), '--json'),
      cli(config, 'explain', 'tick', fire2.toISOString()),
      // Without a fire time: the latest fire, which srv-03 missed too.
      cli(config, 'explain', 'tick', '--json'),
      cli(config, 'explain', 'tick', between.toISOString(), '--json'),
    ]);
    const j2 = json<ExplainJson>(j2Result);
    expect(j2.attempts).toHaveLength(2);
    expect(j2.attempts.filter((a) => a.winner)).toHaveLength(1);
    expect(j2.missing).toEqual(['srv-03']);
    expect(j2.missingRunners).toEqual([
      expect.objectContaining({ host: 'srv-03', state: 'gone', alive: false }),
    ]);
    expect(j2.verdict).toMatch(/; srv-03 left no attempt \(gone since \S+ \S+\)$/);
    expect(text2.stdout.split('\n')[0]).toBe(j2.verdict);
    expect(text2.stdout).toMatch(/^srv-03 +\d+ +gone /m);

    const j3 = json<ExplainJson>(j3Result);
    expect(new Date(j3.scheduledAt!).getTime()).toBeGreaterThanOrEqual(
      Math.floor(latestBefore.getTime() / 1000) * 1000 - 2_000,
    );
    expect(j3.missing).toContain('srv-03');

    const j4 = json<ExplainJson>(j4Result);
    expect(j4.attempts).toEqual([]);
    expect(j4.verdict).toMatch(/^nobody attempted it: .* is not a fire of "\* \* \* \* \* \*"/);
    expect(j4.missing).toEqual(HOSTS);
    expect(j4.missingRunners.map((m) => [m.host, m.alive])).toEqual([
      ['srv-01', true],
      ['srv-02', true],
      ['srv-03', false],
    ]);

    // srv-03 comes back: its registry row now starts after fire2, and it took part in the job
    // before that fire — named as restarted, no longer left out. What comes back needs no
    // process of its own: built in the test process, it has another pid than the killed one, as
    // a restarted process would, so its start still checks the killed one's row for a clash.
    const [again] = await startInProcess(['srv-03'], { config });
    const j6 = json<ExplainJson>(
      await cli(config, 'explain', 'tick', fire2.toISOString(), '--json'),
    );
    expect(j6.attempts).toHaveLength(2);
    expect(j6.missing).toEqual(['srv-03']);
    expect(j6.missingRunners).toEqual([
      expect.objectContaining({
        host: 'srv-03',
        state: 'restarted',
        alive: true,
        detail: expect.stringMatching(/^restarted at \S+ \S+ — down or starting at the fire$/),
      }),
    ]);
    expect(j6.verdict).toMatch(
      /; srv-03 left no attempt \(restarted at \S+ \S+: down or starting at the fire\)$/,
    );

    await Promise.all([srv01!, srv02!, again!].map((r) => r.stop()));
    expectQuiet([srv01!, srv02!]);
    // A runner restarted seconds after a kill -9 takes its host's row back: no "another runner
    // uses the host id" — the old one's lock session ended with it.
    expect(again!.errors(), 'srv-03 restarted after kill -9').toEqual([]);
    expect(again!.stderr).toBe('');
  });

  it('--gone-after: a frozen runner is alive for 15 s by default, gone after a shorter window', async () => {
    const config = writeSchedule(`
namespace: explain-gone
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
`);
    // srv-02 is the one frozen: a process, heartbeating every second. srv-01 is in the test
    // process, at the same pace.
    const [[srv01], [srv02]] = await Promise.all([
      startInProcess(['srv-01'], {
        config,
        runner: { timings: { registrar: { refreshMs: 1_000 } } },
      }),
      fleet.start(['srv-02'], { config, args: ['--registry-interval', '1s'] }),
    ]);
    await fireWithRows(fleet.db, 'tick', await dbNow(fleet.db), 2);
    srv02!.child.kill('SIGSTOP');
    const frozenAt = await dbNow(fleet.db);
    try {
      // A fire 4 s after the freeze: srv-01's row only (its winner, or its skip when the frozen
      // runner happened to hold the job's lock).
      const fire = await waitFor(
        'a fire 4 s after the freeze with srv-01 only',
        async () => {
          for (const [at, rows] of await firesBetween(
            fleet.db,
            'tick',
            new Date(frozenAt.getTime() + 4_000),
          )) {
            if (rows.length === 1 && rows[0]!.host === 'srv-01') return new Date(at);
          }
          return null;
        },
        { timeoutMs: 20_000 },
      );
      const [byDefaultResult, quickResult] = await Promise.all([
        cli(config, 'explain', 'tick', fire.toISOString(), '--json'),
        cli(config, 'explain', 'tick', fire.toISOString(), '--json', '--gone-after', '3s'),
      ]);
      const byDefault = json<ExplainJson>(byDefaultResult);
      expect(byDefault.missingRunners).toEqual([
        expect.objectContaining({ host: 'srv-02', state: 'lagging', alive: true }),
      ]);
      const quick = json<ExplainJson>(quickResult);
      expect(quick.missingRunners).toEqual([
        expect.objectContaining({
          host: 'srv-02',
          state: 'gone',
          alive: false,
          detail: expect.stringMatching(/^gone since .*\(no heartbeat for \S+: crashed, killed/),
        }),
      ]);
      expect(quick.verdict).toMatch(/; srv-02 left no attempt \(gone since \S+ \S+\)$/);
    } finally {
      srv02!.child.kill('SIGCONT');
    }
    await Promise.all([srv01!.stop(), srv02!.stop('SIGTERM')]);
    expectQuiet([srv01!]);
  });
});
