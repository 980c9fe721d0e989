/**
 * Schedule drift, the `schedule-drift` warnings of `baton status` (see status.ts): whether the
 * live runners agree on each job's definition — by the fingerprints they registered
 * (`baton_runners.schedule`, decoded in store/runners.ts) — and, with the local schedules file,
 * whether they run what it says; and whether runners with one definition compute the same next
 * fires from it (`instantsDrift`: their Node versions may carry different time-zone data). Pure.
 */
import { jobFingerprint } from '../config/fingerprint.js';
import type { Config } from '../config/schema.js';
import type { RunnerRecord } from '../store/runners.js';

/** A `Warning` of status.ts, of kind `schedule-drift`. */
export interface DriftWarning {
  kind: 'schedule-drift';
  message: string;
  job: string;
  /** The live runners, all of them. */
  hosts: string[];
}

/**
 * One warning per job the fleet does not agree on: live runners that loaded different
 * definitions (fingerprints) of it, or only some of them; and, with the local schedules file
 * (`config`), a job whose definition there is not the one the live runners run, a job they run
 * that is not in it, and an enabled job of it that no live runner loaded. The message groups the
 * hosts by definition and names "this file" beside them.
 */
export function driftWarnings(
  live: RunnerRecord[],
  config: Pick<Config, 'jobs' | 'file'> | null = null,
): DriftWarning[] {
  const hosts = live.map((r) => r.host).sort();
  const inFile = new Map(
    config?.jobs.map((j) => [j.name, { print: jobFingerprint(j, config.file), job: j }]),
  );
  const names = new Set<string>(inFile.keys());
  for (const r of live) for (const job of r.jobs.keys()) names.add(job);
  const warnings: DriftWarning[] = [];
  for (const job of [...names].sort()) {
    const byPrint = new Map<string, string[]>();
    const without: string[] = [];
    for (const r of live) {
      const print = r.jobs.get(job)?.fingerprint;
      if (print == null) without.push(r.host);
      else byPrint.set(print, [...(byPrint.get(print) ?? []), r.host]);
    }
    const local = config ? (inFile.get(job) ?? null) : undefined;
    const warn = (what: string, parts: string[] = []) =>
      warnings.push({
        kind: 'schedule-drift',
        message: `schedule drift for job "${job}": ${what}${parts.length ? `: ${parts.join('; ')}` : ''}`,
        job,
        hosts,
      });

    const instants = instantsDrift(job, live);
    if (instants) warn(instants);

    if (byPrint.size === 0) {
      // Only in the local file (names come from the file or from some runner).
      if (local?.job.enabled) {
        warn(
          `it is in ${config!.file} but no live runner loaded it` +
            (hosts.length > 0 ? ` (live: ${hosts.join(', ')})` : ' (no runner is alive)'),
        );
      }
      continue;
    }
    const agreed = byPrint.size === 1 && without.length === 0;
    if (agreed && (local === undefined || local?.print === [...byPrint.keys()][0])) continue;

    // "this file (path)" the first time a part names it, "this file" after.
    const mention = { named: false };
    const thisFile = () => {
      if (mention.named || !config) return 'this file';
      mention.named = true;
      return `this file (${config.file})`;
    };
    const what =
      byPrint.size > 1
        ? 'the runners loaded different definitions of it'
        : without.length > 0
          ? 'only some runners loaded it'
          : local === null
            ? `the runners loaded it, but it is not in ${thisFile()}`
            : `${thisFile()} has a different definition than the runners loaded`;
    const parts = [...byPrint].map(
      ([print, on]) =>
        `definition ${print.slice(0, 8)} on ${on.join(', ')}` +
        (local?.print === print ? ` and in ${thisFile()}` : ''),
    );
    if (local && !byPrint.has(local.print)) {
      parts.push(`definition ${local.print.slice(0, 8)} in ${thisFile()}`);
    }
    if (without.length > 0) parts.push(`not loaded on ${without.join(', ')}`);
    if (local === null && !mention.named) parts.push(`not in ${thisFile()}`);
    warn(what, parts);
  }
  return warnings;
}

/**
 * Where live runners that loaded one definition of `job` compute different next fires from the
 * same anchor (schedule/upcoming.ts): the words of a drift warning, naming the runners and the
 * first fire that differs; null when they agree. Each of them would win a fire of its own. Only
 * lists counted from the same hour compare (for a registry tick after the hour turned, a runner
 * may still show the last hour's), and rows of runners that register none are left out.
 */
export function instantsDrift(job: string, live: RunnerRecord[]): string | null {
  // By definition and anchor: runners with different definitions differ for that reason.
  const groups = new Map<string, { after: string; runners: { host: string; at: string[] }[] }>();
  for (const r of live) {
    const loaded = r.jobs.get(job);
    if (!loaded?.next) continue;
    const key = `${loaded.fingerprint} ${loaded.next.after}`;
    const group = groups.get(key) ?? { after: loaded.next.after, runners: [] };
    group.runners.push({ host: r.host, at: loaded.next.at });
    groups.set(key, group);
  }
  for (const key of [...groups.keys()].sort()) {
    const { after, runners } = groups.get(key)!;
    const count = Math.max(...runners.map((r) => r.at.length));
    for (let i = 0; i < count; i++) {
      const hostsBy = new Map<string, string[]>();
      for (const { host, at } of runners) {
        const instant = at[i] ?? 'none';
        hostsBy.set(instant, [...(hostsBy.get(instant) ?? []), host]);
      }
      if (hostsBy.size < 2) continue;
      const parts = [...hostsBy.keys()]
        .sort()
        .map((instant) => `${instant} on ${hostsBy.get(instant)!.sort().join(', ')}`);
      return (
        'the runners compute different fires from one definition of it (different time-zone ' +
        `data?): fire ${i + 1} after ${after} is ${parts.join('; ')}`
      );
    }
  }
  return null;
}
