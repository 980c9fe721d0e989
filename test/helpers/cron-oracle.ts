/**
 * An independent cron evaluator, to judge baton's fire times (src/schedule/cron.ts, over croner)
 * by brute force: it walks real instants one by one (minutes, or seconds for a 6-field
 * expression), reads each on the zone's wall clock (the tz database through Intl: the reference
 * is the zone's history, not a cron library), and decides from the rules alone whether it is a
 * fire. It shares no code with baton and does not import croner.
 *
 * The rules, as docs/schedules.md states them after cron(8) and crontab(5) (Vixie cron):
 * - fields [second] minute hour day-of-month month day-of-week; `*`, `a`, `a-b`, `*\/n`, `a-b/n`,
 *   `a/n`, lists; names JAN–DEC and SUN–SAT; day-of-week 7 is Sunday; `?` is `*` in the day
 *   fields; `L`, `LW`, `nW` in day-of-month, `nL`, `DAY#k`, `DAY#L` in day-of-week (Quartz);
 * - day-of-month and day-of-week: when both are restricted (neither starts with `*` or `?`), a
 *   day matches if either does; otherwise it must match both;
 * - daylight saving: an expression is fixed-time when none of its second, minute and hour fields
 *   starts with `*`. A fixed-time wall time inside a gap (spring forward) fires once, at the first
 *   real instant after the gap, however many of its wall times the gap swallowed; one that
 *   occurs twice (fall back) fires at its first occurrence only. Any other expression fires at
 *   every real instant whose wall clock matches.
 */

const NICKNAMES: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};
const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

interface Wall {
  second: number;
  minute: number;
  hour: number;
  day: number;
  month: number;
  weekday: number;
  lastDay: number;
}

interface Expression {
  seconds: boolean;
  fixedTime: boolean;
  matches: (wall: Wall) => boolean;
}

function number(text: string, names: string[] | null, offset: number): number {
  const upper = text.toUpperCase();
  const named = names?.indexOf(upper) ?? -1;
  if (named >= 0) return named + offset;
  if (!/^\d+$/.test(text)) throw new Error(`oracle: not a number: ${text}`);
  return Number(text);
}

/** The plain values of a field (lists, ranges, steps, names). */
function values(field: string, min: number, max: number, names: string[] | null, offset = 0) {
  const set = new Set<number>();
  for (const part of field.split(',')) {
    const [range, stepText] = part.split('/');
    const step = stepText == null ? 1 : Number(stepText);
    let from: number;
    let to: number;
    if (range === '*' || range === '?') [from, to] = [min, max];
    else if (range!.includes('-')) {
      const [a, b] = range!.split('-');
      [from, to] = [number(a!, names, offset), number(b!, names, offset)];
    } else {
      from = number(range!, names, offset);
      to = stepText == null ? from : max;
    }
    for (let v = from; v <= to; v += step) set.add(v);
  }
  return set;
}

function weekdayOf(day: number, wall: Wall): number {
  return (wall.weekday - (wall.day - day) + 35) % 7;
}

/** Quartz's `nW`: the weekday nearest day n of the month, never in another month. */
function nearestWeekday(n: number, wall: Wall): number {
  const day = Math.min(n, wall.lastDay);
  const weekday = weekdayOf(day, wall);
  if (weekday === 6) return day === 1 ? 3 : day - 1;
  if (weekday === 0) return day === wall.lastDay ? day - 2 : day + 1;
  return day;
}

function dayOfMonthMatcher(field: string): (wall: Wall) => boolean {
  const tests = field.split(',').map((part): ((w: Wall) => boolean) => {
    const upper = part.toUpperCase();
    if (upper === 'L') return (w) => w.day === w.lastDay;
    if (upper === 'LW') return (w) => w.day === nearestWeekday(w.lastDay, w);
    const weekday = /^(\d+)W$/.exec(upper);
    if (weekday) return (w) => w.day === nearestWeekday(Number(weekday[1]), w);
    const set = values(part, 1, 31, null);
    return (w) => set.has(w.day);
  });
  return (w) => tests.some((t) => t(w));
}

