/**
 * One row per runner per fire, also where the loop and a recovery reach the same fire: the loop
 * contends a fire just as the runner reconnects, and the recovery, listing the fires without rows,
 * lists it before the loop's row exists. Seen in the full suite on 2026-12-06 (catch-up-all and
 * outage: "one row per runner (out-c, out-c)"); the window is a few milliseconds wide, so this
 * test makes it certain: it sends one fire to a runner's dispatcher twice at once, as the loop
 * and the catch-up do (`Dispatcher` is the runner's, reached through the runner: white-box, as
 * no public path can send it a fire on cue). The second sender is told what came of the first's
 * contention as soon as it settles (the skip it was given, or that this runner has the fire), not
 * when the run ends: a catch-up waits for the row itself, stoppably.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import type { Dispatcher } from '../../src/daemon/dispatcher.js';
import { jobLockName } from '../../src/lock-names.js';
import { writeSchedule } from '../helpers/cli.js';
import { runs } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';

const fleet = useInProcessFleet('one_row');

/**
 * One runner of a yearly job running `command`, its dispatcher (white-box, see above) and the
 * job's fire of 2026-01-01 03:00 UTC, long past: only a test sends it.
 */
async function soloRunner(
  namespace: string,
  host: string,
  job: string,
  command: string,
  overlap = 'skip',
) {
  const config = writeSchedule(`
namespace: ${namespace}
jobs:
  ${job}:
    schedule: "0 3 1 1 *"
    command: ${command}
    overlap: ${overlap}
`);
  const [runner] = await fleet.start([host], { config });
  const dispatcher = (runner!.runner as unknown as { dispatcher: Dispatcher }).dispatcher;
  const fire = { job, scheduledAt: new Date('2026-01-01T03:00:00Z'), lateMs: 0 };
  return { dispatcher, fire };
}

describe('a fire the loop and a recovery both reach on one runner', () => {
  it('is contended once: one row, the loop and the catch-up both get its outcome', async () => {
    const { dispatcher, fire } = await soloRunner('one-row', 'solo', 'yearly', '["true"]');
    const [loop, catchUp] = await Promise.all([
      dispatcher.dispatch(fire, 'schedule'),
      dispatcher.dispatch(fire, 'catchup'),
    ]);
    expect(loop?.status).toBe('ran');
    // The second sender is told the fire is this runner's, without a row of its own.
    expect(catchUp).toMatchObject({ status: 'skipped', runId: null });
    expect(['taken', 'already-ran']).toContain(catchUp?.status === 'skipped' && catchUp.kind);
    const rows = await runs(fleet.db, 'yearly');
    expect(rows.map((r) => [r.host, r.winner, r.status])).toEqual([['solo', 1, 'done']]);
    expectOneWinnerPerFire(rows, 'yearly');
  });

  it('tells the second sender once the contention settles, not when the run ends', async () => {
    // A catch-up waits for the run's row itself, stoppably (daemon/catch-up.ts): were it told
    // only when the run ends, a run that hangs would hold the catch-up, and the runner's stop
    // behind it, for as long.
    const release = path.join(mkdtempSync(path.join(tmpdir(), 'baton-one-row-')), 'release');
    const { dispatcher, fire } = await soloRunner(
      'one-row-long',
      'slow',
      'long',
      `["sh", "-c", "while [ ! -e '${release}' ]; do sleep 0.05; done"]`,
    );
    const loop = dispatcher.dispatch(fire, 'schedule');
    try {
      const catchUp = await dispatcher.dispatch(fire, 'catchup');
      expect(catchUp).toMatchObject({ status: 'skipped', kind: 'taken', runId: null });
      const rows = await runs(fleet.db, 'long');
      expect(rows.map((r) => [r.host, r.winner, r.status])).toEqual([['slow', 1, 'running']]);
    } finally {
      writeFileSync(release, '');
    }
    expect((await loop)?.status).toBe('ran');
  });

  it('does not contend again for a sender left waiting when a failover forgets the fire', async () => {
    // A catch-up walk from before a failover waits on the loop's contention (queued behind a
    // held lock); the failover forgets every fire. The walk must not contend the fire again —
    // the recovery after the failover decides about it — or this runner writes a second row
    // (and with `queue`, could run it twice).
    const { dispatcher, fire } = await soloRunner(
      'one-row-forget',
      'forgetful',
      'queued',
      '["true"]',
      'queue',
    );
    const lock = jobLockName(fleet.db.name, 'one-row-forget', 'queued');
    const holder = await mysql.createConnection({ uri: fleet.db.url });
    try {
      await holder.query('SELECT GET_LOCK(?, 0)', [lock]);
      const loop = dispatcher.dispatch(fire, 'schedule');
      const catchUp = dispatcher.dispatch(fire, 'catchup');
      dispatcher.forgetSent();
      await holder.query('SELECT RELEASE_LOCK(?)', [lock]);
      expect((await loop)?.status).toBe('ran');
      expect(await catchUp).toBeNull();
      const rows = await runs(fleet.db, 'queued');
      expect(rows.map((r) => [r.host, r.winner, r.status])).toEqual([['forgetful', 1, 'done']]);
    } finally {
      holder.destroy();
    }
  });

  it('tells the second sender the skip the first was given', async () => {
    const { dispatcher, fire } = await soloRunner('one-row-skip', 'skipper', 'held', '["true"]');
    // The job's lock held by another session: the runner skips the fire, naming the holder.
    const holder = await mysql.createConnection({ uri: fleet.db.url });
    try {
      await holder.query('SELECT GET_LOCK(?, 0)', [
        jobLockName(fleet.db.name, 'one-row-skip', 'held'),
      ]);
      const [loop, catchUp] = await Promise.all([
        dispatcher.dispatch(fire, 'schedule'),
        dispatcher.dispatch(fire, 'catchup'),
      ]);
      expect(loop?.status).toBe('skipped');
      expect(catchUp).toEqual(loop);
      expect((await runs(fleet.db, 'held')).length).toBe(1);
    } finally {
      holder.destroy();
    }
  });
});
