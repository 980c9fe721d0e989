/**
 * Where a job runs (docs/placement.md): plain values and rules, no schema (the daemon imports
 * this, never zod: see defaults.ts).
 *
 * - **Runner tags**: `baton start --tag sftp --tag region=eu` (BATON_TAGS, library mode `tags`).
 *   A tag is a name, or `name=value`.
 * - **`runOn`**: `{tags: [...], hosts: [...]}` — a runner may run the job when it has every tag
 *   listed (`sftp` is matched by a runner's `sftp` or `sftp=<anything>`; `region=eu` only by
 *   `region=eu`) and, when hosts are listed, is one of them. The others do not contend for its
 *   fires and write no row for them; their file is still the same file (no drift).
 * - **`prefer`**: `{hosts: [...], lead}` — of the live runners that may run the job, the first one
 *   of the list asks first for each fire (coordination/first-asker.ts); the others contend `lead`
 *   later, so a preferred runner that is gone or late is overtaken within the lead.
 * - **`every`**: each fire runs once on every runner that may run the job, each in its host's own slot
 *   of the fire key (store/host-slots.ts).
 */

/** `runOn:` as loaded: both lists, either may be empty (not both). */
export interface RunOn {
  tags: string[];
  hosts: string[];
}

/** `prefer:` as loaded. */
export interface Prefer {
  hosts: string[];
  leadMs: number;
}

/** What a runner is, for placement: its host id and its tags. */
export interface RunnerPlace {
  host: string;
  tags: readonly string[];
}

/**
 * How long the other runners leave a fire to a preferred runner by default: long enough for one
 * on time on a loaded machine (its claim is milliseconds), short against any schedule's period.
 */
export const DEFAULT_PREFER_LEAD_MS = 1_000;

/** A tag: a name (letters, digits, `_.-`), or `name=value` (value: also `:/@+`). */
export const TAG_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}(=[A-Za-z0-9_.:/@+-]{0,190})?$/;
export const TAG_HINT =
  'a tag is a name of letters, digits and _.- (up to 63), or name=value (e.g. sftp, region=eu)';
/** A runner has at most this many tags (they are stored in its registry row). */
export const MAX_TAGS = 32;

/**
 * The tags a runner was given, checked and deduplicated in their first order; throws with `where`
 * named when one is not a tag. `values` are the `--tag` values or library mode's `tags` (an empty
 * one is refused: it names no tag, and would silently stand for none), or BATON_TAGS split at
 * commas (`listed`: empty items, as after a trailing comma, are left out).
 */
export function parseRunnerTags(values: unknown, where: string, listed = false): string[] {
  if (!Array.isArray(values) || !values.every((v) => typeof v === 'string')) {
    throw new Error(`${where}: expected a list of tags (strings), e.g. ['sftp', 'region=eu']`);
  }
  const tags: string[] = [];
  for (const raw of values) {
    const tag = listed ? raw.trim() : raw;
    if (tag === '' && listed) continue;
    if (!TAG_PATTERN.test(tag)) {
      throw new Error(`${where}: ${JSON.stringify(raw)} is not a tag: ${TAG_HINT}`);
    }
    if (!tags.includes(tag)) tags.push(tag);
  }
  if (tags.length > MAX_TAGS) {
    throw new Error(`${where}: ${tags.length} tags, at most ${MAX_TAGS}`);
  }
  return tags;
}

/** Whether a runner with `tags` has the tag `wanted` (`sftp` also matches `sftp=<value>`). */
function hasTag(tags: readonly string[], wanted: string): boolean {
  if (wanted.includes('=')) return tags.includes(wanted);
  return tags.some((t) => t === wanted || t.startsWith(`${wanted}=`));
}

/** Whether `runner` may run a job placed by `runOn` (none: any runner). */
export function mayRun(runOn: RunOn | null | undefined, runner: RunnerPlace): boolean {
  if (!runOn) return true;
  if (runOn.hosts.length > 0 && !runOn.hosts.includes(runner.host)) return false;
  return runOn.tags.every((t) => hasTag(runner.tags, t));
}

/** What `runOn` asks for, in words: "needs tag sftp", "only on srv-01, srv-02", both. */
export function describeRunOn(runOn: RunOn): string {
  const parts: string[] = [];
  if (runOn.tags.length > 0) {
    parts.push(`needs tag${runOn.tags.length > 1 ? 's' : ''} ${runOn.tags.join(', ')}`);
  }
  if (runOn.hosts.length > 0) parts.push(`only on ${runOn.hosts.join(', ')}`);
  return parts.join('; ');
}

/**
 * Where a job may run, in words for `list`, `explain` and the dashboard: "any runner", "runners
 * tagged sftp", "srv-01, srv-02", "runners tagged sftp among srv-01"; then `prefer` ("srv-01
 * first, the others after 1s") and `every` ("every one of them, each fire"). `lead` is rendered
 * by the caller's duration format.
 */
export function describePlacement(
  job: { runOn?: RunOn | null; prefer?: Prefer | null; every?: boolean },
  duration: (ms: number) => string,
): string {
  const runOn = job.runOn;
  const tags = runOn && runOn.tags.length > 0 ? `runners tagged ${runOn.tags.join(' and ')}` : null;
  const hosts = runOn && runOn.hosts.length > 0 ? runOn.hosts.join(', ') : null;
  let where = tags && hosts ? `${tags} among ${hosts}` : (tags ?? hosts ?? 'any runner');
  if (job.every) where += ', every one of them each fire';
  if (job.prefer && job.prefer.hosts.length > 0) {
    where += `; ${job.prefer.hosts.join(', then ')} first, the others after ${duration(job.prefer.leadMs)}`;
  }
  return where;
}

/**
 * The runner that asks first for a fire of a job with `prefer`: the first host of its list among
 * `live` (the runners that run the job, this one included); null when none of them is live.
 */
export function preferredAsker(prefer: Prefer, live: readonly string[]): string | null {
  return prefer.hosts.find((h) => live.includes(h)) ?? null;
}
