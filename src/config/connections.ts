/**
 * The database a module job works on (`ctx.db`): the connection its `connection:` names (its URL
 * written in the file, or read from the runner's environment when the run starts), or baton's
 * own database.
 */
import { parseDatabaseUrl, type DatabaseTarget } from './database-url.js';
import type { Config, JobDefinition } from './schema.js';
import { allTargetSecrets } from './notify-target-secrets.js';

export function jobDatabase(
  config: Config,
  job: JobDefinition,
  batonDatabase: DatabaseTarget,
): DatabaseTarget {
  if (job.connection == null) return batonDatabase;
  const source = config.connections[job.connection];
  if (!source) throw new Error(`unknown connection "${job.connection}"`);
  const url = source.kind === 'url' ? source.url : process.env[source.variable];
  if (!url) {
    throw new Error(
      `connection "${job.connection}": environment variable ${source.kind === 'env' ? source.variable : ''} is not set`,
    );
  }
  return parseDatabaseUrl(url, `the URL of connection ${job.connection}`);
}

/**
 * The variables of the runner's environment that hold a secret URL of the configuration: those
 * of `connections:` (`urlFromEnv`) and of the notification targets (`urlFromEnv`,
 * `smtpFromEnv`). No job, warm module host, `baton run` job or `command` target inherits them
 * (execution/job-environment.ts): a job that prints its environment would put the database
 * password, the webhook's token or the SMTP password into its kept output.
 */
export function withheldVariables(config: Config): string[] {
  const connections = Object.values(config.connections).flatMap((c) =>
    c.kind === 'env' ? [c.variable] : [],
  );
  const targets = Object.values(config.notifyTargets).flatMap((t) => {
    const source = t.kind === 'webhook' ? t.url : t.kind === 'email' ? t.smtp : null;
    return source?.kind === 'env' ? [source.variable] : [];
  });
  return [...new Set([...connections, ...targets])];
}

/**
 * What must not appear in a job's kept output (execution/secret-mask.ts): the password of baton's
 * own database, every connection's URL and password (as written and percent-decoded), the
 * secrets of every notification target (notify-target-secrets.ts), and the values of the job's
 * `secretEnv` variables (its own `env:`, else the runner's environment).
 */
export function outputSecrets(
  config: Config,
  job: JobDefinition,
  batonDatabase: DatabaseTarget,
): string[] {
  const secrets: string[] = [];
  const password = batonDatabase.connection.password;
  if (password) secrets.push(password, encodeURIComponent(password));
  const decoded = (text: string) => {
    try {
      return decodeURIComponent(text);
    } catch {
      return text; // a stray `%`: the raw form is masked anyway
    }
  };
  for (const source of Object.values(config.connections)) {
    const url = source.kind === 'url' ? source.url : process.env[source.variable];
    if (!url) continue;
    secrets.push(url);
    try {
      const parsed = new URL(url);
      if (parsed.password) secrets.push(parsed.password, decoded(parsed.password));
    } catch {
      // Not a URL: masked whole above.
    }
  }
  secrets.push(...allTargetSecrets(config.notifyTargets, (name) => process.env[name], 'output'));
  for (const name of job.secretEnv) {
    const value = job.env[name] ?? process.env[name];
    if (value) secrets.push(value);
  }
  return secrets;
}
