/**
 * `baton definitions` as a terminal and a script read it: each job's timing versions, the live
 * runners' versions, and the transition preview of a switch — the fires around it under the old
 * timing and the new one, which the fleet runs, and the warning where its day runs the job twice
 * or skips it. `definitions apply` prints the same preview for the change it records. The
 * judgements are fleet/timing-preview.ts's; here only words, tables and the JSON documents.
 */
import { shortTiming } from '../schedule/calendar.js';
import type { ApplyPlan, ApplyResult, ApplyStep } from '../actions/definitions.js';
import {
  fromTheStart,
  type JobTimingView,
  type NumberedTiming,
  type TransitionPreview,
  type VersionView,
} from '../fleet/timing-preview.js';
import { describeTiming } from '../fleet/timing-status.js';
import { formatDuration } from '../config/duration.js';
import { formatInstant } from '../text.js';
import { table } from './format.js';
import { formatLocal, isUtc, relative, shortLocal } from './times.js';

const utc = (at: Date) => `${formatInstant(at)} UTC`;

/** `version 2, "0 4 * * *" (Europe/Paris)`. */
function versionWords(t: NumberedTiming): string {
  return `version ${t.version}, ${describeTiming(t)}`;
}

function effectiveCell(r: VersionView['record']): string {
  return fromTheStart(r.effectiveAt) ? 'from the start' : formatInstant(r.effectiveAt);
}

/** One job's versions, runners and pending switches, as `baton definitions` prints them. */
export function renderJob(v: JobTimingView, now: Date): string {
  let out = `${v.job}: ${inForceWords(v)}${fileWords(v)}\n`;
  if (v.versions.length > 0) {
    const rows = v.versions.map(({ record: r, state, hosts }) => [
      r.version,
      shortTiming(r.schedule),
      r.timezone,
      effectiveCell(r),
      r.chosenBy,
      formatInstant(r.recordedAt),
      r.recordedBy,
      state,
      hosts.join(', '),
    ]);
    out += indent(
      table(
        [
          'VERSION',
          'SCHEDULE',
          'TIME ZONE',
          'EFFECTIVE (UTC)',
          'CHOSEN BY',
          'RECORDED (UTC)',
          'BY',
          'STATE',
          'LIVE RUNNERS',
        ],
        rows,
      ),
    );
  }
  for (const r of v.runners) {
    if (r.version == null) {
      out += `  ${r.host} does not say which version it has (not recorded yet, or an older baton)\n`;
    } else if (r.held) {
      out +=
        `  ${r.host} has version ${r.version}, older than the version in force: it holds ` +
        `${v.job} (load the new schedules file there)\n`;
    } else if (r.holdsFrom) {
      out +=
        `  ${r.host} has version ${r.version}: it holds ${v.job} from ` +
        `${utc(r.holdsFrom)} unless it loads the new schedules file before\n`;
    }
  }
  for (const s of v.switches) out += renderPreview(v.job, s, now);
  return out;
}

function inForceWords(v: JobTimingView): string {
  if (v.versions.length === 0) return 'no timing version recorded';
  const r = v.versions.find((x) => x.state === 'in-force')?.record;
  return r ? `version ${r.version} in force, ${describeTiming(r)}` : 'no version in force yet';
}

function fileWords(v: JobTimingView): string {
  if (!v.file) return '';
  if (v.file.version != null) return `; this schedules file has version ${v.file.version}`;
  return (
    `; this schedules file's timing, ${describeTiming(v.file)}, is not recorded ` +
    '(`baton definitions apply` previews and records it)'
  );
}

/**
 * The switch and the fires around it: a table of both timings' fires with which the fleet runs,
 * a row for the switch itself, and what its day comes to.
 */
