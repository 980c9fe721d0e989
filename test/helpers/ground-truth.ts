/**
 * Ground truth for the tests that prove guarantees: what the jobs themselves did, recorded by the
 * jobs, outside baton's history. baton's rows say what baton believes; a regression that makes
 * baton run a fire twice, or start a run while the last one still lives, may well write rows that
 * look right. The journal cannot be fooled that way:
 *
 * - every attempt appends `start` when it begins and `end` when its work is over, with the job,
 *   fire, host, run id, attempt, pid and the machine's real time (never a skewed runner's clock:
 *   libfaketime is dropped for the `date` call);
 * - every attempt takes an exclusive `flock` on a file of its job (and worker slot) for as long as
 *   any of its processes lives — the lock is inherited by what the job leaves in the background,
 *   and the kernel drops it only when the last of them is gone. An attempt that cannot take it at
 *   its start records `overlap=1`: another run of the job was alive at that moment, whatever the
 *   history says. This sees a run that ignores SIGTERM, or one that outlives its runner.
 *
 * All runner processes of a test run on this one machine, so one file and one clock serve them all.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { writeSchedule } from './cli.js';
import type { RunRow } from './db.js';

export interface JournalEntry {
  /**
   * With `timeOverlap`: `freed`, when the run an overlapped attempt met let go of the lock;
   * `killed`, when the attempt was told to stop (SIGTERM) — it is gone a moment later.
   */
  event: 'start' | 'end' | 'freed' | 'killed';
  job: string;
  /** The fire's instant (BATON_SCHEDULED_AT), ms since the epoch. */
  fire: number;
  host: string;
  runId: number;
  attempt: number;
  /** The worker slot (1 unless `workers: N`). */
  slot: number;
  pid: number;
  /** The machine's real time, ms since the epoch. */
  at: number;
  /** `start` only: another run of the job (and slot) held its lock when this one began. */
  overlapped: boolean;
}

/** One attempt as the journal saw it; `end` is missing when it was killed before it ended. */
export type JournalAttempt = Omit<JournalEntry, 'event' | 'at'> & {
  start: number;
  end: number | null;
  /**
   * With `timeOverlap`, an overlapped attempt: when the other run's lock was dropped (its last
   * process gone), so that the overlap lasted `freed - start`. Null when not seen (this attempt
   * was killed or ended first).
   */
  freed: number | null;
  /** With `timeOverlap`: when a SIGTERM ended it (null: it ended otherwise, or by SIGKILL alone). */
  killed: number | null;
};

export interface JobOptions {
  /** Shell code of the work itself (default: nothing). `$J` is the journal's folder. */
  work?: string;
  /** Ignore SIGTERM, in the job and in everything it starts: only SIGKILL ends it. */
  ignoreTerm?: boolean;
  /**
   * An attempt that meets another's lock at its start waits for that lock in the background and
   * records `freed` when it is dropped: how long the overlap lasted, even when the other run was
   * SIGKILLed and never wrote its end (the fault soak's measure of overlap). And an attempt
   * stopped by SIGTERM journals `killed` (and no end), so that an overlapped attempt that was
   * stopped before the other run let go still tells how long it lived beside it.
   */
  timeOverlap?: boolean;
  /**
   * The job's lock file is its host's (and worker slot's): an `every: true` job runs each fire on
   * every runner at once by design, so only two runs on one host at once are an overlap.
   */
  lockPerHost?: boolean;
}

export interface Journal {
  readonly dir: string;
  /** The argv of a command job that records itself in this journal, then does `work`. */
  command(options?: JobOptions): string[];
  /** `command` as YAML flow text, for a schedules file. */
  yaml(options?: JobOptions): string;
  entries(): JournalEntry[];
  /** Attempts (of one job; of fires in [from, until]), in order of their start. */
  attempts(job?: string, fires?: { from?: Date; until?: Date }): JournalAttempt[];
}

/**
 * A schedules file in a fresh folder, with a journal beside it for its jobs to record themselves
 * in: `yaml` gets the journal to write `command: ${j.yaml()}` with.
 */
export function writeJournaledSchedule(
  yaml: (j: Journal) => string,
  files: Record<string, string> = {},
): { config: string; journal: Journal } {
  const config = writeSchedule('', files);
  const j = journal(path.dirname(config));
  writeFileSync(config, yaml(j));
  return { config, journal: j };
}

/** A journal in `dir` (the test's schedules folder, usually). */
export function journal(dir: string): Journal {
  const folder = path.join(dir, 'ground-truth');
  mkdirSync(path.join(folder, 'locks'), { recursive: true });
  const file = path.join(folder, 'journal');
  const self: Journal = {
    dir: folder,
    command(options = {}) {
      return ['sh', '-c', script(folder, options)];
    },
    yaml(options = {}) {
      return JSON.stringify(self.command(options));
    },
    entries() {
      if (!existsSync(file)) return [];
      return readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.endsWith(' .'))
        .map(parse);
    },
    attempts(job, { from, until } = {}) {
      const byAttempt = new Map<string, JournalAttempt>();
      for (const e of self.entries()) {
        if (job != null && e.job !== job) continue;
        if ((from && e.fire < from.getTime()) || (until && e.fire > until.getTime())) continue;
        const key = `${e.runId}/${e.attempt}`;
        if (e.event === 'start') {
          const { event, at, ...attempt } = e; // the attempt: all but the event and its time
          byAttempt.set(key, { ...attempt, start: at, end: null, freed: null, killed: null });
        } else if (e.event === 'freed' || e.event === 'killed') {
          const a = byAttempt.get(key);
          if (a) a[e.event] = e.at;
        } else {
          const a = byAttempt.get(key);
          if (a) a.end = e.at;
        }
      }
      return [...byAttempt.values()].sort((x, y) => x.start - y.start);
    },
  };
  return self;
}

