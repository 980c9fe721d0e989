/**
 * A blackout covers its own instants only (docs/cli.md, `baton blackout`): a catch-up walk
 * (`catchUp: {fires: all}`) over an outage that spans one skips the fires inside it as `paused`
 * and goes on with those after it, which nobody ran and no blackout covers. Found by an
 * adversarial review: the walk took the blackout's skip for the job's pause and recorded every
 * later fire `missed`. Judged by the job's own journal.
 */
import { describe, expect, it } from 'vitest';
import { baton } from '../helpers/cli-in-process.js';
import { dbNow, runs } from '../helpers/db.js';
import { writeJournaledSchedule } from '../helpers/ground-truth.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('blackout-catch-up');
const iso = (ms: number) => new Date(ms).toISOString();

describe('a catch-up walk over an outage that spans a blackout', () => {
  it('catches up the fires after the blackout that nobody ran', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: a41cu
jobs:
  tick:
    schedule: "*/3 * * * * *"
    catchUp: {window: 10m, fires: all}
    command: ${j.yaml()}
`,
    );
    const [r] = await fleet.start(['cu-a'], { config });
    await waitFor('tick ran', () => journal.attempts('tick').length >= 1, { timeoutMs: 20_000 });
    await r!.stop();
    // A blackout of one fire (3 s), starting on the next 3 s grid instant at least 3 s away.
    const now = (await dbNow(fleet.db)).getTime();
    const from = Math.ceil((now + 3_000) / 3_000) * 3_000;
    const until = from + 3_000;
    const made = await baton([
      'blackout',
      '--from',
      iso(from),
      '--until',
      iso(until),
      '--job',
      'tick',
      '--reason',
      'one fire',
      '--config',
      config,
      '--database-url',
      fleet.db.url,
    ]);
    expect(made.code, made.stderr).toBe(0);
    // Down through the blackout and two fires after it.
    await sleep(until + 6_500 - Date.now());
    await fleet.start(['cu-a'], { config });
    const back = (await dbNow(fleet.db)).getTime();
    await waitFor(
      'a regular fire after the restart',
      () => journal.attempts('tick').some((a) => a.fire > back),
      { timeoutMs: 20_000 },
    );
    await sleep(2_000);
    const ran = journal.attempts('tick').map((a) => a.fire);
    expect(ran.filter((f) => f >= from && f < until)).toEqual([]);
    // The fires after the blackout and before the restart: nobody ran them, no blackout covers
    // them; `fires: all` must run them.
    for (let at = until; at < back - 500; at += 3_000) {
      expect(ran, `fire ${iso(at)} after the blackout`).toContain(at);
    }
    // The fire inside: one `paused` row naming the blackout, no winner.
    const inside = (await runs(fleet.db, 'tick')).filter((r) => r.scheduled_at.getTime() === from);
    expect(inside.map((r) => [r.status, r.reason_kind, r.winner])).toEqual([
      ['skipped', 'paused', null],
    ]);
    expect(inside[0]!.reason).toMatch(/^paused by blackout #\d+ /);
  }, 60_000);
});
