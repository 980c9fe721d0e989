/**
 * Options resolved from the schedules file: the config itself (required, or when there is one),
 * and the namespace of read-only commands. Apart from options.ts because they load the parser (YAML, zod), which `baton start`
 * does not (it parses in a worker thread, config/load-isolated.ts).
 */
import { existsSync } from 'node:fs';
import { loadConfig, type LoadOptions } from '../config/load.js';
import { DEFAULT_NAMESPACE, namespaceSchema, type Config } from '../config/schema.js';
import { UsageError } from '../errors.js';
import { configPath, type CommonArgs } from './options.js';

/**
 * The schedules file. Commands that run jobs need the connections' variables set; inspection
 * commands pass `{ connectionVariables: 'ignore' }`.
 */
export function resolveConfig(args: CommonArgs, options: LoadOptions = {}): Config {
  return loadConfig(configPath(args), options);
}

/**
 * The namespace for read-only commands: `--namespace`, else the schedules file's (when there is
 * one), else "default". A schedules file that exists but is invalid is still an error.
 */
export function resolveNamespace(args: CommonArgs & { namespace?: string }): string {
  const explicit = args.namespace ?? process.env.BATON_NAMESPACE;
  if (explicit != null) {
    const check = namespaceSchema.safeParse(explicit);
    if (!check.success) throw new UsageError(`--namespace: ${check.error.issues[0]?.message}`);
    return explicit;
  }
  const file = configPath(args);
  if (!existsSync(file)) return DEFAULT_NAMESPACE;
  return loadConfig(file, { connectionVariables: 'ignore' }).namespace;
}

/** The schedules file when there is one (an invalid one is an error, as everywhere). */
export function optionalConfig(args: CommonArgs): Config | null {
  const file = configPath(args);
  return existsSync(file) ? loadConfig(file, { connectionVariables: 'ignore' }) : null;
}
