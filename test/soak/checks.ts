/**
 * The soak's verdicts, each from evidence baton cannot fake or from baton's rows judged against
 * it. Ground truth is the jobs' own journal (ground-truth.ts: real clock, a flock per job); the
 * rows are `baton_runs` read after every runner stopped; the runners' log lines say when each
 * knew its lock session was lost. Every check returns what it found, never throws: the soak
 * reports all of them, then judges.
 *
 *  1. double starts     no fire (job, instant, slot) started under two runs, no attempt twice
 *  2. overlap           no two runs of a job alive at once for longer than the stated bound
 *  3. history mismatch  the rows and the journal tell the same story
 *  4. stuck running     no `running` row once every runner stopped gracefully
 *  5. unaccounted       every instant of every job in the window has at least one row
 *  6. recovery          time from each fault to the next run of an every-second job (a figure)
 *  7. starts after loss no job started by a runner between its 'lock session lost' and its
 *                       reconnect
 */
import type { JournalAttempt, JournalEntry } from '../helpers/ground-truth.js';
import type { RunRow } from '../helpers/db.js';
import { OVERLAP_BOUND_MS } from '../helpers/fires.js';
import type { FaultRecord } from './faults.js';
import { EVERY_SECOND_JOBS, JOB_PERIOD_MS, type LoggedLine } from './fleet.js';

/** How long a job's processes may live on after its end line (the shell's exit): 0.2 s. */
const END_SLACK_MS = 200;

export type SoakRow = RunRow & { attempts: number; lock_connection_id: number | null };

export interface Overlap {
  job: string;
  /** The later run, which started while `other` was alive (the journal's flock said so). */
  run: string;
  other: string;
  /** How long both were alive; null when it could not be measured (see `measure`). */
  ms: number | null;
  measure: 'freed' | 'end' | 'killed' | 'unmeasured';
  /** The fault (or faults) that most likely caused it, by time and host. */
  cause: string;
}

export interface Recovery {
  n: number;
  kind: string;
  /** ms from the fault to the start of the next run of an every-second job; null: none came. */
  fromFaultMs: number | null;
  /** The same from the moment the fault was undone (the server answering again, …). */
  fromUndoMs: number | null;
  /**
   * `server-restart`: from the server answering again until the last runner had its lock
   * session back (issue 15's "every runner resumes within about a second"); null otherwise, or
   * when a runner never came back.
   */
  allReconnectedMs: number | null;
}

export interface StartAfterLoss {
  host: string;
  run: string;
  /** ms between the 'lock session lost' line and the job's start. */
  afterLossMs: number;
}

export interface Verdicts {
  fires: number;
  doubleStarts: string[];
  overlaps: Overlap[];
  maxOverlapMs: number;
  overBound: Overlap[];
  historyMismatch: string[];
  stuckRunning: string[];
  unaccounted: string[];
  /** Fires of the window with rows but no winner, by the first words of their skip reasons. */
  noWinner: Record<string, number>;
  recovery: Recovery[];
  /** Check 7: processes the runner started after it knew its lock session was lost. */
  startsAfterLoss: StartAfterLoss[];
  /**
   * Not a failure, listed: first attempts whose process the runner had started before the loss
   * (its 'fire won: running' line came first), whose first instruction came after it — the OS
   * had not run it yet. They are stopped with the run, and check 2 bounds any overlap.
   */
  startsRacingLoss: StartAfterLoss[];
}

export interface Evidence {
  entries: JournalEntry[];
  attempts: JournalAttempt[];
  rows: SoakRow[];
  /** Each host's log lines, all incarnations, with real times. */
  logs: Map<string, LoggedLine[]>;
  faults: FaultRecord[];
  /** The fires judged by check 5: instants in [from, until] (ms). */
  window: { from: number; until: number };
}

export function judge(e: Evidence): Verdicts {
  const overlaps = findOverlaps(e.attempts, e.faults);
  const measured = overlaps.map((o) => o.ms ?? 0);
  const { unaccounted, noWinner, fires } = accountFires(e.rows, e.window);
  return {
    fires,
    doubleStarts: doubleStarts(e.entries),
    overlaps,
    maxOverlapMs: Math.max(0, ...measured),
    // An overlap that could not be measured cannot be shown to be within the bound.
    overBound: overlaps.filter((o) => o.ms == null || o.ms > OVERLAP_BOUND_MS),
    historyMismatch: historyMismatch(e.rows, e.attempts),
    stuckRunning: e.rows
      .filter((r) => r.status === 'running')
      .map((r) => `run ${r.id} (${r.job} ${iso(r.scheduled_at)} on ${r.host})`),
    unaccounted,
    noWinner,
    recovery: recoveries(e.faults, e.attempts, e.rows, e.logs),
    ...startsAfterLoss(e.logs, e.attempts, e.rows),
  };
}

