/**
 * Hostile input reaches the history verbatim and harms nothing: job arguments and host ids full
 * of quotes, SQL and non-ASCII text are passed and stored as they are (every statement is
 * parameterised: the tables are still there); a command that does not exist fails its run with a
 * plain error while the daemon goes on firing; a job that floods its output leaves a bounded tail
 * that holds the END of the output (cut on a character boundary); a module that throws fails its
 * run with its own message. Proven with real runner daemons (`baton start`, two of them, with
 * hostile host ids) and with `baton run`.
 */
import { describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';
import { byFire, runs, type RunRow } from '../helpers/db.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

/** A skip that names the runner holding this very fire: claiming it, running it, or done. */
const NAMES_WINNER = /^this fire (is being claimed by|is running on|already ran on) /;
/** An `overlap` skip: `an earlier run is still running on H (fire <instant>, started …)`. */
const EARLIER_RUN = /^an earlier run is still running on .* \(fire (\S+), started /;

/** Whether `reason` names `host` verbatim as that runner (`… on H (…` or `… by H (…`). */
function namesHost(reason: string, host: string): boolean {
  return reason.includes(` on ${host} (`) || reason.includes(` by ${host} (`);
}

const fleet = useFleet('hostile', { perTest: true });

const SQL_ARG = "'; DROP TABLE baton_runs; --";
const TEXT_ARG = 'naïve ☃ "q"';
const QUOTES_OUTPUT = `${SQL_ARG}\n${TEXT_ARG}\n`;
const HOST_SQL = "o'brien; DROP TABLE x; -- ☃";
const HOST_OTHER = 'back\\slash "dq" `tick` 🎉';
const THROWN = "ledger 'x'; DROP TABLE baton_runs; -- ☃ does not balance";
/** `seq 1 150000`: about 1 MB. */
const SEQ_OUTPUT = Array.from({ length: 150_000 }, (_, i) => `${i + 1}\n`).join('');
/** 1 MB of 3-byte characters, then a marker: the 8 KiB cut falls inside a character. */
const SNOW_COUNT = 350_000;
const TAIL_BYTES = 8 * 1024;

const SCHEDULE = `
namespace: hostile
jobs:
  quotes:
    schedule: "* * * * * *"
    command: ${JSON.stringify(['printf', '%s\n', SQL_ARG, TEXT_ARG])}
  missing:
    schedule: "* * * * * *"
    command: ["/nonexistent/x"]
  big:
    schedule: "*/2 * * * * *"
    command: ["seq", "1", "150000"]
  snow:
    schedule: "*/2 * * * * *"
    command: ${JSON.stringify([process.execPath, '-e', `process.stdout.write('☃'.repeat(${SNOW_COUNT}) + 'END\\n')`])}
  throws:
    schedule: "*/2 * * * * *"
    module: throws.mjs
  shouts:
    schedule: "0 3 * * *"
    module: shouts.mjs
`;
/** A message far longer than the history's one-line error, of characters outside the BMP. */
const SHOUT = '🎉'.repeat(50_000);
const FILES = {
  'throws.mjs': `export default async () => { throw new Error(${JSON.stringify(THROWN)}); };\n`,
  'shouts.mjs': `export default async () => { throw new Error('🎉'.repeat(50000)); };\n`,
};

/** The tail kept of `output`: its last 8 KiB, without a broken first character, after '…'. */
function expectTailOf(tail: string | null, output: string): void {
  expect(tail).not.toBeNull();
  expect(tail!.startsWith('…')).toBe(true);
  expect(Buffer.byteLength(tail!.slice(1))).toBeLessThanOrEqual(TAIL_BYTES);
  // No more than one character lost to the cut.
  expect(Buffer.byteLength(tail!.slice(1))).toBeGreaterThan(TAIL_BYTES - 4);
  expect(tail).not.toContain('\uFFFD');
  expect(output.endsWith(tail!.slice(1))).toBe(true);
}

async function tablesOf(): Promise<string[]> {
  const rows = await fleet.db.query<Record<string, string>>('SHOW TABLES');
  return rows.map((r) => Object.values(r)[0]!).sort();
}

const winners = (rows: RunRow[]) => rows.filter((r) => r.winner === 1 && r.status !== 'running');

describe('the daemon', () => {
  it('stores hostile arguments and host ids verbatim, survives a missing command, bounds a flood, records a throw', async () => {
    const db = fleet.db;
    await db.query('CREATE TABLE x (id INT)');
    const config = writeSchedule(SCHEDULE, FILES);
    const hosts = [HOST_SQL, HOST_OTHER];
    const runners = await fleet.start(hosts, { config });

    await waitFor(
      'every job to have run, `missing` three times',
      async () => {
        const rows = await runs(db);
        const n = (job: string) => winners(rows.filter((r) => r.job === job)).length;
        return (
          n('quotes') >= 3 && n('missing') >= 3 && n('big') >= 1 && n('snow') >= 1 && n('throws')
        );
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    // The daemons are alive and still firing after their failed runs.
    for (const r of runners) expect(r.child.exitCode, r.host).toBeNull();
    const [latest] = await db.query<{ at: Date }>(
      "SELECT MAX(scheduled_at) AS at FROM baton_runs WHERE job = 'missing'",
    );
    await waitFor(
      'fires of `quotes` and `missing` after that',
      async () => {
        const rows = (await runs(db)).filter((r) => r.scheduled_at > latest!.at);
        return (
          winners(rows.filter((r) => r.job === 'quotes')).length >= 1 &&
          winners(rows.filter((r) => r.job === 'missing')).length >= 1
        );
      },
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    expect(await Promise.all(runners.map((r) => r.stop('SIGTERM')))).toEqual([0, 0]);
    expectQuiet(runners);

    // Nothing was dropped, nothing was injected.
    expect(await tablesOf()).toEqual([
      'baton_audit',
      'baton_dependent_fires',
      'baton_failovers',
      'baton_host_slots',
      'baton_migrations',
      'baton_notifications',
      'baton_pauses',
      'baton_run_output',
      'baton_run_requests',
      'baton_runners',
      'baton_runs',
      'baton_schedule_revisions',
      'baton_schedules',
      'baton_skip_tallies',
      'x',
    ]);
    const all = await runs(db);
    expect(all.filter((r) => r.status === 'running')).toEqual([]);
    expect(new Set(all.map((r) => r.host))).toEqual(new Set(hosts));

    const quotes = all.filter((r) => r.job === 'quotes');
    for (const [at, fire] of byFire(quotes)) {
      const label = `quotes ${new Date(at).toISOString()}`;
      const won = fire.filter((r) => r.winner === 1);
      expect(won, label).toHaveLength(1);
      expect(won[0], label).toMatchObject({ status: 'done', exit_code: 0 });
      expect(won[0]!.output_tail, label).toBe(QUOTES_OUTPUT);
      for (const s of fire.filter((r) => r.winner === null)) {
        // The other runner names the winner's host id, verbatim (unless the 10 ms run was over
        // before it could look the holder up).
        if (s.reason === 'another run held the lock at this instant (it is free now)') continue;
        // On a loaded machine the previous fire's run may still be going at this instant: the
        // skip then names that run's host, verbatim too.
        const earlier = EARLIER_RUN.exec(s.reason!);
        if (earlier) {
          expect(Date.parse(earlier[1]!), `${label}: ${s.reason}`).toBeLessThan(at);
          const previous = quotes.find(
            (r) => r.winner === 1 && r.scheduled_at.toISOString() === earlier[1],
          );
          expect(previous, `${label}: the earlier run it names (${s.reason})`).toBeDefined();
          expect(namesHost(s.reason!, previous!.host), `${label}: ${s.reason}`).toBe(true);
          continue;
        }
        expect(s.reason, label).toMatch(NAMES_WINNER);
        expect(namesHost(s.reason!, won[0]!.host), `${label}: ${s.reason}`).toBe(true);
      }
    }
    // Every skip (of every job) that names this fire's winner names it verbatim.
    let named = 0;
    for (const job of ['quotes', 'missing', 'big', 'snow', 'throws']) {
      for (const [at, fire] of byFire(all.filter((r) => r.job === job))) {
        const won = fire.find((r) => r.winner === 1);
        for (const s of fire.filter((r) => r.winner === null)) {
          if (!NAMES_WINNER.test(s.reason!)) continue;
          expect(namesHost(s.reason!, won!.host), `${job} ${new Date(at).toISOString()}`).toBe(
            true,
          );
          named++;
        }
      }
    }
    expect(named).toBeGreaterThanOrEqual(1);

    const missing = winners(all.filter((r) => r.job === 'missing'));
    expect(missing.length).toBeGreaterThanOrEqual(4);
    for (const r of missing) {
      expect(r, `missing run ${r.id}`).toMatchObject({
        status: 'failed',
        exit_code: null,
        error: 'command not found: /nonexistent/x',
      });
    }

    for (const r of winners(all.filter((r) => r.job === 'big'))) {
      expect(r.status).toBe('done');
      expectTailOf(r.output_tail, SEQ_OUTPUT);
      expect(r.output_tail!.endsWith('\n149999\n150000\n')).toBe(true);
    }
    for (const r of winners(all.filter((r) => r.job === 'snow'))) {
      expect(r.status).toBe('done');
      expectTailOf(r.output_tail, `${'☃'.repeat(SNOW_COUNT)}END\n`);
      // 8192 bytes = "END\n" + 2729 whole snowmen + one byte of a broken one, which is dropped.
      expect(r.output_tail).toBe(`…${'☃'.repeat(2729)}END\n`);
    }
    for (const r of winners(all.filter((r) => r.job === 'throws'))) {
      expect(r).toMatchObject({ status: 'failed', exit_code: 1, error: THROWN });
      expect(r.output_tail).toContain(THROWN);
    }
  });
});

describe('baton run', () => {
  const run = (config: string, job: string) =>
    baton(['run', job, '--config', config, '--database-url', fleet.db.url, '--host', HOST_SQL], {
      timeoutMs: 60_000,
    });

  it('runs the same hostile jobs by hand with the same results and exit codes', async () => {
    const db = fleet.db;
    const config = writeSchedule(SCHEDULE, FILES);

    const quotes = await run(config, 'quotes');
    expect(quotes.code).toBe(0);
    expect(quotes.stdout).toBe(QUOTES_OUTPUT);
    const [quotesRow] = await runs(db, 'quotes');
    expect(quotesRow).toMatchObject({
      winner: 1,
      triggered_by: 'manual',
      status: 'done',
      host: HOST_SQL,
      output_tail: QUOTES_OUTPUT,
    });
    expect(quotes.stderr).toBe(`baton: quotes done (run ${quotesRow!.id})\n`);

    const missing = await run(config, 'missing');
    expect(missing.code).toBe(1);
    const [missingRow] = await runs(db, 'missing');
    expect(missingRow).toMatchObject({
      status: 'failed',
      host: HOST_SQL,
      exit_code: null,
      error: 'command not found: /nonexistent/x',
    });
    expect(missing.stderr).toContain(
      `missing failed: command not found: /nonexistent/x (run ${missingRow!.id})`,
    );

    const big = await run(config, 'big');
    expect(big.code).toBe(0);
    // The whole output passes through to the terminal; the history keeps the end.
    expect(big.stdout).toBe(SEQ_OUTPUT);
    const [bigRow] = await runs(db, 'big');
    expect(bigRow!.status).toBe('done');
    expectTailOf(bigRow!.output_tail, SEQ_OUTPUT);

    const throws = await run(config, 'throws');
    expect(throws.code).toBe(1);
    expect(throws.stderr).toContain(THROWN);
    const [throwsRow] = await runs(db, 'throws');
    expect(throwsRow).toMatchObject({ status: 'failed', exit_code: 1, error: THROWN });

    expect(await tablesOf()).toEqual([
      'baton_audit',
      'baton_dependent_fires',
      'baton_failovers',
      'baton_host_slots',
      'baton_migrations',
      'baton_notifications',
      'baton_pauses',
      'baton_run_output',
      'baton_run_requests',
      'baton_runners',
      'baton_runs',
      'baton_schedule_revisions',
      'baton_schedules',
      'baton_skip_tallies',
    ]);
    expect((await runs(db)).map((r) => r.host)).toEqual([HOST_SQL, HOST_SQL, HOST_SQL, HOST_SQL]);
  });

  it('bounds a huge thrown message without breaking a character', async () => {
    const config = writeSchedule(SCHEDULE, FILES);
    const shouts = await run(config, 'shouts');
    expect(shouts.code).toBe(1);
    const [row] = await runs(fleet.db, 'shouts');
    expect(row!.status).toBe('failed');
    const error = row!.error!;
    // One line for humans: cut to 2,000 characters (code points, as every bound of the history
    // counts them), and marked as cut.
    expect([...error].length).toBe(2_000);
    expect(error.endsWith('…')).toBe(true);
    // The cut falls between two characters, not inside one (a lone UTF-16 surrogate is stored
    // as U+FFFD).
    expect(error.slice(-3)).toBe('🎉…');
    expect(SHOUT.startsWith(error.slice(0, -1))).toBe(true);
  });
});
