/**
 * Why a runner did not run a fire, as a kind and a sentence. The kind (`SkipKind`,
 * src/run-status.ts) is what machines read: the `reason_kind` column, `history --reason-kind`,
 * the metrics' `reason` label. The sentence is for people — the `reason` column, the logs — and
 * is rendered here, from the facts, once; nothing parses it back.
 *
 * Every sentence names who has the fire or the lock and which run that is, so that an operator
 * reading a skip row never has to guess why this host stood aside. docs/history.md lists them.
 */
import { describePool, type PoolDefinition } from '../config/pools.js';
import type { SkipKind, Trigger } from '../run-status.js';
import { blackoutReason, type Blackout } from '../store/blackouts.js';
import { pausedReason, type Pause } from '../store/pauses.js';
import type { PoolUse } from '../store/pool-reads.js';
import type { Run } from '../store/runs.js';

export interface SkipReason {
  kind: SkipKind;
  text: string;
  /**
   * This runner saw the fire's winner row (or its own): the skip adds nothing to whether the
   * fire was attempted, so a job with `skips: tally` may count it instead of writing its row
   * (store/skip-tallies.ts). Never set where the winner was only inferred — a lock holder still
   * claiming may die before its row is written, and then this skip row is what says the fire was
   * attempted (recovery.ts: a fire without rows is `missed`, and caught up).
   */
  sawWinner?: true;
}

const seen = (r: SkipReason): SkipReason => ({ ...r, sawWinner: true });

const iso = (d: Date): string => d.toISOString();

/** The job is paused, or the fire's instant is in a blackout of it: both are kind `paused`. */
export function paused(by: Pause | Blackout): SkipReason {
  return { kind: 'paused', text: 'startsAt' in by ? blackoutReason(by) : pausedReason(by) };
}

/** Fan-out: this runner already runs a slot of this fire, and takes at most one per fire. */
export function slotAlreadyTaken(slot: number | null): SkipReason {
  return seen({
    kind: 'already-ran',
    text: `this runner already took worker slot ${slot} of this fire`,
  });
}

/** This very fire has a winner (`winner` null: its row was not found, e.g. already pruned). */
export function fireHasWinner(winner: Run | null): SkipReason {
  if (!winner) return { kind: 'already-ran', text: 'this fire already ran on another runner' };
  return seen(
    winner.status === 'running'
      ? {
          kind: 'taken',
          text: `this fire is running on ${winner.host} (started ${iso(winner.startedAt)})`,
        }
      : { kind: 'already-ran', text: `this fire already ran on ${winner.host} (${winner.status})` },
  );
}

/** The claim met the fire key: the fire was won elsewhere between our GET_LOCK and our INSERT. */
export function claimedElsewhere(winner: Run | null): SkipReason {
  if (!winner) return { kind: 'already-ran', text: 'this fire already ran on another runner' };
  return seen({
    kind: 'already-ran',
    text: `this fire already ran on ${winner.host} (${winner.status})`,
  });
}

/**
 * A child's fire (`after:`) whose judge no longer held the chain's judgement at its claim: it
 * stalled past its lease, and another runner may have taken the judgement (or closed the fire)
 * since. Not claimed; the fire is judged again, by whoever takes the judgement next.
 */
export function chainJudgedElsewhere(): SkipReason {
  return {
    kind: 'taken',
    text:
      "not claimed: this runner's judgement of the chain lapsed before its claim " +
      '(it stalled past its lease); the fire is judged again',
  };
}

/**
 * The claim's fence refused it (store/fire-writes.ts `definitionFence`): the instant is no fire
 * of the job's schedule as the database has it — this runner's read of the timing versions, or
 * of a schedule created at run time, is older than a change. A `taken` skip: the fleet fires the
 * job by the schedule in force, and this runner reads it again.
 */
export function notInForce(): SkipReason {
  return {
    kind: 'taken',
    text:
      "not claimed: the job's schedule in the database has changed since this runner read it " +
      '(a timing version in force, or a schedule created at run time changed or removed); ' +
      'the fleet fires it by the one in force',
  };
}

/**
 * A due fire that is no fire of the job's schedule in force now (daemon/dispatcher.ts): taken
 * from the loop's schedule before a change was read. Never contended, and no row is written.
 */