// 1 -------------------------------------------------------------------------------------------

/** Straight from the journal's lines (its `attempts()` keeps one line per attempt). */
function doubleStarts(entries: readonly JournalEntry[]): string[] {
  const runsOfFire = new Map<string, Set<number>>();
  const startsOfAttempt = new Map<string, number>();
  for (const e of entries) {
    if (e.event !== 'start') continue;
    const fire = `${e.job} ${new Date(e.fire).toISOString()} slot ${e.slot}`;
    runsOfFire.set(fire, (runsOfFire.get(fire) ?? new Set()).add(e.runId));
    const attempt = `run ${e.runId} attempt ${e.attempt}`;
    startsOfAttempt.set(attempt, (startsOfAttempt.get(attempt) ?? 0) + 1);
  }
  return [
    ...[...runsOfFire]
      .filter(([, ids]) => ids.size > 1)
      .map(([fire, ids]) => `fire ${fire} started by runs ${[...ids].join(', ')}`),
    ...[...startsOfAttempt]
      .filter(([, n]) => n > 1)
      .map(([attempt, n]) => `${attempt} started ${n} times`),
  ];
}

// 2 -------------------------------------------------------------------------------------------

/**
 * An attempt that found its job's flock held started beside a live run. How long: until the
 * other let go (`freed`, recorded by the attempt's waiter), else until this one ended or was
 * stopped (the other outlived it), else unmeasured (SIGKILLed without a SIGTERM). The journal's
 * start/end intervals are checked too, in case a run let go of its flock yet went on.
 */
function findOverlaps(attempts: readonly JournalAttempt[], faults: readonly FaultRecord[]) {
  const found: Overlap[] = [];
  const bySlot = new Map<string, JournalAttempt[]>();
  for (const a of attempts) {
    const key = `${a.job}/${a.slot}`;
    bySlot.set(key, [...(bySlot.get(key) ?? []), a]);
  }
  for (const list of bySlot.values()) {
    for (let i = 0; i < list.length; i++) {
      const a = list[i]!;
      const earlier = list.slice(0, i);
      // The run it met. A run's end line is written a moment before its last process exits (and
      // its flock goes), so a run that journaled its end just before `a` started, and whose end
      // is the nearest before the lock was freed, is the one; else the latest still going.
      const justEnded = a.freed
        ? earlier
            .filter((b) => b.end != null && b.end > a.start - END_SLACK_MS && b.end <= a.freed!)
            .sort((x, y) => y.end! - x.end!)[0]
        : undefined;
      const other = justEnded ?? earlier.findLast((b) => b.end == null || b.end > a.start);
      if (a.overlapped) {
        const until = a.freed ?? a.end ?? a.killed;
        found.push({
          job: a.job,
          run: describe(a),
          other: other ? describe(other) : '(a run not in the journal)',
          ms: until != null ? until - a.start : null,
          measure:
            a.freed != null
              ? 'freed'
              : a.end != null
                ? 'end'
                : a.killed != null
                  ? 'killed'
                  : 'unmeasured',
          cause: causeOf(a.start, other?.host, faults),
        });
      } else if (other?.end != null && other.end > a.start) {
        found.push({
          job: a.job,
          run: describe(a),
          other: describe(other),
          ms: Math.min(other.end, a.end ?? other.end) - a.start,
          measure: 'end',
          cause: causeOf(a.start, other.host, faults),
        });
      }
    }
  }
  return found;
}

/** The faults made in the 30 s before `at` on `host` or the server, latest first. */
function causeOf(at: number, host: string | undefined, faults: readonly FaultRecord[]): string {
  const near = faults
    .filter((f) => f.applied && f.at <= at && at - f.at <= 30_000)
    .filter((f) => f.target === host || f.target === 'server' || f.kind === 'freeze')
    .sort((x, y) => y.at - x.at)
    .slice(0, 2);
  return near.length === 0
    ? 'no fault on that host in the 30 s before'
    : near
        .map((f) => `#${f.n} ${f.kind} ${f.target} ${((at - f.at) / 1000).toFixed(1)} s before`)
        .join('; ');
}