export function renderPreview(job: string, p: TransitionPreview, now: Date): string {
  const tz = p.to.timezone;
  const local = !isUtc(tz) || (p.from != null && !isUtc(p.from.timezone));
  const when = relative(p.at, now);
  let out =
    `\n  switch of ${job} to ${versionWords(p.to)} at ${utc(p.at)}` +
    (local ? ` (${shortLocal(p.at, tz)} ${tz})` : '') +
    `, ${when}\n` +
    (p.from ? `  from ${versionWords(p.from)}\n` : '');
  const oldHead = p.from ? `VERSION ${p.from.version} (OLD)` : 'OLD';
  const head = [
    'FIRE (UTC)',
    ...(local ? [`LOCAL (${tz})`] : []),
    oldHead,
    `VERSION ${p.to.version} (NEW)`,
  ];
  const row = (at: Date, old: string, neu: string) => [
    formatInstant(at),
    ...(local ? [shortLocal(at, tz)] : []),
    old,
    neu,
  ];
  // One row an instant: both timings' cells side by side where they fire together.
  const byInstant = new Map<number, { old: string; neu: string }>();
  for (const f of p.fires) {
    const cells = byInstant.get(f.at.getTime()) ?? { old: '', neu: '' };
    cells[f.timing === 'old' ? 'old' : 'neu'] = f.runs ? 'runs' : 'not run';
    byInstant.set(f.at.getTime(), cells);
  }
  const rows: string[][] = [];
  let switched = false;
  for (const [ms, cells] of byInstant) {
    if (!switched && ms >= p.at.getTime()) {
      rows.push(row(p.at, '── switch ──', '── switch ──'));
      switched = true;
    }
    rows.push(row(new Date(ms), cells.old, cells.neu));
  }
  if (!switched) rows.push(row(p.at, '── switch ──', '── switch ──'));
  out += indent(table(head, rows), 2);
  out += `  ${anomalyWords(job, p)}\n`;
  return out;
}

/** The switch's day: the warning where it runs the job twice or skips it, else that it does not. */
export function anomalyWords(job: string, p: TransitionPreview): string {
  const a = p.anomaly;
  const tz = p.to.timezone;
  if (!p.from) return `${job} has no version in force before this one: nothing to compare`;
  if (p.same) {
    return (
      `version ${p.to.version} has version ${p.from.version}'s timing: the switch changes no ` +
      'fire, only which version is in force'
    );
  }
  if (!a) {
    return (
      `${p.day} (${tz}), the switch's day, runs ${job} as often as one of the two timings ` +
      'would: no day runs it twice or skips it'
    );
  }
  const counts =
    `version ${p.from.version} alone runs it ${times(a.oldCount)} that day, version ` +
    `${p.to.version} ${times(a.newCount)}`;
  const fires = a.fires.map((f) => shortLocal(f, tz)).join(', ');
  const choose =
    "choose another instant with --at (e.g. --at midnight: the day boundary in the job's zone)";
  return a.kind === 'twice'
    ? `warning: the switch runs ${job} ${times(a.fires.length)} on ${a.day} (${tz}), at ` +
        `${fires}: more than either timing (${counts}); ${choose}`
    : `warning: the switch skips ${job} on ${a.day} (${tz}): ` +
        (a.fires.length === 0 ? 'no fire that day' : `only ${times(a.fires.length)}, at ${fires}`) +
        `, fewer than either timing (${counts}); ${choose}`;
}

function times(n: number): string {
  return n === 1 ? 'once' : n === 2 ? 'twice' : `${n} times`;
}

function indent(text: string, by = 2): string {
  const pad = ' '.repeat(by);
  return text
    .split('\n')
    .map((l) => (l ? pad + l : l))
    .join('\n');
}

/** One step of `definitions apply`: what it does, its preview, what came of it. */
export function renderStep(
  step: ApplyStep,
  plan: ApplyPlan,
  result: ApplyResult | null,
  dryRun: boolean,
): string {
  const t = describeTiming(step.timing);
  const at = utc(step.at);
  const chosen =
    step.chosenBy === 'operator'
      ? 'chosen with --at'
      : `the default: the first fire at least ${formatDuration(plan.settleMs)} from now whose ` +
        'day the switch neither doubles nor skips';
  let out: string;
  switch (step.kind) {
    case 'first':
      out = `${step.job}: new to the fleet: ${t} becomes version 1, in force from the start\n`;
      break;
    case 'unchanged':
      out = `${step.job}: unchanged: ${t} is version ${step.version}, in force\n`;
      break;
    case 'pending':
      out = `${step.job}: pending: ${t} is version ${step.version}, effective ${at} (${step.chosenBy})\n`;
      break;
    case 'retime':
      out =
        `${step.job}: move version ${step.version}, ${t}, from ${utc(step.previousAt!)} to ` +
        `${at} (chosen with --at)\n`;
      break;
    case 'change':
    case 'rollback':
      out =
        `${step.job}: ${step.kind === 'rollback' ? `roll back to version ${step.rollbackOf}'s timing` : 'change'}: ` +
        `${t} becomes version ${step.version}, effective ${at} (${chosen})\n`;
      break;
  }
  for (const n of step.notes) out += `  note: ${n}\n`;
  if (step.supersedes.length > 0) {
    out +=
      `  note: version(s) ${step.supersedes.join(', ')}, pending, will never take effect: ` +
      `version ${step.version} does first\n`;
  }
  if (step.preview) out += renderPreview(step.job, step.preview, plan.now);
  if (result && result.step.kind !== 'pending' && result.step.kind !== 'unchanged') {
    out +=
      `  ${result.applied ? '' : 'NOT APPLIED: '}${result.outcome}` +
      (result.auditId != null ? ` (audit ${result.auditId})` : '') +
      '\n';
  } else if (dryRun && step.kind !== 'pending' && step.kind !== 'unchanged') {
    out += '  dry run: nothing written\n';
  }
  return out;
}

