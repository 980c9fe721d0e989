/**
 * A manual run's fire (`baton run`, the write API's run now) is the moment it was triggered
 * (database time). Cron instants are whole seconds, so a manual instant is moved off a whole
 * second (by 1 ms, in the rare case it falls on one): otherwise a manual run at exactly
 * 03:00:00.000 would share the 03:00 fire's key, and the scheduled fire would be recorded as
 * "already ran".
 */
export function manualInstant(now: Date): Date {
  return now.getUTCMilliseconds() === 0 ? new Date(now.getTime() + 1) : now;
}