function dayOfWeekMatcher(field: string): (wall: Wall) => boolean {
  const tests = field.split(',').map((part): ((w: Wall) => boolean) => {
    const upper = part.toUpperCase();
    const nth = /^(\w+)#(\d|L)$/.exec(upper);
    const last = nth?.[2] === 'L' ? nth[1] : /^(\w+)L$/.exec(upper)?.[1];
    if (last != null) {
      const day = number(last, DAYS, 0) % 7;
      return (w) => w.weekday === day && w.day + 7 > w.lastDay;
    }
    if (nth) {
      const day = number(nth[1]!, DAYS, 0) % 7;
      return (w) => w.weekday === day && Math.ceil(w.day / 7) === Number(nth[2]);
    }
    const set = new Set([...values(part, 0, 7, DAYS)].map((d) => d % 7));
    return (w) => set.has(w.weekday);
  });
  return (w) => tests.some((t) => t(w));
}

export function parseOracle(text: string): Expression {
  const expanded = NICKNAMES[text.trim().toLowerCase()] ?? text.trim();
  const fields = expanded.split(/\s+/);
  const seconds = fields.length === 6;
  const [sec, min, hour, dom, month, dow] = seconds ? fields : ['0', ...fields];
  const sets = {
    second: values(sec!, 0, 59, null),
    minute: values(min!, 0, 59, null),
    hour: values(hour!, 0, 23, null),
    month: values(month!, 1, 12, MONTHS, 1),
  };
  const domMatch = dayOfMonthMatcher(dom!);
  const dowMatch = dayOfWeekMatcher(dow!);
  const unrestricted = (f: string) => f.startsWith('*') || f.startsWith('?');
  const both = unrestricted(dom!) || unrestricted(dow!);
  return {
    seconds,
    fixedTime: [sec!, min!, hour!].every((f) => !f.startsWith('*')),
    matches: (w) =>
      sets.second.has(w.second) &&
      sets.minute.has(w.minute) &&
      sets.hour.has(w.hour) &&
      sets.month.has(w.month) &&
      (both ? domMatch(w) && dowMatch(w) : domMatch(w) || dowMatch(w)),
  };
}

/** One Intl formatter per zone. */
const formatters = new Map<string, Intl.DateTimeFormat>();
/** Intl's answers: UTC offsets per zone, by the UTC minute's number. */
const answers = new Map<string, Map<number, number>>();

/** The zone's UTC offset at a UTC minute, as Intl gives it (remembered). */
export function intlOffset(zone: string, minuteMs: number): number {
  let known = answers.get(zone);
  if (!known) answers.set(zone, (known = new Map()));
  const offset = known.get(minuteMs);
  if (offset != null) return offset;
  let format = formatters.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
    });
    formatters.set(zone, format);
  }
  const p = Object.fromEntries(format.formatToParts(minuteMs).map((x) => [x.type, x.value]));
  const wall = Date.UTC(+p.year!, +p.month! - 1, +p.day!, +p.hour!, +p.minute!);
  known.set(minuteMs, wall - minuteMs);
  return wall - minuteMs;
}

const HOUR_MS = 3_600_000;

/**
 * The zone's UTC offset at a UTC minute. Intl is asked at the hours around it, and at the minute
 * itself only when those differ: an offset changes at most once within an hour in any zone
 * (tzdata's changes are months apart), so an hour that starts and ends at one offset has it
 * throughout. Asking Intl at every minute of the four-month walks was most of this file's time.
 */
function offsetAt(zone: string, minuteMs: number): number {
  const hour = Math.floor(minuteMs / HOUR_MS) * HOUR_MS;
  const atHour = intlOffset(zone, hour);
  return atHour === intlOffset(zone, hour + HOUR_MS) ? atHour : intlOffset(zone, minuteMs);
}

/** The wall clock at a real instant, as milliseconds of a UTC date with the same fields. */
function wallAt(zone: string, at: number): number {
  const minute = Math.floor(at / 60_000) * 60_000;
  return at + offsetAt(zone, minute);
}

function fields(wallMs: number): Wall {
  const d = new Date(wallMs);
  const month = d.getUTCMonth() + 1;
  return {
    second: d.getUTCSeconds(),
    minute: d.getUTCMinutes(),
    hour: d.getUTCHours(),
    day: d.getUTCDate(),
    month,
    weekday: d.getUTCDay(),
    lastDay: new Date(Date.UTC(d.getUTCFullYear(), month, 0)).getUTCDate(),
  };
}

