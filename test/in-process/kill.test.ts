/**
 * `baton kill` (issue 20), with the runners in the test process (in-process-fleet.ts; the jobs
 * are real processes, each in its own process group) and the CLI under test in the test process
 * too (cli-in-process.ts; `baton run` as a process): what is judged is `baton kill/audit/show/history/explain`'s output and exit codes, the rows, and the
 * jobs' process groups (/proc).
 * - A run on one runner of a two-runner fleet, killed from another host name: the job's process
 *   group is gone within 3 s of the request (SIGTERM at once, not the SIGKILL after the 10 s
 *   grace), the row says `killed` with who and why, the audit has it (`baton audit --json`,
 *   `baton show`, `history`, `explain`), and the job's next fire has a winner again.
 * - A job that ignores SIGTERM: gone only after the grace (SIGKILL), never retried.
 * - A finished run: said so, nothing changed; an unknown id: 64.
 * - A run of `baton run` in the foreground (a process of its own by nature): killed the same way.
 * - `pause` and `resume` are in the audit, with the operator (SUDO_USER) and the host.
 * - Re-runs whose runner is gone (planted rows, no runner): each declared `lost` as its own
 *   generation, told apart from generation 0's in the outbox.
 *
 * The runners look for kill requests every 100 ms (`runs.killWatchMs`, 1 s by default): the bound
 * below is about SIGTERM at once vs SIGKILL after the grace, not about the watch's pace. What
 * needs a runner killed (SIGKILL: its run declared lost, its job stopped by its watchdog) is in
 * e2e/kill.test.ts.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeSchedule, type CliResult } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { createTestDatabase, plantRun, type RunRow } from '../helpers/db.js';
import { expectQuiet } from '../helpers/fleet.js';
import { useInProcessFleet, type InProcessRunner } from '../helpers/in-process-fleet.js';
import { groupGone, killGroup, pidFile } from '../helpers/procfs.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('kill');

const JOBS = `
namespace: kill
jobs:
  stuck:
    schedule: "*/2 * * * * *"
    overlap: skip
    command: [sh, -c, 'echo $$ > stuck-$BATON_RUN_ID.pgid; sleep 60 & wait']
  quick:
    schedule: "*/2 * * * * *"
    command: ["true"]
  by-hand:
    schedule: "0 3 1 1 *"
    command: [sh, -c, 'echo $$ > by-hand-$BATON_RUN_ID.pgid; sleep 60 & wait']
  stubborn:
    schedule: "*/2 * * * * *"
    overlap: skip
    retries: 2
    command:
      - sh
      - -c
      - 'trap "" TERM; echo $$ > stubborn-$BATON_RUN_ID.pgid; sleep 60 & wait'
`;
const config = writeSchedule(JOBS);
const dir = path.dirname(config);
/** The kill watch's pace, shortened; the runner's own stop grace as `baton start --grace 1`. */
const RUNNER = { graceMs: 1_000, runner: { timings: { runs: { killWatchMs: 100 } } } };
/** The operator the audit names: under sudo, the user who ran sudo. */
const AS_ALICE = { env: { SUDO_USER: 'alice' } };
/** `baton kill`'s default grace, which the row and the audit record. */
const DEFAULT_KILL_GRACE_MS = 10_000;

let runners: InProcessRunner[] = [];

const kill = (args: string[]): Promise<CliResult> =>
  baton(['kill', ...args, '--database-url', fleet.db.url], AS_ALICE);

async function row(id: number): Promise<RunRow & Record<string, unknown>> {
  const [r] = await fleet.db.query<RunRow & Record<string, unknown>>(
    'SELECT * FROM baton_runs WHERE id = ?',
    [id],
  );
  return r!;
}

/** A running winner of the job, once its process group has written its id. */
async function runningRun(job: string): Promise<{ run: RunRow; pgid: number }> {
  const run = await waitFor(`a running ${job}`, async () => {
    const [r] = await fleet.db.query<RunRow>(
      "SELECT * FROM baton_runs WHERE job = ? AND status = 'running' AND winner = 1 ORDER BY id",
      [job],
    );
    return r;
  });
  const pgid = await pidFile(dir, `${job}-${run.id}.pgid`);
  expect(groupGone(pgid), `${job}'s process group before the kill`).toBe(false);
  return { run, pgid };
}

/**
 * Runs `kill` while watching the run's row and its process group: resolves with the result and
 * how long after the request was written (seen in the row) the group was gone. Measured from
 * the request, not from the command's start: on a loaded test machine node alone takes seconds
 * to start the CLI, which is no part of the runner's bound.
 */
