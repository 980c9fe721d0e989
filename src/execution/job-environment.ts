/**
 * The environment every job's process starts from, whether spawned for its run (job-process.ts)
 * or ahead of need (warm-hosts.ts): one function, so a warm host never holds a variable a cold
 * run would not have got.
 */

/**
 * The runner's environment minus its own settings: BATON_* configures the runner (and
 * BATON_DATABASE_URL carries the database password), so none of it reaches a job — a job that
 * prints its environment must not put the password into its output tail. The job's BATON_*
 * variables are the fire's (`fireEnvironment`); a job that needs a database gets its URL through
 * its own `env:`. CREDENTIALS_DIRECTORY (systemd's, which may hold the runner's `database-url`)
 * is the runner's too: a job is not pointed at it.
 */
export function inheritedEnvironment(withhold: ReadonlySet<string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key === 'CREDENTIALS_DIRECTORY') continue;
    if (!key.startsWith('BATON_') && !withhold.has(key)) env[key] = value;
  }
  return env;
}