/** Every fire of `text` in `zone` in [from, to], by the rules above. */
export function oracleFires(text: string, zone: string, from: Date, to: Date): Date[] {
  const expression = parseOracle(text);
  const step = expression.seconds ? 1_000 : 60_000;
  const start = Math.ceil(from.getTime() / step) * step;
  const out: Date[] = [];
  let latestWall = wallAt(zone, start - step);
  for (let at = start; at <= to.getTime(); at += step) {
    const wall = wallAt(zone, at);
    let fire: boolean;
    if (!expression.fixedTime) fire = expression.matches(fields(wall));
    else if (wall > latestWall + step) {
      // A gap: the wall times it swallowed, and this one, fire once, now.
      fire = false;
      for (let w = latestWall + step; w <= wall && !fire; w += step) {
        fire = expression.matches(fields(w));
      }
    } else fire = wall > latestWall && expression.matches(fields(wall));
    if (fire) out.push(new Date(at));
    latestWall = Math.max(latestWall, wall);
  }
  return out;
}

/**
 * The fires of a compound timing (src/schedule/compound.ts's grammar, as docs/schedules.md states
 * it) in [from, to], judged independently: a list is the union of `oracleFires` of its
 * expressions; `@every P [anchor A]` is every real second t with (t − A) divisible by P, found by
 * walking the seconds (not by arithmetic on k); `@at` its instants; the bounds filter the union
 * (`until` inclusive), and `max N` keeps the first N from `from`. Instants are written with `Z`.
 */
export function oracleTimingFires(text: string, zone: string, from: Date, to: Date): Date[] {
  const [body, ...bounds] = text.split(';').map((s) => s.trim());
  const bound = (word: string) =>
    bounds.find((b) => b.startsWith(`${word} `))?.slice(word.length + 1);
  const first = bound('from') ? Date.parse(bound('from')!) : -Infinity;
  const last = bound('until') ? Date.parse(bound('until')!) : Infinity;
  const max = bound('max') ? Number(bound('max')) : Infinity;
  // `max` counts from `from`: walk from there, however early the window starts.
  const walkFrom = Number.isFinite(max) ? first : Math.max(from.getTime(), first);
  const walkTo = Math.min(to.getTime(), last);
  const all = new Set<number>();
  for (const part of body!.split('|').map((p) => p.trim())) {
    const every = /^@every (\d+)([smhd])(?: anchor (\S+))?$/.exec(part);
    if (every) {
      const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[every[2] as 's'];
      const period = Number(every[1]) * unit;
      const anchor = every[3] ? Date.parse(every[3]) : 0;
      for (let t = Math.ceil(walkFrom / 1_000) * 1_000; t <= walkTo; t += 1_000) {
        if ((((t - anchor) % period) + period) % period === 0) all.add(t);
      }
    } else if (part.startsWith('@at ')) {
      for (const v of part.slice(4).split(',')) all.add(Date.parse(v.trim()));
    } else {
      for (const d of oracleFires(part, zone, new Date(walkFrom), new Date(walkTo))) {
        all.add(d.getTime());
      }
    }
  }
  const sorted = [...all].filter((t) => t >= walkFrom && t <= walkTo).sort((a, b) => a - b);
  return sorted
    .slice(0, Number.isFinite(max) ? max : undefined)
    .filter((t) => t >= from.getTime() && t <= to.getTime())
    .map((t) => new Date(t));
}

/** The hours of 2027 at which `zone`'s offset changes (a quiet day for zones without). */
export function transitions2027(zone: string): number[] {
  const found: number[] = [];
  let previous = intlOffset(zone, Date.UTC(2027, 0, 1));
  for (let at = Date.UTC(2027, 0, 1) + HOUR_MS; at < Date.UTC(2028, 0, 1); at += HOUR_MS) {
    const now = intlOffset(zone, at);
    if (now !== previous) found.push(at);
    previous = now;
  }
  return found.length > 0 ? found : [Date.UTC(2027, 2, 14, 6)];
}

/** Every fire of `schedule` in [from, to] (by its `nextAfter`: what a runner's loop asks). */
export function firesWithin(
  schedule: { nextAfter(after: Date): Date | null },
  from: Date,
  to: Date,
): Date[] {
  const out: Date[] = [];
  for (
    let at = schedule.nextAfter(new Date(from.getTime() - 1));
    at && at <= to;
    at = schedule.nextAfter(at)
  ) {
    out.push(at);
  }
  return out;
}

/**
 * The fires of a timing with calendar clauses (src/schedule/calendar.ts's grammar, as
 * docs/schedules.md states it) in [from, to], judged independently: the fires of the timing
 * without its clauses and bounds (`oracleTimingFires`, walked `reachDays` wider for `shift`); a
 * fire is excluded when its wall date (the oracle's own offsets) is on a `skip` day or range or
 * its instant in a `skip` span, or on none of the `only` items; with `shift`, an excluded fire
 * moves to the same wall time of the nearest day (up to `reachDays` away) whose instant is not
 * excluded — a wall time the clocks skip read as the moment the clock jumps — and each
 * instant counts once; then `from` and `until` cut. Wall-time spans and `max` are not judged here.
 */
