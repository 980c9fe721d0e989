/**
 * The runner's half of fleet-wide timing changes (schedule/timing-switch.ts, store/timings.ts):
 * it records the timing of each job of its file that the fleet does not have yet — the next
 * version, effective at the default instant after the settle window — and keeps the fleet's
 * versions of every job, read again whenever they change (one cheap statement a look), so that
 * the runner fires each job by the version in force at each instant and holds where the fleet has
 * moved past its own file.
 *
 * The settle window applies only while another live runner has the job: a lone runner (one
 * server, or the others down) switches at the first good instant, and a server that comes back
 * with the old file holds.
 *
 * It says what it sees, once each: a version it recorded (with the day the switch runs a job
 * twice or skips, if it does), and a job it holds from an instant on (error: the runner has an
 * old file; `baton status` is CRITICAL `held` too, fleet/status.ts).
 */
import { timingPrint } from '../config/fingerprint.js';
import type { Config, JobDefinition } from '../config/schema.js';
import { delay } from '../delay.js';
import { errorMessage } from '../errors.js';
import { HOLDS_PROCESS, type KeepAlive } from '../keep-alive.js';
import type { Logger } from '../log.js';
import { parseSchedule } from '../schedule/cron.js';
import { switchAnomaly } from '../schedule/timing-switch.js';
import type { Queryable } from '../store/deadline.js';
import { otherLiveRunners } from '../store/runners.js';
import { settleMsOf, timingProposal } from '../store/timing-proposal.js';
import {
  ownVersion,
  readTimings,
  recordFirstVersions,
  recordTiming,
  timingsMarker,
  type TimingRecord,
} from '../store/timings.js';
import { heldFrom, UNREAD, type LoadedSchedule } from './loaded-schedule.js';

/** How often a runner looks for a changed version (one statement a look). */
export const DEFAULT_TIMING_LOOK_MS = 5_000;

/**
 * While a sync records many changed timings one after another, what it has recorded so far is
 * read and applied this often: each version takes effect from `lookMs + 1 s` after its own
 * recording (`record`), and this runner must fire by it from then — not once the last of a
 * reload's hundreds of changed jobs is recorded, seconds later, when the fires between are lost.
 */
export const APPLY_WHILE_RECORDING_MS = 500;

export interface TimingWatchTimings {
  /** DEFAULT_TIMING_LOOK_MS. */
  lookMs: number;
}

export const TIMING_WATCH_TIMINGS: Readonly<TimingWatchTimings> = {
  lookMs: DEFAULT_TIMING_LOOK_MS,
};

export type TimingVersions = ReadonlyMap<string, readonly TimingRecord[]>;

/** Whether two reads of the versions say the same (each job's versions and their instants). */
export function sameTimings(a: TimingVersions, b: TimingVersions | typeof UNREAD): boolean {
  if (b === UNREAD || a.size !== b.size) return false;
  const key = (records: readonly TimingRecord[] | undefined) =>
    (records ?? []).map((r) => `${r.version}@${r.effectiveAt.getTime()}:${r.print}`).join(',');
  for (const [job, records] of a) if (key(records) !== key(b.get(job))) return false;
  return true;
}

export interface TimingWatchOptions {
  host: string;
  loaded: () => LoadedSchedule;
  /** The pool, while there is one (the look is a read; recording is a write of one row). */
  pool: () => Queryable | null;
  /** The database's clock. */
  now: () => Date;
  /** The versions changed: the runner fires by them from now on. */
  apply: (timings: TimingVersions) => void;
  log: Logger;
  signal: AbortSignal;
  timings?: TimingWatchTimings | undefined;
  keepAlive?: KeepAlive | undefined;
}

export class TimingWatch {
  private readonly t: TimingWatchTimings;
  private marker: string | null = null;
  /** The last sync failed, or left a timing of the file unrecorded: the next look syncs. */
  private unsettled = true;
  private syncing: Promise<unknown> = Promise.resolve();
  private recordFailed = false;
  private running = false;
  /** Each job's hold as last told (its instant, and whether it had begun): told once each. */
  private readonly toldHeld = new Map<string, string>();

