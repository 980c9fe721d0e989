/**
 * Preloaded into a `baton` CLI process (`node --import tsx --import bench/lib/b-sql-capture.ts
 * dist/cli/main.js …`) to record every statement it sends, exactly as sent: mysql2 publishes each
 * query on the diagnostics channel `mysql2:query` with its SQL already formatted (values inlined).
 * One JSON line per statement is appended to the file named by BENCH_SQL_CAPTURE:
 * `{ sql, clientMs, error? }` (clientMs: from sending to the callback, i.e. round trip + server).
 * The history-scale scenario then runs each captured SELECT again under ANALYZE FORMAT=JSON.
 */
import dc from 'node:diagnostics_channel';
import { appendFileSync } from 'node:fs';

interface QueryContext {
  query?: string;
  error?: unknown;
}

const file = process.env.BENCH_SQL_CAPTURE;
if (file) {
  const started = new WeakMap<object, bigint>();
  const done = (ctx: QueryContext) => {
    const t = started.get(ctx);
    const clientMs = t == null ? null : Number(process.hrtime.bigint() - t) / 1e6;
    const error = ctx.error instanceof Error ? ctx.error.message : undefined;
    appendFileSync(file, `${JSON.stringify({ sql: ctx.query, clientMs, error })}\n`);
  };
  dc.tracingChannel<unknown, QueryContext>('mysql2:query').subscribe({
    start: (ctx) => void started.set(ctx, process.hrtime.bigint()),
    end: () => {},
    asyncStart: (ctx) => done(ctx),
    asyncEnd: () => {},
    error: () => {},
  });
}
