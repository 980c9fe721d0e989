/**
 * `baton kill` (issue 20) of a run whose runner was SIGKILLed: reported, and declared, `lost` —
 * not left "being killed" — and the job stopped by its watchdog when the runner died. The runner
 * is a real `baton start` process (kill -9 needs one); everything else about `baton kill` (a run
 * on another runner, a job that ignores SIGTERM, a finished run, `baton run` in the foreground,
 * the audit, re-runs whose runner is gone) is in in-process/kill.test.ts.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';
import type { RunRow } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { groupGone, killGroup, pidFile } from '../helpers/procfs.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('kill');

/** A runner alone with its job: nobody else claims (and reaps) its fires. */
const soloConfig = writeSchedule(`
namespace: kill
jobs:
  solo:
    schedule: "*/2 * * * * *"
    overlap: skip
    command: [sh, -c, 'echo $$ > solo-$BATON_RUN_ID.pgid; sleep 60 & wait']
`);
const soloDir = path.dirname(soloConfig);
/** The periodic reaper stays out of the way: a lost run is the kill's to find. */
const ARGS = ['--reaper-interval', '60s', '--grace', '1'];
/** The operator the audit names: under sudo, the user who ran sudo. */
const AS_ALICE = { env: { SUDO_USER: 'alice' } };

async function row(id: number): Promise<RunRow & Record<string, unknown>> {
  const [r] = await fleet.db.query<RunRow & Record<string, unknown>>(
    'SELECT * FROM baton_runs WHERE id = ?',
    [id],
  );
  return r!;
}

describe('baton kill', () => {
  it('a run whose runner was SIGKILLed is reported and declared lost', async () => {
    const [solo] = await fleet.start(['kill-solo'], { config: soloConfig, args: ARGS });
    const run = await waitFor('a running solo', async () => {
      const [r] = await fleet.db.query<RunRow>(
        "SELECT * FROM baton_runs WHERE job = 'solo' AND status = 'running' AND winner = 1 ORDER BY id",
      );
      return r;
    });
    const pgid = await pidFile(soloDir, `solo-${run.id}.pgid`);
    expect(groupGone(pgid), "solo's process group before the kill").toBe(false);
    expect(run.host).toBe('kill-solo');
    await solo!.stop('SIGKILL');
    const result = await baton(
      [
        'kill',
        String(run.id),
        '--reason',
        'hung',
        '--host',
        'kill-a',
        '--database-url',
        fleet.db.url,
      ],
      AS_ALICE,
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      new RegExp(`^run ${run.id} \\(solo on kill-solo\\): its runner is gone: declared lost`),
    );
    const lost = await row(run.id);
    expect(lost.status).toBe('lost');
    expect(lost.error).toMatch(
      /^lost: its runner on kill-solo is gone .*noticed by kill-a when asked to kill it/,
    );
    // Its watchdog stopped the job when the runner died.
    await waitFor("solo's group gone", () => groupGone(pgid), { timeoutMs: 3_000 }).catch(() => {
      killGroup(pgid);
      throw new Error('the job outlived its SIGKILLed runner');
    });
  });
});