async function killWatching(runId: number, pgid: number, args: string[]) {
  let requestedAt: number | null = null;
  let goneAt: number | null = null;
  let done = false;
  const poll = (async () => {
    while (!done && goneAt == null) {
      if (requestedAt == null && (await row(runId)).kill_requested_at != null) {
        requestedAt = performance.now();
      }
      if (groupGone(pgid)) goneAt = performance.now();
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const result = await kill(args);
  done = true;
  await poll;
  // The verdict is written after the job's end: the group is gone by now, or was never killed.
  goneAt ??= groupGone(pgid) ? performance.now() : null;
  const goneAfterMs = goneAt != null && requestedAt != null ? goneAt - requestedAt : null;
  return { result, goneAfterMs, gone: goneAt != null };
}

describe('baton kill', () => {
  it('stops a run on another runner within 3 s, records killed with who and why, and the next fire runs', async () => {
    runners = await fleet.start(['kill-a', 'kill-b'], { config, ...RUNNER });
    const { run, pgid } = await runningRun('stuck');
    const owner = run.host;
    const elsewhere = runners.find((r) => r.host !== owner)!.host;

    const { result, goneAfterMs, gone } = await killWatching(run.id, pgid, [
      String(run.id),
      '--reason',
      'stuck on a lock',
      '--host',
      elsewhere,
      '--json',
    ]);
    if (!gone) killGroup(pgid);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(goneAfterMs, 'ms from the request to the process group gone').not.toBeNull();
    expect(goneAfterMs!).toBeLessThan(3_000);
    const out = JSON.parse(result.stdout) as Record<string, unknown>;
    expect(out).toMatchObject({
      runId: run.id,
      job: 'stuck',
      host: owner,
      outcome: 'killed',
      status: 'killed',
      error: 'killed by alice: stuck on a lock',
    });
    // By the database's clock too: the SIGTERM ended it, long before the grace's SIGKILL.
    expect(out.tookMs as number).toBeLessThan(DEFAULT_KILL_GRACE_MS);

    const killed = await row(run.id);
    expect(killed).toMatchObject({
      status: 'killed',
      error: 'killed by alice: stuck on a lock',
      attempts: 1,
      kill_requested_by: 'alice',
      kill_reason: 'stuck on a lock',
      kill_grace_ms: DEFAULT_KILL_GRACE_MS,
    });
    expect(killed.finished_at).not.toBeNull();

    const url = ['--database-url', fleet.db.url];
    const fire = run.scheduled_at.toISOString();
    const [audit, shown, history, explained] = await Promise.all([
      baton(['audit', '--json', '--namespace', 'kill', ...url]),
      baton(['show', String(run.id), ...url]),
      baton(['history', 'stuck', '--json', '--namespace', 'kill', '--limit', '100', ...url]),
      baton(['explain', 'stuck', fire, '--json', '--namespace', 'kill', ...url]),
    ]);
    expect(audit.code).toBe(0);
    const [entry] = JSON.parse(audit.stdout) as Record<string, unknown>[];
    expect(entry).toMatchObject({
      action: 'kill',
      job: 'stuck',
      runId: run.id,
      operator: 'alice',
      via: 'cli',
      host: elsewhere,
      reason: 'stuck on a lock',
      details: { graceMs: DEFAULT_KILL_GRACE_MS },
    });
    expect(entry!.outcome).toMatch(/^killed in /);
    expect(shown.stdout).toMatch(/^status:\s+killed$/m);
    expect(shown.stdout).toContain(`kill by alice on ${elsewhere}: stuck on a lock → killed in `);
    // history and explain show the action beside the run it was about.
    const inHistory = (JSON.parse(history.stdout) as { id: number; actions: unknown[] }[]).find(
      (r) => r.id === run.id,
    );
    expect(inHistory?.actions).toMatchObject([{ action: 'kill', operator: 'alice' }]);
    expect(JSON.parse(explained.stdout)).toMatchObject({
      actions: [{ action: 'kill', runId: run.id, operator: 'alice', reason: 'stuck on a lock' }],
    });

    // The lock was released with the verdict: the job's next fire has a winner again (running,
    // or done), not a skip for an overlap with the killed run.
    const next = await waitFor(
      'a later fire of stuck won',
      async () =>
        (
          await fleet.db.query<RunRow>(
            `SELECT * FROM baton_runs WHERE job = 'stuck' AND winner = 1 AND scheduled_at > ?
                AND status IN ('running', 'done')`,
            [run.scheduled_at],
          )
        )[0],
    );
    expect(next.scheduled_at.getTime()).toBeGreaterThan(run.scheduled_at.getTime());
  });

  it('a job that ignores SIGTERM is gone after the grace, and is not retried', async () => {
    const { run, pgid } = await runningRun('stubborn');
    const { result, gone } = await killWatching(run.id, pgid, [
      String(run.id),
      '--grace',
      '2s',
      '--json',
    ]);
    if (!gone) killGroup(pgid);
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout) as { outcome: string; tookMs: number; error: string };
    expect(out).toMatchObject({ outcome: 'killed', error: 'killed by alice' });
    // SIGTERM changed nothing; only the SIGKILL after the grace ended it (from the request to
    // the verdict, by the database's clock: at least the grace, and about a tick more).
    expect(out.tookMs).toBeGreaterThanOrEqual(2_000);
    expect(out.tookMs).toBeLessThan(2_000 + 3_000);
    expect(gone, 'the group gone by the time kill answered').toBe(true);
    // `retries: 2`, but a kill is for good: one attempt.
    expect(await row(run.id)).toMatchObject({
      status: 'killed',
      attempts: 1,
      error: 'killed by alice',
    });
  });

  it('a finished run: says so and changes nothing; an unknown run id is 64', async () => {
    const [done] = await fleet.db.query<RunRow>(
      "SELECT id FROM baton_runs WHERE job = 'quick' AND status = 'done' ORDER BY id LIMIT 1",
    );
    const before = await row(done!.id);
    const [result, unknown, typo] = await Promise.all([
      kill([String(done!.id), '--reason', 'too late']),
      kill(['999999999']),
      kill(['12x']),
    ]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      new RegExp(
        `^run ${done!.id} \\(quick on \\S+\\) already finished \\(done at .+ UTC\\), nothing changed\\n$`,
      ),
    );
    expect(await row(done!.id)).toEqual(before);

    expect(unknown.code).toBe(64);
    expect(unknown.stderr).toMatch(/^baton: no run with id 999999999 in the history at /);
    expect(typo.code).toBe(64);
  });

  it('stops a run of `baton run` in the foreground too', async () => {
    const manual = baton(['run', 'by-hand', '--config', config, '--database-url', fleet.db.url]);
    const { run, pgid } = await runningRun('by-hand');
    expect(run.triggered_by).toBe('manual');
    const { result, gone } = await killWatching(run.id, pgid, [String(run.id), '--json']);
    if (!gone) killGroup(pgid);
    expect(JSON.parse(result.stdout)).toMatchObject({ outcome: 'killed', status: 'killed' });
    const ran = await manual;
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain('by-hand failed: killed by alice');
    expect(gone, 'the group gone by the time kill answered').toBe(true);
  });

  it('pause and resume are in the audit, newest first, with the operator and the host', async () => {
    const common = ['--namespace', 'kill', '--config', config, '--database-url', fleet.db.url];
    const paused = await baton(
      ['pause', 'stubborn', '--reason', 'maintenance', '--host', 'ops-1', ...common],
      AS_ALICE,
    );
    expect(paused.code).toBe(0);
    expect(paused.stdout).toContain('paused by alice@ops-1 at ');
    const resumed = await baton(
      ['resume', 'stubborn', '--reason', 'done', '--host', 'ops-1', ...common],
      AS_ALICE,
    );
    expect(resumed.code).toBe(0);
    const [audit, text] = await Promise.all([
      baton(['audit', '--json', '--job', 'stubborn', '--since', '1h', ...common]),
      baton(['audit', ...common]),
    ]);
    const actions = JSON.parse(audit.stdout) as Record<string, unknown>[];
    expect(actions.slice(0, 3).map((a) => [a.action, a.operator, a.host, a.reason])).toEqual([
      ['resume', 'alice', 'ops-1', 'done'],
      ['pause', 'alice', 'ops-1', 'maintenance'],
      ['kill', 'alice', expect.any(String), null],
    ]);
    expect(text.stdout).toMatch(/^AT \(UTC\)\s+ACTION\s+JOB\s+RUN\s+OPERATOR/m);
    expect(text.stdout).toMatch(/\bresume\s+stubborn\s+alice\s+cli\s+ops-1\s+done\b/);
    expectQuiet(runners);
  });
});

describe('baton kill of re-runs whose runner is gone', () => {
  it("declares each lost as its own generation: a re-run's notification is not dropped as generation 0's", async () => {
    const db = await createTestDatabase('kill_gen');
    try {
      const genConfig = writeSchedule(`
namespace: kill-gen
notify:
  ops: {webhook: {url: "http://127.0.0.1:9/hook"}}
jobs:
  gen:
    schedule: "0 3 1 1 *"
    command: ["true"]
    notify: {to: [ops], on: [lost]}
`);
      expect((await baton(['migrate', '--database-url', db.url])).code).toBe(0);
      // One fire, run twice (the scheduled run and an operator's re-run), each left `running`
      // by a runner that is gone: no lock session holds the session lock its row names.
      const fire = new Date('2026-01-01T03:00:00Z');
      const ids: number[] = [];
      for (const rerun of [0, 1]) {
        ids.push(
          await plantRun(db, {
            namespace: 'kill-gen',
            job: 'gen',
            scheduledAt: fire,
            trigger: rerun === 0 ? 'schedule' : 'rerun',
            rerun,
            status: 'running',
            host: 'gone-host',
            lockConnectionId: 999_999_999,
          }),
        );
      }
      for (const id of ids) {
        const killed = await baton(
          ['kill', String(id), '--config', genConfig, '--database-url', db.url],
          AS_ALICE,
        );
        expect(killed.code, killed.stderr).toBe(0);
        expect(killed.stdout).toContain('its runner is gone: declared lost');
      }
      const told = await db.query<{ run_id: number; rerun: number }>(
        "SELECT run_id, rerun FROM baton_notifications WHERE event = 'lost' ORDER BY run_id",
      );
      expect(told.map((n) => [Number(n.run_id), Number(n.rerun)])).toEqual([
        [ids[0], 0],
        [ids[1], 1],
      ]);
    } finally {
      await db.drop();
    }
  });
});
