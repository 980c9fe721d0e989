/**
 * The soak's fault plan: which fault, when, on which runner, for how long — all drawn from one
 * seeded PRNG before the soak starts, so that a seed names a plan (printed at the start) and a
 * failing seed can be run again. What happens when a fault meets the live fleet (which runner
 * holds the long job at that moment) is decided then and recorded in the report.
 */

/** mulberry32: a tiny, well-mixed 32-bit PRNG; the same seed gives the same sequence. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export const FAULT_KINDS = [
  /** `kill -9` of a runner; started again `holdMs` later. */
  'kill9',
  /** SIGSTOP, SIGCONT `holdMs` later: a runner alive but not running (a VM pause, swap). */
  'stall',
  /**
   * SIGSTOP of the runner that runs the long job, `KILL` of its lock session 0.3 s later, SIGCONT
   * `holdMs` later: the server frees the job's lock while its runner cannot stop the job.
   */
  'stall-kill',
  /** `KILL` of a runner's lock session on the server (a DBA's KILL). */
  'kill-session',
  /** The proxied runner's link frozen (no FIN, no RST) for `holdMs`, then thawed. */
  'freeze',
  /** The server stopped (gracefully, or SIGKILLed) and started `holdMs` later. */
  'server-restart',
  /** SIGTERM: a graceful stop of a runner, started again `holdMs` after it exited. */
  'sigterm',
  /** SIGHUP: a runner reloads its (unchanged) schedule. */
  'sighup',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** How often each kind is drawn: the stall + KILL case is the one the issue is about. */
const WEIGHTS: Record<FaultKind, number> = {
  kill9: 2,
  stall: 2,
  'stall-kill': 3,
  'kill-session': 2,
  freeze: 2,
  'server-restart': 2,
  sigterm: 1,
  sighup: 1,
};

/** How long each kind lasts (the hold before it is undone), in ms: [min, max]. */
const HOLD_MS: Record<FaultKind, [number, number]> = {
  kill9: [500, 2_000],
  stall: [2_000, 10_000],
  'stall-kill': [2_000, 10_000],
  'kill-session': [0, 0],
  freeze: [2_000, 8_000],
  'server-restart': [1_000, 4_000],
  sigterm: [500, 2_000],
  sighup: [0, 0],
};

/** What a fault is expected to keep busy after its hold (a restart, a reconnect), in ms. */
const SETTLE_MS = 3_000;
/**
 * A graceful stop itself takes time before the hold begins: up to the runners' `--grace` (5 s,
 * fleet.ts) for the runs, then the kill grace (5 s) for runs that ignore SIGTERM.
 */
const STOP_MS: Partial<Record<FaultKind, number>> = { sigterm: 10_000 };
/** `stall-kill` waits up to this long for a long run to stall (faults.ts, HOLDER_WAIT_MS). */
export const STALL_KILL_WAIT_MS = 6_000;

export interface PlannedFault {
  /** 1, 2, … in order. */
  n: number;
  kind: FaultKind;
  /** When, in ms from the start of the soak window. */
  atMs: number;
  /** How long before it is undone (0: nothing to undo). */
  holdMs: number;
  /**
   * The runner's index (0-based) for a fault on one runner; for `stall-kill`, the one to take
   * when no runner holds the long job; -1 for the server.
   */
  runner: number;
  /** `server-restart` only: SIGKILL instead of a graceful shutdown. */
  crash?: boolean;
}

export interface PlanOptions {
  seed: number;
  /** The soak window, in ms: every fault is undone before it ends. */
  windowMs: number;
  runners: number;
  /** The runner behind the freezable proxy (the only one `freeze` can take). */
  proxied: number;
  /** No fault before this (the fleet settles first), in ms. */
  warmupMs?: number;
  /** Gap between two faults, in ms: [min, max]. */
  gapMs?: [number, number];
}

/**
 * The faults of one soak, one every 4–8 s. A fault on a runner never takes a runner that an
 * earlier fault still holds (stopped, stalled, frozen, restarting), and at most one server
 * restart is under way at a time, so that the fleet always has runners to fire with and each
 * fault's effect can be told apart.
 */
export function planFaults(o: PlanOptions): PlannedFault[] {
  const random = mulberry32(o.seed);
  const between = (min: number, max: number) => Math.round(min + random() * (max - min));
  const [gapMin, gapMax] = o.gapMs ?? [4_000, 8_000];
  const busyUntil = new Array<number>(o.runners).fill(0);
  let serverBusyUntil = 0;
  const faults: PlannedFault[] = [];
  for (let at = (o.warmupMs ?? 3_000) + between(0, gapMin); ; at += between(gapMin, gapMax)) {
    const free = busyUntil.flatMap((until, i) => (until <= at ? [i] : []));
    const possible = FAULT_KINDS.filter((kind) => {
      if (kind === 'server-restart') return serverBusyUntil <= at;
      // A server restart inside a stall + KILL would end every session anyway and leave no
      // runner to win the fire beside the stalled job: the reproduction needs the server up.
      if (kind === 'stall-kill') return serverBusyUntil <= at && free.length > 0;
      if (kind === 'freeze') return free.includes(o.proxied);
      return free.length > 0;
    });
    if (possible.length === 0) continue;
    const kind = pickWeighted(possible, random);
    const holdMs = between(...HOLD_MS[kind]);
    const busyMs = (STOP_MS[kind] ?? 0) + holdMs + SETTLE_MS;
    if (at + busyMs > o.windowMs) break;
    const runner =
      kind === 'server-restart'
        ? -1
        : kind === 'freeze'
          ? o.proxied
          : free[Math.floor(random() * free.length)]!;
    const fault: PlannedFault = { n: faults.length + 1, kind, atMs: at, holdMs, runner };
    if (kind === 'server-restart') {
      fault.crash = random() < 0.5;
      serverBusyUntil = at + busyMs;
    } else {
      busyUntil[runner] = at + busyMs;
    }
    // It may wait up to HOLDER_WAIT_MS for a long run to stall (faults.ts).
    if (kind === 'stall-kill') serverBusyUntil = at + busyMs + STALL_KILL_WAIT_MS;
    faults.push(fault);
  }
  return faults;
}

function pickWeighted(kinds: readonly FaultKind[], random: () => number): FaultKind {
  const total = kinds.reduce((sum, k) => sum + WEIGHTS[k], 0);
  let r = random() * total;
  for (const k of kinds) {
    r -= WEIGHTS[k];
    if (r < 0) return k;
  }
  return kinds[kinds.length - 1]!;
}

/** One line per fault, for the start of the soak's output. */
export function describePlan(faults: readonly PlannedFault[], hosts: readonly string[]): string {
  return faults
    .map((f) => {
      const who =
        f.runner < 0
          ? `server (${f.crash ? 'SIGKILL' : 'graceful stop'})`
          : f.kind === 'stall-kill'
            ? `the long job's runner (else ${hosts[f.runner]})`
            : hosts[f.runner];
      const hold = f.holdMs > 0 ? `, undone after ${(f.holdMs / 1000).toFixed(1)} s` : '';
      return `  #${f.n} +${(f.atMs / 1000).toFixed(1)} s ${f.kind} ${who}${hold}`;
    })
    .join('\n');
}
