/**
 * An event as each kind of target shows it: the JSON document of a `format: json` webhook (also
 * a command's stdin), the `{text}` of a chat webhook, a mail's subject and body, a command's
 * `BATON_EVENT_*` variables. Pure functions of the event, so that every retry sends the same
 * thing. Nothing here links anywhere: baton has no URL a receiver could be trusted to reach.
 */
import { formatDuration } from '../config/duration.js';
import { oneLine, truncate } from '../text.js';
import type { BlackoutFacts, NotificationEvent, UpstreamFacts } from './types.js';

/** Bumped only when a field changes meaning or goes away; new fields keep version 1. */
export const EVENT_DOCUMENT_VERSION = 1;

/** The JSON document: docs/notifications.md lists its fields. */
export interface EventDocument {
  version: typeof EVENT_DOCUMENT_VERSION;
  id: string;
  event: NotificationEvent['event'];
  namespace: string;
  job: string | null;
  fire: string | null;
  slot: number | null;
  host: string | null;
  status: string | null;
  exitCode: number | null;
  durationMs: number | null;
  /** For `slow` and `too-short`: the warn or `min` the run passed. */
  limitMs: number | null;
  error: string | null;
  output: string | null;
  runId: number | null;
  count: number | null;
  /** For `upstream`: the parent that did not let the child run, its run and status, why. */
  upstream: UpstreamFacts | null;
  /** For `blackout-started` and `blackout-ended`: the blackout. */
  blackout: BlackoutFacts | null;
  text: string;
  at: string;
}

/**
 * Field by field rather than a spread: a field added to NotificationEvent for baton's own use
 * does not reach receivers until it is added here (and documented).
 */
export function eventDocument(e: NotificationEvent): EventDocument {
  return {
    version: EVENT_DOCUMENT_VERSION,
    id: e.id,
    event: e.event,
    namespace: e.namespace,
    job: e.job,
    fire: e.fire,
    slot: e.slot,
    host: e.host,
    status: e.status,
    exitCode: e.exitCode,
    durationMs: e.durationMs,
    limitMs: e.limitMs ?? null,
    error: e.error,
    output: e.output,
    runId: e.runId,
    count: e.count,
    upstream: e.upstream
      ? {
          parent: e.upstream.parent,
          parentRunId: e.upstream.parentRunId,
          parentStatus: e.upstream.parentStatus,
          reason: e.upstream.reason,
        }
      : null,
    blackout: e.blackout
      ? {
          id: e.blackout.id,
          from: e.blackout.from,
          until: e.blackout.until,
          endsAt: e.blackout.endsAt,
          jobs: e.blackout.jobs,
          reason: e.blackout.reason,
          by: e.blackout.by,
          cancelledBy: e.blackout.cancelledBy,
        }
      : null,
    text: e.text,
    at: e.at,
  };
}

/** `settle#123 (failed)`: the parent of an `upstream` event, as a fact line. */
function parentFact(u: UpstreamFacts | null): string | null {
  if (!u?.parent) return null;
  const run = u.parentRunId != null ? `#${u.parentRunId}` : '';
  return `${u.parent}${run}${u.parentStatus ? ` (${u.parentStatus})` : ''}`;
}

/** The facts worth a line each, in the order people read them; absent ones are left out. */
function facts(e: NotificationEvent): [string, string][] {
  const rows: [string, string | null][] = [
    ['host', e.host],
    ['parent', parentFact(e.upstream)],
    ['reason', e.upstream?.reason == null ? null : oneLine(e.upstream.reason, 500)],
    ['blackout', e.blackout ? `#${e.blackout.id} by ${e.blackout.by}` : null],
    ['reason', e.blackout ? oneLine(e.blackout.reason, 500) : null],
    ['from', e.blackout?.from ?? null],
    ['until', e.blackout?.endsAt ?? null],
    ['exit code', e.exitCode == null ? null : String(e.exitCode)],
    ['duration', e.durationMs == null ? null : formatDuration(e.durationMs, 'brief')],
    [
      e.event === 'too-short' ? 'min' : 'warn',
      e.limitMs == null ? null : formatDuration(e.limitMs, 'brief'),
    ],
    ['error', e.error == null ? null : oneLine(e.error, 500)],
  ];
  return rows.filter((r): r is [string, string] => r[1] != null && r[1] !== '');
}

/** A chat message's output block is cut to its end: what a failing job printed last. */
const CHAT_OUTPUT_MAX = 3_000;
const SUBJECT_MAX = 150;

