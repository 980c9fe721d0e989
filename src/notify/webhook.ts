/**
 * The `webhook` target: one HTTP POST of the event (baton's JSON document, or `{text}` for
 * Slack, Mattermost and Teams).
 *
 * node:http rather than fetch: the outbox needs to know whether a failed request may have
 * reached the receiver. http.ClientRequest tells when the whole request was handed to the
 * socket ('finish'), so a refused connection, a failed DNS lookup or a reset before that point
 * is a plain retry, and only a timeout or reset after it is `outcomeUnknown` (the receiver may
 * have it; a retry repeats it with the same Idempotency-Key). fetch reports all of these as one
 * "fetch failed" or AbortError, and follows redirects unless told not to; node:http never
 * follows one, and a 3xx is a failure (a hook that moved is a configuration to fix, and a
 * redirect would carry the event somewhere nobody configured).
 *
 * The URL is a secret (a Slack hook's path is its password), so are the header values: errors
 * say which target and what failed, built from fixed words, never from the URL or a header.
 */
import http from 'node:http';
import https from 'node:https';
import { formatDuration } from '../config/duration.js';
import type { NotifyTarget } from '../config/schema.js';
import { version } from '../version.js';
import { eventDocument, slackText } from './message.js';
import { headerSecrets, urlSecrets } from '../config/notify-target-secrets.js';
import { redact, resolveSecret } from './secrets.js';
import { failed } from './result.js';
import type { DeliveryResult, EnvLookup, NotificationEvent } from './types.js';

export type WebhookTarget = Extract<NotifyTarget, { kind: 'webhook' }>;

export interface SendOptions {
  env: EnvLookup;
  signal?: AbortSignal | undefined;
}

/** What an HTTP status means for the outbox. */
export function classifyStatus(status: number): DeliveryResult {
  if (status >= 200 && status < 300) return { ok: true, status };
  const retryable = status === 408 || status === 429 || status >= 500;
  const why =
    status >= 300 && status < 400
      ? `HTTP ${status} (redirects are not followed)`
      : `HTTP ${status}`;
  return { ok: false, error: why, status, retryable, outcomeUnknown: false };
}

/** Socket errors by code, in words; none of node's messages (they name the host and port). */
const SOCKET_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed',
  EAI_NONAME: 'host name not found',
  ETIMEDOUT: 'connection timed out',
  ENETUNREACH: 'network unreachable',
  EHOSTUNREACH: 'host unreachable',
  ECONNABORTED: 'connection aborted',
};

function socketError(code: string | undefined): string {
  if (code == null) return 'request failed';
  if (SOCKET_ERRORS[code]) return SOCKET_ERRORS[code];
  if (/CERT|TLS|SSL/.test(code)) return `TLS error (${code})`;
  return `request failed (${code})`;
}

/**
 * The request's headers: ours, the target's (which may replace Content-Type or User-Agent), then
 * the two a receiver relies on, which stay ours. Keys lower-cased so that none is sent twice.
 */
function requestHeaders(
  target: WebhookTarget,
  event: NotificationEvent,
  length: number,
): Record<string, string> | string {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': `baton/${version}`,
  };
  for (const [name, value] of Object.entries(target.headers)) {
    try {
      http.validateHeaderName(name);
      http.validateHeaderValue(name, value);
    } catch {
      return `header "${name}" is not a valid HTTP header`;
    }
    headers[name.toLowerCase()] = value;
  }
  headers['idempotency-key'] = event.id;
  headers['x-baton-event'] = event.event;
  headers['content-length'] = String(length);
  return headers;
}

export async function sendWebhook(
  target: WebhookTarget,
  event: NotificationEvent,
  options: SendOptions,
): Promise<DeliveryResult> {
  const who = `webhook "${target.name}"`;
  const resolved = resolveSecret(target.url, options.env);
  if (!resolved.ok) return failed(`${who}: ${resolved.error}`, false);
  let url: URL;
  try {
    url = new URL(resolved.value);
  } catch {
    return failed(`${who}: the URL is not a valid URL`, false);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return failed(`${who}: the URL is not http(s)`, false);
  }
  const body = Buffer.from(
    JSON.stringify(target.format === 'slack' ? slackText(event) : eventDocument(event)),
  );
  const headers = requestHeaders(target, event, body.length);
  if (typeof headers === 'string') return failed(`${who}: ${headers}`, false);

  const result = await post(url, headers, body, target.timeoutMs, options.signal);
  if (result.ok) return result;
  // Built from fixed words; redacted all the same, so that a later change cannot leak the URL.
  const secrets = [
    ...urlSecrets(resolved.value, 'errors'),
    ...headerSecrets(target.headers, 'errors'),
  ];
  return { ...result, error: `${who}: ${redact(result.error, secrets)}` };
}

/** One POST; resolves (never rejects) with what happened, errors without the target's name. */
function post(
  url: URL,
  headers: Record<string, string>,
  body: Buffer,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<DeliveryResult> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve(failed('not sent: the runner is stopping', true));
      return;
    }
    /** The whole request reached the socket: from here on the receiver may have it. */
    let sent = false;
    let settled = false;
    const settle = (r: DeliveryResult): void => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
    // agent: false: a connection of its own, closed after the answer (a delivery is rare, and
    // a kept-alive socket the receiver closed would fail the next one for no reason).
    const req = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'POST',
      headers,
      agent: false,
    });
    const finish = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const timer = setTimeout(() => {
      settle(
        failed(
          sent
            ? `timed out after ${formatDuration(timeoutMs, 'brief')} waiting for the answer`
            : `timed out after ${formatDuration(timeoutMs, 'brief')} before the request was sent`,
          true,
          sent,
        ),
      );
      finish();
      req.destroy();
    }, timeoutMs);
    const onAbort = (): void => {
      settle(failed('stopped: the runner is stopping', true, sent));
      finish();
      req.destroy();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    req.on('finish', () => {
      sent = true;
    });
    req.on('response', (res) => {
      settle(classifyStatus(res.statusCode ?? 0));
      // The body is not read (it could echo anything); drained so the socket can close.
      res.resume();
      res.on('end', finish);
      res.on('close', () => {
        finish();
        req.destroy();
      });
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      const what = socketError(err.code);
      settle(failed(sent ? `${what} after the request was sent` : what, true, sent));
      finish();
    });
    req.end(body);
  });
}
