/**
 * `baton status`'s judgement of the notification outbox: which targets' deliveries are failing.
 */
import { formatDuration } from '../config/duration.js';
import type { OutboxState } from '../store/notification-reads.js';
import type { Warning } from './check-state.js';

/** Notifications retried for longer than this make a warning: the target is down, not slow. */
export const NOTIFY_STUCK_SECONDS = 300;

const brief = (ms: number) => formatDuration(ms, 'brief');

/**
 * Deliveries that are failing: some given up in the last hour, or retried for longer than
 * NOTIFY_STUCK_SECONDS. A warning, not critical: the jobs run; only the telling of them fails.
 */
export function notifyWarnings(state: OutboxState): Warning[] {
  const warnings: Warning[] = [];
  const targets = new Set([...state.failedRecently.keys(), ...state.retrying.keys()]);
  for (const target of [...targets].sort()) {
    const failed = state.failedRecently.get(target) ?? 0;
    const retrying = state.retrying.get(target) ?? 0;
    const oldest = state.oldestPendingSeconds.get(target) ?? 0;
    const stuck = retrying > 0 && oldest > NOTIFY_STUCK_SECONDS;
    if (failed === 0 && !stuck) continue;
    const parts = [
      failed > 0 ? `${failed} given up in the last hour` : null,
      stuck ? `${retrying} retrying, the oldest waiting ${brief(oldest * 1000)}` : null,
    ].filter(Boolean);
    warnings.push({
      kind: 'notify-failing',
      message: `notifications to "${target}" are failing: ${parts.join('; ')} (baton notifications --status ${failed > 0 ? 'failed' : 'pending'})`,
      hosts: [target],
    });
  }
  return warnings;
}
