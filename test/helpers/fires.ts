/**
 * The central assertions of the suite, one definition each, so that "one winner per fire" means
 * the same thing in every test:
 *
 * - `expectOneWinnerPerFire`: every fire has exactly one winner (one per worker slot it ran) —
 *   or a recorded reason why it has none, of a kind the test names as expected, and true:
 *   - a lone `missed` row (nobody attempted it; always allowed);
 *   - `overlap`: an earlier run was still going — the run the reason names must be in the
 *     history, and not have ended before the fire's instant;
 *   - `lock-being-released`: the fire met the lock of an earlier run that had ended (its
 *     verdict written, its RELEASE_LOCK on the way) and still found it held after asking again
 *     for LOCK_PASSING_WAIT_MS (1 s: coordination/fire-protocol.ts, issue 15's fix), so every
 *     runner skipped it ("this fire is being claimed by H", "another run held the lock at this
 *     instant"); an earlier run of the job must have ended within a second of the instant, or
 *     the holder named must have been still claiming an earlier fire then (it won it, and its run
 *     started after this fire was decided: a slow link, e2e/network-faults). Or the
 *     lock is still held by the lock session of an earlier run whose runner lost it ("held by
 *     connection N, which has no running row": the server has not dropped that session yet): N
 *     must be that run's `lock_connection_id`. What still produces it: a fault — a lost or
 *     stalled lock session, a stalled database or link (a release that takes longer than the
 *     wait), a skewed clock — or a runner too busy to send its release within the wait: a job
 *     that ends right at an instant, on a loaded machine (in-process/policies' `serial`, whose
 *     runners share the test's event loop). The fault tests, that check, and in-process/catch-up-all
 *     and verdict-pending (whose runs also end at instants) allow it; the others expect
 *     `overlap` alone, also on a loaded machine;
 *   - `behind`: a later fire of the job was already running when this runner reached this one
 *     (its clock estimate, or its queue of fires, behind the fleet's) — the later run it names
 *     must be in the history and have started by then. Expected only where clocks move;
 *   - `paused`.
 *   A fire with only skip rows for any other reason fails. One row per runner per fire, always.
 * - `expectNoOverlapInHistory`: no two winners' [started_at, finished_at] intersect (per slot).
 *   The jobs' own account of the same (ground-truth.ts) is the stronger check; use both.
 * - `expectCompleteFires`: every instant of the window is there, attempted by every runner.
 */
import { expect } from 'vitest';
import { RUN_POLL_MS } from '../../src/execution/run-processes.js';
import {
  DEFAULT_HEARTBEAT_DEADLINE_MS,
  DEFAULT_HEARTBEAT_MS,
} from '../../src/coordination/lock-session.js';
import { LEASE_MARGIN_MS } from '../../src/execution/run-lease.js';
import { LOST_KILL_GRACE_MS } from '../../src/fire/run-control.js';
import { byFire, dbNow, type RunRow, type TestDatabase } from './db.js';
import { waitFor } from './wait.js';

/**
 * docs/design.md, "Faults and what happens": a lock session dying under a live job may overlap
 * the next run for at most heartbeat (1 s) + deadline (3 s) + the lease's margin (0.25 s) + the
 * abort's kill grace (1 s) — also when the runner is stalled (the runs' lease).
 */
export const OVERLAP_BOUND_MS =
  DEFAULT_HEARTBEAT_MS + DEFAULT_HEARTBEAT_DEADLINE_MS + LEASE_MARGIN_MS + LOST_KILL_GRACE_MS;

/** Why a fire may have no winner, besides a lone `missed` row. */
export type NoWinnerKind = 'overlap' | 'lock-being-released' | 'behind' | 'paused' | 'pool';

export interface FireExpectations {
  /** Kinds of skip that may leave a fire without a winner (default: none). */
  noWinner?: readonly NoWinnerKind[];
  /** Worker slots per fire (`workers: N`); default 1. */
  slots?: number;
  /**
   * The rows of every job of the pool, when `rows` are one job's: a `pool` skip names runs of the
   * pool's other jobs too. Default `rows`.
   */
  poolRows?: readonly RunRow[];
  /**
   * How far from the moment a fire was decided the run an `overlap` or `lock-being-released`
   * skip stands for may have ended (its process may end a moment before its verdict is
   * written), in ms.
   */
  slackMs?: number;
}

