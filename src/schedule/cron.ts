/**
 * Fire-time maths over croner: pure functions of (expression, time zone, instant).
 *
 * A fire's instant is computed from the expression, never taken from the moment a timer happened
 * to wake: every host computes the same `scheduled_at` for the same fire, which is what makes the
 * unique fire key in `baton_runs` work across hosts (docs/design.md, "Guarantees": one winner per
 * fire; the protocol itself is in the header of src/coordination/fire-protocol.ts).
 *
 * The Cron objects are created paused and without a callback, so croner never starts a timer of
 * its own; the daemon has one loop for all jobs (`src/schedule/fire-schedule.ts`). Used that way a
 * Cron is a calculator without state (it remembers a run only when it triggers one), so every
 * job with the same expression and time zone shares one (see `calculatorFor`).
 *
 * Daylight saving time (docs/schedules.md, Vixie cron's cron(8)): a fixed-time expression (none
 * of its second, minute and hour fields starts with `*`) in a skipped hour runs once at the first
 * instant after the gap, and in a repeated hour once at its first occurrence; any other expression
 * fires at every instant its wall clock matches. croner decides fixed-time by its own rules, so
 * baton decides it from the expression text (`isFixedTime`) and tells croner (`newCron`).
 */
import { Cron } from 'croner';
import { isCompound, parseCompound } from './compound.js';

import type { Schedule } from './schedule.js';

export type { Schedule } from './schedule.js';

/**
 * Parses `expression` for `timezone`. Throws an Error with a plain message for an invalid
 * expression or time zone; config validation turns that into a located problem.
 */
export function parseSchedule(expression: string, timezone: string): Schedule {
  // Several expressions, an interval, instants, bounds: schedule/compound.ts.
  if (isCompound(expression)) {
    assertTimeZone(timezone);
    return parseCompound(expression, timezone, (part) => parseSchedule(part, timezone));
  }
  const calculator = calculatorFor(expression, timezone);
  return {
    expression,
    timezone,
    nextAfter: (after) => calculator.nextAfter(after),
    nextN: (count, after) => calculator.cron.nextRuns(count, after),
  };
}

/** Throws for a time zone that the runtime's IANA database does not know. */
export function assertTimeZone(timezone: string): void {
  if (knownTimeZones.has(timezone)) return;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    throw new Error(`unknown time zone "${timezone}" (use an IANA name such as Asia/Seoul or UTC)`);
  }
  knownTimeZones.add(timezone);
}

/**
 * Time zones already found valid. Asking ICU costs a DateTimeFormat each time, whose native
 * memory the allocator keeps after the object is collected, and config validation asks once per
 * job: checked once per zone, that cost does not grow with the number of jobs (figures in
 * bench/README.md).
 */
const knownTimeZones = new Set<string>();

/**
 * The croner Cron of one (expression, time zone), shared by every job that has them, and the
 * last instant it was asked for. Jobs on one expression ask the same question in a row: at
 * start-up (each job's first fire after now) and whenever they fire together (each one's next
 * fire after this one). An answer from croner is not cheap, and jobs that fire together would
 * each ask for it while holding up the event loop at the fire: the last answer is kept, so N jobs
 * on one expression cost one answer per fire (figures in bench/README.md).
 */
export class Calculator {
  private lastAfter = NaN;
  private lastNext: number | null = null;

  constructor(readonly cron: Cron) {}

  nextAfter(after: Date): Date | null {
    const at = after.getTime();
    if (at !== this.lastAfter) {
      this.lastNext = this.cron.nextRun(after)?.getTime() ?? null;
      this.lastAfter = at;
    }
    // A Date of its own for each caller: a Date is mutable, and jobs must not share one.
    return this.lastNext == null ? null : new Date(this.lastNext);
  }
}

/**
 * The calculators in use, by time zone and expression. Weak: a calculator lives as long as a
 * Schedule holds it, so a config reload that drops an expression drops its Cron too.
 */