  constructor(private readonly o: TimingWatchOptions) {
    this.t = o.timings ?? TIMING_WATCH_TIMINGS;
  }

  /** Looks at an interval until the runner stops. */
  start(): void {
    if (this.running) return;
    this.running = true;
    void (async () => {
      while (!this.o.signal.aborted) {
        await delay(this.t.lookMs, this.o.signal, this.o.keepAlive ?? HOLDS_PROCESS);
        if (this.o.signal.aborted) return;
        try {
          await this.look();
        } catch (err) {
          this.o.log.warn({ err: errorMessage(err) }, 'could not look at the timing versions');
        }
      }
    })();
  }

  /**
   * Reads the versions again if they changed — or if the last sync could not read or record
   * them all (it is done again: this runner's new timing must reach the table) — and hands them
   * on.
   */
  async look(): Promise<void> {
    const pool = this.o.pool();
    if (!pool) return;
    const namespace = this.o.loaded().config.namespace;
    if (this.unsettled || (await timingsMarker(pool, namespace)) !== this.marker) {
      this.o.apply(await this.sync(pool, { applyWhileRecording: true }));
    }
    // Told at every look: a hold to come becomes one that has begun as time passes.
    this.tellHolds();
  }

  /**
   * Records the timings of the file the fleet does not have, and returns every version (the
   * caller builds its schedule from them: at connect, before the loop fires by the file). With
   * `applyWhileRecording` (a runner already firing by versions: a reload, a look), a long
   * recording hands what it has recorded so far to `apply` as it goes (APPLY_WHILE_RECORDING_MS).
   * Throws what the database throws.
   */
  sync(
    pool: Queryable,
    { applyWhileRecording = false }: { applyWhileRecording?: boolean } = {},
  ): Promise<TimingVersions> {
    // One at a time (a reload's and a look's): each reads after the one before it wrote, so a
    // later caller never applies an older read, and the record-failure flags are one sync's.
    const next = this.syncing.then(
      () => this.syncOnce(pool, applyWhileRecording),
      () => this.syncOnce(pool, applyWhileRecording),
    );
    this.syncing = next.catch(() => undefined);
    return next;
  }

  private async syncOnce(pool: Queryable, applyWhileRecording: boolean): Promise<TimingVersions> {
    this.unsettled = true;
    const { config } = this.o.loaded();
    const namespace = config.namespace;
    const marker = await timingsMarker(pool, namespace);
    let timings = await readTimings(pool, namespace);
    const unrecorded = config.jobs.filter(
      (j) =>
        j.enabled &&
        j.schedule != null &&
        ownVersion(timings.get(j.name) ?? [], timingPrint(j)!) == null,
    );
    // A job the fleet has no version of: its first, in force from the start, all in one write.
    // What cannot be recorded is said, and the runner fires by the versions it read: those are
    // the fleet's until its own is recorded (by it at its next load, or by another runner).
    const first = unrecorded.filter((j) => !timings.has(j.name));
    await recordFirstVersions(
      pool,
      namespace,
      first.map((j) => ({
        job: j.name,
        print: timingPrint(j)!,
        schedule: j.schedule!,
        timezone: j.timezone,
      })),
      this.o.host,
    ).catch((err: unknown) => this.cannotRecord(first, err));
    const changed = unrecorded.filter((j) => timings.has(j.name));
    // The settle window is for a rolling deploy: while no other live runner has the job, nobody
    // runs it by another file meanwhile (one that comes back with the old file holds). The
    // registry is read once for all the changed jobs.
    const others = changed.length > 0 ? await otherLiveRunners(pool, namespace, this.o.host) : [];
    // A long recording (a reload of hundreds of changed jobs, or one whose insert waits on a
    // lock) hands what it has recorded so far to `apply` every APPLY_WHILE_RECORDING_MS, on a
    // timer of its own: a single stalled record must not hold back the versions before it.
    let fresh = 0;
    let applying: Promise<void> | null = null;
    const applyRecorded = () => {
      if (applying || fresh === 0) return;
      fresh = 0;
      applying = readTimings(pool, namespace)
        .then((read) => this.o.apply(read))
        .catch((err: unknown) =>
          this.o.log.warn({ err: errorMessage(err) }, 'could not read the timing versions'),
        )
        .finally(() => (applying = null));
    };
    const ticker =
      applyWhileRecording && changed.length > 1
        ? (this.o.keepAlive ?? HOLDS_PROCESS).background(
            setInterval(applyRecorded, APPLY_WHILE_RECORDING_MS),
          )
        : null;
    try {
      for (const job of changed) {
        const shared = others.some((r) => r.jobs.has(job.name));
        await this.record(pool, namespace, job, config, shared).catch((err: unknown) =>
          this.cannotRecord([job], err),
        );
        fresh++;
      }
    } finally {
      clearInterval(ticker ?? undefined);
      // Its read is older than the one returned below: it must not be applied after it.
      await applying;
    }
    if (unrecorded.length > 0) {
      this.marker = null;
      timings = await readTimings(pool, namespace);
    } else {
      this.marker = marker;
    }
    this.unsettled = this.recordFailed;
    this.recordFailed = false;
    return timings;
  }

