/**
 * `every: true` (docs/placement.md): each fire runs once on every runner that may run the job,
 * each runner in its host's own slot of the fire key (store/host-slots.ts). Proven with three
 * real runner processes and an every-second job that journals itself (ground-truth.ts):
 *
 * - every fire while all three were up ran exactly once on each of them, by the journal, and has
 *   one winner row per runner — no skip rows: no runner wrote a row for another's share;
 * - a runner stopped (SIGTERM) and started again with the same `--host` mid-way keeps its slot,
 *   and runs no fire twice, by the journal;
 * - with `runOn: {tags}`, only the tagged runners run it, each every fire.
 */
import { describe, expect, it } from 'vitest';
import { runs, type RunRow } from '../helpers/db.js';
import { expectNoOverlapInJournal, writeJournaledSchedule } from '../helpers/ground-truth.js';
import type { JournalAttempt } from '../helpers/ground-truth.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('every_runner');
const HOSTS = ['ev-1', 'ev-2', 'ev-3'];
/** Runners with the tag the `tagged` job asks for: two of the three. */
const TAGGED = ['ev-1', 'ev-3'];

/** The fires (ms) that `hosts` all ran, by the journal, in order. */
function firesRanByAll(attempts: readonly JournalAttempt[], hosts: readonly string[]): number[] {
  const by = new Map<number, Set<string>>();
  for (const a of attempts) by.set(a.fire, (by.get(a.fire) ?? new Set()).add(a.host));
  return [...by.entries()]
    .filter(([, ran]) => hosts.every((h) => ran.has(h)))
    .map(([fire]) => fire)
    .sort((a, b) => a - b);
}

/** `fire host` of every attempt that is not the first of its fire on its host. */
function twice(attempts: readonly JournalAttempt[]): string[] {
  const seen = new Set<string>();
  const again: string[] = [];
  for (const a of attempts) {
    const key = `${new Date(a.fire).toISOString()} ${a.host}`;
    if (seen.has(key)) again.push(key);
    seen.add(key);
  }
  return again;
}

describe('every: true on three runners', () => {
  it('runs each fire once on every runner, keeps a restarted runner to its slot, and honours runOn', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: every
jobs:
  warm:
    schedule: "* * * * * *"
    every: true
    command: ${j.yaml({ work: 'sleep 0.2', lockPerHost: true })}
  tagged:
    schedule: "* * * * * *"
    every: true
    runOn: { tags: [cache] }
    command: ${j.yaml({ lockPerHost: true })}
`,
    );
    const db = fleet.db;
    const args = (host: string) => (TAGGED.includes(host) ? ['--tag', 'cache'] : []);
    const runners = await Promise.all(
      HOSTS.map(async (host) => (await fleet.start([host], { config, args: args(host) }))[0]!),
    );
    const ranByAll = (job: string, hosts = HOSTS) => firesRanByAll(journal.attempts(job), hosts);

    await waitFor('five fires run by all three runners', () => ranByAll('warm').length >= 5, {
      timeoutMs: 20_000,
    });
    // Mid-way, ev-2 stops (draining its run) and comes back as itself.
    const restarted = runners[1]!;
    expect(await restarted.stop('SIGTERM')).toBe(0);
    const stoppedAt = Date.now();
    const [again] = await fleet.start(['ev-2'], { config });
    await waitFor(
      'five fires run by all three after the restart',
      () => ranByAll('warm').filter((f) => f > stoppedAt).length >= 5,
      { timeoutMs: 20_000 },
    );
    const live = [runners[0]!, again!, runners[2]!];
    await Promise.all(live.map((r) => r.stop('SIGTERM')));
    expectQuiet([...runners, again!]);

    const warm = journal.attempts('warm');
    // No fire ran twice on any runner, the restarted one included; no two runs of one host at once.
    expect(twice(warm)).toEqual([]);
    for (const host of HOSTS) {
      expectNoOverlapInJournal(
        warm.filter((a) => a.host === host),
        `warm on ${host}`,
      );
    }
    // The runners that stayed up ran each fire once, from the first that all three ran to the
    // last: every one of them, none left out.
    const all = ranByAll('warm');
    const [first, last] = [all[0]!, all.at(-1)!];
    for (const host of ['ev-1', 'ev-3']) {
      const mine = warm.filter((a) => a.host === host && a.fire >= first && a.fire <= last);
      expect(mine.length, `${host}'s fires`).toBe((last - first) / 1000 + 1);
    }
    // The restarted runner ran fires before its stop and after its start, each once.
    expect(all.filter((f) => f < stoppedAt).length).toBeGreaterThanOrEqual(5);

    // The history: one winner row per runner per fire, each host always in its own slot (the
    // restarted one too), and nothing else — no runner skipped another's share.
    const rows = await runs(db, 'warm');
    expect(rows.filter((r) => r.winner == null).map((r) => `${r.host}: ${r.reason}`)).toEqual([]);
    const slotOf = new Map<string, number>();
    const perFire = new Map<number, RunRow[]>();
    for (const r of rows) {
      expect(slotOf.get(r.host) ?? r.winner, `${r.host}'s slot`).toBe(r.winner);
      slotOf.set(r.host, r.winner!);
      const fire = r.scheduled_at.getTime();
      perFire.set(fire, [...(perFire.get(fire) ?? []), r]);
    }
    expect(new Set(slotOf.values()).size).toBe(3);
    for (const [fire, winners] of perFire) {
      const hosts = winners.map((r) => r.host);
      expect(new Set(hosts).size, `${new Date(fire).toISOString()}: ${hosts.join(', ')}`).toBe(
        hosts.length,
      );
    }
    // Every run in the journal is its host's winner row of that fire, and back.
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const a of warm) {
      const row = byId.get(a.runId);
      expect({ host: row?.host, fire: row?.scheduled_at.getTime() }).toEqual({
        host: a.host,
        fire: a.fire,
      });
    }
    const ran = rows.filter((r) => r.status === 'done');
    expect(ran.length).toBe(warm.length);

    // runOn: the tagged runners ran each fire of `tagged`, the other runner none.
    const tagged = journal.attempts('tagged');
    expect(tagged.filter((a) => !TAGGED.includes(a.host))).toEqual([]);
    expect(twice(tagged)).toEqual([]);
    const both = ranByAll('tagged', TAGGED);
    expect(both.length).toBeGreaterThanOrEqual(5);
    for (const host of TAGGED) {
      const mine = tagged.filter(
        (a) => a.host === host && a.fire >= both[0]! && a.fire <= both.at(-1)!,
      );
      expect(mine.length, `${host}'s tagged fires`).toBe((both.at(-1)! - both[0]!) / 1000 + 1);
    }
    const taggedRows = await runs(db, 'tagged');
    expect(taggedRows.filter((r) => !TAGGED.includes(r.host))).toEqual([]);
    expect(taggedRows.filter((r) => r.winner == null)).toEqual([]);
  });
});
