/**
 * Terminal output helpers: borderless tables (cli-table3) that line up for people and stay
 * greppable, and the JSON shapes more than one command prints. Durations are
 * config/duration.ts:formatDuration's (its `table` style in columns); instants and one-line text
 * are src/text.ts's.
 */
import Table from 'cli-table3';
import { formatDuration } from '../config/duration.js';
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

/** A run's duration in ms; null while it has not finished. */
export function durationMs(run: Run): number | null {
  return run.finishedAt ? run.finishedAt.getTime() - run.startedAt.getTime() : null;
}

/** The DURATION column: how long the run took, '' while it runs. */
export function durationCell(run: Run): string {
  const ms = durationMs(run);
  return ms == null ? '' : formatDuration(ms, 'table');
}

/**
 * The stable JSON shape of one history row (`baton history --json`, and the attempts of
 * `baton explain --json`); see docs/history.md.
 */
export function runToJson(run: Run) {
  return {
    id: run.id,
    job: run.job,
    scheduledAt: run.scheduledAt.toISOString(),
    rerun: run.rerun,
    winner: run.winner,
    workerSlot: run.workerSlot,
    trigger: run.trigger,
    status: run.status,
    reason: run.reason,
    reasonKind: run.reasonKind,
    host: run.host,
    pid: run.pid,
    startedAt: run.startedAt.toISOString(),
    finishedAt: run.finishedAt?.toISOString() ?? null,
    durationMs: durationMs(run),
    exitCode: run.exitCode,
    attempts: run.attempts,
    error: run.error,
    params: run.params,
  };
}