/** `local`: the job's wall clock of an instant, with its offset. */
const local = (at: Date, tz: string) => formatLocal(at, tz);

function timingToJson(t: NumberedTiming | null) {
  return t && { version: t.version, schedule: t.schedule, timezone: t.timezone };
}

/** A transition preview in `--json`. */
export function previewToJson(p: TransitionPreview) {
  return {
    from: timingToJson(p.from),
    to: timingToJson(p.to),
    at: p.at.toISOString(),
    atLocal: local(p.at, p.to.timezone),
    day: p.day,
    fires: p.fires.map((f) => ({
      at: f.at.toISOString(),
      local: local(f.at, p.to.timezone),
      timing: f.timing,
      version: f.timing === 'old' ? (p.from?.version ?? null) : p.to.version,
      runs: f.runs,
    })),
    same: p.same,
    anomaly: p.anomaly && {
      kind: p.anomaly.kind,
      day: p.anomaly.day,
      fires: p.anomaly.fires.map((f) => f.toISOString()),
      oldCount: p.anomaly.oldCount,
      newCount: p.anomaly.newCount,
    },
  };
}

/** A version in `--json`. */
export function versionToJson(v: VersionView) {
  const r = v.record;
  return {
    version: r.version,
    schedule: r.schedule,
    timezone: r.timezone,
    // Null for a first version: in force from the start.
    effectiveAt: fromTheStart(r.effectiveAt) ? null : r.effectiveAt.toISOString(),
    chosenBy: r.chosenBy,
    recordedAt: r.recordedAt.toISOString(),
    recordedBy: r.recordedBy,
    state: v.state,
    runners: v.hosts,
  };
}

/** One job of `baton definitions --json`. */
export function jobTimingToJson(v: JobTimingView) {
  return {
    job: v.job,
    inForce: v.inForce,
    versions: v.versions.map(versionToJson),
    runners: v.runners.map((r) => ({
      host: r.host,
      version: r.version,
      held: r.held,
      holdsFrom: r.holdsFrom?.toISOString() ?? null,
    })),
    file: v.file,
    switches: v.switches.map(previewToJson),
  };
}

/** One step of `baton definitions apply --json`. */
export function stepToJson(step: ApplyStep, result: ApplyResult | null) {
  return {
    job: step.job,
    kind: step.kind,
    version: step.version,
    schedule: step.timing.schedule,
    timezone: step.timing.timezone,
    effectiveAt: fromTheStart(step.at) ? null : step.at.toISOString(),
    chosenBy: step.chosenBy,
    previousAt: step.previousAt?.toISOString() ?? null,
    rollbackOf: step.rollbackOf,
    supersedes: step.supersedes,
    notes: step.notes,
    preview: step.preview && previewToJson(step.preview),
    applied: result?.applied ?? false,
    outcome: result?.outcome ?? null,
    auditId: result?.auditId ?? null,
    recorded: result?.record
      ? {
          version: result.record.version,
          effectiveAt: fromTheStart(result.record.effectiveAt)
            ? null
            : result.record.effectiveAt.toISOString(),
          chosenBy: result.record.chosenBy,
          recordedBy: result.record.recordedBy,
        }
      : null,
  };
}