  /**
   * Tells each hold once as it is to come (info: a rolling deploy usually reaches this runner
   * before it begins) and once when it has begun (error: the job no longer runs here).
   */
  tellHolds(): void {
    const loaded = this.o.loaded();
    // Unread: every job is held, and the failed read was said (runner.ts syncTimings).
    if (loaded.timings === UNREAD) return;
    const now = this.o.now().getTime();
    for (const job of loaded.jobs.keys()) {
      const from = heldFrom(loaded, job);
      if (from == null) {
        this.toldHeld.delete(job);
        continue;
      }
      const begun = from.getTime() <= now;
      const told = `${from.toISOString()} ${begun}`;
      if (this.toldHeld.get(job) === told) continue;
      this.toldHeld.set(job, told);
      const versions = loaded.timings.get(job) ?? [];
      const facts = {
        job,
        heldFrom: from.toISOString(),
        ownVersion: loaded.ownVersions.get(job) ?? null,
        fleetVersion: versions.at(-1)?.version ?? null,
        why:
          'from heldFrom the fleet fires it by a newer timing than this file has; load the ' +
          'new schedules file here (reload); `baton definitions` shows the versions',
      };
      if (begun) this.o.log.error(facts, 'job held');
      else this.o.log.info(facts, 'job to be held');
    }
  }

  private cannotRecord(jobs: readonly JobDefinition[], err: unknown): void {
    if (jobs.length === 0) return;
    this.recordFailed = true;
    this.o.log.warn(
      { jobs: jobs.map((j) => j.name), err: errorMessage(err) },
      'could not record a timing',
    );
  }

  private async record(
    pool: Queryable,
    namespace: string,
    job: JobDefinition,
    config: Pick<Config, 'scheduleChanges'>,
    shared: boolean,
  ): Promise<void> {
    const next = parseSchedule(job.schedule!, job.timezone);
    // Never sooner than every runner's next look (and a second of margin): a runner that has
    // not read the new version by its instant would fire the old timing's fire there. This
    // runner applies it within APPLY_WHILE_RECORDING_MS, however many jobs it records after.
    const settleMs = Math.max(shared ? settleMsOf(config) : 0, this.t.lookMs + 1_000);
    const { record, recorded } = await recordTiming(
      pool,
      timingProposal(job, { namespace, recordedBy: this.o.host, settleMs }),
    );
    if (!recorded || record.version === 1) return;
    const previous = (await readTimings(pool, namespace, [job.name]))
      .get(job.name)
      ?.find((r) => r.version === record.version - 1);
    const anomaly =
      previous &&
      switchAnomaly(parseSchedule(previous.schedule, previous.timezone), next, record.effectiveAt);
    this.o.log.warn(
      {
        job: job.name,
        version: record.version,
        schedule: record.schedule,
        timezone: record.timezone,
        effectiveAt: record.effectiveAt.toISOString(),
        ...(previous ? { from: { schedule: previous.schedule, timezone: previous.timezone } } : {}),
        ...(anomaly ? { anomaly: `${anomaly.kind} on ${anomaly.day}` } : {}),
        what: 'every runner fires the job by its new timing from effectiveAt, by the old before',
      },
      'timing change recorded',
    );
  }
}