const calculators = new Map<string, WeakRef<Calculator>>();
const forgetCalculator = new FinalizationRegistry<string>((key) => {
  // The key may already name a newer calculator for the same expression: keep that one.
  if (calculators.get(key)?.deref() === undefined) calculators.delete(key);
});

/**
 * The one calculator for (expression, time zone). Sharing matters at scale: 1,000 jobs on one
 * expression cost one Cron, not 1,000 (bench/README.md has the figures). Ask its Cron for
 * instants only: a Cron that ran a callback (`schedule`, `trigger`) remembers that run and would
 * answer differently for every job that shares it.
 */
export function calculatorFor(expression: string, timezone: string): Calculator {
  const key = JSON.stringify([timezone, expression]);
  const known = calculators.get(key)?.deref();
  if (known) return known;
  const calculator = new Calculator(newCron(expression, timezone));
  calculators.set(key, new WeakRef(calculator));
  forgetCalculator.register(calculator, key);
  return calculator;
}

/**
 * How baton asks croner to read an expression (every option but the time zone and
 * `domAndDow`, which depends on the expression: `cronOptionsFor`).
 */
export const CRON_OPTIONS = {
  paused: true,
  // 5 fields (minute precision) or 6 with seconds first; nicknames such as @daily are accepted
  // by croner in every mode.
  mode: '5-or-6-parts',
  // Which expressions are fixed-time on DST nights is decided by baton (`isFixedTime`), not by
  // this rule: croner's 'no-wildcard' counts any field containing `*` or `/` as every-match, so
  // `0 0-23/2 * * *` or `0 2,*/12 * * *` would lose or repeat fires. `newCron` overrides it.
  fixedTimeRule: 'no-wildcard',
} as const;

/** The options of the Cron for `expression` in `timezone` (exported for the tests). */
export function cronOptionsFor(expression: string, timezone: string) {
  return { ...CRON_OPTIONS, domAndDow: daysMatchBoth(expression), timezone };
}

function newCron(expression: string, timezone: string): Cron {
  assertTimeZone(timezone);
  refuseForeignSyntax(expression);
  let cron: Cron;
  try {
    cron = new Cron(expression, cronOptionsFor(expression, timezone));
  } catch (err) {
    const detail = err instanceof Error ? asWritten(err.message) : String(err);
    throw new Error(`invalid cron expression "${expression}": ${detail}`, { cause: err });
  }
  if (cron.nextRun(new Date()) == null) {
    throw new Error(`"${expression}" never fires`);
  }
  setFixedTime(cron, isFixedTime(expression));
  shareYearTable(cron);
  return cron;
}

/** The fields of a non-nickname expression, seconds first (0 for a 5-field one). */
function fieldsOf(expression: string): string[] | null {
  const text = expression.trim();
  if (text.startsWith('@')) return null;
  const fields = text.split(/\s+/);
  return fields.length === 5 ? ['0', ...fields] : fields;
}

/**
 * Day-of-month with day-of-week, as Vixie cron's code and crontab(5) have it: "if both fields
 * are restricted (i.e., don't start with *), the command will be run when either field matches";
 * otherwise a day must match both. So `0 12 1,15 * MON` runs on the 1st, the 15th and every
 * Monday, while `0 12 *\/2 * MON` runs on Mondays that are odd days of the month (`*\/2` starts
 * with `*`), where croner alone would OR them. `?` is "any" in those fields and counts as `*`.
 */
export function daysMatchBoth(expression: string): boolean {
  const fields = fieldsOf(expression);
  if (fields === null || fields.length !== 6) return true;
  const unrestricted = (field: string) => field.startsWith('*') || field.startsWith('?');
  return unrestricted(fields[3]!) || unrestricted(fields[5]!);
}

/**
 * croner accepts more than cron's syntax; baton refuses what its rules do not cover, so that
 * every accepted expression means what docs/schedules.md says:
 * - `?` (Quartz's "no specific value") only in day-of-month and day-of-week, where it means `*`;
 *   elsewhere croner reads it differently from Quartz, and `*` says it plainly;
 * - a `+` before day-of-week (croner's switch to AND the two day fields) is not needed: baton
 *   combines them by cron's rule (`daysMatchBoth`).
 */
