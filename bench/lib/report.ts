/** Printing a scenario's table, figures and checks. */
import Table from 'cli-table3';
import type { Check } from './index.js';

const tty = process.stdout.isTTY;
const red = (s: string) => (tty ? `\x1b[31;1m${s}\x1b[0m` : s);
const green = (s: string) => (tty ? `\x1b[32m${s}\x1b[0m` : s);
const bold = (s: string) => (tty ? `\x1b[1m${s}\x1b[0m` : s);

/** Rows as objects; the columns are the union of their keys, in first-seen order. */
export function renderTable(rows: Array<Record<string, string | number>>): string {
  if (rows.length === 0) return '';
  const head: string[] = [];
  for (const row of rows) for (const k of Object.keys(row)) if (!head.includes(k)) head.push(k);
  const table = new Table({ head, style: { head: [], border: [], compact: true } });
  for (const row of rows) table.push(head.map((k) => String(row[k] ?? '')));
  return table.toString();
}

export function renderChecks(checks: Check[]): string {
  return checks
    .map((c) =>
      c.ok
        ? `  ${green('PASS')} ${c.name}${c.detail ? `: ${c.detail}` : ''}`
        : `  ${red('FAIL')} ${red(c.name)}${c.detail ? `: ${c.detail}` : ''}`,
    )
    .join('\n');
}

export function heading(text: string): string {
  return bold(`\n=== ${text} ===`);
}

export function loud(text: string): string {
  return red(text);
}
