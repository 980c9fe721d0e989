/**
 * PLACEHOLDER until the targets land (helper branch h-notify-targets replaces this file): posts
 * the event as JSON to a webhook; other kinds are refused.
 */
import type { NotifyTarget } from '../config/schema.js';
import type { DeliveryResult, EnvLookup, NotificationEvent } from './types.js';

export async function deliverNotification(
  target: NotifyTarget,
  event: NotificationEvent,
  options: { env: EnvLookup; signal?: AbortSignal },
): Promise<DeliveryResult> {
  if (target.kind !== 'webhook') {
    return {
      ok: false,
      error: 'not built yet',
      status: null,
      retryable: false,
      outcomeUnknown: false,
    };
  }
  const url = target.url.kind === 'url' ? target.url.url : options.env(target.url.variable);
  if (!url)
    return { ok: false, error: 'no URL', status: null, retryable: false, outcomeUnknown: false };
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': event.id },
      body: JSON.stringify({ version: 1, ...event }),
      signal: AbortSignal.timeout(target.timeoutMs),
      redirect: 'manual',
    });
    await res.arrayBuffer().catch(() => {});
    if (res.ok) return { ok: true, status: res.status };
    return {
      ok: false,
      error: `HTTP ${res.status}`,
      status: res.status,
      retryable: res.status >= 500 || res.status === 429,
      outcomeUnknown: false,
    };
  } catch (err) {
    const timeout = (err as Error).name === 'TimeoutError';
    return {
      ok: false,
      error: timeout ? 'timed out' : 'connection failed',
      status: null,
      retryable: true,
      outcomeUnknown: timeout,
    };
  }
}
