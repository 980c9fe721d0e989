/**
 * The environment every job's process starts from, whether spawned for its run (job-process.ts)
 * or ahead of need (warm-hosts.ts): one function, so a warm host never holds a variable a cold
 * run would not have got.
 */

/** The OTLP exporter's headers, general and per signal: the collector's credentials. */
const OTLP_HEADERS = /^OTEL_EXPORTER_OTLP_(?:[A-Z]+_)?HEADERS$/;

/**
 * The runner's environment minus its own settings: BATON_* configures the runner (and
 * BATON_DATABASE_URL carries the database password), so none of it reaches a job — a job that
 * prints its environment must not put the password into its output tail. The job's BATON_*
 * variables are the fire's (`fireEnvironment`); a job that needs a database gets its URL through
 * its own `env:`. CREDENTIALS_DIRECTORY (systemd's, which may hold the runner's `database-url`)
 * is the runner's too: a job is not pointed at it. So are the OTLP exporter's headers
 * (`OTEL_EXPORTER_OTLP_HEADERS`, `…_TRACES_HEADERS`…: the collector's token, docs/tracing.md);
 * the endpoint stays, for a job that sends its own spans.
 */
export function inheritedEnvironment(withhold: ReadonlySet<string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key === 'CREDENTIALS_DIRECTORY' || OTLP_HEADERS.test(key)) continue;
    if (!key.startsWith('BATON_') && !withhold.has(key)) env[key] = value;
  }
  return env;
}
