/**
 * Issue 21, part 3: the peers a Node team would pick for "cron on N servers", side by side with
 * baton in the same run. Every system gets 3 worker processes on this machine, the third with
 * its wall clock 0.4 s behind (libfaketime `FAKETIME=-0.4`, the monotonic clock left alone), and
 * the same workload:
 *
 * - every second (croner's granularity and baton's): 10 jobs every second for 60 s (quick: 10 s)
 *   — croner + redlock on Redis (bench/lib/peers/cron-redlock.mjs; node-cron is not installed:
 *   croner is the cron library baton itself uses) against 3 baton runners, then 3 replicas of an
 *   application in baton's library mode;
 * - every minute (pg-boss's `schedule()` and graphile-worker's crontab are minute-granular): 100
 *   jobs every minute for 2 minutes (`BENCH_PEER_MINUTES`; quick: 1) — pg-boss and
 *   graphile-worker on the local PostgreSQL, then 3 baton runners and 3 library-mode replicas on
 *   the same 100 jobs.
 *
 * baton is two systems here (bench/lib/peers/baton.ts): the daemon, whose jobs are processes it
 * spawns, and library mode (`createScheduler`, bench/lib/peers/baton-library.mjs), whose jobs are
 * handlers called in the replica's process — like croner's and graphile-worker's, so that row is
 * the like-for-like one.
 *
 * Measured the same way for every system: a fire's lag = the real instant its job ran its first
 * instruction − the fire's instant. The peers' jobs and library mode's handlers are functions in
 * warm processes that stamp the monotonic clock first thing; the daemon's are command jobs
 * (bench/lib/stamp.ts's C program with CLOCK_MONOTONIC), so its lag includes spawning a process.
 * The harness maps the monotonic clock to its own (unfaked) wall clock; baton's `scheduled_at`
 * is database time (the offset to the host is measured, ~0 on one machine). The lag of a fire
 * is its first run's. Also per system: fires run twice (two runs of one fire, by the jobs' own
 * records), fires lost (no run), and the idle footprint: each worker's resident memory (its
 * process tree: a baton runner and its spawner) just before the first measured fire, and the
 * peak over the run.
 *
 * A peer whose server is unreachable (Redis at 127.0.0.1:6379, PostgreSQL at 127.0.0.1:5432 as
 * user postgres, trust auth) is skipped with a failed check that says so. Each peer's data is its
 * own: a Redis key prefix, a PostgreSQL database per peer, dropped at the end.
 */
import type { BenchContext, Check, Scenario, ScenarioResult } from '../lib/index.js';
import { skewedClockEnv } from '../lib/b-procs.js';
import { baton, batonLibrary } from '../lib/peers/baton.js';
import { cronRedlock, graphileWorker, pgBoss, PG, REDIS } from '../lib/peers/cron-peers.js';
import { reachable, SKEW, type SystemResult } from '../lib/peers/harness.js';
import { report } from '../lib/peers/report.js';

export default {
  name: 'peers-cron',
  title:
    'Side by side: croner + redlock, pg-boss, graphile-worker and baton (daemon, library mode), 3 workers, one 0.4 s late',
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const seconds = ctx.quick ? 10 : 60;
    const minutesEnv = Number(process.env.BENCH_PEER_MINUTES ?? (ctx.quick ? 1 : 2));
    if (!Number.isInteger(minutesEnv) || minutesEnv < 1) {
      throw new Error(`BENCH_PEER_MINUTES=${process.env.BENCH_PEER_MINUTES}: a whole number ≥ 1`);
    }
    const minutes = minutesEnv;
    const checks: Check[] = [];
    const notes: string[] = [];
    if (!skewedClockEnv(SKEW)) {
      checks.push({
        name: 'libfaketime installed (apt-get install faketime)',
        ok: false,
        detail: 'not found: every third worker ran on the real clock',
      });
    }
    const redis = await reachable(REDIS.host, REDIS.port);
    const postgres = await reachable(PG.host, PG.port);
    const results: SystemResult[] = [];
    const skipped = (what: string, why: string) =>
      checks.push({ name: `${what} measured`, ok: false, detail: `skipped: ${why}` });

    // Every second.
    if (redis) results.push(await cronRedlock(ctx, seconds));
    else skipped('croner + redlock', `no Redis at ${REDIS.host}:${REDIS.port}`);
    results.push(await baton(ctx, 'second', seconds));
    results.push(await batonLibrary(ctx, 'second', seconds));
    // Every minute.
    if (postgres) {
      results.push(await pgBoss(ctx, minutes));
      results.push(await graphileWorker(ctx, minutes));
    } else {
      skipped('pg-boss and graphile-worker', `no PostgreSQL at ${PG.host}:${PG.port}`);
    }
    results.push(await baton(ctx, 'minute', minutes));
    results.push(await batonLibrary(ctx, 'minute', minutes));
    return report(results, { seconds, minutes }, checks, notes);
  },
} satisfies Scenario;
