/**
 * Options resolved from the schedules file: the config itself (required, or when there is one),
 * and the namespace of read-only commands. Apart from options.ts because they load the parser (YAML, zod), which `baton start`
 * does not (it parses in a worker thread, config/load-isolated.ts).
 */
import { existsSync } from 'node:fs';
import { loadConfig, type LoadOptions } from '../config/load.js';
import { DEFAULT_NAMESPACE } from '../config/defaults.js';
import { namespaceSchema, type Config } from '../config/schema.js';
import { UsageError } from '../errors.js';
import { configPath, type CommonArgs } from './options.js';

/**
 * The schedules file. Commands that run jobs need the connections' variables set; inspection
 * commands pass `{ connectionVariables: 'ignore' }`.
 */
export function resolveConfig(args: CommonArgs, options: LoadOptions = {}): Config {
  return loadConfig(configPath(args), options);
}

/** Where a read-only command's namespace came from, for the line that says which one it read. */
export type NamespaceSource =
  | { kind: 'flag' }
  | { kind: 'env' }
  | { kind: 'file'; file: string }
  /** No schedules file at `file` (and no --namespace, no BATON_NAMESPACE): "default". */
  | { kind: 'default'; file: string };

export interface ResolvedNamespace {
  namespace: string;
  source: NamespaceSource;
}

/**
 * The namespace for read-only commands and where it came from: `--namespace`, else
 * BATON_NAMESPACE, else the schedules file's (when there is one), else "default". A schedules
 * file that exists but is invalid is still an error.
 */
export function resolveNamespaceSource(
  args: CommonArgs & { namespace?: string },
): ResolvedNamespace {
  const fromFlag = args.namespace != null;
  const explicit = args.namespace ?? process.env.BATON_NAMESPACE;
  if (explicit != null) {
    const check = namespaceSchema.safeParse(explicit);
    const what = fromFlag ? '--namespace' : 'BATON_NAMESPACE';
    if (!check.success) throw new UsageError(`${what}: ${check.error.issues[0]?.message}`);
    return { namespace: explicit, source: { kind: fromFlag ? 'flag' : 'env' } };
  }
  const file = configPath(args);
  if (!existsSync(file)) return { namespace: DEFAULT_NAMESPACE, source: { kind: 'default', file } };
  const namespace = loadConfig(file, { connectionVariables: 'ignore' }).namespace;
  return { namespace, source: { kind: 'file', file } };
}

/** The namespace for read-only commands (see resolveNamespaceSource). */
export function resolveNamespace(args: CommonArgs & { namespace?: string }): string {
  return resolveNamespaceSource(args).namespace;
}

/**
 * The first line of `status` and `history`: which namespace was read and why, e.g.
 * `namespace "prod" (from the schedules file /etc/baton/schedules.yaml)`.
 */
export function namespaceLine({ namespace, source }: ResolvedNamespace): string {
  const why =
    source.kind === 'flag'
      ? 'from --namespace'
      : source.kind === 'env'
        ? 'from BATON_NAMESPACE'
        : source.kind === 'file'
          ? `from the schedules file ${source.file}`
          : `the default: no schedules file at ${source.file}`;
  return `namespace "${namespace}" (${why})`;
}

/**
 * The hint for a command that found nothing in the fallback namespace: most likely it was run
 * outside the schedules file's folder. Null when the namespace was chosen on purpose.
 */
export function namespaceHint({ namespace, source }: ResolvedNamespace): string | null {
  if (source.kind !== 'default') return null;
  return (
    `nothing found in namespace "${namespace}", read because there is no schedules file at ` +
    `${source.file}: give --config <schedules.yaml> or --namespace <name> (env BATON_CONFIG, ` +
    'BATON_NAMESPACE)'
  );
}

/** The schedules file when there is one (an invalid one is an error, as everywhere). */
export function optionalConfig(args: CommonArgs): Config | null {
  const file = configPath(args);
  return existsSync(file) ? loadConfig(file, { connectionVariables: 'ignore' }) : null;
}
