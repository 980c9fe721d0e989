/**
 * settle — seed 001, the nightly settlement that doubled.
 *
 * The batch was in the crontab of both redundant servers; both ran it and every daily total was
 * inserted twice. baton gives the fire to one runner (the seed's GET_LOCK, plus the fire key), but
 * a lock is prevention, not a guarantee: a dropped connection frees it, and an operator can run
 * the job again by hand. So the batch itself gives the same result however often it runs:
 *
 * - it settles the day before its FIRE (`ctx.scheduledAt`), never the day before the wall clock,
 *   so a late start, a retry or a second run after midnight settle the same day;
 * - it recomputes each (day, provider) total from the payments and writes it over the old one:
 *   `upsertSelect` with `set` semantics on the UNIQUE key `uk_date_provider (settle_date,
 *   provider_no)`. Twice gives the same rows, not twice the amounts; a payment recorded late is
 *   picked up by the next run. Without that key the helper refuses (MissingUniqueKeyError)
 *   instead of silently inserting a second set of rows.
 *
 * Tables: jobs/sql/settle.sql (and jobs/sql/settle.demo.sql for sample payments).
 *
 * Environment (job `env:` in schedules.yaml):
 *   SETTLE_TIMEZONE  the business day's time zone (IANA name, default UTC). Payments are stored
 *                    in UTC; the day runs from midnight to midnight in this zone.
 *   SETTLE_DAY       YYYY-MM-DD: settle this day instead of the day before the fire (a backfill
 *                    or a correction: `baton run settle` with the job's env changed).
 */
import type { RowDataPacket } from 'mysql2/promise';
import { upsertSelect, type JobContext } from 'baton-cron';

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

/** The calendar date of `at` in `timeZone`, as [year, month (1-12), day]. */
function dateIn(at: Date, timeZone: string): [number, number, number] {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
  }).formatToParts(at);
  const get = (type: string) => Number(parts.find((p) => p.type === type)?.value);
  return [get('year'), get('month'), get('day')];
}

/** How far `timeZone` is ahead of UTC at `at`, in ms. */
function offsetMs(at: Date, timeZone: string): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  }).formatToParts(at);
  const get = (type: string) => Number(parts.find((p) => p.type === type)?.value);
  const local = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'));
  return local + get('second') * 1000 - Math.floor(at.getTime() / 1000) * 1000;
}

/** The UTC instant of midnight at the start of `y-m-d` in `timeZone`. */
function midnight(y: number, m: number, d: number, timeZone: string): Date {
  const wall = Date.UTC(y, m - 1, d);
  let at = wall;
  // Twice: the offset at the guess may differ from the offset at the answer (a DST change).
  for (let i = 0; i < 2; i++) at = wall - offsetMs(new Date(at), timeZone);
  return new Date(at);
}

/** The day to settle and its [from, to) range in UTC. */
export function settlementDay(
  scheduledAt: Date,
  timeZone = 'UTC',
  override?: string,
): { day: string; from: Date; to: Date } {
  let y: number, m: number, d: number;
  if (override) {
    const match = DAY.exec(override);
    if (!match) throw new RangeError(`SETTLE_DAY must be YYYY-MM-DD, not ${override}`);
    [y, m, d] = [Number(match[1]), Number(match[2]), Number(match[3])];
    const check = new Date(Date.UTC(y, m - 1, d));
    if (check.getUTCMonth() !== m - 1 || check.getUTCDate() !== d) {
      throw new RangeError(`SETTLE_DAY is not a calendar day: ${override}`);
    }
  } else {
    // "Yesterday" of the fire: the fire's date in the business time zone, minus one day.
    const [fy, fm, fd] = dateIn(scheduledAt, timeZone);
    const prev = new Date(Date.UTC(fy, fm - 1, fd - 1));
    [y, m, d] = [prev.getUTCFullYear(), prev.getUTCMonth() + 1, prev.getUTCDate()];
  }
  const day = new Date(Date.UTC(y, m - 1, d)).toISOString().slice(0, 10);
  return { day, from: midnight(y, m, d, timeZone), to: midnight(y, m, d + 1, timeZone) };
}

export default async function settle(ctx: JobContext): Promise<void> {
  const timeZone = process.env.SETTLE_TIMEZONE || 'UTC';
  const { day, from, to } = settlementDay(ctx.scheduledAt, timeZone, process.env.SETTLE_DAY);
  ctx.log.info(
    { day, timeZone, from: from.toISOString(), to: to.toISOString() },
    'settling the day',
  );

  // One statement: the totals of the day, recomputed from the payments, written over the
  // previous ones on the unique key. `set` (the default for every non-key column) replaces.
  const result = await upsertSelect(ctx.db, {
    table: 'settle_daily',
    key: ['settle_date', 'provider_no'],
    columns: ['settle_date', 'provider_no', 'amount', 'txn_count', 'settled_at'],
    select: `SELECT ? AS settle_date, provider_no, SUM(amount) AS amount, COUNT(*) AS txn_count,
                    UTC_TIMESTAMP(3) AS settled_at
             FROM settle_txn WHERE paid_at >= ? AND paid_at < ?
             GROUP BY provider_no`,
    params: [day, from, to],
  });

  const [[summary]] = await ctx.db.query<RowDataPacket[]>(
    `SELECT COUNT(*) AS providers, COALESCE(SUM(amount), 0) AS amount, COALESCE(SUM(txn_count), 0) AS txns
     FROM settle_daily WHERE settle_date = ?`,
    [day],
  );
  ctx.log.info(
    {
      day,
      providers: Number(summary?.providers),
      amount: String(summary?.amount),
      txns: Number(summary?.txns),
      affectedRows: result.affectedRows,
    },
    'settled',
  );
}