export function oracleCalendarFires(
  text: string,
  zone: string,
  from: Date,
  to: Date,
  reachDays = 2,
): Date[] {
  const pieces = text.split(';').map((s) => s.trim());
  const clauses = pieces.filter((p) => /^(skip|only|shift)\b/.test(p));
  const bounds = pieces.slice(1).filter((p) => /^(from|until)\b/.test(p));
  const bound = (word: string) =>
    bounds.find((b) => b.startsWith(`${word} `))?.slice(word.length + 1);
  const first = bound('from') ? Date.parse(bound('from')!) : -Infinity;
  const last = bound('until') ? Date.parse(bound('until')!) : Infinity;
  const shift = clauses.find((c) => c.startsWith('shift '))?.slice(6) ?? 'none';
  const itemsOf = (word: string) =>
    clauses.filter((c) => c.startsWith(`${word} `)).flatMap((c) => c.split(/\s+/).slice(2));
  const skips = itemsOf('skip');
  const onlys = itemsOf('only');
  const hasOnly = clauses.some((c) => c.startsWith('only '));
  const dayOf = (t: number) => new Date(wallAt(zone, t)).toISOString().slice(0, 10);
  const covers = (item: string, t: number): boolean => {
    if (item.includes('/')) {
      const [a, b] = item.split('/').map((v) => Date.parse(v));
      return t >= a! && t < b!;
    }
    const [a, b = a] = item.split('..');
    const day = dayOf(t);
    return day >= a! && day <= b!;
  };
  const allowed = (t: number) =>
    !skips.some((i) => covers(i, t)) && (!hasOnly || onlys.some((i) => covers(i, t)));
  const reach = shift === 'none' ? 0 : reachDays * 86_400_000;
  const base = oracleTimingFires(
    pieces[0]!,
    zone,
    new Date(from.getTime() - reach),
    new Date(to.getTime() + reach),
  );
  const out = new Set<number>();
  for (const d of base) {
    const t = d.getTime();
    if (allowed(t)) out.add(t);
    else if (shift !== 'none') {
      const wall = wallAt(zone, t);
      for (let k = 1; k <= reachDays; k++) {
        const target = wall + (shift === 'next' ? k : -k) * 86_400_000;
        const moved = instantOfWallOracle(zone, target);
        if (allowed(moved)) {
          out.add(moved);
          break;
        }
      }
    }
  }
  return [...out]
    .filter((t) => t >= from.getTime() && t <= to.getTime() && t >= first && t <= last)
    .sort((a, b) => a - b)
    .map((t) => new Date(t));
}

/**
 * The instant whose wall clock in `zone` is `wall` (a UTC date with the wall's fields): of the
 * instants `wall − o` for every quarter-hour offset o within ±15 h, the earliest that reads
 * `wall`; none (a gap): the first whole minute from 15 hours before that reads later than it.
 */
function instantOfWallOracle(zone: string, wall: number): number {
  const QUARTER = 15 * 60_000;
  for (let o = 15 * 60 * 60_000; o >= -15 * 60 * 60_000; o -= QUARTER) {
    const t = wall - o;
    if (wallAt(zone, t) === wall) return t;
  }
  let t = Math.floor((wall - 15 * HOUR_MS) / 60_000) * 60_000;
  while (wallAt(zone, t) <= wall) t += 60_000;
  return t;
}

/** Five-field expressions: every field form, fixed-time and every-match (the oracle tests'). */
export const FIVE_FIELD_EXPRESSIONS = [
  '0 2 * * *',
  '30 2 * * *',
  '15 1 * * *',
  '45 1 * * *',
  '0 0-23/2 * * *',
  '23 0-23/2 * * *',
  '5-50/10 2 * * *',
  '0 2,*/12 * * *',
  '0,30 1-3 * * *',
  '*/15 * * * *',
  '30 * * * *',
  '0 */2 * * *',
  '15 */3 * * *',
  '0 0 * * *',
  '30 23 * * *',
  '0 3 * * SUN',
  '0 2 * * sun-sat',
  '0 12 */2 * MON',
  '0 1 1-7 * SUN',
  '@daily',
  '@hourly',
  '@midnight',
];
