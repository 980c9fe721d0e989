/**
 * `baton status` about a runner PROCESS killed with SIGKILL: `runner-gone` for it once it missed
 * its heartbeats (made short with `start --registry-interval 1s` and `status --gone-after 5s`),
 * exit 1, naming its pid, while a live runner with the same heartbeats is never called gone.
 * Everything else `baton status` reports is judged against runners in the test process:
 * in-process/status.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { writeSchedule } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { kinds, runnerOf, status } from '../helpers/status-cli.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('status', { perTest: true });

describe('baton status', () => {
  it('a runner killed with SIGKILL is reported gone once it missed its heartbeats', async () => {
    const config = writeSchedule(`
namespace: fleet
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const db = fleet.db;
    const runners = await fleet.start(['g1', 'g2'], {
      config,
      args: ['--registry-interval', '1s'],
    });
    // Five heartbeats: a full suite on two cores has held a live runner's heartbeat back for 3 s.
    const quick = ['--config', config, '--gone-after', '5s'];
    const up = await status(db, quick);
    expect(up.json.warnings).toEqual([]);
    expect(up.json.runners.map((r) => r.state)).toEqual(['alive', 'alive']);
    // Each registry row has its own process's pid (the in-process tier's runners share one).
    expect(up.json.runners.map((r) => [r.host, r.pid])).toEqual(
      runners.map((r) => [r.host, r.child.pid]),
    );

    await runners[1]!.stop('SIGKILL');
    // Right after the kill, with the default window of 15 s, it still counts as alive.
    const soon = await status(db, ['--config', config]);
    expect(runnerOf(soon.json, 'g2')!.state).toBe('alive');
    expect(runnerOf(soon.json, 'g1')!.state).toBe('alive');

    // With 1 s heartbeats a 5 s window never calls a live runner gone: g1 is alive in every
    // report until g2 is gone (more than the window after g2's last heartbeat), and nothing
    // else is found meanwhile. (How many reports fall in that window depends on how fast the
    // machine runs the command: on a loaded one, the first may already find g2 gone.)
    const gone = await waitFor(
      'status calling g2 gone',
      async () => {
        const s = await status(db, quick);
        expect(runnerOf(s.json, 'g1')).toMatchObject({ state: 'alive', alive: true });
        if (runnerOf(s.json, 'g2')!.state === 'gone') return s;
        expect(s.json.warnings).toEqual([]);
        expect(runnerOf(s.json, 'g2')!.state).toBe('alive');
        return null;
      },
      { timeoutMs: 15_000, intervalMs: 500 },
    );
    expect(gone.code).toBe(1);
    expect(kinds(gone.json)).toEqual([['runner-gone', null, ['g2']]]);
    expect(gone.json.warnings[0]!.message).toMatch(
      new RegExp(
        `^runner g2 \\(pid ${runners[1]!.child.pid}\\) stopped heartbeating: last seen [\\d.]+s ago`,
      ),
    );
    const g2 = runnerOf(gone.json, 'g2')!;
    expect(Date.parse(gone.json.now) - Date.parse(g2.lastSeenAt)).toBeGreaterThan(5_000);
    expect(g2).toMatchObject({ alive: false, stoppedAt: null });
    expect(runnerOf(gone.json, 'g1')).toMatchObject({ state: 'alive', alive: true });
  });
});
