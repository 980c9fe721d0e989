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
  for (const [key, value] of environmentThisTurn()) {
    if (key === 'CREDENTIALS_DIRECTORY' || OTLP_HEADERS.test(key)) continue;
    if (!key.startsWith('BATON_') && !withhold.has(key)) env[key] = value;
  }
  return env;
}

/**
 * `process.env`'s entries, read once per turn of the event loop. Each read of process.env goes
 * to the C library's environment, variable by variable: with 100 command jobs due at once,
 * reading it whole for every run was 16 % of the runner's CPU (bench many-jobs, a CPU profile).
 * The runs started in one turn (their claims answered together) share one read; a variable an
 * application sets — or deletes — is seen so by every run started in a later turn, not by one
 * started in the same turn after the change.
 */
let readThisTurn: [string, string | undefined][] | null = null;

function environmentThisTurn(): [string, string | undefined][] {
  if (!readThisTurn) {
    readThisTurn = Object.entries(process.env);
    setImmediate(() => (readThisTurn = null));
  }
  return readThisTurn;
}