function script(
  folder: string,
  { work = '', ignoreTerm = false, timeOverlap = false, lockPerHost = false }: JobOptions,
): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  // Every field is one word; the line ends in " ." so that a torn line is never read.
  const fields =
    '$BATON_JOB $(fire) $BATON_HOST $BATON_RUN_ID ${BATON_ATTEMPT:-1} ${BATON_WORKER:-1} $$';
  return [
    // Ignored signals stay ignored across exec: what the job starts ignores SIGTERM too.
    ignoreTerm ? "trap '' TERM" : '',
    `J=${q(folder)}`,
    // The machine's real clock, not a runner's skewed one.
    'now() { LD_PRELOAD= date +%s%3N; }',
    'fire() { LD_PRELOAD= date -d "$BATON_SCHEDULED_AT" +%s%3N; }',
    `rec() { echo "$1 ${fields} $(now) $2 ." >> "$J/journal"; }`,
    // fd 9 (and the lock on it) is inherited by everything the job starts.
    `exec 9>>"$J/locks/$BATON_JOB.\${BATON_WORKER:-1}${lockPerHost ? '.$BATON_HOST' : ''}"`,
    'if flock -n 9; then o=0; else o=1; fi',
    'rec start $o',
    // `flock` on the same fd 9 (one open file description with the job's): once the other run
    // lets go, the lock is this job's, as if its own `flock -n` had won. Then the waiter exits.
    timeOverlap ? 'if [ $o = 1 ]; then ( flock 9 && rec freed 1 ) & fi' : '',
    // The end is recorded however the work ends by itself (`exit 3` too), not when killed.
    "trap 'rec end 0' EXIT",
    // Stopped: `killed`, not an end. sh runs the trap once its foreground command is gone, and
    // that got the same SIGTERM (the whole group does).
    timeOverlap && !ignoreTerm ? "trap 'trap - EXIT; rec killed 0; exit 143' TERM" : '',
    work,
  ]
    .filter(Boolean)
    .join('\n');
}

function parse(line: string): JournalEntry {
  const [event, job, fire, host, runId, attempt, slot, pid, at, overlapped] = line.split(' ');
  return {
    event: event as JournalEntry['event'],
    job: job!,
    fire: Number(fire),
    host: host!,
    runId: Number(runId),
    attempt: Number(attempt),
    slot: Number(slot),
    pid: Number(pid),
    at: Number(at),
    overlapped: overlapped === '1',
  };
}

/**
 * No two attempts of a job (per worker slot) were alive at once, by the jobs' own account: none
 * found another's lock held at its start, and no two [start, end] intervals intersect.
 */
export function expectNoOverlapInJournal(attempts: JournalAttempt[], label: string): void {
  expect(
    attempts.filter((a) => a.overlapped).map(describe),
    `${label}: attempts that started while another run of the job was alive`,
  ).toEqual([]);
  const bySlot = new Map<string, JournalAttempt[]>();
  for (const a of attempts) {
    const key = `${a.job}/${a.slot}`;
    bySlot.set(key, [...(bySlot.get(key) ?? []), a]);
  }
  for (const list of bySlot.values()) {
    for (let i = 1; i < list.length; i++) {
      const before = list[i - 1]!;
      if (before.end == null) continue; // killed: its lock, not its end line, covers it
      expect(
        list[i]!.start,
        `${label}: ${describe(list[i]!)} started before ${describe(before)} ended`,
      ).toBeGreaterThanOrEqual(before.end);
    }
  }
}

/**
 * The history and the jobs agree: every attempt in the journal belongs to a winner row of its
 * fire on its host; no fire (and worker slot) was started under two runs; and every winner row
 * that says its job ran (`ran`, default: done, failed with an exit code, timeout) has its attempts
 * in the journal, as many as the row counts.
 */
export function expectHistoryMatchesJournal(
  rows: readonly (RunRow & { attempts?: number })[],
  attempts: readonly JournalAttempt[],
  label: string,
  ran: (row: RunRow) => boolean = (r) =>
    r.status === 'done' || r.status === 'timeout' || (r.status === 'failed' && r.exit_code != null),
): void {
  const winners = new Map(rows.filter((r) => (r.winner ?? 0) >= 1).map((r) => [r.id, r]));
  const runOfFire = new Map<string, number>();
  for (const a of attempts) {
    const row = winners.get(a.runId);
    const what = `${label}: ${describe(a)}`;
    expect(row, `${what} has no winner row`).toBeDefined();
    expect(
      { job: row!.job, fire: row!.scheduled_at.getTime(), host: row!.host, slot: row!.winner },
      what,
    ).toEqual({ job: a.job, fire: a.fire, host: a.host, slot: a.slot });
    const fire = `${a.job} ${new Date(a.fire).toISOString()} slot ${a.slot}`;
    const first = runOfFire.get(fire);
    expect(first ?? a.runId, `${label}: fire ${fire} started by runs ${first} and ${a.runId}`).toBe(
      a.runId,
    );
    runOfFire.set(fire, a.runId);
  }
  for (const row of winners.values()) {
    if (!ran(row)) continue;
    const mine = attempts.filter((a) => a.runId === row.id);
    expect(
      mine.length,
      `${label}: run ${row.id} (${row.job} ${row.scheduled_at.toISOString()}, ${row.status}) in the journal`,
    ).toBe(row.attempts ?? 1);
  }
}

function describe(a: JournalAttempt): string {
  return (
    `run ${a.runId} attempt ${a.attempt} of ${a.job} (fire ${new Date(a.fire).toISOString()}, ` +
    `slot ${a.slot}) on ${a.host} [${a.start}, ${a.end ?? 'killed'}]`
  );
}