export function notAFireInForce(): SkipReason {
  return {
    kind: 'taken',
    text: "not contended: not a fire of the job's schedule in force now (its timing changed)",
  };
}

/**
 * This runner sent this very fire already — its loop and a catch-up both reached it — and won it
 * (daemon/sent-fires.ts): the second sending is told so, and writes no row.
 */
export function sentAlready(runOver: boolean): SkipReason {
  return runOver
    ? { kind: 'already-ran', text: 'this fire already ran on this runner' }
    : { kind: 'taken', text: 'this fire is running on this runner already' };
}

/** This runner still runs an earlier fire of the job (`overlap: skip`, or a queue that gave up). */
export function runningHere(host: string, fire: Date): SkipReason {
  return {
    kind: 'overlap',
    text: `an earlier run is still running on ${host} (this runner; fire ${iso(fire)})`,
  };
}

/** The run that holds the job's lock, seen from the fire at `scheduledAt`. */
export function heldByRun(run: Run, scheduledAt: Date, trigger?: Trigger): SkipReason {
  const started = `started ${iso(run.startedAt)}`;
  if (run.trigger === 'manual') {
    return { kind: 'overlap', text: `a manual run is running on ${run.host} (${started})` };
  }
  const delta = run.scheduledAt.getTime() - scheduledAt.getTime();
  // A re-run of a past fire, or a fire met by one: the other fire's instant says nothing of clocks.
  if (run.trigger === 'rerun' || trigger === 'rerun') {
    const what = run.trigger === 'rerun' ? 'a re-run of' : 'a run of';
    if (delta === 0 && trigger === 'rerun') {
      return seen({
        kind: 'taken',
        text: `this fire is being run on ${run.host} (run ${run.id}, ${started})`,
      });
    }
    return {
      kind: 'overlap',
      text: `${what} the fire ${iso(run.scheduledAt)} is running on ${run.host} (run ${run.id}, ${started})`,
    };
  }
  // The holder's running row of this very fire: the winner row.
  if (delta === 0)
    return seen({ kind: 'taken', text: `this fire is running on ${run.host} (${started})` });
  if (delta < 0) {
    return {
      kind: 'overlap',
      text: `an earlier run is still running on ${run.host} (fire ${iso(run.scheduledAt)}, ${started})`,
    };
  }
  return {
    kind: 'behind',
    text:
      `a later fire (${iso(run.scheduledAt)}) is already running on ${run.host}; ` +
      'this runner is behind (check its clock)',
  };
}

/** The holder has the lock but no row yet: it is between its GET_LOCK and its claim. */
export function beingClaimed(host: string): SkipReason {
  return { kind: 'taken', text: `this fire is being claimed by ${host} (it holds the job's lock)` };
}

/** The lock was freed before it could be described, and the fire has no winner to name. */
export function lockFreedMeanwhile(): SkipReason {
  return { kind: 'taken', text: 'another run held the lock at this instant (it is free now)' };
}

/** A holder that is no registered runner's session and has no running row of the job. */
export function heldByUnknown(connectionId: number): SkipReason {
  return {
    kind: 'overlap',
    text: `the lock is held by connection ${connectionId}, which has no running row for this job`,
  };
}

/**
 * A queued fire (`overlap: queue`) that gave up: it waited for the lock until its deadline (the
 * job's next fire) or until the runner stopped. An earlier run kept it out, whatever the holder.
 */
export function gaveUpQueue(holder: SkipReason, why: 'stopping' | { nextFire: Date }): SkipReason {
  const until =
    why === 'stopping'
      ? 'the runner is stopping'
      : `the next fire (${iso(why.nextFire)}) came first`;
  return { kind: 'overlap', text: `waited in the queue until ${until}; ${holder.text}` };
}

/**
 * Fan-out: no slot could be had. `pool` when the job's pool refused a slot this runner could
 * have had (the pool, not the fire, kept it out); overlap when every slot was kept by another
 * fire's run (an earlier one, or a later one on a runner that is ahead); otherwise the fire is
 * taken — its slots went to other runners.
 */