// 3 -------------------------------------------------------------------------------------------

/**
 * expectHistoryMatchesJournal's rules, counted: every attempt in the journal belongs to its
 * fire's winner row on its host (same job, instant, slot); every row that says its job ran
 * (`done`, `timeout`, `failed` with an exit code) has as many attempts in the journal as it
 * counts, and a `done` run's last attempt ended by itself.
 */
function historyMismatch(rows: readonly SoakRow[], attempts: readonly JournalAttempt[]): string[] {
  const out: string[] = [];
  const winners = new Map(rows.filter((r) => (r.winner ?? 0) >= 1).map((r) => [r.id, r]));
  for (const a of attempts) {
    const row = winners.get(a.runId);
    if (!row) {
      out.push(`${describe(a)} has no winner row`);
      continue;
    }
    const same =
      row.job === a.job &&
      row.scheduled_at.getTime() === a.fire &&
      row.host === a.host &&
      row.winner === a.slot;
    if (!same) out.push(`${describe(a)} is in the history as ${describeRow(row)}`);
  }
  for (const row of winners.values()) {
    const ran =
      row.status === 'done' ||
      row.status === 'timeout' ||
      (row.status === 'failed' && row.exit_code != null);
    if (!ran) continue;
    const mine = attempts.filter((a) => a.runId === row.id);
    if (mine.length !== row.attempts) {
      out.push(`${describeRow(row)}: ${row.attempts} attempt(s), ${mine.length} in the journal`);
    } else if (row.status === 'done' && mine[mine.length - 1]!.end == null) {
      out.push(`${describeRow(row)}: done, but its last attempt never ended in the journal`);
    }
  }
  return out;
}

// 5 -------------------------------------------------------------------------------------------

function accountFires(rows: readonly SoakRow[], window: { from: number; until: number }) {
  const byFire = new Map<string, SoakRow[]>();
  for (const r of rows) {
    const key = `${r.job} ${r.scheduled_at.getTime()}`;
    byFire.set(key, [...(byFire.get(key) ?? []), r]);
  }
  const unaccounted: string[] = [];
  const noWinner: Record<string, number> = {};
  let fires = 0;
  for (const [job, period] of Object.entries(JOB_PERIOD_MS)) {
    for (let t = Math.ceil(window.from / period) * period; t <= window.until; t += period) {
      fires++;
      const fire = byFire.get(`${job} ${t}`);
      if (!fire) {
        unaccounted.push(`${job} ${new Date(t).toISOString()}`);
        continue;
      }
      if (fire.some((r) => (r.winner ?? 0) >= 1)) continue;
      const why = fire.some((r) => r.status === 'missed')
        ? 'missed'
        : firstWords(fire.find((r) => r.reason)?.reason ?? '(no reason)');
      noWinner[`${job}: ${why}`] = (noWinner[`${job}: ${why}`] ?? 0) + 1;
    }
  }
  return { unaccounted, noWinner, fires };
}

