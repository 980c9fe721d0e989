/**
 * The names of schedules created at run time (library mode's `scheduler.schedules.upsert(job,
 * key, …)`, docs/library-mode.md): each one fires as a *subject* of its own, `<job>:<key>`, in
 * every place a job's name goes — the fire key and the lock (so one run per key and instant across
 * the fleet, and a key's runs never overlap), `baton_runs.job`, pauses, notifications. A job's name
 * never holds `:` (config/schema.ts `JOB_NAME_PATTERN`), so a subject cannot be mistaken for a job
 * of a schedules file, and the first `:` of a subject always ends its job's name.
 *
 * A key is what the application names a tenant's schedule by: letters, digits, `_ . @ -`,
 * starting with a letter or digit (so never an option, `--all`, nor a path, `../x`), ASCII only
 * (the history's job column is ASCII, compared byte for byte), and short enough that the subject
 * fits that column whole (VARCHAR(128)): a name cut short there would share its fire key with
 * another.
 */

/** Between a job's name and a key in a subject's name. */
export const SUBJECT_SEPARATOR = ':';

/** `baton_runs.job` (and every other job column) holds this many characters. */
export const SUBJECT_MAX = 128;

export const SCHEDULE_KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.@-]*$/;

/** The longest key `job` may have: its subject must fit the job column. */
export function keyMaxFor(job: string): number {
  return SUBJECT_MAX - job.length - SUBJECT_SEPARATOR.length;
}

/** Why `key` cannot name a schedule of `job`, in words; null when it can. */
export function keyProblem(job: string, key: unknown): string | null {
  if (typeof key !== 'string') return `expected a string, got ${typeof key}`;
  if (key.length === 0) return 'must not be empty';
  const max = keyMaxFor(job);
  if (key.length > max) {
    return (
      `is ${key.length} characters long; a key of ${job} may have at most ${max} (the job's ` +
      `name, ":" and the key fit the history's job column, ${SUBJECT_MAX} characters)`
    );
  }
  if (!SCHEDULE_KEY_PATTERN.test(key)) {
    return (
      `${quoteKey(key)} may contain only ASCII letters, digits, '_', '.', '@' and '-', and must ` +
      'start with a letter or digit'
    );
  }
  return null;
}

/** A key as a message may show it: quoted, and cut when long (it may be anything a caller sent). */
export function quoteKey(key: string): string {
  return JSON.stringify(key.length > 40 ? `${key.slice(0, 40)}…` : key);
}

/** The subject a schedule of `job` under `key` fires as: `job:key`. */
export function subjectName(job: string, key: string): string {
  return `${job}${SUBJECT_SEPARATOR}${key}`;
}

/** A subject's job and key; null for a plain job's name. */
export function splitSubject(name: string): { job: string; key: string } | null {
  const at = name.indexOf(SUBJECT_SEPARATOR);
  return at < 0 ? null : { job: name.slice(0, at), key: name.slice(at + 1) };
}

/** The job whose definition a name runs: the job of a subject, or the name itself. */
export function jobOfSubject(name: string): string {
  const at = name.indexOf(SUBJECT_SEPARATOR);
  return at < 0 ? name : name.slice(0, at);
}
