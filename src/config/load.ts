/**
 * schedules.yaml → a validated, typed `Config`, or a `ConfigError` listing every problem with its
 * file, line and path. Nothing is half-loaded: either the whole file is valid or nothing of it is
 * used (DESIGN.md, guarantee 5).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { ConfigError, type ConfigProblem } from '../errors.js';
import { parseSchedule } from '../schedule/cron.js';
import {
  DEFAULT_NAMESPACE,
  DEFAULT_TIMEZONE,
  fileSchema,
  jobNameSchema,
  type Config,
  type JobDefinition,
  type JobTarget,
  type RawFile,
  type RawJob,
} from './schema.js';
import { YamlSource, type PathSegment } from './yaml-source.js';

/** Reads and validates a schedules file. Throws ConfigError (exit 78) on any problem. */
export function loadConfig(file: string): Config {
  const absolute = path.resolve(file);
  let text: string;
  try {
    text = readFileSync(absolute, 'utf8');
  } catch (err) {
    const reason =
      (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : String(err);
    throw new ConfigError([{ file: absolute, path: '', message: `cannot read: ${reason}` }]);
  }
  return parseConfig(absolute, text);
}

/** Validates schedules-file text; `file` is used for messages and to resolve relative paths. */
export function parseConfig(file: string, text: string): Config {
  const source = new YamlSource(file, text);
  if (!source.ok) throw new ConfigError(source.problems);

  const raw = source.toJS();
  if (raw == null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ConfigError([source.problem([], 'expected a mapping with a `jobs:` key')]);
  }
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) throw new ConfigError(zodProblems(source, parsed.error));

  const problems: ConfigProblem[] = [];
  const config = buildConfig(source, parsed.data, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

function buildConfig(source: YamlSource, raw: RawFile, problems: ConfigProblem[]): Config {
  const baseDir = path.dirname(source.file);
  const jobs: JobDefinition[] = [];
  for (const [name, rawJob] of Object.entries(raw.jobs)) {
    const job = buildJob(source, baseDir, name, { ...raw.defaults, ...rawJob }, problems);
    if (job) jobs.push(job);
  }
  if (Object.keys(raw.jobs).length === 0) {
    problems.push(source.problem(['jobs'], 'no jobs defined'));
  }
  return { file: source.file, namespace: raw.namespace ?? DEFAULT_NAMESPACE, jobs };
}

function buildJob(
  source: YamlSource,
  baseDir: string,
  name: string,
  job: RawJob,
  problems: ConfigProblem[],
): JobDefinition | undefined {
  const at = (key?: string): PathSegment[] => (key ? ['jobs', name, key] : ['jobs', name]);
  const before = problems.length;
  const report = (key: string | undefined, message: string) =>
    problems.push(source.problem(at(key), message));

  const nameCheck = jobNameSchema.safeParse(name);
  if (!nameCheck.success)
    report(undefined, nameCheck.error.issues.map((i) => i.message).join('; '));

  if (job.schedule == null) report(undefined, 'missing `schedule`');
  const timezone = job.timezone ?? DEFAULT_TIMEZONE;
  if (job.schedule != null) {
    try {
      parseSchedule(job.schedule, timezone);
    } catch (err) {
      const key = /time zone/.test(String(err)) ? 'timezone' : 'schedule';
      report(key, (err as Error).message);
    }
  }

  const target = buildTarget(baseDir, job, report);
  const cwd = path.resolve(baseDir, job.cwd ?? '.');
  if (job.cwd != null && !isDirectory(cwd)) report('cwd', `directory not found: ${cwd}`);

  if (problems.length > before || !target || job.schedule == null) return undefined;
  return {
    name,
    schedule: job.schedule,
    timezone,
    ...(job.description != null ? { description: job.description } : {}),
    enabled: job.enabled ?? true,
    target,
    env: job.env ?? {},
    cwd,
  };
}

function buildTarget(
  baseDir: string,
  job: RawJob,
  report: (key: string | undefined, message: string) => void,
): JobTarget | undefined {
  if (job.command != null && job.module != null) {
    report('module', 'set either `command` or `module`, not both');
    return undefined;
  }
  if (job.module != null) {
    if (job.shell) report('shell', '`shell` applies to `command`, not to `module`');
    const modulePath = path.resolve(baseDir, job.module);
    if (!existsSync(modulePath)) {
      report('module', `module file not found: ${modulePath}`);
      return undefined;
    }
    return { kind: 'module', path: modulePath };
  }
  if (job.command == null) {
    report(undefined, 'missing `command` or `module` (one of them says what to run)');
    return undefined;
  }
  if (typeof job.command === 'string') {
    if (job.shell !== true) {
      report(
        'command',
        'a string command runs through a shell: write it as an argv list ["prog", "arg"], ' +
          'or set `shell: true` to say that a shell is meant',
      );
      return undefined;
    }
    return { kind: 'shell', script: job.command };
  }
  if (job.shell === true) {
    report('shell', 'with `shell: true` give `command` as one string, not a list');
    return undefined;
  }
  return { kind: 'command', argv: job.command };
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function zodProblems(source: YamlSource, error: z.ZodError): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const issue of error.issues) {
    const where = issue.path.filter((p): p is PathSegment => typeof p !== 'symbol');
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        problems.push(source.problem([...where, key], `unknown key "${key}"`));
      }
      continue;
    }
    problems.push(source.problem(where, describeIssue(issue)));
  }
  return problems;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_type') {
    return issue.input === undefined ? 'required' : `expected ${issue.expected}`;
  }
  if (issue.code === 'invalid_union') return 'expected an argv list of strings or a string';
  return issue.message;
}
