/**
 * One row per runner per fire, also where the loop and a recovery reach the same fire: the loop
 * contends a fire just as the runner reconnects, and the recovery, listing the fires without rows,
 * lists it before the loop's row exists. Seen in the full suite on 2026-12-06 (catch-up-all and
 * outage: "one row per runner (out-c, out-c)"); the window is a few milliseconds wide, so this
 * test makes it certain: it sends one fire to a runner's dispatcher twice at once, as the loop
 * and the catch-up do (`Dispatcher` is the runner's, reached through the runner: white-box, as
 * no public path can send it a fire on cue).
 */
import { describe, expect, it } from 'vitest';
import type { Dispatcher } from '../../src/daemon/dispatcher.js';
import { writeSchedule } from '../helpers/cli.js';
import { runs } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';

const fleet = useInProcessFleet('one_row');

describe('a fire the loop and a recovery both reach on one runner', () => {
  it('is contended once: one row, the loop and the catch-up both get its outcome', async () => {
    const config = writeSchedule(`
namespace: one-row
jobs:
  yearly:
    schedule: "0 3 1 1 *"
    command: ["true"]
`);
    const [runner] = await fleet.start(['solo'], { config });
    const dispatcher = (runner!.runner as unknown as { dispatcher: Dispatcher }).dispatcher;
    const fire = { job: 'yearly', scheduledAt: new Date('2026-01-01T03:00:00Z'), lateMs: 0 };
    const [loop, catchUp] = await Promise.all([
      dispatcher.dispatch(fire, 'schedule'),
      dispatcher.dispatch(fire, 'catchup'),
    ]);
    expect(loop?.status).toBe('ran');
    expect(catchUp).toBe(loop);
    const rows = await runs(fleet.db, 'yearly');
    expect(rows.map((r) => [r.host, r.winner, r.status])).toEqual([['solo', 1, 'done']]);
    expectOneWinnerPerFire(rows, 'yearly');
  });
});
