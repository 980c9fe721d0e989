/**
 * Options every command shares, and their precedence: flag > environment (BATON_*) > default.
 * Defaults are resolved here rather than given to yargs, so that `--help` never prints a value
 * taken from the environment (a database URL there may carry a password).
 *
 * What needs the schedules file parsed is in config-options.ts: this module is loaded by the
 * daemon too, which parses its file in a worker thread (config/load-isolated.ts) and never loads
 * the parser itself.
 */
import os from 'node:os';
import type { Argv } from 'yargs';
import type { Config } from '../config/schema.js';
import { UsageError } from '../errors.js';
import {
  DEFAULT_DATABASE_URL,
  parseDatabaseUrl,
  type DatabaseTarget,
} from '../config/database-url.js';

export const DEFAULT_CONFIG = './schedules.yaml';

export interface CommonArgs {
  config?: string;
  databaseUrl?: string;
  host?: string;
}

export function withCommonOptions<T>(y: Argv<T>): Argv<T & CommonArgs> {
  return y
    .option('config', {
      type: 'string',
      describe: `schedules file (env BATON_CONFIG; default ${DEFAULT_CONFIG})`,
    })
    .option('database-url', {
      type: 'string',
      describe: `mysql://user:password@host:port/database (env BATON_DATABASE_URL; default ${DEFAULT_DATABASE_URL})`,
    })
    .option('host', {
      type: 'string',
      describe: "this runner's name in history (env BATON_HOST; default the OS host name)",
    }) as Argv<T & CommonArgs>;
}

export function configPath(args: CommonArgs): string {
  return args.config ?? process.env.BATON_CONFIG ?? DEFAULT_CONFIG;
}

export function resolveDatabase(args: CommonArgs): DatabaseTarget {
  return parseDatabaseUrl(
    args.databaseUrl ?? process.env.BATON_DATABASE_URL ?? DEFAULT_DATABASE_URL,
  );
}

export function resolveHost(args: CommonArgs): string {
  const host = args.host ?? process.env.BATON_HOST ?? os.hostname();
  if (!host || host.length > 255) throw new UsageError('--host must be 1 to 255 characters');
  return host;
}

export function findJob(config: Config, name: string) {
  const job = config.jobs.find((j) => j.name === name);
  if (!job) {
    const known = config.jobs.map((j) => j.name).join(', ') || '(none)';
    throw new UsageError(`unknown job "${name}" in ${config.file} (jobs: ${known})`);
  }
  return job;
}
