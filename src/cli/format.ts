/**
 * Terminal output helpers: borderless tables (cli-table3) that line up for people and stay
 * greppable. Durations are config/duration.ts:formatDuration's (its `table` style in columns).
 */
import Table from 'cli-table3';

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

/** `2026-11-30T03:00:00.000Z` → `2026-11-30 03:00:00.000` (UTC, as stored). */
export function formatInstant(d: Date | null): string {
  return d ? d.toISOString().replace('T', ' ').replace('Z', '') : '';
}

/** The WINNER column: `yes`, or the worker slot of a fan-out run (`slot 2`). */
export function winnerCell(r: { winner: boolean; workerSlot: number | null }): string {
  if (!r.winner) return '';
  return r.workerSlot != null && r.workerSlot > 1 ? `slot ${r.workerSlot}` : 'yes';
}