/**
 * The kind of a skip reason, from its first words (as docs/history.md lists them): `taken` (this
 * fire's winner is running or done), `claiming` (the lock's holder has no running row: it is
 * claiming this fire — or releasing an earlier one), `overlap`, `paused`, or `other`.
 *
 * Not baton's own `reason_kind` (coordination/skip-reasons.ts): the judge reads the documented
 * sentences on its own, so that a change to baton's classification cannot change the verdict
 * with it, and it needs the `claiming` kind that baton counts as `taken`.
 */
export function skipKindOf(
  reason: string,
): 'taken' | 'claiming' | 'ghost' | 'overlap' | 'behind' | 'paused' | 'pool' | 'other' {
  const slots = /^all \d+ worker slots are taken: (.*)$/s.exec(reason);
  if (slots) {
    const each = slots[1]!.split(/; (?=\d+: )/).map((s) => skipKindOf(s.replace(/^\d+: /, '')));
    return each.every((k) => k === each[0]) ? each[0]! : 'taken';
  }
  if (reason.startsWith('paused by ')) return 'paused';
  if (/^(waited for a slot until [^;]*; )?pool \S+ \([^)]*\) is full/.test(reason)) return 'pool';
  // A runner that met the lock of one waiting for a slot (`poolFull: queue`), or held back by its
  // own run that outlived its slot.
  if (/, waiting for a slot: pool \S+ \(|^a run of \S+ in pool \S+ is still stopping/.test(reason))
    return 'pool';
  const holder = holderOf(reason);
  if (/^(an earlier run is still running|a manual run is running) on /.test(holder))
    return 'overlap';
  if (/^this fire is being claimed by |^another run held the lock at this instant/.test(holder))
    return 'claiming';
  if (/^this fire (is running on|already ran on) /.test(holder)) return 'taken';
  // No runner's session and no running row: a lost session the server has not let go yet.
  if (/^the lock is held by connection \d+, which has no running row/.test(holder)) return 'ghost';
  if (/^a later fire \(\S+\) is already running on \S+; this runner is behind/.test(holder))
    return 'behind';
  return 'other';
}

export function expectOneWinnerPerFire(
  rows: readonly RunRow[],
  label: string,
  { noWinner = [], slots = 1, slackMs = 1_000, poolRows = rows }: FireExpectations = {},
): void {
  const winners = rows.filter((r) => (r.winner ?? 0) >= 1);
  const poolWinners = poolRows.filter((r) => (r.winner ?? 0) >= 1);
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
    const won = fire.filter((r) => (r.winner ?? 0) >= 1);
    const taken = won.map((w) => w.winner).sort();
    expect(taken, `${where}: worker slots won`).toEqual([...new Set(taken)]);
    expect(won.length, `${where}: winners`).toBeLessThanOrEqual(slots);
    if (won.length > 0) continue;
    // No winner: every row must say why, the reason must be one the test expects, and true.
    for (const skip of fire) {
      const what = `${where} has no winner; ${skip.host} skipped it: ${skip.reason}`;
      const as = NO_WINNER_KIND[skipKindOf(skip.reason ?? '')];
      expect({ status: skip.status, allowed: as != null && noWinner.includes(as) }, what).toEqual({
        status: 'skipped',
        allowed: true,
      });
      if (as === 'overlap') expectNamedRunWasGoing(skip, winners, slackMs, what);
      if (as === 'lock-being-released' && skipKindOf(skip.reason ?? '') === 'ghost') {
        // True only if that connection was the lock session of an earlier run of the job (a
        // session its runner lost, whose lock the server still holds until it is KILLed).
        const connection = Number(/held by connection (\d+)/.exec(skip.reason ?? '')?.[1]);
        const lostSession = winners.some(
          (w) =>
            w.job === skip.job &&
            w.scheduled_at < skip.scheduled_at &&
            Number(w.lock_connection_id) === connection,
        );
        expect(lostSession, `${what}: connection ${connection} ran an earlier fire`).toBe(true);
      } else if (as === 'lock-being-released') {
        const claimer = /this fire is being claimed by (\S+) /.exec(skip.reason ?? '')?.[1];
        const ended = winners.some(
          (w) =>
            w.job === skip.job &&
            (claimer == null || w.host === claimer) &&
            w.scheduled_at < skip.scheduled_at &&
            w.finished_at != null &&
            Math.abs(w.finished_at.getTime() - decidedAt(skip)) <= slackMs,
        );
        // Or the holder was still claiming an earlier fire at this one's instant (a slow link:
        // its claim's statements in flight), which it then won and ran: the reason cannot tell
        // which fire a holder without a row is claiming.
        const claimingEarlier =
          claimer != null &&
          winners.some(
            (w) =>
              w.job === skip.job &&
              w.host === claimer &&
              w.scheduled_at < skip.scheduled_at &&
              w.started_at.getTime() >= decidedAt(skip) - slackMs,
          );
        expect(
          ended || claimingEarlier,
          `${what}: an earlier run ended about the fire's instant, or its claimer was still claiming an earlier fire`,
        ).toBe(true);
      }
      if (as === 'behind') expectLaterRunHadStarted(skip, winners, slackMs, what);
      if (as === 'pool') expectNamedPoolHoldersWereGoing(skip, poolWinners, slackMs, what);
    }
  }
}

