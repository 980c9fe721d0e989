/**
 * `baton explain` as pure functions (src/fleet/explain.ts), on plain objects: which fire "the
 * latest" is (the schedule's, when it is later than the history's and some runner had the job by
 * then), how a registered runner without an attempt is judged (restarted since the fire, stopped,
 * gone after --gone-after or with its lock session, without the job, given it by a reload after
 * the fire, lagging), the one-line verdict (winners and fan-out slots, missed marks, skips, fires
 * not come yet, instants that are no fire), the notes, and the whole judgement of a fire.
 */
import { describe, expect, it } from 'vitest';
import { formatDuration } from '../../src/config/duration.js';
import { parseConfig } from '../../src/config/load.js';
import { retryWaitMs } from '../../src/config/retry-delay.js';
import {
  judgeFire,
  judgeMissing,
  latestOf,
  NO_LATEST,
  notAFireOf,
  notesFor,
  notFiredVerdict,
  verdictOf,
  type FireInput,
  type MissingRunner,
} from '../../src/fleet/explain.js';
import type { RunnerNow } from '../../src/store/fire-reads.js';
import type { Pause } from '../../src/store/pauses.js';
import type { LoadedDefinition } from '../../src/store/runners.js';
import type { Run } from '../../src/store/runs.js';

const NOW = new Date('2027-03-10T12:00:00.000Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const at = (iso: string) => new Date(iso);
const FIRE = at('2027-03-10T11:50:00Z');

const FILE = parseConfig(
  '/etc/baton/schedules.yaml',
  `
namespace: ns
jobs:
  tick:
    schedule: "*/10 * * * *"
    command: ["true"]
  idle:
    schedule: "*/10 * * * *"
    command: ["true"]
    enabled: false
`,
);
const tickJob = FILE.jobs.find((j) => j.name === 'tick')!;
const idleJob = FILE.jobs.find((j) => j.name === 'idle')!;

const START = ago(3_600_000);

/** What a registry row says its runner loaded, decoded: job → since when (default its start). */
function loaded(jobs: Record<string, Date | null>): Map<string, LoadedDefinition> {
  return new Map(
    Object.entries(jobs).map(([job, since]) => [job, { fingerprint: 'f', since: since ?? START }]),
  );
}

/** A registered runner as fire-reads.ts:runnersNow judges it: alive, with tick and idle. */
function runner(host: string, o: Partial<RunnerNow> = {}): RunnerNow {
  const startedAt = o.startedAt ?? START;
  const lastSeenAt = o.lastSeenAt ?? ago(1_000);
  return {
    namespace: 'ns',
    host,
    pid: 100,
    version: '0.1.0',
    startedAt,
    lastSeenAt,
    stoppedAt: null,
    clockOffsetMs: 3,
    lockConnectionId: 7,
    jobs: loaded({ tick: startedAt, idle: startedAt }),
    alive: true,
    lockSessionHeld: true,
    lastSeenAgoMs: NOW.getTime() - lastSeenAt.getTime(),
    ...o,
  };
}

/** A row of the fire, as store/runs.ts reads it: by default srv-01's won, done in 1.5 s. */
function row(o: Partial<Run> = {}): Run {
  const startedAt = o.startedAt ?? FIRE;
  return {
    id: 1,
    namespace: 'ns',
    job: 'tick',
    scheduledAt: FIRE,
    rerun: 0,
    params: null,
    pool: null,
    winner: true,
    workerSlot: 1,
    trigger: 'schedule',
    status: 'done',
    reason: null,
    host: 'srv-01',
    pid: 4242,
    lockConnectionId: 9,
    startedAt,
    finishedAt: new Date(startedAt.getTime() + 1_500),
    exitCode: 0,
    attempts: 1,
    error: null,
    outputTail: null,
    reasonKind: null,
    ...o,
  };
}

const skip = (host: string, reason: string) =>
  row({ host, winner: false, workerSlot: null, status: 'skipped', reason, attempts: 0 });

const PAUSE: Pause = {
  job: 'tick',
  reason: 'maintenance',
  pausedBy: 'ops@srv-09',
  pausedAt: at('2027-03-10T11:00:00Z'),
};

describe('which fire is the latest', () => {
  it("the schedule's when it is later than the history's", () => {
    const runners = [runner('a')];
    // History has 11:40; the schedule fired at 12:00 (NOW): that one, although it has no row.
    expect(latestOf(tickJob, at('2027-03-10T11:40:00Z'), runners, NOW)).toEqual({
      fire: NOW,
      fromSchedule: true,
      beforeAnyRunner: null,
    });
    // History is up to date: the history's.
    expect(latestOf(tickJob, NOW, runners, NOW)).toMatchObject({ fire: NOW, fromSchedule: false });
    // Not in the file, or disabled there: the history's only.
    expect(latestOf(null, FIRE, runners, NOW)).toMatchObject({ fire: FIRE, fromSchedule: false });
    expect(latestOf(idleJob, FIRE, runners, NOW)).toMatchObject({
      fire: FIRE,
      fromSchedule: false,
    });
    // No history: the schedule's fire only when some runner had the job by then.
    expect(latestOf(tickJob, null, runners, NOW)).toMatchObject({ fire: NOW, fromSchedule: true });
    const addedLater = [
      runner('a', { jobs: loaded({ tick: at('2027-03-10T12:01:00Z') }) }),
      runner('b', { startedAt: at('2027-03-10T12:00:00.500Z') }),
    ];
    expect(latestOf(tickJob, null, addedLater, at('2027-03-10T12:05:00Z'))).toEqual({
      fire: null,
      fromSchedule: false,
      beforeAnyRunner: at('2027-03-10T12:00:00Z'),
    });
    // No history and no runner at all: not fired yet, whatever the schedule says.
    expect(latestOf(tickJob, null, [], NOW)).toEqual({
      fire: null,
      fromSchedule: false,
      beforeAnyRunner: NOW,
    });
  });

  it('a job with no fire yet says why, and when it fires next', () => {
    expect(notFiredVerdict('tick', 'ns', tickJob, NO_LATEST, NOW)).toBe(
      'tick has not fired yet in namespace "ns" (no scheduled fire in the history); next fire ' +
        '2027-03-10 12:10:00.000 UTC',
    );
    const unloaded = latestOf(tickJob, null, [], NOW);
    expect(notFiredVerdict('tick', 'ns', tickJob, unloaded, NOW)).toBe(
      'tick has not fired yet in namespace "ns" (no scheduled fire in the history; its ' +
        "schedule's latest fire, 2027-03-10 12:00:00.000 UTC, came before any runner loaded it); " +
        'next fire 2027-03-10 12:10:00.000 UTC',
    );
    expect(notFiredVerdict('idle', 'ns', idleJob, NO_LATEST, NOW)).toBe(
      'idle has not fired yet in namespace "ns" (no scheduled fire in the history); it is ' +
        'disabled in the schedules file; next fire 2027-03-10 12:10:00.000 UTC',
    );
    expect(notFiredVerdict('elsewhere', 'ns', null, NO_LATEST, NOW)).toBe(
      'elsewhere has not fired yet in namespace "ns" (no scheduled fire in the history)',
    );
  });
});

describe('the runners that left no attempt', () => {
  it('a runner restarted after the fire is "restarted", whatever it is now', () => {
    const startedAt = at('2027-03-10T11:55:00Z');
    const alive = judgeMissing(runner('srv-03', { startedAt }), 'tick', FIRE, NOW, 15_000);
    expect(alive).toMatchObject({
      host: 'srv-03',
      state: 'restarted',
      alive: true,
      detail: 'restarted at 2027-03-10 11:55:00.000 — down or starting at the fire',
    });
    const goneAgain = judgeMissing(
      runner('srv-03', { startedAt, alive: false, lastSeenAt: ago(60_000), lastSeenAgoMs: 60_000 }),
      'tick',
      FIRE,
      NOW,
      15_000,
    );
    expect(goneAgain.state).toBe('restarted');
    expect(goneAgain.detail).toMatch(/; gone since 2027-03-10 11:59:00\.000$/);
    expect(verdictOf([], [alive], FIRE, NOW)).toBe(
      'nobody attempted it: no runner wrote a row for this fire; srv-03 left no attempt ' +
        '(restarted at 2027-03-10 11:55:00.000: down or starting at the fire)',
    );
  });

  it('a runner that got the job by a reload after the fire; gone by --gone-after', () => {
    const later = runner('a', {
      startedAt: ago(86_400_000),
      jobs: loaded({ tick: at('2027-03-10T11:52:00Z') }),
    });
    expect(judgeMissing(later, 'tick', FIRE, NOW, 15_000)).toMatchObject({
      state: 'loaded-later',
      detail:
        'alive; it loaded its definition of "tick" at 2027-03-10 11:52:00.000, after this fire ' +
        '(a reload added or changed the job)',
    });
    // Loaded at its start (the old registry shape says nothing more): a runner there is lagging.
    const lagging = runner('a', { startedAt: ago(86_400_000) });
    expect(judgeMissing(lagging, 'tick', FIRE, NOW, 15_000).state).toBe('lagging');

    const quiet = runner('b', { alive: false, lastSeenAt: ago(4_000), lastSeenAgoMs: 4_000 });
    expect(judgeMissing(quiet, 'tick', FIRE, NOW, 3_000).detail).toMatch(/no heartbeat for 4/);
    expect(judgeMissing(quiet, 'tick', FIRE, NOW, 15_000).detail).toMatch(
      /its lock session has ended/,
    );
  });

  it('stopped, gone before the fire, without the job: each says so, with the whole row', () => {
    const stopped = judgeMissing(
      runner('s', { alive: false, stoppedAt: at('2027-03-10T11:58:00Z') }),
      'tick',
      FIRE,
      NOW,
      15_000,
    );
    expect(stopped).toEqual({
      host: 's',
      pid: 100,
      alive: false,
      startedAt: START.toISOString(),
      lastSeenAt: ago(1_000).toISOString(),
      stoppedAt: '2027-03-10T11:58:00.000Z',
      lockSessionHeld: true,
      state: 'stopped',
      detail: 'stopped at 2027-03-10 11:58:00.000',
    });
    const lastSeenAt = at('2027-03-10T11:40:00Z');
    const longGone = runner('g', {
      alive: false,
      lockSessionHeld: false,
      lastSeenAt,
      lastSeenAgoMs: NOW.getTime() - lastSeenAt.getTime(),
    });
    expect(judgeMissing(longGone, 'tick', FIRE, NOW, 15_000)).toMatchObject({
      state: 'gone',
      detail:
        'gone since 2027-03-10 11:40:00.000, before the fire (no heartbeat for 20m00s: ' +
        'crashed, killed, or cut off from the database)',
    });
    expect(
      judgeMissing(runner('n', { jobs: loaded({}) }), 'tick', FIRE, NOW, 15_000),
    ).toMatchObject({
      state: 'no-job',
      detail: 'alive, but its schedule has no job "tick" (a different schedules file?)',
    });
    expect(judgeMissing(runner('f'), 'tick', at('2027-03-10T12:10:00Z'), NOW, 15_000).detail).toBe(
      'alive; the fire has not come yet',
    );
  });

  it('a fire seconds old without rows is "not yet"; a fire nobody was there for says so', () => {
    const fresh: MissingRunner = judgeMissing(runner('a'), 'tick', ago(1_200), NOW, 15_000);
    expect(fresh.state).toBe('lagging');
    expect(fresh.detail).toBe('alive; has not written its attempt yet (the fire was 1.2s ago)');
    expect(verdictOf([], [fresh], ago(1_200), NOW)).toBe(
      'nobody attempted it yet: the fire was 1.2s ago; a left no attempt (alive: its attempt ' +
        'is not written yet)',
    );
    expect(verdictOf([], [], FIRE, NOW)).toBe(
      'nobody attempted it: no runner wrote a row for this fire, and no registered runner was ' +
        'running then',
    );
  });
});

describe('the verdict', () => {
  it('names the winner and how it ended, and counts the skips', () => {
    expect(verdictOf([row()], [], FIRE, NOW)).toBe('ran on srv-01 (done in 1.5s)');
    expect(
      verdictOf(
        [
          row({
            status: 'failed',
            attempts: 3,
            error: 'exit code 2:\n  disk\tfull',
            trigger: 'catchup',
          }),
          skip('srv-02', 'srv-01 holds the lock'),
        ],
        [],
        FIRE,
        NOW,
      ),
    ).toBe(
      'ran on srv-01 (catchup) (failed after 1.5s, 3 attempts: exit code 2: disk full); 1 runner ' +
        'skipped',
    );
    const running = row({ status: 'running', finishedAt: null, startedAt: ago(90_000) });
    expect(verdictOf([running], [], FIRE, NOW)).toBe(
      'running on srv-01 since 2027-03-10 11:58:30.000 (for 1m30s)',
    );
  });

  it('names every worker slot of a fan-out fire', () => {
    const slots = [
      row(),
      row({ id: 2, host: 'srv-02', workerSlot: 2, finishedAt: null, status: 'running' }),
    ];
    expect(verdictOf(slots, [], FIRE, NOW)).toBe(
      'ran on srv-01 [slot 1] (done in 1.5s), running on srv-02 [slot 2] since ' +
        '2027-03-10 11:50:00.000 (for 10m00s)',
    );
  });

  it('says why nobody ran it: a missed mark, one reason for every skip, or several', () => {
    const missed = row({
      winner: false,
      status: 'missed',
      reason: 'no runner was up',
      attempts: 0,
    });
    expect(verdictOf([missed], [], FIRE, NOW)).toBe('nobody ran it: missed (no runner was up)');
    // A runner held the lock for it but its claim was not written (recorded late).
    const notClaimed = row({
      winner: false,
      status: 'missed',
      reasonKind: 'not-claimed',
      reason:
        "claim not recorded: the database did not answer within 10 s (srv-01 held the job's " +
        'lock; the job did not run)',
      attempts: 0,
    });
    expect(
      verdictOf([notClaimed, skip('b', 'this fire is being claimed by srv-01')], [], FIRE, NOW),
    ).toBe(
      'nobody ran it: claim not recorded: the database did not answer within 10 s (srv-01 held ' +
        "the job's lock; the job did not run)",
    );
    const paused = 'paused by ops at 2027-03-10T11:00:00.000Z';
    expect(verdictOf([skip('a', paused), skip('b', paused)], [], FIRE, NOW)).toBe(
      `nobody ran it: 2 runners skipped it (${paused})`,
    );
    expect(verdictOf([skip('a', paused), skip('b', 'overlap')], [], FIRE, NOW)).toBe(
      'nobody ran it: 2 runners skipped it (reasons below)',
    );
    expect(verdictOf([skip('a', 'x'.repeat(300))], [], FIRE, NOW)).toBe(
      `nobody ran it: 1 runner skipped it (${'x'.repeat(159)}…)`,
    );
  });

  it('a future fire, and an instant that is no fire (its runners are not blamed)', () => {
    const soon = at('2027-03-10T12:10:00Z');
    expect(verdictOf([], [], soon, NOW)).toBe('nobody attempted it: this fire has not come yet');
    const odd = at('2027-03-10T11:55:00Z');
    const notAFire = notAFireOf(tickJob, odd)!;
    expect(notAFire).toBe(
      '2027-03-10 11:55:00.000 is not a fire of "*/10 * * * *" (UTC); the next fire after it is ' +
        '2027-03-10 12:00:00.000 UTC',
    );
    expect(notAFireOf(tickJob, FIRE)).toBeNull();
    const lagging = judgeMissing(runner('a'), 'tick', odd, NOW, 15_000);
    expect(verdictOf([], [lagging], odd, NOW, notAFire)).toBe(`nobody attempted it: ${notAFire}`);
  });
});

describe('the notes and the whole judgement of a fire', () => {
  it('notes an instant that is no fire, a disabled job, a future fire and a pause', () => {
    const soon = at('2027-03-10T12:10:00Z');
    expect(notesFor(idleJob, soon, [], NOW, PAUSE, null)).toEqual([
      'idle is disabled in the schedules file',
      'this fire is in the future (database time)',
      'tick is paused by ops@srv-09 at 2027-03-10T11:00:00.000Z: maintenance (now)',
    ]);
    expect(notesFor(tickJob, FIRE, [row()], NOW, null, null)).toEqual([]);
    expect(notesFor(null, FIRE, [], NOW, null, 'not a fire')).toEqual(['not a fire']);
  });

  it("notes a retried run's policy and the waits its fire had, as every runner computes them", () => {
    const retrying = parseConfig(
      '/etc/baton/schedules.yaml',
      `
namespace: ns
jobs:
  tick:
    schedule: "*/10 * * * *"
    command: ["true"]
    retries: 3
    retryDelay: {initial: 1s, factor: 2}
`,
    ).jobs[0]!;
    const retried = row({ status: 'failed', attempts: 4, error: 'exited with code 1 (attempt 4)' });
    const waits = [2, 3, 4].map((a) => retryWaitMs('ns', retrying, FIRE, a));
    const [note] = notesFor(retrying, FIRE, [retried], NOW, null, null);
    expect(note).toBe(
      'retries: 3 retries, from 1s, ×2 up to 10m, ±10%; this fire waited ' +
        `${waits.map((w) => formatDuration(w, 'brief')).join(', ')} before attempts 2–4 ` +
        '(by the schedules file here)',
    );
    // A run that needed one attempt says nothing of its retries.
    expect(notesFor(retrying, FIRE, [row()], NOW, null, null)).toEqual([]);
  });

  it('leaves out the runners that wrote a row, sorts the rest, and notes a fire of the schedule', () => {
    const input: FireInput = {
      name: 'tick',
      job: tickJob,
      fire: NOW,
      rows: [],
      runners: [
        runner('srv-03'),
        runner('srv-01'),
        runner('srv-02', { startedAt: at('2027-03-10T12:00:30Z') }),
        runner('srv-04', { startedAt: at('2027-03-10T12:00:30Z') }),
      ],
      // srv-02 ran the job before the fire: restarted since, it is named; srv-04 never did.
      hostsBefore: new Set(['srv-01', 'srv-02']),
      now: at('2027-03-10T12:00:01Z'),
      goneAfterMs: 15_000,
      pause: null,
      latest: { fire: NOW, fromSchedule: true, beforeAnyRunner: null },
    };
    const judged = judgeFire(input);
    expect(judged.missing.map((m) => [m.host, m.state])).toEqual([
      ['srv-01', 'lagging'],
      ['srv-02', 'restarted'],
      ['srv-03', 'lagging'],
    ]);
    expect(judged.notes).toEqual([
      "the latest fire by the schedules file's schedule; no runner wrote a row for it",
    ]);
    expect(judged.verdict).toMatch(/^nobody attempted it yet: the fire was 1.0s ago; srv-01 left/);

    const ran = judgeFire({ ...input, rows: [row({ scheduledAt: NOW, startedAt: NOW })] });
    expect(ran.missing.map((m) => m.host)).toEqual(['srv-02', 'srv-03']);
    expect(ran.notes).toEqual([]);
    expect(ran.verdict).toBe(
      'ran on srv-01 (done in 1.5s); srv-02 left no attempt (restarted at ' +
        '2027-03-10 12:00:30.000: down or starting at the fire); srv-03 left no attempt ' +
        '(alive: its attempt is not written yet)',
    );
  });

  it('counts a runner whose skip tally spans the fire as having skipped it, and says what a tally cannot', () => {
    const tally = (host: string, kind: string, skips: number, first: string, last: string) => ({
      job: 'tick',
      periodStart: at('2027-03-10T11:00:00Z'),
      host,
      kind,
      skips,
      firstFire: at(first),
      lastFire: at(last),
      lastReason: 'this fire is running on srv-01 (started …)',
    });
    const judged = judgeFire({
      name: 'tick',
      job: tickJob,
      fire: FIRE,
      rows: [row()],
      runners: [runner('srv-01'), runner('srv-02'), runner('srv-03')],
      hostsBefore: new Set(['srv-01', 'srv-02', 'srv-03']),
      now: NOW,
      goneAfterMs: 15_000,
      pause: null,
      latest: NO_LATEST,
      tallies: [
        tally('srv-02', 'taken', 1_204, '2027-03-10T11:00:00Z', '2027-03-10T11:59:59Z'),
        tally('srv-02', 'already-ran', 3, '2027-03-10T11:10:00Z', '2027-03-10T11:20:00Z'),
        // srv-03's tally ends before the fire: it is not taken to have skipped this one.
        tally('srv-03', 'taken', 40, '2027-03-10T11:00:00Z', '2027-03-10T11:40:00Z'),
      ],
    });
    expect(judged.tallied).toEqual(['srv-02']);
    expect(judged.missing.map((m) => m.host)).toEqual(['srv-03']);
    expect(judged.notes).toEqual([
      'skips: tally — skips of this job counted in 11:00–12:00 UTC: srv-02 1,207 (taken 1,204, ' +
        'already-ran 3); srv-03 40 (taken 40); srv-02 most likely skipped this fire (a tally ' +
        'does not say which fires it counted)',
    ]);
  });
});