export function allSlotsTaken(slots: readonly SkipReason[]): SkipReason {
  const keptOut = (s: SkipReason) => s.kind === 'overlap' || s.kind === 'behind';
  const kind: SkipKind = slots.some((s) => s.kind === 'pool')
    ? 'pool'
    : slots.every(keptOut)
      ? 'overlap'
      : 'taken';
  const each = slots.map((s, i) => `${i + 1}: ${s.text}`).join('; ');
  const all = { kind, text: `all ${slots.length} worker slots are taken: ${each}` };
  // Every slot's winner seen: nothing here that the winner rows do not say.
  return slots.every((s) => s.sawWinner) ? seen(all) : all;
}

/** Why a wait for a pool's slot ended without one (pool-slots.ts; `poolFull` says it). */
export type PoolWaitEnd =
  | 'stopping'
  /** A reload changed the job's pool while it waited. */
  | 'changed'
  /** `poolFull: queue`: the job's next fire came. */
  | { nextFire: Date }
  /** An operator's `--wait` ran out. */
  | { waitedUntil: Date };

/**
 * How a skip for a full pool begins, found at once (`waited for …` is a queue that gave up, `a
 * run of …` a runner held back by its own run): the skip that decides a fire for the fleet
 * (`isPoolFull`, fire-batches.ts), the one sentence of this module read back, by this module.
 */
const POOL_FULL = 'pool ';

/** Whether a `pool` skip's reason says the pool was full when its runner asked (see POOL_FULL). */
export function isPoolFull(reason: string | null): boolean {
  return reason?.startsWith(POOL_FULL) === true;
}

/** How many holders a `pool` skip names; the rest are counted (the reason column is short). */
const HOLDERS_NAMED = 4;

/**
 * Every slot of the job's pool is taken (docs/pools.md): by which runs, on which hosts, since
 * when — and, for a `poolFull: queue` fire that gave up, how long it waited. `host`: the host
 * whose slots these are (a pool of `scope: host`).
 */
export function poolFull(
  pool: PoolDefinition,
  use: PoolUse,
  o: { host?: string; gaveUp?: PoolWaitEnd } = {},
): SkipReason {
  const where = pool.scope === 'host' && o.host ? ` on ${o.host}` : '';
  const holders = [
    ...use.runs.map((r) => `${r.job} on ${r.host} (run ${r.id}, started ${iso(r.startedAt)})`),
    ...use.claiming.map(
      (c) => `${c.holder} (taking ${c.slots === 1 ? 'a slot' : `${c.slots} slots`})`,
    ),
  ];
  const named = holders.slice(0, HOLDERS_NAMED);
  if (holders.length > named.length) named.push(`${holders.length - named.length} more`);
  const by = named.length > 0 ? `: ${named.join(', ')}` : '';
  const full = `${POOL_FULL}${describePool(pool)} is full${where} (${use.used} of ${use.slots} taken)${by}`;
  const end = o.gaveUp;
  if (!end) return { kind: 'pool', text: full };
  const until =
    end === 'stopping'
      ? 'the runner is stopping'
      : end === 'changed'
        ? "a reload changed the job's pool"
        : 'nextFire' in end
          ? `the next fire (${iso(end.nextFire)}) came first`
          : `the end of its --wait (${iso(end.waitedUntil)})`;
  return { kind: 'pool', text: `waited for a slot until ${until}; ${full}` };
}

/**
 * Another runner took this fire's lock, found its pool full and skipped it (`poolFull: skip`): the
 * fire is decided, for every runner, as a fire with a winner is. Its words are that runner's, so
 * that every row of the fire names the same holders.
 */
export function poolDecided(skip: Run): SkipReason {
  return { kind: 'pool', text: `${skip.reason ?? 'its pool was full'} (seen by ${skip.host})` };
}

/**
 * This runner still has a run of the pool going whose slot went with a lock session it lost:
 * the run is being stopped (within a second or so), and until it is gone the server no longer
 * counts it against the pool — so this runner takes no slot of that pool meanwhile.
 */
export function poolSlotLost(pool: string, host: string, job: string): SkipReason {
  return {
    kind: 'pool',
    text:
      `a run of ${job} in pool ${pool} is still stopping on ${host} (this runner), its slot ` +
      'lost with its lock session: no slot of the pool is taken here until it is gone',
  };
}