/** A queued fire that gave up says so, then names the holder: the part that says what it met. */
function holderOf(reason: string): string {
  return reason.replace(/^waited in the queue until [^;]*; /, '');
}

/** What each kind of reason means for a fire that has no winner (null: it is no reason). */
const NO_WINNER_KIND: Record<ReturnType<typeof skipKindOf>, NoWinnerKind | null> = {
  overlap: 'overlap',
  claiming: 'lock-being-released',
  ghost: 'lock-being-released',
  behind: 'behind',
  paused: 'paused',
  pool: 'pool',
  taken: null,
  other: null,
};

/**
 * An `overlap` skip names a run by host, and by its fire ("… on H (fire F, started S)", "… on H
 * (this runner; fire F)") or, for a manual run, by its start ("a manual run is running on H
 * (started S)"): that run is in the history, and had not ended when the fire was decided.
 */
function expectNamedRunWasGoing(
  skip: RunRow,
  winners: readonly RunRow[],
  slackMs: number,
  what: string,
): void {
  const holder = holderOf(skip.reason ?? '');
  const named =
    /running on (\S+) \((?:this runner; )?(?:fire (\S+?)[,)] ?)?(?:started (\S+?)\))?/.exec(holder);
  expect(named, `${what}: names the run`).not.toBeNull();
  const [, host, fire, started] = named!;
  const candidates = winners.filter(
    (w) =>
      w.job === skip.job &&
      w.host === host &&
      (fire != null
        ? w.scheduled_at.toISOString() === fire
        : started != null && w.started_at.toISOString() === started),
  );
  // A manual run may be outside the rows the test looked at.
  if (fire == null && candidates.length === 0) return;
  expect(candidates.length, `${what}: the run it names is in the history`).toBeGreaterThan(0);
  // A lost row's finished_at is when the loss was written (by its runner or a reaper), not when
  // its process ended: that may live on for the overlap bound, and its runner — stalled, say —
  // rightly skips its next fires until it has seen the process gone.
  const end = (w: RunRow) =>
    w.finished_at!.getTime() + (w.status === 'lost' ? OVERLAP_BOUND_MS : 0);
  const going = candidates.some(
    (w) =>
      w.started_at.getTime() <= skip.started_at.getTime() &&
      (w.finished_at == null || end(w) + slackMs >= decidedAt(skip)),
  );
  expect(going, `${what}: the run it names was still going when the fire was decided`).toBe(true);
}

/**
 * A `behind` skip names a later fire and its host ("a later fire (F) is already running on H"):
 * H won F, F is after the skipped fire, and H's run of it had started by the time the skip's row
 * was written.
 */
