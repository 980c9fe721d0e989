/**
 * The two views of `baton history`. By default one line per fire — when it was (UTC, how long
 * ago, the job's own clock when it has a zone), the job, how it ended, the winner's host, how
 * long it took, and how many runners skipped it — fitting the terminal (80 columns when stdout
 * is not one). `--attempts` (`-o wide`) shows every row instead: the winner's, each runner's
 * skip, the `missed` mark, with every column of the table. A child job's fire (`after:`) names the
 * parent runs behind it: `after settle#123` (they let it start), `stopped by settle#123` (an
 * `upstream` skip).
 */
import { formatDuration } from '../config/duration.js';
import type { RunStatus } from '../run-status.js';
import type { AuditRecord } from '../store/audit.js';
import { parentRunsWords, type ParentRuns } from '../store/dependent-fire-reads.js';
import type { Run } from '../store/runs.js';
import { oneLine, formatInstant } from '../text.js';
import { fitTable, type Cell, type Column } from './fit.js';
import { actionWords } from './audit-view.js';
import { durationCell, table, winnerCell } from './format.js';
import type { Paint, Style } from './terminal.js';
import { instantForm, isUtc, relative, shortInstant, shortLocal } from './times.js';

/** How each outcome is painted on a terminal that takes colour. */
const STYLES: Partial<Record<RunStatus, Style>> = {
  done: 'green',
  failed: 'red',
  timeout: 'red',
  lost: 'red',
  interrupted: 'yellow',
  killed: 'yellow',
  missed: 'magenta',
  running: 'cyan',
  skipped: 'dim',
};

/** Worst first: the outcome a fire of several worker slots is shown with. */
const SEVERITY: RunStatus[] = [
  'failed',
  'timeout',
  'lost',
  'killed',
  'interrupted',
  'running',
  'done',
];

/** The rows of one fire (a job at one instant), in the order the history gave them. */
export interface Fire {
  job: string;
  scheduledAt: Date;
  rows: Run[];
}

/** Rows grouped by fire, newest fire first (the history's order). */
export function groupFires(runs: Run[]): Fire[] {
  const fires = new Map<string, Fire>();
  for (const r of runs) {
    const key = `${r.job}\u0000${r.scheduledAt.getTime()}`;
    let fire = fires.get(key);
    if (!fire) {
      fire = { job: r.job, scheduledAt: r.scheduledAt, rows: [] };
      fires.set(key, fire);
    }
    fire.rows.push(r);
  }
  return [...fires.values()];
}

export interface FireSummary {
  outcome: RunStatus;
  /** How many times the job was started for the fire, on its winner (retries). */
  attempts: number;
  /** The winner's host (`srv-01 +2` for worker slots on more hosts); '' when nobody ran it. */
  host: string;
  durationMs: number | null;
  /** How many runners wrote a skip row for it. */
  skippedBy: number;
  /** Why nobody ran it: the skips' kind (`paused`, `overlap`), when nobody did. */
  skipKind: string | null;
  manual: boolean;
  /** The fire's latest generation: how many times it was re-run (0: never). */
  reruns: number;
  /** A run of it went past its warn (`duration.warn`: told `slow`). */
  slow: boolean;
  /** A run of it succeeded in less than the job's `duration.min` (told `too-short`). */
  tooShort: boolean;
}

export function summarise(fire: Fire): FireSummary {
  // A re-run fire is what its latest generation came to (a failure re-run with success is done).
  const generation = Math.max(0, ...fire.rows.filter((r) => r.winner).map((r) => r.rerun));
  const winners = fire.rows.filter((r) => r.winner && r.rerun === generation);
  const skips = fire.rows.filter((r) => r.status === 'skipped');
  const missed = fire.rows.find((r) => r.status === 'missed');
  const outcome: RunStatus =
    winners.length > 0
      ? (SEVERITY.find((s) => winners.some((w) => w.status === s)) ?? winners[0]!.status)
      : missed
        ? 'missed'
        : 'skipped';
  const hosts = [...new Set(winners.map((w) => w.host))];
  const ended = winners.filter((w) => w.finishedAt != null);
  return {
    outcome,
    attempts: Math.max(0, ...winners.map((w) => w.attempts)),
    host: hosts.length <= 1 ? (hosts[0] ?? '') : `${hosts[0]} +${hosts.length - 1}`,
    durationMs:
      ended.length === winners.length && ended.length > 0
        ? Math.max(...ended.map((w) => w.finishedAt!.getTime() - w.startedAt.getTime()))
        : null,
    skippedBy: new Set(skips.map((s) => s.host)).size,
    skipKind: winners.length === 0 && !missed ? (skips[0]?.reasonKind ?? null) : null,
    manual: fire.rows.some((r) => r.trigger === 'manual'),
    reruns: generation,
    slow: winners.some((w) => w.slowAt != null),
    tooShort: winners.some((w) => w.tooShort === true),
  };
}

export interface FireViewOptions {
  now: Date;
  width: number;
  paint: Paint;
  /** The time zone of each job of the schedules file, when it is loaded. */
  zones: Map<string, string>;
  /** Operators' actions tied to the rows (a kill, a manual run), by run id (cli/audit-view.ts). */
  actions?: ReadonlyMap<number, readonly AuditRecord[]>;
  /** The parent runs behind a child's rows, by run id (store/dependent-fire-reads.ts). */
  upstream?: ReadonlyMap<number, ParentRuns>;
}

/** The rows of a child's fire that name the parent runs behind them (their run ids). */
export function chainedRows(runs: readonly Run[]): number[] {
  return runs.filter((r) => r.trigger === 'after' || r.reasonKind === 'upstream').map((r) => r.id);
}

