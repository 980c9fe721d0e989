/**
 * How each fault of the plan is done to the live fleet, and undone: real signals to real runner
 * processes, a real `KILL` on the server, the proxy frozen, the private server stopped or killed.
 * Each fault is recorded with the real times it was made and undone — the checks attribute what
 * they find to the faults by those times.
 */
import { sessionLockName } from '../../src/lock-names.js';
import { sleep } from '../helpers/wait.js';
import {
  JOB_PERIOD_MS,
  jobSeconds,
  LONG_JOB,
  LONG_SECONDS,
  NAMESPACE,
  query,
  type SoakFleet,
  type SoakRunner,
} from './fleet.js';
import { STALL_KILL_WAIT_MS, type FaultKind, type PlannedFault } from './plan.js';

/** SIGSTOP first, the session's KILL this long after: the runner is surely stalled by then. */
const KILL_AFTER_STOP_MS = 300;
/** How long `stall-kill` waits for a runner to hold the long job before it takes the planned one. */
const HOLDER_WAIT_MS = STALL_KILL_WAIT_MS;

export interface FaultRecord {
  n: number;
  kind: FaultKind;
  /** The host it was done to, or `server`. */
  target: string;
  /** Real time (ms since the epoch) the fault was made; its effect starts here. */
  at: number;
  /** Real time it was undone (the runner started again, continued, the link thawed, the server answering). */
  undoneAt: number | null;
  /** False when it could not be made (say, no lock session to KILL): then it counts for nothing. */
  applied: boolean;
  /** What it met: the run it stalled, the session it killed, the exit code of a stop. */
  note: string;
}

export class FaultInjector {
  readonly records: FaultRecord[] = [];
  /** The long runs the last holder search saw and passed over, for its note. */
  private readonly seen = new Set<string>();
  /** Hosts a fault holds now: no second fault takes them. */
  private readonly busy = new Set<string>();

  /** `plan`: the whole plan, so that a fault that picks its runner live spares the runners later faults are planned for. */
  constructor(
    private readonly fleet: SoakFleet,
    private readonly plan: readonly PlannedFault[] = [],
    /** When the plan's times count from (ms since the epoch). */
    private readonly t0 = Date.now(),
  ) {}

  /** Does `fault` (it may last its hold and more), and records it. Never throws. */
  async run(fault: PlannedFault): Promise<FaultRecord> {
    const record: FaultRecord = {
      n: fault.n,
      kind: fault.kind,
      target: fault.runner < 0 ? 'server' : this.fleet.runners[fault.runner]!.host,
      at: Date.now(),
      undoneAt: null,
      applied: false,
      note: '',
    };
    this.records.push(record);
    try {
      await this.inject(fault, record);
    } catch (err) {
      record.note += `${record.note ? '; ' : ''}error: ${(err as Error).message}`;
    } finally {
      this.busy.delete(record.target);
    }
    return record;
  }

  private async inject(f: PlannedFault, rec: FaultRecord): Promise<void> {
    const { runners, proxy, server, pool } = this.fleet;
    const planned = f.runner >= 0 ? runners[f.runner]! : null;
    if (planned && f.kind !== 'stall-kill' && !this.take(planned, rec)) return;

    switch (f.kind) {
      case 'kill9': {
        const r = planned!;
        rec.at = Date.now();
        await r.stop('SIGKILL');
        rec.applied = true;
        await sleep(f.holdMs);
        r.launch();
        rec.undoneAt = Date.now();
        return;
      }
      case 'stall': {
        const r = planned!;
        rec.at = Date.now();
        r.signal('SIGSTOP');
        rec.applied = true;
        await sleep(f.holdMs);
        r.signal('SIGCONT');
        rec.undoneAt = Date.now();
        return;
      }
      case 'stall-kill': {
        // The key reproduction: the runner of a live long run stalls, and its lock session is
        // killed under it, so the server frees the job's lock while nothing can stop the job.
        if (this.busy.has('server')) {
          rec.note = 'the server is down: no session to KILL';
          return;
        }
        const holder = await this.longJobHolder(f);
        const r = holder?.runner ?? planned!;
        rec.target = r.host;
        if (!this.take(r, rec)) return;
        const session = holder?.session ?? r.lockConnectionId();
        if (session == null) {
          rec.note = `${r.host} has no lock session to kill`;
          return;
        }
        rec.note = holder
          ? `holds ${LONG_JOB} run ${holder.runId}, ${(holder.leftMs / 1000).toFixed(1)} s left`
          : `no ${LONG_JOB} run to stall (seen: ${[...this.seen].join(', ') || 'none'})`;
        rec.at = Date.now();
        r.signal('SIGSTOP');
        rec.applied = true;
        try {
          await sleep(KILL_AFTER_STOP_MS);
          const killed = await this.killSession(session);
          rec.note += killed ? `; session ${session} killed` : `; session ${session} was gone`;
        } catch (err) {
          // The server went down meanwhile: a stall all the same (its session dies with it).
          rec.note += `; no KILL: ${(err as Error).message}`;
        } finally {
          // Whatever happened to the KILL, the runner is continued: a soak never leaves one stopped.
          await sleep(Math.max(0, f.holdMs - KILL_AFTER_STOP_MS));
          r.signal('SIGCONT');
          rec.undoneAt = Date.now();
        }
        return;
      }
      case 'kill-session': {
        const r = planned!;
        if (this.busy.has('server')) {
          rec.note = 'the server is down: no session to KILL';
          return;
        }
        const session = r.lockConnectionId();
        if (session == null || !r.alive) {
          rec.note = `${r.host} has no lock session to kill`;
          return;
        }
        rec.at = Date.now();
        rec.applied = await this.killSession(session);
        rec.note = `session ${session}${rec.applied ? ' killed' : ' was not live'}`;
        return;
      }
      case 'freeze': {
        rec.at = Date.now();
        proxy.freeze();
        rec.applied = true;
        await sleep(f.holdMs);
        proxy.thaw();
        rec.undoneAt = Date.now();
        return;
      }
      case 'server-restart': {
        if (this.busy.has('server')) {
          rec.note = 'the server is already down';
          return;
        }
        this.busy.add('server');
        rec.at = Date.now();
        await (f.crash ? server.kill() : server.stop());
        rec.applied = true;
        rec.note = f.crash ? 'SIGKILL' : 'graceful shutdown';
        await sleep(f.holdMs);
        await server.start();
        rec.undoneAt = Date.now();
        // The harness's pool still holds connections to the old server process: drop them now,
        // rather than let the next check meet a dead one.
        await query(pool, 'SELECT 1').catch(() => undefined);
        return;
      }
      case 'sigterm': {
        const r = planned!;
        rec.at = Date.now();
        const code = await r.stop('SIGTERM');
        rec.applied = true;
        rec.note = `exited ${code}`;
        await sleep(f.holdMs);
        r.launch();
        rec.undoneAt = Date.now();
        return;
      }
      case 'sighup': {
        const r = planned!;
        rec.at = Date.now();
        r.signal('SIGHUP');
        rec.applied = true;
        return;
      }
    }
  }

