/**
 * Preloaded into a runner (`NODE_OPTIONS=--import …/statement-log.mjs`, with TEST_STATEMENT_LOG
 * naming a file): appends one line per statement the process sends — `<Date.now()> <SQL's first
 * 60 characters, or TEST_STATEMENT_LOG_CHARS>` — from mysql2's `mysql2:query` tracing channel. Plain JavaScript, so that it
 * loads without a TypeScript loader. See statements.ts.
 */
import dc from 'node:diagnostics_channel';
import { appendFileSync } from 'node:fs';

const file = process.env.TEST_STATEMENT_LOG;
const chars = Number(process.env.TEST_STATEMENT_LOG_CHARS) || 60;
if (file) {
  const noop = () => {};
  dc.tracingChannel('mysql2:query').subscribe({
    start: (ctx) => {
      const sql = String(ctx.query ?? '')
        .replace(/\s+/g, ' ')
        .slice(0, chars);
      appendFileSync(file, `${Date.now()} ${sql}\n`);
    },
    end: noop,
    asyncStart: noop,
    asyncEnd: noop,
    error: noop,
  });
}
