/**
 * What `baton backfill` tells as it goes: on a terminal, one progress bar on stderr, redrawn in
 * place; otherwise (`--json`, or output to a pipe or file) one JSON object per line on stdout —
 * one per fire, then a summary — for a script to follow.
 */
import type { BackfillProgress, FireLine } from '../actions/backfill.js';
import { terminalWidth } from './terminal.js';

export interface Progress extends BackfillProgress {
  done(summary: Record<string, unknown>): void;
}

export function progressFor(json: boolean): Progress {
  return !json && process.stderr.isTTY === true ? new Bar() : new JsonLines();
}

class JsonLines implements Progress {
  fire(line: FireLine): void {
    process.stdout.write(`${JSON.stringify(line)}\n`);
  }
  note(text: string): void {
    process.stderr.write(`baton: ${text}\n`);
  }
  done(summary: Record<string, unknown>): void {
    process.stdout.write(`${JSON.stringify({ summary })}\n`);
  }
}

class Bar implements Progress {
  private last = '';
  fire(line: FireLine): void {
    if (line.action === 'plan') {
      process.stderr.write(`${line.index}/${line.of} ${line.fire} ${line.reason ?? ''}\n`);
      return;
    }
    const width = Math.max(10, Math.min(40, terminalWidth(process.stderr) - 60));
    const filled = Math.round((line.index / Math.max(1, line.of)) * width);
    const chain = (line.dependents ?? [])
      .map((d) => `${d.job} ${d.status}${d.reason ? ` (${d.reason})` : ''}`)
      .join(', ');
    const what =
      (line.action === 'run'
        ? `${line.status ?? 'ran'}${line.rerun ? ` (generation ${line.rerun})` : ''}`
        : `skipped: ${line.reason ?? ''}`) + (chain ? `; then ${chain}` : '');
    this.last =
      `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${line.index}/${line.of} ` +
      `${line.fire} ${what}`;
    process.stderr.write(`\r\x1b[K${this.last.slice(0, terminalWidth(process.stderr) - 1)}`);
    if (line.action === 'run' && line.status !== 'done') process.stderr.write('\n');
  }
  note(text: string): void {
    process.stderr.write(`\r\x1b[Kbaton: ${text}\n`);
  }
  done(summary: Record<string, unknown>): void {
    const parts = Object.entries(summary)
      .filter(([k]) => k !== 'outcome')
      .map(([k, v]) => `${k} ${String(v)}`);
    process.stderr.write(
      `\r\x1b[Kbaton: backfill ${String(summary.outcome)}: ${parts.join(', ')}\n`,
    );
  }
}
