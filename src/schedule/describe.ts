/**
 * A cron expression in words ("At 03:00", "Every 5 minutes") for `baton list`, via cronstrue.
 * Words describe the expression in the job's own time zone, which is printed next to it.
 */
import cronstrue from 'cronstrue';

export function describeSchedule(expression: string): string {
  try {
    return cronstrue.toString(expression, { use24HourTimeFormat: true, verbose: false });
  } catch {
    // cronstrue is stricter than croner for a few forms; the expression itself is still valid.
    return expression;
  }
}
