/**
 * A backfill started through the write API (`POST /api/jobs/{job}/backfill`: the backfill
 * action's walk, run by the runner asked — no `baton backfill` process) never outlives that
 * runner, with real processes:
 *
 * - SIGTERM to the runner while a fire runs: no further fire starts, the fire going finishes
 *   within the runner's grace (or is stopped after it, recorded `interrupted`), and the runner
 *   exits only once the backfill has, its rows and audit final.
 * - SIGKILL to the runner: the fire's job is stopped with the runner's other runs (its spawner
 *   sees the runner go), and nothing of the backfill goes on.
 *
 * Ground truth: the job appends a line to `starts.txt` as it starts, and its pid to `pids.txt`.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort } from '../helpers/private-server.js';
import { processGone } from '../helpers/procfs.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('bf_owner', { perTest: true });

const READ = 'read-token-0123456789abcdef';
const ALICE = 'alice-token-0123456789abcdef';

/** A runner with the write API, and a job whose every fire takes `seconds`. */
async function runnerWithApi(seconds: number, grace: number) {
  const config = writeSchedule(`
namespace: owner
jobs:
  slow:
    schedule: "* * * * *"
    enabled: false
    command: ["sh", "-c", "echo $$ >> pids.txt; echo \\"$BATON_SCHEDULED_AT\\" >> starts.txt; sleep ${seconds}"]
`);
  const dir = path.dirname(config);
  const tokens = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-tokens-')), 'write-tokens');
  writeFileSync(tokens, `alice:${ALICE}\n`, { mode: 0o600 });
  const port = await freePort();
  const [runner] = await fleet.start(['owner-a'], {
    config,
    args: [
      '--http',
      `127.0.0.1:${port}`,
      '--http-write-tokens-file',
      tokens,
      '--grace',
      String(grace),
    ],
    env: { BATON_HTTP_TOKEN: READ },
  });
  return { runner: runner!, dir, port };
}

/** Asks for a backfill of the last few minutes (3 or 4 fires) and waits for its first start. */
async function backfillStarted(port: number, dir: string): Promise<number> {
  const now = Date.now();
  const res = await fetch(`http://127.0.0.1:${port}/api/jobs/slow/backfill`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ALICE}` },
    body: JSON.stringify({
      from: new Date(now - 4 * 60_000 + 1_000).toISOString(),
      to: new Date(now - 1_000).toISOString(),
      reason: 'catch up',
    }),
  });
  const body = (await res.json()) as { fires?: number };
  expect(res.status, JSON.stringify(body)).toBe(202);
  expect(body.fires).toBeGreaterThanOrEqual(3);
  await waitFor('the first fire of the backfill to start', () => starts(dir).length === 1);
  return body.fires!;
}

function starts(dir: string): string[] {
  const file = path.join(dir, 'starts.txt');
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
}

/** The runner's children that are `baton backfill` commands: none, the walk is the runner's. */
function backfillChildren(runner: RunnerProcess): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (ppid === runner.child.pid && argv.includes('backfill')) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

function jobPids(dir: string): number[] {
  const file = path.join(dir, 'pids.txt');
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number) : [];
}

async function backfillRows() {
  const runs = await fleet.db.query<{ status: string; error: string | null }>(
    "SELECT status, error FROM baton_runs WHERE job = 'slow' AND winner >= 1 ORDER BY id",
  );
  const audit = await fleet.db.query<{ outcome: string | null }>(
    "SELECT outcome FROM baton_audit WHERE action = 'backfill'",
  );
  return { runs, audit };
}

describe('a backfill of the write API stops with its runner', () => {
  it('SIGTERM: no fire starts after the stop, the fire going ends within the grace, the runner waits for it', async () => {
    // A fire takes longer than the grace: it is stopped at the grace's end.
    const { runner, dir, port } = await runnerWithApi(30, 1);
    await backfillStarted(port, dir);
    // The walk is the runner's own: no command was spawned for it.
    expect(backfillChildren(runner)).toEqual([]);

    expect(await runner.stop('SIGTERM', 60_000)).toBe(0);
    // The runner exited after its backfill did: everything is final at that moment.
    const { runs, audit } = await backfillRows();
    expect(runs).toEqual([
      {
        status: 'interrupted',
        error: expect.stringMatching(/the runner stopped \(SIGTERM\)/) as string,
      },
    ]);
    expect(audit).toEqual([
      { outcome: expect.stringMatching(/^interrupted by the runner's stop: 0 run/) as string },
    ]);
    expect(starts(dir)).toHaveLength(1);
    expect(jobPids(dir).every(processGone)).toBe(true);
  });

  it('SIGTERM with a grace that covers the fire: it finishes `done`, and none starts after it', async () => {
    const { runner, dir, port } = await runnerWithApi(2, 60);
    await backfillStarted(port, dir);

    expect(await runner.stop('SIGTERM', 60_000)).toBe(0);
    const { runs, audit } = await backfillRows();
    expect(runs).toEqual([{ status: 'done', error: null }]);
    expect(audit).toEqual([
      { outcome: expect.stringMatching(/^interrupted by the runner's stop: 1 run/) as string },
    ]);
    expect(starts(dir)).toHaveLength(1);
  });

  it("SIGKILL: the fire's job is stopped with the runner, and nothing of the backfill goes on", async () => {
    const { runner, dir, port } = await runnerWithApi(30, 30);
    await backfillStarted(port, dir);
    const [pid] = jobPids(dir);

    await runner.stop('SIGKILL');
    await waitFor('the job of the fire going to be stopped', () => processGone(pid!), {
      timeoutMs: 30_000,
    });
    // The backfill's audit row stays unfinished: `baton backfill` of the range continues it.
    const { audit } = await backfillRows();
    expect(audit).toEqual([{ outcome: null }]);
    expect(starts(dir)).toHaveLength(1);
  });
});
