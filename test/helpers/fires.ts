/**
 * The central assertions of the suite, one definition each, so that "one winner per fire" means
 * the same thing in every test:
 *
 * - `expectOneWinnerPerFire`: every fire has exactly one winner (one per worker slot it ran) —
 *   or a recorded reason why it has none: a lone `missed` row, or skip rows of a kind the test
 *   names as expected (`overlap`: an earlier run was still going, which must be true of the run
 *   the reason names; `paused`). A fire with only skip rows for any other reason fails. One row
 *   per runner per fire, always.
 * - `expectNoOverlapInHistory`: no two winners' [started_at, finished_at] intersect (per slot).
 *   The jobs' own account of the same (ground-truth.ts) is the stronger check; use both.
 * - `expectCompleteFires`: every instant of the window is there, attempted by every runner.
 */
import { expect } from 'vitest';
import { byFire, type RunRow } from './db.js';

/** Why a fire may have no winner, besides a lone `missed` row. */
export type NoWinnerKind = 'overlap' | 'paused';

export interface FireExpectations {
  /** Kinds of skip that may leave a fire without a winner (default: none). */
  noWinner?: readonly NoWinnerKind[];
  /** Worker slots per fire (`workers: N`); default 1. */
  slots?: number;
  /**
   * `overlap` skips name the run that was still going ("… on H (fire F, started S)"): it must be
   * a winner of this history that was still running at the skipped fire's instant, give or take
   * this many ms (its process may have ended a moment before, its verdict not yet written).
   */
  overlapSlackMs?: number;
}

/** The kind of a skip reason, from its first words (as docs/history.md lists them). */
export function skipKindOf(reason: string): 'taken' | NoWinnerKind | 'other' {
  const slots = /^all \d+ worker slots are taken: (.*)$/s.exec(reason);
  if (slots) {
    const each = slots[1]!.split(/; (?=\d+: )/).map((s) => skipKindOf(s.replace(/^\d+: /, '')));
    return each.every((k) => k === each[0]) ? each[0]! : 'taken';
  }
  if (reason.startsWith('paused by ')) return 'paused';
  if (
    /^(an earlier run is still running|a manual run is running|waited in the queue) /.test(reason)
  )
    return 'overlap';
  if (reason.startsWith('this fire ')) return 'taken';
  return 'other';
}

export function expectOneWinnerPerFire(
  rows: readonly RunRow[],
  label: string,
  { noWinner = [], slots = 1, overlapSlackMs = 1_000 }: FireExpectations = {},
): void {
  const winnersById = new Map(rows.filter((r) => (r.winner ?? 0) >= 1).map((r) => [r.id, r]));
  for (const [at, fire] of byFire([...rows])) {
    const where = `${label}: fire ${new Date(at).toISOString()}`;
    const hosts = fire.map((r) => r.host);
    expect(hosts.length, `${where}: one row per runner (${hosts.join(', ')})`).toBe(
      new Set(hosts).size,
    );
    if (fire.some((r) => r.status === 'missed')) {
      // Nobody attempted it: the first runner to look back recorded it, once.
      expect(fire, `${where}: a missed fire has that one row`).toHaveLength(1);
      expect(fire[0], where).toMatchObject({ winner: 0, status: 'missed' });
      continue;
    }
    const winners = fire.filter((r) => (r.winner ?? 0) >= 1);
    const taken = winners.map((w) => w.winner).sort();
    expect(taken, `${where}: worker slots won`).toEqual([...new Set(taken)]);
    expect(winners.length, `${where}: winners`).toBeLessThanOrEqual(slots);
    if (winners.length > 0) continue;
    // No winner: every row must say why, and the reason must be one the test expects.
    for (const skip of fire) {
      const kind = skipKindOf(skip.reason ?? '');
      expect(
        { status: skip.status, allowed: (noWinner as string[]).includes(kind) },
        `${where} has no winner; ${skip.host} skipped it: ${skip.reason}`,
      ).toEqual({ status: 'skipped', allowed: true });
      if (kind === 'overlap') expectNamedRunWasGoing(skip, winnersById, rows, overlapSlackMs);
    }
  }
}

