/**
 * An example module job. The default export receives the run's context: the fire it belongs to
 * (scheduledAt is the cron instant, the same on every host), a logger bound to the run, and an
 * AbortSignal that fires when the run must stop.
 */
import type { JobContext } from 'baton-cron';

export default async function report(ctx: JobContext): Promise<void> {
  // Compute the period from the fire, never from the clock: a late or retried run reports the
  // same five minutes.
  const end = ctx.scheduledAt;
  const start = new Date(end.getTime() - 5 * 60_000);
  ctx.log.info(
    { from: start.toISOString(), to: end.toISOString() },
    'reporting the last five minutes',
  );
}
