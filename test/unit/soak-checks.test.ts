/**
 * The soak's checks (test/soak/checks.ts) can fail: each is fed evidence with the fault it is
 * for — a fire started twice, an overlap past the bound, a run the history has and the journal
 * has not, a row left running, a fire with no row, a start inside a loss window — and must name
 * it. Clean evidence gives clean verdicts.
 */
import { describe, expect, it } from 'vitest';
import type { JournalAttempt, JournalEntry } from '../helpers/ground-truth.js';
import { judge, type Evidence, type SoakRow } from '../soak/checks.js';
import type { LoggedLine } from '../soak/fleet.js';

const T = Date.UTC(2026, 11, 2, 6, 0, 0);

function attempt(a: Partial<JournalAttempt> & { runId: number; fire: number }): JournalAttempt {
  return {
    job: 'tick',
    host: 'r3',
    attempt: 1,
    slot: 1,
    pid: 100 + a.runId,
    overlapped: false,
    start: a.fire + 20,
    end: a.fire + 220,
    freed: null,
    killed: null,
    ...a,
  };
}

function entries(attempts: JournalAttempt[]): JournalEntry[] {
  return attempts.flatMap((a) => {
    const base = { ...a, event: 'start' as const, at: a.start };
    const out: JournalEntry[] = [base];
    if (a.end != null) out.push({ ...base, event: 'end', at: a.end });
    return out;
  });
}

function row(a: JournalAttempt, status = 'done'): SoakRow {
  return {
    id: a.runId,
    job: a.job,
    scheduled_at: new Date(a.fire),
    winner: a.slot,
    triggered_by: 'schedule',
    status,
    reason: null,
    reason_kind: null,
    host: a.host,
    pid: 1,
    started_at: new Date(a.start),
    finished_at: status === 'running' ? null : new Date(a.end ?? a.start),
    exit_code: status === 'done' ? 0 : null,
    error: null,
    output_tail: null,
    attempts: 1,
    lock_connection_id: 5,
  };
}

/** One every-second job, tick, run once per second for 5 s; the window judges only tick. */
function evidence(attempts: JournalAttempt[], rows: SoakRow[] = attempts.map((a) => row(a))) {
  const e: Evidence = {
    entries: entries(attempts),
    attempts,
    rows,
    logs: new Map(),
    faults: [],
    window: { from: T, until: T + 4_000 },
  };
  return e;
}

/** A runner's log line at `at` (real time, ms). */
const line = (msg: string, at: number, extra = {}): LoggedLine =>
  ({ level: 30, msg, time: '', realTime: at, incarnation: 0, ...extra }) as LoggedLine;

const clean = Array.from({ length: 5 }, (_, i) => attempt({ runId: i + 1, fire: T + i * 1000 }));

/** Only tick's fires are judged here: the other jobs' instants have no rows. */
function unaccountedTick(v: ReturnType<typeof judge>): string[] {
  return v.unaccounted.filter((u) => u.startsWith('tick '));
}

