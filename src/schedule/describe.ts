/**
 * A cron expression in words ("At 03:00", "Every 5 minutes") for `baton list`, via cronstrue.
 * Words describe the expression in the job's own time zone, which is printed next to it.
 */
import cronstrue from 'cronstrue';
import { shortTiming } from './calendar.js';
import { isCompound } from './compound.js';
import { daysMatchBoth } from './cron.js';

export function describeSchedule(expression: string): string {
  // Several expressions, an interval, instants, bounds (compound.ts): each part in words.
  if (isCompound(expression)) {
    const [body = '', ...bounds] = expression.split(';').map((p) => p.trim());
    const parts = body.split('|').map((p) => p.trim());
    const words = parts.map((p) => (/^@(every|at)\b/i.test(p) ? p.slice(1) : describeSchedule(p)));
    return shortTiming([words.join('; or '), ...bounds].join('; '));
  }
  let words: string;
  try {
    words = cronstrue.toString(expression, { use24HourTimeFormat: true, verbose: false });
  } catch {
    // cronstrue is stricter than croner for a few forms; the expression itself is still valid.
    return expression;
  }
  // cronstrue joins two restricted day fields with "and on", cron's OR; where baton ANDs them
  // (`0 12 */2 * MON`, docs/schedules.md) the words must say so.
  return daysMatchBoth(expression) ? words.replace(/, and on (.+)$/, ', only if it is $1') : words;
}