function firstWords(reason: string): string {
  return reason
    .replace(/^waited in the queue until [^;]*; /, '')
    .split(/ on | \(/)[0]!
    .slice(0, 60);
}

// 6 -------------------------------------------------------------------------------------------

/** From each fault to the start of the first run of an every-second job, of a fire after it, that succeeded. */
function recoveries(
  faults: readonly FaultRecord[],
  attempts: readonly JournalAttempt[],
  rows: readonly SoakRow[],
  logs: Map<string, LoggedLine[]>,
): Recovery[] {
  const done = new Set(rows.filter((r) => r.status === 'done').map((r) => r.id));
  const pulse = attempts
    .filter((a) => EVERY_SECOND_JOBS.includes(a.job) && done.has(a.runId))
    .sort((x, y) => x.start - y.start);
  const after = (t: number) => {
    const next = pulse.find((a) => a.fire >= t && a.start > t);
    return next ? next.start - t : null;
  };
  return faults
    .filter((f) => f.applied)
    .map((f) => ({
      n: f.n,
      kind: f.kind,
      fromFaultMs: after(f.at),
      fromUndoMs: f.undoneAt != null ? after(f.undoneAt) : null,
      allReconnectedMs:
        f.kind === 'server-restart' && f.undoneAt != null ? allBack(f.undoneAt, logs) : null,
    }));
}

/** From `since` until every host logged its lock session back (reopened, or a fresh start). */
function allBack(since: number, logs: Map<string, LoggedLine[]>): number | null {
  let last = since;
  for (const lines of logs.values()) {
    const back = lines.find(
      (l) =>
        l.realTime >= since && (l.msg === 'lock session reopened' || l.msg === 'runner started'),
    );
    if (!back) return null;
    last = Math.max(last, back.realTime);
  }
  return last - since;
}

// 7 -------------------------------------------------------------------------------------------

/**
 * A host's loss windows are from each 'lock session lost' line to that process's next 'lock
 * session reopened' (or its end): no attempt of that host may start inside one. A first attempt
 * whose 'fire won' line came before the loss was already a process when the runner learned of
 * it: its late first instruction is the OS's, not a start the runner made (startsRacingLoss). A
 * retry (attempt 2, …) is a new process whatever the first attempt's line says.
 */
/**
 * What the runner records on a run whose process it was told had started only once it knew its
 * lock session lost (src/fire/run-fire.ts stops it so). The runner checks its session right
 * before each spawn, so such a process was asked for before the loss: the 'fire won' line, written
 * when the spawner reports the pid, can come after the 'lock session lost' line.
 */
const STOPPED_AS_CLAIMED_BEFORE_LOSS =
  "lost: the runner's lock session ended while the run was being claimed";

function startsAfterLoss(
  logs: Map<string, LoggedLine[]>,
  attempts: readonly JournalAttempt[],
  rows: readonly SoakRow[],
): Pick<Verdicts, 'startsAfterLoss' | 'startsRacingLoss'> {
  const errors = new Map(rows.map((r) => [r.id, r.error ?? '']));
  const after: StartAfterLoss[] = [];
  const racing: StartAfterLoss[] = [];
  for (const [host, lines] of logs) {
    for (let i = 0; i < lines.length; i++) {
      const lost = lines[i]!;
      if (lost.msg !== 'lock session lost') continue;
      const back = lines
        .slice(i + 1)
        .find(
          (l) =>
            l.incarnation !== lost.incarnation ||
            l.msg === 'lock session reopened' ||
            l.msg === 'lock session lost',
        );
      const until =
        back && back.incarnation === lost.incarnation ? back.realTime : lastTime(lines, lost);
      for (const a of attempts) {
        if (a.host !== host || a.start <= lost.realTime || a.start >= until) continue;
        const won = lines.find((l) => l.msg === 'fire won: running' && Number(l.runId) === a.runId);
        const start = { host, run: describe(a), afterLossMs: a.start - lost.realTime };
        const spawnedBefore =
          a.attempt === 1 &&
          ((won != null && lines.indexOf(won) < i) ||
            (errors.get(a.runId) ?? '').startsWith(STOPPED_AS_CLAIMED_BEFORE_LOSS));
        (spawnedBefore ? racing : after).push(start);
      }
    }
  }
  return { startsAfterLoss: after, startsRacingLoss: racing };
}

/** The last line of the incarnation `line` belongs to: its end, as far as its log says. */
function lastTime(lines: readonly LoggedLine[], line: LoggedLine): number {
  return lines.filter((l) => l.incarnation === line.incarnation).at(-1)!.realTime;
}

// ---------------------------------------------------------------------------------------------

function describe(a: JournalAttempt): string {
  const end = a.end != null ? `+${((a.end - a.start) / 1000).toFixed(1)} s` : 'killed';
  return `run ${a.runId}/${a.attempt} ${a.job} ${iso(new Date(a.fire))} on ${a.host} [${iso(new Date(a.start))}, ${end}]`;
}

function describeRow(r: SoakRow): string {
  return `run ${r.id} (${r.job} ${iso(r.scheduled_at)} on ${r.host}, ${r.status})`;
}

function iso(d: Date): string {
  return d.toISOString().slice(11, 23);
}

/** p50 and max of some numbers (nulls left out), in ms; null when there are none. */
export function p50max(values: readonly (number | null)[]): { p50: number; max: number } | null {
  const v = values.filter((x): x is number => x != null).sort((a, b) => a - b);
  if (v.length === 0) return null;
  return { p50: v[Math.floor((v.length - 1) / 2)]!, max: v[v.length - 1]! };
}