function expectLaterRunHadStarted(
  skip: RunRow,
  winners: readonly RunRow[],
  slackMs: number,
  what: string,
): void {
  const named = /^a later fire \((\S+)\) is already running on (\S+);/.exec(
    holderOf(skip.reason ?? ''),
  );
  expect(named, `${what}: names the later run`).not.toBeNull();
  const [, fire, host] = named!;
  const later = winners.find(
    (w) => w.job === skip.job && w.host === host && w.scheduled_at.toISOString() === fire,
  );
  expect(later, `${what}: the later run it names is in the history`).toBeDefined();
  expect(later!.scheduled_at > skip.scheduled_at, `${what}: it is later`).toBe(true);
  expect(
    later!.started_at.getTime() <= skip.started_at.getTime() + slackMs,
    `${what}: it had started when the fire was decided`,
  ).toBe(true);
}

/**
 * About when a skip was decided: at the fire's instant (runners contend then), or when its row
 * was written if that was earlier (a runner that came early, its clock estimate wrong).
 */
/**
 * A `pool` skip names the runs holding the pool's slots ("… load-a on p-1 (run 12, started S)"):
 * each is a winner in the history (of any job: a pool is shared) that had started by the time the
 * fire was decided and had not ended long before.
 */
function expectNamedPoolHoldersWereGoing(
  skip: RunRow,
  winners: readonly RunRow[],
  slackMs: number,
  what: string,
): void {
  const ids = [...(skip.reason ?? '').matchAll(/\(run (\d+), started /g)].map((m) => Number(m[1]));
  const at = decidedAt(skip);
  for (const id of ids) {
    const run = winners.find((w) => w.id === id);
    expect(run, `${what}: run ${id} is a winner in the history`).toBeDefined();
    const going =
      run!.started_at.getTime() <= skip.started_at.getTime() + slackMs &&
      (run!.finished_at == null || run!.finished_at.getTime() >= at - slackMs);
    expect(going, `${what}: run ${id} was going when the fire was decided`).toBe(true);
  }
}

function decidedAt(skip: RunRow): number {
  return Math.min(skip.scheduled_at.getTime(), skip.started_at.getTime());
}

/**
 * How late a `lost` run's `finished_at` may say it ended. The runner that lost its session writes
 * it afterwards, from what it saw: the first look at the run's processes that found them all gone
 * (they are looked at every RUN_POLL_MS: src/execution/run-processes.ts), turned into database
 * time with its estimate of the clock offset — read over the link it has just lost. A run the
 * server stopped waiting for (its session dropped) can so read as ending some milliseconds after
 * the next run started, when by the job's own account it did not (seen: 11 ms, in partition). The
 * jobs' journal (ground-truth.ts) judges the real order exactly; this is the history's
 * resolution, for that one kind of row.
 */
export const LOST_END_RESOLUTION_MS = 2 * RUN_POLL_MS;

/**
 * No two winners of a job (per worker slot) ran at once by their rows' database times (a `lost`
 * run's end within LOST_END_RESOLUTION_MS).
 */
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
      const resolution = before.status === 'lost' ? LOST_END_RESOLUTION_MS : 0;
      expect(
        after.started_at.getTime(),
        `${label}: run ${after.id} started before run ${before.id} finished`,
      ).toBeGreaterThanOrEqual(before.finished_at!.getTime() - resolution);
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

/**
 * The next `seconds` every-second instants after now, by the database's clock, once that clock is
 * 2 s past the last of them (every runner has decided them by then, its rows written).
 */
export async function fireWindow(
  db: TestDatabase,
  seconds: number,
): Promise<{ from: Date; until: Date }> {
  const now = await dbNow(db);
  const from = new Date(Math.ceil(now.getTime() / 1000) * 1000 + 1000);
  const until = new Date(from.getTime() + (seconds - 1) * 1000);
  await waitFor(
    `the fires up to ${until.toISOString()} decided`,
    async () => (await dbNow(db)).getTime() > until.getTime() + 2_000,
    { timeoutMs: seconds * 1000 + 20_000 },
  );
  return { from, until };
}
