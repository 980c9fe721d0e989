/**
 * Terminal output helpers: borderless tables (cli-table3) that line up for people and stay
 * greppable, and the JSON shapes more than one command prints. Durations are
 * config/duration.ts:formatDuration's (its `table` style in columns); instants and one-line text
 * are src/text.ts's.
 */
import Table from 'cli-table3';
import { formatDuration } from '../config/duration.js';
import { durationMs } from '../actions/documents.js';
import type { Run } from '../store/runs.js';

export function table(head: string[], rows: (string | number)[][]): string {
  const t = new Table({
    head,
    style: { head: [], border: [], compact: true, 'padding-left': 0, 'padding-right': 2 },
    chars: {
      top: '',
      'top-mid': '',
      'top-left': '',
      'top-right': '',
      bottom: '',
      'bottom-mid': '',
      'bottom-left': '',
      'bottom-right': '',
      left: '',
      'left-mid': '',
      mid: '',
      'mid-mid': '',
      right: '',
      'right-mid': '',
      middle: '',
    },
  });
  t.push(...rows.map((r) => r.map(String)));
  return (
    t
      .toString()
      .split('\n')
      .map((l) => l.trimEnd())
      .join('\n') + '\n'
  );
}

/** The WINNER column: `yes`, or the worker slot of a fan-out run (`slot 2`). */
export function winnerCell(r: { winner: boolean; workerSlot: number | null }): string {
  if (!r.winner) return '';
  return r.workerSlot != null && r.workerSlot > 1 ? `slot ${r.workerSlot}` : 'yes';
}

/** The DURATION column: how long the run took, '' while it runs. */
export function durationCell(run: Run): string {
  const ms = durationMs(run);
  return ms == null ? '' : formatDuration(ms, 'table');
}