/** An `overlap` skip names a run by host and fire: it existed and was running at the fire. */
function expectNamedRunWasGoing(
  skip: RunRow,
  winners: ReadonlyMap<number, RunRow>,
  rows: readonly RunRow[],
  slackMs: number,
): void {
  const named = /running on (\S+) \((?:this runner; )?(?:fire (\S+?), )?(?:started (\S+?))?\)/.exec(
    skip.reason ?? '',
  );
  const what = `${skip.host}'s skip of ${skip.scheduled_at.toISOString()} (${skip.reason})`;
  if (!named) return; // "waited in the queue until the runner is stopping; …" names no run
  const [, host, fire] = named;
  const candidates = [...winners.values()].filter(
    (w) =>
      w.job === skip.job &&
      w.host === host &&
      (fire == null || w.scheduled_at.toISOString() === fire) &&
      w.id !== skip.id,
  );
  // A manual run's row may be outside the rows the test looked at; only check what is there.
  if (candidates.length === 0 && rows.every((r) => r.job !== skip.job || r.host !== host)) return;
  expect(candidates.length, `${what}: the run it names is in the history`).toBeGreaterThan(0);
  const going = candidates.some(
    (w) =>
      w.started_at.getTime() <= skip.started_at.getTime() &&
      (w.finished_at == null || w.finished_at.getTime() + slackMs >= skip.scheduled_at.getTime()),
  );
  expect(going, `${what}: the run it names was still going at the fire's instant`).toBe(true);
}

/** No two winners of a job (per worker slot) ran at once by their rows' database times. */
export function expectNoOverlapInHistory(rows: readonly RunRow[], label: string): void {
  const bySlot = new Map<string, RunRow[]>();
  for (const r of rows) {
    if ((r.winner ?? 0) < 1) continue;
    const key = `${r.job}/${r.winner}`;
    bySlot.set(key, [...(bySlot.get(key) ?? []), r]);
  }
  for (const list of bySlot.values()) {
    list.sort((x, y) => x.started_at.getTime() - y.started_at.getTime());
    for (let i = 1; i < list.length; i++) {
      const [before, after] = [list[i - 1]!, list[i]!];
      expect(before.finished_at, `${label}: run ${before.id} has ended`).not.toBeNull();
      expect(
        after.started_at.getTime(),
        `${label}: run ${after.id} started before run ${before.id} finished`,
      ).toBeGreaterThanOrEqual(before.finished_at!.getTime());
    }
  }
}

/**
 * Every fire of an `everyMs` grid in [from, until] is in the rows (none lost), and each was
 * attempted by every one of `hosts` (a lone `missed` row stands for all of them).
 */
export function expectCompleteFires(
  rows: readonly RunRow[],
  label: string,
  { from, until, everyMs, hosts }: { from: Date; until: Date; everyMs: number; hosts: string[] },
): void {
  const expected: number[] = [];
  for (let t = Math.ceil(from.getTime() / everyMs) * everyMs; t <= until.getTime(); t += everyMs) {
    expected.push(t);
  }
  const inWindow = rows.filter((r) => r.scheduled_at >= from && r.scheduled_at <= until);
  const fires = byFire(inWindow);
  expect(
    [...fires.keys()].map((t) => new Date(t).toISOString()),
    `${label}: the fires of the window`,
  ).toEqual(expected.map((t) => new Date(t).toISOString()));
  for (const [at, fire] of fires) {
    if (fire.length === 1 && fire[0]!.status === 'missed') continue;
    expect(
      fire.map((r) => r.host).sort(),
      `${label}: runners that attempted ${new Date(at).toISOString()}`,
    ).toEqual([...hosts].sort());
  }
}
