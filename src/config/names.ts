/**
 * What a job's name and a namespace may be, without the schema: the runner judges names it is
 * asked for over HTTP (actions/scope.ts, http/write-actions.ts) and must not load zod to do it
 * (config/schema.ts builds its rules from these).
 *
 * Job names end up in the history table (`baton_runs.job VARCHAR(128)`) and in lock names, so they
 * are limited to safe ASCII and to what the column stores whole: MySQL would truncate a longer name
 * silently under INSERT IGNORE, and two truncated names would then share one fire key.
 */
export const JOB_NAME_MAX = 128;
export const JOB_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** The namespace scopes lock names and history rows; `baton_runs.namespace VARCHAR(64)`. */
export const NAMESPACE_MAX = 64;