/**
 * The NOTE of a child's fire: the parent runs that let its latest generation start (`after
 * settle#123`), or, when nobody ran it, those that stopped it (`stopped by settle#123`).
 */
export function chainNote(fire: Fire, upstream: FireViewOptions['upstream']): string {
  if (!upstream || upstream.size === 0) return '';
  const started = fire.rows
    .filter((r) => r.winner && upstream.has(r.id))
    .sort((a, b) => b.rerun - a.rerun)[0];
  if (started) return `after ${parentRunsWords(upstream.get(started.id)!)}`;
  if (fire.rows.some((r) => r.winner || r.status === 'missed')) return '';
  const stopped = fire.rows.find((r) => r.reasonKind === 'upstream' && upstream.has(r.id));
  return stopped ? `stopped by ${parentRunsWords(upstream.get(stopped.id)!)}` : '';
}

/** Who acted on the fire's rows, for the NOTE column: `kill by alice`. */
function actionNotes(fire: Fire, actions: FireViewOptions['actions']): string[] {
  if (!actions) return [];
  const words = fire.rows.flatMap((r) =>
    (actions.get(r.id) ?? []).map((a) => `${a.action} by ${a.operator}`),
  );
  return [...new Set(words)];
}

export function renderFires(fires: Fire[], o: FireViewOptions): string {
  const form = instantForm(
    fires.map((f) => f.scheduledAt),
    o.now,
  );
  const zoned = (job: string) => {
    const zone = o.zones.get(job);
    return zone != null && !isUtc(zone) ? zone : null;
  };
  const local = fires.some((f) => zoned(f.job) != null);
  const columns: Column[] = [
    { head: 'FIRE (UTC)' },
    { head: 'AGO', optional: 2 },
    ...(local ? [{ head: 'LOCAL', optional: 1 }] : []),
    { head: 'JOB', flex: { min: 10, keep: 1 } },
    { head: 'OUTCOME' },
    { head: 'HOST', flex: { min: 8, keep: 1 } },
    { head: 'TOOK', right: true },
    { head: 'NOTE', flex: { min: 12 } },
  ];
  const rows = fires.map((f): Cell[] => {
    const s = summarise(f);
    const zone = zoned(f.job);
    const outcome = s.attempts > 1 ? `${s.outcome} ×${s.attempts}` : s.outcome;
    // The exit code, the reasons and the errors are in the wide view (and `baton explain`).
    const notes = [
      s.slow ? 'slow' : '',
      s.tooShort ? 'too short' : '',
      s.manual ? 'manual' : '',
      chainNote(f, o.upstream),
      s.reruns > 0 ? `re-run ×${s.reruns}` : '',
      ...actionNotes(f, o.actions),
      s.skippedBy > 0 ? `skipped by ${s.skippedBy}` : '',
    ];
    const nobody = s.outcome === 'skipped' || s.outcome === 'missed';
    return [
      { text: shortInstant(f.scheduledAt, form) },
      { text: relative(f.scheduledAt, o.now, 'short'), style: 'dim' },
      ...(local ? [{ text: zone ? shortLocal(f.scheduledAt, zone) : '' }] : []),
      { text: f.job },
      { text: outcome, ...styleOf(s.outcome) },
      nobody ? { text: s.skipKind ? `(${s.skipKind})` : '', style: 'dim' } : { text: s.host },
      { text: s.durationMs != null ? formatDuration(s.durationMs, 'table') : '' },
      {
        text: notes.filter((n) => n !== '').join(', '),
        ...(nobody ? {} : { style: 'dim' as const }),
      },
    ];
  });
  return fitTable(columns, rows, o.width, o.paint);
}

/** Every row, with every column: the view of `--attempts` / `-o wide`. */
export function renderAttempts(
  runs: Run[],
  paint: Paint,
  actions?: ReadonlyMap<number, readonly AuditRecord[]>,
  upstream?: ReadonlyMap<number, ParentRuns>,
): string {
  // A child's row names the parent runs behind it beside its trigger: `after settle#123`.
  const trigger = (r: Run) => {
    const parents = upstream?.get(r.id);
    return parents ? `${r.trigger} ${parentRunsWords(parents)}` : r.trigger;
  };
  const acted = (r: Run) => (actions?.get(r.id) ?? []).map((a) => ` [${actionWords(a)}]`).join('');
  return table(
    [
      'ID',
      'JOB',
      'SCHEDULED (UTC)',
      'HOST',
      'WINNER',
      'TRIGGER',
      'STATUS',
      'DURATION',
      'EXIT',
      'REASON / ERROR',
    ],
    runs.map((r) => [
      r.id,
      r.job,
      formatInstant(r.scheduledAt),
      r.host,
      winnerCell(r),
      trigger(r),
      // Retried runs say how many attempts it took: "done ×3"; a soft limit passed, which:
      // "done slow", "done too-short".
      paint(
        STYLES[r.status],
        (r.attempts > 1 ? `${r.status} ×${r.attempts}` : r.status) + limitMarks(r),
      ),
      durationCell(r),
      r.exitCode ?? '',
      oneLine(`${r.reason ?? r.error ?? ''}${acted(r)}`.trim(), 160),
    ]),
  );
}

/** A run's soft limits passed (`duration:`), after its status: ` slow`, ` too-short`. */
function limitMarks(r: Run): string {
  return `${r.slowAt != null ? ' slow' : ''}${r.tooShort ? ' too-short' : ''}`;
}

function styleOf(status: RunStatus): { style?: Style } {
  const style = STYLES[status];
  return style ? { style } : {};
}