function refuseForeignSyntax(expression: string): void {
  const fields = fieldsOf(expression);
  if (fields === null || fields.length !== 6) return;
  const names = ['second', 'minute', 'hour', 'day-of-month', 'month', 'day-of-week'];
  fields.forEach((field, i) => {
    if (field.includes('?') && i !== 3 && i !== 5) {
      throw new Error(
        `invalid cron expression "${expression}": \`?\` is only for day-of-month and ` +
          `day-of-week; write \`*\` in the ${names[i]} field`,
      );
    }
  });
  if (fields[5]!.includes('+')) {
    throw new Error(
      `invalid cron expression "${expression}": \`+\` in day-of-week is not cron syntax; ` +
        "day-of-month and day-of-week combine by cron's rule (docs/schedules.md)",
    );
  }
}

/**
 * Vixie cron's rule (cron(8); in its source a field starting with `*` is a "wild" field): an
 * expression is fixed-time when none of its second, minute and hour fields starts with `*`.
 * Lists, ranges and steps over a range (`0,30`, `1-3`, `0-23/2`, `2,*\/12`) are fixed times.
 * A 5-field expression has second 0 (fixed). `?` is refused in these fields
 * (`refuseForeignSyntax`). Nicknames are fixed except @hourly (`0 * * * *`).
 */
export function isFixedTime(expression: string): boolean {
  const fields = fieldsOf(expression);
  if (fields === null) return expression.trim().toLowerCase() !== '@hourly';
  return fields.slice(0, 3).every((field) => !field.startsWith('*') && !field.startsWith('?'));
}

/**
 * Tells croner baton's answer. croner reads the flag on its pattern (`_states.pattern.isFixedTime`,
 * croner 11) at every computation; when that shape changes, the oracle and DST tests say so.
 */
function setFixedTime(cron: Cron, fixed: boolean): void {
  const pattern = (cron as unknown as { _states?: { pattern?: { isFixedTime?: boolean } } })._states
    ?.pattern;
  if (pattern !== undefined && typeof pattern.isFixedTime === 'boolean') {
    pattern.isFixedTime = fixed;
  }
}

/**
 * croner names a bad day-of-month or month by its zero-based index ("day: 31" for 32): name the
 * value as written instead.
 */
function asWritten(message: string): string {
  return message
    .replace(/^CronPattern:\s*/, '')
    .replace(
      /^Invalid value for (day|month): (-?\d+)$/,
      (_all, field: string, index: string) =>
        `invalid value for ${field === 'day' ? 'day-of-month' : 'month'}: ${Number(index) + 1}`,
    );
}

/**
 * Every croner pattern carries a table of the years 0–9999 (10,000 numbers, 80 KiB: most of a
 * Cron's memory). Baton's expressions have no year field, so every table holds the same "any
 * year" ones; they are swapped for one frozen table shared by all. The swap keeps the contents
 * exactly, so the maths cannot change; frozen, a write by croner would throw rather than change
 * another schedule. The table sits in croner's internals (`_states.pattern.year`, croner 11):
 * when that shape changes this does nothing and test/unit/fire-schedule.test.ts says so.
 */
function shareYearTable(cron: Cron): void {
  const pattern = (cron as unknown as { _states?: { pattern?: { year?: unknown } } })._states
    ?.pattern;
  if (pattern !== undefined && isAnyYear(pattern.year)) pattern.year = ANY_YEAR;
}

const ANY_YEAR: readonly number[] = Object.freeze(new Array<number>(10_000).fill(1));

function isAnyYear(table: unknown): boolean {
  if (!Array.isArray(table) || table.length !== ANY_YEAR.length) return false;
  for (const allowed of table) if (allowed !== 1) return false;
  return true;
}
