/**
 * Counting the statements a process sends, from mysql2's `mysql2:query` tracing channel: in this
 * process (`countStatements`), or in a runner (`statementLogEnv` preloads statement-log.mjs).
 * The shared server's own counters (`Questions`) would count every test file running alongside.
 */
import dc from 'node:diagnostics_channel';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mustEnd } from './leftovers.js';

export interface StatementCount {
  /** The statements sent since the count began, their SQL as sent. */
  readonly statements: string[];
  stop(): void;
}

interface QueryContext {
  query?: string;
}

export function countStatements(): StatementCount {
  const statements: string[] = [];
  const noop = () => {};
  const handlers = {
    start: (ctx: QueryContext) => void statements.push(String(ctx.query ?? '')),
    end: noop,
    asyncStart: noop,
    asyncEnd: noop,
    error: noop,
  };
  return { statements, stop: subscribe('statement count', handlers) };
}

/** The environment that makes a runner log its statements (their first `chars`) to `file`. */
export function statementLogEnv(file: string, chars = 60): Record<string, string> {
  const preload = fileURLToPath(new URL('./statement-log.mjs', import.meta.url));
  return {
    NODE_OPTIONS: [process.env.NODE_OPTIONS, `--import=${preload}`].filter(Boolean).join(' '),
    TEST_STATEMENT_LOG: file,
    TEST_STATEMENT_LOG_CHARS: String(chars),
  };
}

/** The statements of a runner's log sent between `from` and `to` (epoch ms), as SQL prefixes. */
export function loggedStatements(file: string, from: number, to: number): string[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => ({
      at: Number(line.slice(0, line.indexOf(' '))),
      sql: line.slice(line.indexOf(' ') + 1),
    }))
    .filter((s) => s.at >= from && s.at <= to)
    .map((s) => s.sql);
}

/** A statement `traceStatements` saw: when it was sent, and from which scope. */
export interface TracedStatement {
  readonly sql: string;
  /** Date.now() when it was sent. */
  readonly at: number;
  /** `scopeOf()` when it was sent: whose statement it is (an in-process runner's host, say). */
  readonly scope: string | undefined;
}

/**
 * As countStatements, each statement with when it was sent and by whom (`scopeOf`, asked as it
 * is sent: `() => runnerScope.getStore()` of in-process-fleet.ts names the runner that sent it).
 */
export function traceStatements(scopeOf: () => string | undefined): {
  readonly statements: TracedStatement[];
  stop(): void;
} {
  const statements: TracedStatement[] = [];
  const noop = () => {};
  const handlers = {
    start: (ctx: QueryContext) =>
      void statements.push({ sql: String(ctx.query ?? ''), at: Date.now(), scope: scopeOf() }),
    end: noop,
    asyncStart: noop,
    asyncEnd: noop,
    error: noop,
  };
  return { statements, stop: subscribe('statement trace', handlers) };
}

/**
 * Subscribes `handlers` to mysql2's query channel; returns the unsubscribe. One the test file does
 * not end itself is ended after it (file-boundary.ts): it would record every statement of the
 * files after it in this worker.
 */
function subscribe(what: string, handlers: dc.TracingChannelSubscribers<QueryContext>): () => void {
  const channel = dc.tracingChannel<unknown, QueryContext>('mysql2:query');
  channel.subscribe(handlers);
  const unsubscribe = () => void channel.unsubscribe(handlers);
  const ended = mustEnd(what, unsubscribe);
  return () => {
    unsubscribe();
    ended();
  };
}