describe('the soak checks', () => {
  it('find nothing in a clean run', () => {
    const v = judge(evidence(clean));
    expect(v.doubleStarts).toEqual([]);
    expect(v.overlaps).toEqual([]);
    expect(v.historyMismatch).toEqual([]);
    expect(v.stuckRunning).toEqual([]);
    expect(unaccountedTick(v)).toEqual([]);
    expect(v.startsAfterLoss).toEqual([]);
  });

  it('(1) a fire started by two runs', () => {
    const twice = attempt({ runId: 9, fire: T + 2_000, host: 'r4', start: T + 2_300 });
    const v = judge(evidence([...clean, twice]));
    expect(v.doubleStarts).toEqual([
      expect.stringMatching(/^fire tick .*:02\.000Z slot 1 started by runs 3, 9$/),
    ]);
  });

  it('(2) an overlap past the bound, measured by the waiter, and one unmeasured', () => {
    const stalled = attempt({ job: 'long', runId: 20, fire: T, start: T + 10, end: T + 12_000 });
    const next = attempt({
      job: 'long',
      runId: 21,
      fire: T + 4_000,
      host: 'r5',
      start: T + 4_010,
      end: T + 9_000,
      overlapped: true,
      freed: T + 11_990,
    });
    const killed = attempt({
      job: 'queued',
      runId: 30,
      fire: T,
      end: null,
      overlapped: true,
    });
    const v = judge(evidence([...clean, stalled, next, killed]));
    expect(v.maxOverlapMs).toBe(7_980);
    expect(v.overBound.map((o) => [o.job, o.ms, o.measure])).toEqual([
      ['long', 7_980, 'freed'],
      ['queued', null, 'unmeasured'],
    ]);
  });

  it('(3) history and journal disagree', () => {
    const rows = clean.map((a) => row(a));
    rows[1] = { ...rows[1]!, host: 'r1' }; // the journal says r3 ran it
    const ghost = row(attempt({ runId: 40, fire: T + 3_000 })); // done, never in the journal
    const v = judge(evidence(clean, [...rows, { ...ghost, winner: 2 }]));
    expect(v.historyMismatch).toEqual([
      expect.stringMatching(
        /^run 2\/1 tick .* is in the history as run 2 \(tick .* on r1, done\)$/,
      ),
      expect.stringMatching(/^run 40 \(tick .*\): 1 attempt\(s\), 0 in the journal$/),
    ]);
  });

  it('(4) a row left running, (5) a fire with no row', () => {
    const rows = clean.map((a) => row(a));
    rows[0] = row(clean[0]!, 'running');
    const v = judge(
      evidence(
        clean,
        rows.filter((r) => r.id !== 4),
      ),
    );
    expect(v.stuckRunning).toEqual([expect.stringMatching(/^run 1 \(tick/)]);
    expect(unaccountedTick(v)).toEqual([`tick ${new Date(T + 3_000).toISOString()}`]);
  });

  it('(7) a start between "lock session lost" and the reconnect', () => {
    const e = evidence(clean);
    e.logs.set('r3', [
      line('lock session lost', T + 2_015),
      line('fire won: running', T + 2_030, { runId: 3 }),
      line('lock session reopened', T + 2_500),
    ]);
    const v = judge(e);
    expect(v.startsAfterLoss).toEqual([expect.objectContaining({ host: 'r3', afterLossMs: 5 })]);
    expect(v.startsRacingLoss).toEqual([]);
  });

  it('(7) a process asked for before the loss whose pid came after it: its row says so, listed, not failed', () => {
    // As seed 131 met in CI (2026-12-06): the loss, the process's first instruction, then the
    // spawner's pid ('fire won'); the runner stopped the run as claimed before the loss.
    const rows = clean.map((a) => row(a));
    rows[2] = {
      ...rows[2]!,
      status: 'lost',
      error:
        "lost: the runner's lock session ended while the run was being claimed (heartbeat timeout)",
    };
    const e = evidence(clean, rows);
    e.logs.set('r3', [
      line('lock session lost', T + 2_015),
      line('fire won: running', T + 2_030, { runId: 3 }),
      line('lock session reopened', T + 2_500),
    ]);
    const v = judge(e);
    expect(v.startsAfterLoss).toEqual([]);
    expect(v.startsRacingLoss).toEqual([expect.objectContaining({ host: 'r3', afterLossMs: 5 })]);
  });

  it('(7) a process started before the loss whose first instruction came after it: listed, not failed', () => {
    const e = evidence(clean);
    // As seed 131 met in CI: 'fire won' (the process spawned), the loss, then its first instruction.
    e.logs.set('r3', [
      line('fire won: running', T + 1_990, { runId: 3 }),
      line('lock session lost', T + 2_015),
      line('lock session reopened', T + 2_500),
    ]);
    const v = judge(e);
    expect(v.startsAfterLoss).toEqual([]);
    expect(v.startsRacingLoss).toEqual([expect.objectContaining({ host: 'r3', afterLossMs: 5 })]);
  });
});
