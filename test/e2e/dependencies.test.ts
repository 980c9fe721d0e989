/**
 * Dependencies (`after:`, docs/dependencies.md) with real `baton start` processes: the proofs
 * that need a process boundary. Three runners share one schedule, `report` after `settle`
 * (every 3 s), judged by the jobs' own journal (helpers/ground-truth.ts) as well as the rows:
 *
 * - A parent updated by SIGHUP keeps its children (dkron lost a parent's edges when the parent
 *   was updated): settle's command and description change, every runner reloads, and report
 *   still runs once after each of settle's next successful instants, and after a run of settle
 *   held at a gate across the reload (started, its children planned, under the old definition;
 *   its verdict written under the new one).
 * - `kill -9` of the runner that wrote settle's verdict, 0–100 ms after the verdict committed:
 *   the verdict's transaction wrote report's fire, so the instant's report still runs, once.
 *   The writer judges its children at once, so a kill can land before or after it claimed
 *   report: before, report runs on another runner after the lead (`leadMs` + `pollMs`); after,
 *   report's run died with its runner (`lost`) and nobody runs it again. Either way exactly one
 *   winner and at most one attempt. Each trial says which it was; the file fails unless at least
 *   one kill landed before the writer's claim (the failover the lead exists for).
 *
 * The two share one fleet (the reload first, then the kills, each replacing its victim), so the
 * file pays for four runner starts rather than ten. At the end, every instant of settle that
 * succeeded has exactly one winner of report, and nothing ran twice anywhere.
 */
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import type { RunnerProcess } from '../helpers/cli.js';
import { allRuns, dbNow, type RunRow } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import {
  expectHistoryMatchesJournal,
  expectNoOverlapInJournal,
  writeJournaledSchedule,
  type Journal,
} from '../helpers/ground-truth.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('dependencies');

/** settle fires every 3 s. */
const EVERY_MS = 3_000;
/** The children's fires looked at every 200 ms; the verdict's writer goes first for 500 ms. */
const TIMINGS = { dependents: { pollMs: 200, leadMs: 500 } };
/** A dead runner's rows are found within half a second (default 10 s). */
const ARGS = ['--reaper-interval', '500ms'];
/**
 * The bound on report's start after settle's verdict when the verdict's writer died: the lead
 * (500 ms) and a look (200 ms) make it under a second on an idle machine; the bound is generous
 * so that a loaded machine does not fail the test (the bench's `chain` measures the time).
 */
const FAILOVER_BOUND_MS = 20_000;

/**
 * settle's work before the reload: a second, then, while the test's gate is there, it says so
 * (`held-<run id>`) and waits for the gate to go.
 */
const OLD_SETTLE =
  'sleep 1; if [ -e "$J/gate" ]; then touch "$J/held-$BATON_RUN_ID"; ' +
  'while [ -e "$J/gate" ]; do sleep 0.05; done; fi';
/** And after it: what it prints tells the new definition's runs. */
const NEW_SETTLE = 'sleep 1; echo v2';

function schedule(j: Journal, settleWork: string): string {
  return `
namespace: chain
jobs:
  settle:
    schedule: "*/3 * * * * *"
    description: ${JSON.stringify(`settles the day (${settleWork})`)}
    command: ${j.yaml({ work: settleWork })}
  report:
    schedule: "0 0 1 1 *"
    after: {jobs: [settle], on: success}
    command: ${j.yaml({ work: 'sleep 0.1' })}
`;
}

/** The fleet both tests use: started by the first test that needs it. */
const shared: {
  config?: string;
  journal?: Journal;
  runners: RunnerProcess[];
  hosts: number;
  /** Hosts killed by the second test. */
  killed: Set<string>;
} = { runners: [], hosts: 0, killed: new Set() };

async function startRunners(n: number): Promise<RunnerProcess[]> {
  const hosts = Array.from({ length: n }, () => `d${++shared.hosts}`);
  const started = await fleet.start(hosts, {
    config: shared.config!,
    timings: TIMINGS,
    args: ARGS,
  });
  shared.runners.push(...started);
  return started;
}

async function ensureFleet(): Promise<void> {
  if (shared.config) return;
  const written = writeJournaledSchedule((j) => schedule(j, OLD_SETTLE));
  shared.config = written.config;
  shared.journal = written.journal;
  await startRunners(3);
}

/** The next instant of settle at least `aheadMs` after now (database time). */
async function nextInstant(aheadMs: number): Promise<Date> {
  const now = (await dbNow(fleet.db)).getTime() + aheadMs;
  return new Date(Math.ceil(now / EVERY_MS) * EVERY_MS);
}

const at = (d: Date) => d.toISOString();
const rowsAt = (rows: RunRow[], job: string, instant: Date) =>
  rows.filter((r) => r.job === job && r.scheduled_at.getTime() === instant.getTime());

