/**
 * reward — seed 000, the reward paid twice.
 *
 * Two workers did `SELECT … WHERE status = 'ready' LIMIT 1` and then `UPDATE … SET status =
 * 'working'`; between the two statements the other worker read the same row, and an account got
 * its reward twice. Here several runners share one fire (`workers: 3` in schedules.yaml) and the
 * same queue, safely:
 *
 * 1. At the start of each run, rows a dead worker left claimed longer than REWARD_RECLAIM_AFTER
 *    go back to the queue (`reclaimStale`, by the database's clock). The seed measured 2 minutes
 *    at worst and chose 10; the bound must exceed the longest a LIVE worker holds a claim.
 * 2. Claim a batch with ONE statement (`claimRows`: `UPDATE … WHERE status = 'ready' ORDER BY
 *    job_no LIMIT n`, read back by worker id and a per-claim token). A row goes to one worker.
 * 3. Pay each reward through the ledger (`once`): its job_no is inserted into `reward_given`
 *    (PRIMARY KEY job_no, the seed's table) in the same transaction as the payment. A reward
 *    already in the ledger — a reclaimed row whose worker died after paying it — is not paid
 *    again, whatever the claim says.
 * 4. Mark the batch done (`completeClaim`, only rows this claim still holds).
 *
 * Told to stop (ctx.signal: timeout, shutdown, its runner gone), the job finishes the reward in
 * hand, marks the paid ones done and hands the rest back at once (`releaseClaim`). Only a worker
 * that dies without a chance to clean up (kill -9 of the host) leaves claims for step 1.
 *
 * Worker id: `${host}-${pid}`, the seed's gethostname()-getmypid(); `SELECT worker_id, COUNT(*)
 * FROM reward_payment GROUP BY worker_id` shows how the work was shared.
 *
 * Tables: jobs/sql/reward.sql (jobs/sql/reward.demo.sql queues 1,000 sample rewards).
 *
 * Environment (job `env:`):
 *   REWARD_RECLAIM_AFTER  the reclaim bound, a duration like 10m, 90s, 500ms (default 10m)
 *   REWARD_BATCH          rows per claim (default 10)
 *   REWARD_WORK_MS        simulated time of the item service per reward, ms (default 0)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import {
  claimRows,
  completeClaim,
  once,
  reclaimStale,
  releaseClaim,
  type ClaimTable,
  type JobContext,
} from 'baton-cron';

interface RewardJob extends RowDataPacket {
  job_no: number;
  uid: string;
  item_id: number;
}

const queue: ClaimTable = { table: 'reward_job', orderBy: 'job_no' };

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

function durationMs(name: string, fallback: string): number {
  const text = process.env[name] || fallback;
  const match = /^(\d+)(ms|s|m|h)$/.exec(text.trim());
  if (!match || Number(match[1]) <= 0) {
    throw new RangeError(`${name} must be a positive duration like 10m, 90s or 500ms: ${text}`);
  }
  return Number(match[1]) * UNITS[match[2]!]!;
}

function count(name: string, fallback: number, min: number): number {
  const text = process.env[name];
  const n = text == null || text === '' ? fallback : Number(text);
  if (!Number.isInteger(n) || n < min) throw new RangeError(`${name} must be an integer >= ${min}`);
  return n;
}

/** The item service: here a pause (REWARD_WORK_MS) and a row in reward_payment. */
async function giveItem(
  conn: Connection,
  job: RewardJob,
  worker: string,
  workMs: number,
  signal: AbortSignal,
): Promise<void> {
  if (workMs > 0) await sleep(workMs, undefined, { signal });
  await conn.query(
    `INSERT INTO reward_payment (job_no, uid, item_id, worker_id, paid_at)
     VALUES (?, ?, ?, ?, UTC_TIMESTAMP(3))`,
    [job.job_no, job.uid, job.item_id, worker],
  );
}

export default async function reward(ctx: JobContext): Promise<void> {
  const reclaimAfterMs = durationMs('REWARD_RECLAIM_AFTER', '10m');
  const batch = count('REWARD_BATCH', 10, 1);
  const workMs = count('REWARD_WORK_MS', 0, 0);
  const worker = `${ctx.fire.host}-${process.pid}`;
  const log = ctx.log.child({ workerId: worker });

  const reclaimed = await reclaimStale(ctx.db, queue, { olderThanMs: reclaimAfterMs });
  if (reclaimed > 0) log.warn({ reclaimed, reclaimAfterMs }, 'reclaimed rewards of a dead worker');

  let paid = 0;
  let alreadyPaid = 0;
  let claims = 0;
  for (;;) {
    if (ctx.signal.aborted) break;
    const claim = await claimRows<RewardJob>(ctx.db, { ...queue, worker, limit: batch });
    if (claim.rows.length === 0) break;
    claims++;
    const finished: number[] = [];
    try {
      for (const job of claim.rows) {
        if (ctx.signal.aborted) break;
        const r = await once(
          ctx.db,
          {
            ledger: 'reward_given',
            key: job.job_no,
            keyColumn: 'job_no',
            doneAtColumn: 'reg_date',
            values: { uid: job.uid },
          },
          (conn) => giveItem(conn, job, worker, workMs, ctx.signal),
        );
        if (r.done) paid++;
        else {
          alreadyPaid++;
          log.warn({ job: job.job_no }, 'already paid: not paying again');
        }
        finished.push(job.job_no);
      }
    } finally {
      // Done rows are marked done; the rest (stopped, or an error) go back to the queue now.
      const done =
        finished.length > 0
          ? await completeClaim(ctx.db, queue, claim, { ids: finished, idColumn: 'job_no' })
          : 0;
      if (done < finished.length) {
        log.warn(
          { lost: finished.length - done },
          'rows of this claim were reclaimed by another worker meanwhile: the reclaim bound is ' +
            'shorter than this worker held them',
        );
      }
      const unfinished = claim.rows.map((j) => j.job_no).filter((n) => !finished.includes(n));
      if (unfinished.length > 0) {
        await releaseClaim(ctx.db, queue, claim, { ids: unfinished, idColumn: 'job_no' });
      }
    }
  }
  log.info({ paid, alreadyPaid, reclaimed, claims }, 'rewards paid');
  ctx.signal.throwIfAborted();
}
