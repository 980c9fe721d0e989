/** The one shape of a failed delivery, so that each target reads as its cases. */
import type { DeliveryResult } from './types.js';

export function failed(
  error: string,
  retryable: boolean,
  outcomeUnknown = false,
  status: number | null = null,
): DeliveryResult {
  return { ok: false, error, status, retryable, outcomeUnknown };
}