/** report's fate at `instant`: its winner row, final (done, failed, lost), or its upstream skip. */
async function reportDecided(instant: Date): Promise<RunRow[] | null> {
  const rows = rowsAt(await allRuns(fleet.db, 'report'), 'report', instant);
  const decided = rows.some(
    (r) => ((r.winner ?? 0) >= 1 && r.status !== 'running') || r.reason_kind === 'upstream',
  );
  return decided ? rows : null;
}

describe('a parent updated by SIGHUP', () => {
  it('keeps its children: report runs once after its run across the reload and after each of settle’s next successful instants', async () => {
    await ensureFleet();
    const db = fleet.db;
    const config = shared.config!;
    const j = shared.journal!;
    const runners = [...shared.runners];

    // The chain works before the reload: one instant of settle with its report done.
    await waitFor(
      'an instant of settle with its report, before the reload',
      async () => {
        const rows = await allRuns(db);
        return rows.some(
          (s) =>
            s.job === 'settle' &&
            s.status === 'done' &&
            rowsAt(rows, 'report', s.scheduled_at).some(
              (r) => r.winner === 1 && r.status === 'done',
            ),
        );
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );

    // A run of settle held at the gate across the reload: started (and its children planned)
    // under the old definition, its verdict written once every runner has the new one.
    writeFileSync(path.join(j.dir, 'gate'), '');
    const held = await waitFor(
      'a run of settle held at the gate',
      () => readdirSync(j.dir).find((f) => f.startsWith('held-')),
      { timeoutMs: 20_000, intervalMs: 20 },
    );
    const heldId = Number(held.slice('held-'.length));
    writeFileSync(config, schedule(j, NEW_SETTLE));
    for (const r of runners) r.child.kill('SIGHUP');
    const reloads = await Promise.all(runners.map((r) => r.waitForLog('schedule reloaded')));
    for (const line of reloads) {
      expect(line).toMatchObject({ added: [], removed: [], changed: ['settle'] });
    }
    const reloadedAt = Math.max(...reloads.map((l) => Date.parse(String(l.time))));
    rmSync(path.join(j.dir, 'gate'));

    // The held run, then the next two successful instants of settle, each with report decided.
    const decided = await waitFor(
      'the held run and two later instants of settle, each with report decided',
      async () => {
        const rows = await allRuns(db);
        const done = rows.filter(
          (s) =>
            s.job === 'settle' &&
            s.winner === 1 &&
            s.status === 'done' &&
            (s.id === heldId || s.scheduled_at.getTime() > reloadedAt),
        );
        const chains = done.filter((s) =>
          rowsAt(rows, 'report', s.scheduled_at).some(
            (r) => ((r.winner ?? 0) >= 1 && r.status !== 'running') || r.reason_kind === 'upstream',
          ),
        );
        return chains.some((s) => s.id === heldId) && chains.length >= 3
          ? { rows, settles: chains }
          : null;
      },
      { timeoutMs: 40_000, intervalMs: 100 },
    );
    const { rows, settles } = decided;
    const heldRow = settles.find((s) => s.id === heldId)!;
    expect(heldRow.finished_at!.getTime(), 'the held run ended after the reloads').toBeGreaterThan(
      reloadedAt,
    );
    for (const settle of settles) {
      const instant = settle.scheduled_at;
      // The new definition from the reload on (the held run is the old one's).
      expect(settle.output_tail, `settle at ${at(instant)}`).toBe(
        settle.id === heldId ? '' : 'v2\n',
      );
      const report = rowsAt(rows, 'report', instant);
      const winners = report.filter((r) => (r.winner ?? 0) >= 1);
      expect(winners, `report's winners at ${at(instant)}`).toHaveLength(1);
      expect(winners[0]).toMatchObject({ status: 'done', triggered_by: 'after', rerun: 0 });
      expect(report.filter((r) => r.reason_kind === 'upstream')).toEqual([]);
      // After its parent's run ended (database time).
      expect(winners[0]!.started_at.getTime()).toBeGreaterThanOrEqual(
        settle.finished_at!.getTime(),
      );
      // The journal: once, with the parent's instant.
      const attempts = j.attempts('report').filter((a) => a.fire === instant.getTime());
      expect(
        attempts.map((a) => a.runId),
        `report's attempts at ${at(instant)}`,
      ).toEqual([winners[0]!.id]);
    }
  });
});

interface Trial {
  instant: Date;
  delayMs: number;
  victim: string;
  /** How long after the verdict's commit was seen the SIGKILL was sent. */
  killedAfterMs: number;
  /** `before`: the kill came before the writer claimed report; `after`: it had claimed it. */
  landed: 'before' | 'after';
  report: RunRow;
  /** report's start − settle's end (database time). */
  lagMs: number;
}

/** Polls settle's winner at `instant` on a connection of its own until its verdict is written. */
async function verdictOf(
  conn: Connection,
  instant: Date,
): Promise<{ id: number; host: string; status: string }> {
  const deadline = Date.now() + instant.getTime() - (await dbNow(fleet.db)).getTime() + 20_000;
  for (;;) {
    const [rows] = await conn.query<RowDataPacket[]>(
      `SELECT id, host, status FROM baton_runs
        WHERE job = 'settle' AND scheduled_at = ? AND winner = 1`,
      [instant],
    );
    const row = rows[0];
    if (row && row.status !== 'running') {
      return { id: Number(row.id), host: String(row.host), status: String(row.status) };
    }
    if (Date.now() > deadline) throw new Error(`no verdict of settle at ${at(instant)}`);
    await sleep(row ? 1 : 50);
  }
}

describe('kill -9 of the runner that wrote the parent’s verdict', () => {
  it('report still runs the instant exactly once, on another runner when the kill beat the writer’s claim', async () => {
    await ensureFleet();
    const db = fleet.db;
    const j = shared.journal!;
    // Mostly right after the commit (the writer claims report within milliseconds), once at
    // 100 ms; more at 0 ms if none of those beat the writer's claim.
    const delays = [0, 50, 100];
    const extra = [0, 0];
    const trials: Trial[] = [];
    const conn = await mysql.createConnection({ uri: db.url, timezone: 'Z' });
    try {
      for (let i = 0; i < delays.length + extra.length; i++) {
        if (i >= delays.length && trials.some((t) => t.landed === 'before')) break;
        const delayMs = i < delays.length ? delays[i]! : extra[i - delays.length]!;
        const instant = await nextInstant(800);
        const verdict = await verdictOf(conn, instant);
        const seen = performance.now();
        expect(verdict.status, `settle at ${at(instant)}`).toBe('done');
        const victim = shared.runners.find((r) => r.host === verdict.host)!;
        expect(victim, `the runner of ${verdict.host}`).toBeDefined();
        if (delayMs > 0) await sleep(delayMs - (performance.now() - seen));
        victim.child.kill('SIGKILL');
        const killedAfterMs = performance.now() - seen;
        shared.killed.add(victim.host);
        shared.runners = shared.runners.filter((r) => r !== victim);
        await victim.stop('SIGKILL');
        // Its replacement starts meanwhile (it may judge report too: any live runner may).
        const replaced = startRunners(1);

        // report's fate: a winner on a survivor, done; or the victim's, lost by the reaper.
        const report = await waitFor(
          `report at ${at(instant)} decided`,
          () => reportDecided(instant),
          { timeoutMs: FAILOVER_BOUND_MS + 10_000, intervalMs: 100 },
        ).catch(async (err: unknown) => {
          // What the chain's row and report's rows say, for the one reading the failure.
          const fire = await db.query(
            "SELECT *, NOW(3) AS now FROM baton_dependent_fires WHERE job = 'report' AND scheduled_at = ?",
            [instant],
          );
          console.log('report chain row:', JSON.stringify(fire));
          console.log('report rows:', JSON.stringify(rowsAt(await allRuns(db), 'report', instant)));
          for (const r of shared.runners) console.log(r.host, r.errors());
          throw err;
        });
        const winners = report.filter((r) => (r.winner ?? 0) >= 1);
        expect(winners, `report's winners at ${at(instant)}`).toHaveLength(1);
        const winner = winners[0]!;
        expect(report.filter((r) => r.reason_kind === 'upstream')).toEqual([]);
        expect(winner).toMatchObject({ triggered_by: 'after', rerun: 0 });
        const settle = rowsAt(await allRuns(db, 'settle'), 'settle', instant).find(
          (r) => r.winner === 1,
        )!;
        const lagMs = winner.started_at.getTime() - settle.finished_at!.getTime();
        const landed = winner.host === victim.host ? 'after' : 'before';
        trials.push({
          instant,
          delayMs,
          victim: victim.host,
          killedAfterMs,
          landed,
          report: winner,
          lagMs,
        });
        console.log(
          `kill -9 of ${victim.host} ${killedAfterMs.toFixed(1)} ms after settle's verdict at ` +
            `${at(instant)} (asked ${delayMs} ms): report run ${winner.id} on ${winner.host}, ` +
            `${winner.status}, ${lagMs} ms after settle ended — the kill landed ${landed} ` +
            `the writer's claim`,
        );
        if (landed === 'before') {
          expect(winner.status, `report at ${at(instant)}`).toBe('done');
          expect(lagMs).toBeGreaterThanOrEqual(0);
          expect(lagMs, 'report started after the lead').toBeLessThan(FAILOVER_BOUND_MS);
        } else {
          // Its run died with its runner: lost, and not run again (below, the journal).
          expect(winner.status, `report at ${at(instant)}`).toBe('lost');
        }
        // The journal: report ran this instant once at most, with the parent's instant; its one
        // attempt is the winner's (a lost run was killed mid-work: its end may be missing).
        // (A kill between the claim and the spawn leaves no attempt at all.)
        const attempts = j.attempts('report').filter((a) => a.fire === instant.getTime());
        const ran = attempts.map((a) => `${a.runId}@${a.host}`);
        if (landed === 'before' || ran.length > 0) {
          expect(ran, `report's attempts at ${at(instant)}`).toEqual([
            `${winner.id}@${winner.host}`,
          ]);
        }
        if (landed === 'before') expect(attempts[0]!.end).not.toBeNull();

        await replaced;
      }
    } finally {
      await conn.end();
    }
    console.table(
      trials.map((t) => ({
        instant: at(t.instant),
        asked: t.delayMs,
        killedAfterMs: Number(t.killedAfterMs.toFixed(1)),
        victim: t.victim,
        landed: t.landed,
        report: `${t.report.id} ${t.report.host} ${t.report.status}`,
        lagMs: t.lagMs,
      })),
    );
    expect(
      trials.filter((t) => t.landed === 'before').length,
      'kills that came before the writer claimed report (the lead’s failover)',
    ).toBeGreaterThan(0);

    // Nothing twice anywhere; every successful instant of settle (whose chain had time to end)
    // has exactly one run of report.
    const last = trials.at(-1)!.instant;
    // Ended: every run of the window, and the judgement of report at every instant settle
    // succeeded (a judge killed after taking it holds it for its lease, then another takes it).
    await waitFor(
      'every run of the window ended, and report judged at each success of settle',
      async () => {
        const rows = (await allRuns(db)).filter((r) => r.scheduled_at <= last);
        const judged = await db.query<{ n: number }>(
          `SELECT COUNT(*) AS n FROM baton_runs s
            WHERE s.job = 'settle' AND s.winner = 1 AND s.status = 'done' AND s.scheduled_at <= ?
              AND NOT EXISTS (SELECT 1 FROM baton_dependent_fires d WHERE d.job = 'report'
                AND d.scheduled_at = s.scheduled_at AND d.status <> 'waiting')`,
          [last],
        );
        return rows.every((r) => r.status !== 'running') && Number(judged[0]!.n) === 0;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const codes = await Promise.all(shared.runners.map((r) => r.stop('SIGTERM')));
    expect(codes).toEqual(shared.runners.map(() => 0));
    for (const r of shared.runners) {
      expect(r.errors(), r.host).toEqual([]);
      expect(r.stderr, r.host).toBe('');
    }
    const rows = await allRuns(db);
    const attempts = j.attempts();
    expectHistoryMatchesJournal(rows, attempts, 'the chain');
    expectNoOverlapInJournal(attempts, 'the chain');
    const perFire = new Map<string, number>();
    for (const a of attempts) {
      const key = `${a.job} ${new Date(a.fire).toISOString()}`;
      perFire.set(key, (perFire.get(key) ?? 0) + 1);
    }
    expect(
      [...perFire].filter(([, n]) => n > 1),
      'fires run twice',
    ).toEqual([]);
    const settles = rows.filter(
      (r) => r.job === 'settle' && r.winner === 1 && r.status === 'done' && r.scheduled_at <= last,
    );
    // At least the trials' instants (each had a `done` settle, checked above): how many more
    // the shared fleet's window holds depends on the machine's pace, not on the guarantee.
    expect(settles.length).toBeGreaterThanOrEqual(trials.length);
    // And the chain's outbox agrees: report's fire at each of them started, with that run (none
    // left waiting, none started twice).
    const outbox = await db.query<{
      scheduled_at: Date;
      rerun: number;
      status: string;
      run_id: number | null;
    }>(
      "SELECT scheduled_at, rerun, status, run_id FROM baton_dependent_fires WHERE job = 'report'",
    );
    for (const s of settles) {
      const report = rowsAt(rows, 'report', s.scheduled_at).filter((r) => (r.winner ?? 0) >= 1);
      expect(report, `report's winners at ${at(s.scheduled_at)}`).toHaveLength(1);
      const fire = outbox.filter((o) => o.scheduled_at.getTime() === s.scheduled_at.getTime());
      expect(fire, `report's fire at ${at(s.scheduled_at)}`).toEqual([
        { scheduled_at: s.scheduled_at, rerun: 0, status: 'started', run_id: report[0]!.id },
      ]);
    }
  });
});