  /** Marks the runner held by this fault; false (and why) when it cannot take it. */
  private take(r: SoakRunner, rec: FaultRecord): boolean {
    if (this.busy.has(r.host) || !r.alive) {
      rec.note = `${r.host} is ${r.alive ? 'under another fault' : 'not running'}`;
      return false;
    }
    this.busy.add(r.host);
    return true;
  }

  /**
   * The runner that runs the long job now, free of other faults now and until this one is
   * undone, with its run's lock session.
   */
  private async longJobHolder(f: PlannedFault): Promise<{
    runner: SoakRunner;
    session: number;
    runId: number;
    leftMs: number;
  } | null> {
    // A runner that a later fault is planned for before this one would be undone is never
    // taken: that fault would kill or stop it mid-stall, or not be made.
    const safe = (host: string) => {
      const undoneAtMs = Date.now() - this.t0 + f.holdMs + 1_000;
      return !this.plan.some(
        (later) =>
          later.n !== f.n &&
          this.fleet.runners[later.runner]?.host === host &&
          later.atMs >= f.atMs &&
          later.atMs <= undoneAtMs,
      );
    };
    const usable = (r: SoakRunner) => r.alive && !this.busy.has(r.host) && safe(r.host);
    // The run should outlive the stall, as in the reproduction (a 12 s job, a 10 s
    // stall): then the job is still running when the next fire is won elsewhere. A run's length
    // is known from its fire (fleet.ts, jobSeconds); the best one seen is taken at the deadline.
    type Holder = {
      runner: SoakRunner;
      session: number;
      runId: number;
      leftMs: number;
      endsAt: number;
    };
    let best: Holder | null = null;
    this.seen.clear();
    const deadline = Date.now() + HOLDER_WAIT_MS;
    while (Date.now() < deadline) {
      const rows = await query<{
        id: number;
        host: string;
        lock_connection_id: number;
        scheduled_at: Date;
      }>(
        this.fleet.pool,
        `SELECT id, host, lock_connection_id, scheduled_at FROM baton_runs
          WHERE namespace = ? AND job = ? AND status = 'running' AND winner >= 1`,
        [NAMESPACE, LONG_JOB],
      ).catch(() => []);
      for (const row of rows) {
        const runner = this.fleet.runners.find((r) => r.host === row.host);
        if (!runner || !usable(runner) || !row.lock_connection_id) {
          this.seen.add(`run ${row.id} on ${row.host} (runner not usable)`);
          continue;
        }
        const fire = row.scheduled_at.getTime();
        const endsAt = fire + jobSeconds(LONG_SECONDS, fire, this.fleet.seed) * 1000;
        const leftMs = endsAt - Date.now();
        const session = Number(row.lock_connection_id);
        const holder = { runner, session, runId: row.id, leftMs, endsAt };
        // Enough: it outlives the stall, or at least the next fire of the job (≤ one period
        // away), so that the fire is won beside it. Waiting for a better one may find none: no
        // other long run starts while this one holds the job.
        if (leftMs >= Math.min(f.holdMs, JOB_PERIOD_MS[LONG_JOB]! + 500)) return holder;
        if (!best || endsAt > best.endsAt) best = holder;
      }
      await sleep(200);
    }
    // Seen a while ago: still usable, and its run still going?
    if (!best || !usable(best.runner) || best.endsAt - Date.now() < 1_000) {
      if (best) this.seen.add(`run ${best.runId} on ${best.runner.host} (ending)`);
      return null;
    }
    return { ...best, leftMs: best.endsAt - Date.now() };
  }

  /**
   * `KILL` of a lock session, once the server confirms it is one (it holds its own session
   * lock): a stale id must never kill another connection.
   */
  private async killSession(id: number): Promise<boolean> {
    const [row] = await query<{ holder: number | null }>(
      this.fleet.pool,
      'SELECT IS_USED_LOCK(?) AS holder',
      [sessionLockName(id)],
    );
    if (Number(row?.holder) !== id) return false;
    await query(this.fleet.pool, 'KILL ?', [id]);
    return true;
  }
}