/** Slack's three special characters (mrkdwn); `<` also starts links and mentions (`<!channel>`). */
function slackEscape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** The end of `output`, cut at a line when one starts near the cut. */
function tail(output: string, max: number): string {
  if (output.length <= max) return output;
  let cut = output.slice(output.length - max);
  const newline = cut.indexOf('\n');
  if (newline >= 0 && newline < 200) cut = cut.slice(newline + 1);
  return `…\n${cut}`;
}

/**
 * The `{text}` payload Slack, Mattermost and Teams incoming webhooks all accept: the headline,
 * a line per fact, the output's end in a code block. A ``` inside the output would close the
 * block early, so a zero-width space is put between its backticks.
 */
export function slackText(e: NotificationEvent): { text: string } {
  const lines = [slackEscape(oneLine(e.text, 500))];
  for (const [name, value] of facts(e)) lines.push(`${name}: ${slackEscape(value)}`);
  const output = e.output?.replace(/\s+$/, '');
  if (output) {
    const body = slackEscape(tail(output, CHAT_OUTPUT_MAX)).replace(/`(?=``)/g, '`\u200b');
    lines.push('```', body, '```');
  }
  return { text: lines.join('\n') };
}

/** Subject and plain-text body of the mail. */
export function emailMessage(e: NotificationEvent): { subject: string; text: string } {
  // oneLine takes out newlines (no header injection); control characters go too.
  // eslint-disable-next-line no-control-regex
  const subject = oneLine(`[baton] ${e.text}`.replace(/[\u0000-\u001f\u007f]/g, ' '), SUBJECT_MAX);
  const rows: [string, string | null][] = [
    ['event', e.event],
    ['namespace', e.namespace],
    ['job', e.job],
    ['fire', e.fire],
    ['slot', e.slot == null ? null : String(e.slot)],
    ['status', e.status],
    ...facts(e),
    ['failures', e.count == null ? null : String(e.count)],
    ['run id', e.runId == null ? null : String(e.runId)],
    ['event id', e.id],
  ];
  const lines = [e.text, ''];
  for (const [name, value] of rows)
    if (value != null && value !== '') lines.push(`${name}: ${value}`);
  const output = e.output?.replace(/\s+$/, '');
  if (output) lines.push('', 'The end of its output:', '', output);
  return { subject, text: `${lines.join('\n')}\n` };
}

/** A variable's value cannot hold NUL; null becomes the empty string. */
function envValue(v: string | number | null): string {
  return v == null ? '' : String(v).replace(/\0/g, '');
}

/** The event as environment variables of a `command` target (the output is on stdin only). */
export function eventEnv(e: NotificationEvent): Record<string, string> {
  return {
    BATON_EVENT_ID: envValue(e.id),
    BATON_EVENT: envValue(e.event),
    BATON_EVENT_NAMESPACE: envValue(e.namespace),
    BATON_EVENT_JOB: envValue(e.job),
    BATON_EVENT_FIRE: envValue(e.fire),
    BATON_EVENT_SLOT: envValue(e.slot),
    BATON_EVENT_HOST: envValue(e.host),
    BATON_EVENT_STATUS: envValue(e.status),
    BATON_EVENT_EXIT_CODE: envValue(e.exitCode),
    BATON_EVENT_DURATION_MS: envValue(e.durationMs),
    BATON_EVENT_LIMIT_MS: envValue(e.limitMs ?? null),
    BATON_EVENT_ERROR: envValue(e.error == null ? null : truncate(e.error, 2_000)),
    BATON_EVENT_RUN_ID: envValue(e.runId),
    BATON_EVENT_COUNT: envValue(e.count),
    BATON_EVENT_PARENT: envValue(e.upstream?.parent ?? null),
    BATON_EVENT_PARENT_RUN_ID: envValue(e.upstream?.parentRunId ?? null),
    BATON_EVENT_PARENT_STATUS: envValue(e.upstream?.parentStatus ?? null),
    BATON_EVENT_REASON: envValue(e.upstream?.reason ?? e.blackout?.reason ?? null),
    BATON_EVENT_BLACKOUT_ID: envValue(e.blackout?.id ?? null),
    BATON_EVENT_BLACKOUT_FROM: envValue(e.blackout?.from ?? null),
    BATON_EVENT_BLACKOUT_UNTIL: envValue(e.blackout?.endsAt ?? null),
    BATON_EVENT_BLACKOUT_JOBS: envValue(e.blackout ? (e.blackout.jobs?.join(',') ?? '*') : null),
    BATON_EVENT_BLACKOUT_BY: envValue(e.blackout?.by ?? null),
    BATON_EVENT_TEXT: envValue(e.text),
    BATON_EVENT_AT: envValue(e.at),
  };
}
