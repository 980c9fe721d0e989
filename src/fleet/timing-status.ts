/**
 * What `baton status` says of the fleet's timing versions (store/timings.ts; the rule is
 * schedule/timing-switch.ts): a live runner that holds a job because its file has an older
 * timing than the one in force (`held`, critical: nothing of that job runs there, and if no
 * runner has the new file nothing runs at all), and a change still to come (`timing-switch`,
 * informational, or `switch-anomaly`, a warning, where its day runs the job twice or skips it).
 * Pure.
 */
import { parseSchedule } from '../schedule/cron.js';
import { switchAnomaly } from '../schedule/timing-switch.js';
import type { RunnerRecord } from '../store/runners.js';
import type { TimingRecord } from '../store/timings.js';
import type { Warning } from './check-state.js';

/** The version in force at `now`: the newest by number whose instant has come. */
export function versionInForce(records: readonly TimingRecord[], now: Date): TimingRecord | null {
  let inForce: TimingRecord | null = null;
  for (const r of records) {
    if (r.effectiveAt.getTime() <= now.getTime() && (!inForce || r.version > inForce.version)) {
      inForce = r;
    }
  }
  return inForce;
}

/** Whether `r` never takes effect: a newer version does at or before its instant. */
export function superseded(r: TimingRecord, records: readonly TimingRecord[]): boolean {
  return records.some(
    (o) => o.version > r.version && o.effectiveAt.getTime() <= r.effectiveAt.getTime(),
  );
}

/** The version in force just before `to` takes effect (of those numbered below it). */
export function versionBefore(
  records: readonly TimingRecord[],
  to: Pick<TimingRecord, 'version' | 'effectiveAt'>,
): TimingRecord | null {
  return versionInForce(
    records.filter((r) => r.version < to.version),
    new Date(to.effectiveAt.getTime() - 1),
  );
}

/**
 * The switches still to come: each version whose instant is ahead and that no newer version
 * supersedes, with the version in force just before it (not the one in force now: with two
 * pending, the second switches from the first).
 */
export function pendingSwitches(
  records: readonly TimingRecord[],
  now: Date,
): { from: TimingRecord | null; to: TimingRecord }[] {
  return records
    .filter((r) => r.effectiveAt.getTime() > now.getTime() && !superseded(r, records))
    .map((to) => ({ from: versionBefore(records, to), to }));
}

/** A timing as a sentence: `"5-59/10 * * * * *" (UTC)`. */
export function describeTiming(r: Pick<TimingRecord, 'schedule' | 'timezone'>): string {
  return `"${r.schedule}" (${r.timezone})`;
}

export function timingWarnings(
  live: readonly RunnerRecord[],
  timings: ReadonlyMap<string, readonly TimingRecord[]>,
  now: Date,
): Warning[] {
  const warnings: Warning[] = [];
  for (const [job, records] of [...timings].sort(([a], [b]) => a.localeCompare(b))) {
    const inForce = versionInForce(records, now);
    if (inForce) {
      const behind = live.filter((r) => {
        const own = r.jobs.get(job)?.timingVersion;
        return own != null && own < inForce.version && !r.jobs.get(job)?.disabled;
      });
      if (behind.length > 0) {
        const hosts = behind.map((r) => r.host).sort();
        const own = behind.map((r) => `${r.host}: version ${r.jobs.get(job)!.timingVersion}`);
        warnings.push({
          kind: 'held',
          job,
          hosts,
          message:
            `job "${job}" is held on ${hosts.join(', ')}: the fleet fires it by timing version ` +
            `${inForce.version}, ${describeTiming(inForce)}, since ` +
            `${inForce.effectiveAt.toISOString()}, and ${own.join('; ')} is older; load the ` +
            'new schedules file there (baton definitions shows the versions)',
        });
      }
    }
    for (const { from, to } of pendingSwitches(records, now)) {
      const anomaly =
        from &&
        switchAnomaly(
          parseSchedule(from.schedule, from.timezone),
          parseSchedule(to.schedule, to.timezone),
          to.effectiveAt,
        );
      const what =
        `job "${job}" switches to timing version ${to.version}, ${describeTiming(to)}, at ` +
        `${to.effectiveAt.toISOString()}` +
        (from ? ` (from version ${from.version}, ${describeTiming(from)})` : '');
      warnings.push(
        anomaly
          ? {
              kind: 'switch-anomaly',
              job,
              message:
                `${what}: ${anomaly.day} runs it ${anomaly.fires.length} time(s) ` +
                `(${anomaly.kind === 'twice' ? 'more' : 'fewer'} than either timing's ` +
                `${anomaly.oldCount} and ${anomaly.newCount}); choose another instant with ` +
                'baton definitions apply --at',
            }
          : { kind: 'timing-switch', job, message: what },
      );
    }
  }
  return warnings;
}
