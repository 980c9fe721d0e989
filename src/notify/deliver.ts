/**
 * One delivery of one event to one target: the outbox's deliverer (daemon/notifier.ts) and
 * `baton notify test` call this and record what it answers. It never throws: whatever goes
 * wrong becomes a DeliveryResult, an unexpected error a retryable one, its text redacted of the
 * target's secrets (its URL, the URL's password, its header values). Every failure is redacted
 * of the other targets' secrets too (`targets`): a command target's stderr, which its error
 * quotes, may echo anything — the event's output, a file, another target's URL.
 */
import type { NotifyTarget } from '../config/schema.js';
import { errorMessage } from '../errors.js';
import { oneLine } from '../text.js';
import { runCommand } from './command.js';
import { sendEmail } from './email.js';
import { failed } from './result.js';
import { allTargetSecrets, targetSecrets } from '../config/notify-target-secrets.js';
import { redact } from './secrets.js';
import type { DeliveryResult, EnvLookup, NotificationEvent } from './types.js';
import { sendWebhook } from './webhook.js';

export interface DeliverOptions {
  /** Looks up a target's `urlFromEnv` variable. */
  env: EnvLookup;
  /** Aborted when the runner stops: the delivery ends now, as a retryable failure. */
  signal?: AbortSignal;
  /**
   * Variables of the runner that a `command` target does not inherit (besides BATON_*, which
   * none does): the `urlFromEnv` variables of connections and targets.
   */
  withholdEnv?: readonly string[];
  /** Every target of the schedule: no failure message shows a secret of any of them. */
  targets?: Readonly<Record<string, NotifyTarget>>;
  /** A `command` target's SIGTERM → SIGKILL (NOTIFY_COMMAND_KILL_GRACE_MS when not given). */
  killGraceMs?: number;
}

export async function deliverNotification(
  target: NotifyTarget,
  event: NotificationEvent,
  options: DeliverOptions,
): Promise<DeliveryResult> {
  const result = await deliverTo(target, event, options);
  if (result.ok || !options.targets) return result;
  try {
    const secrets = allTargetSecrets(options.targets, options.env, 'errors');
    return { ...result, error: redact(result.error, secrets) };
  } catch {
    return { ...result, error: `${target.kind} "${target.name}": not delivered` };
  }
}

async function deliverTo(
  target: NotifyTarget,
  event: NotificationEvent,
  options: DeliverOptions,
): Promise<DeliveryResult> {
  try {
    switch (target.kind) {
      case 'webhook':
        return await sendWebhook(target, event, options);
      case 'command':
        return await runCommand(target, event, options);
      case 'email':
        return await sendEmail(target, event, options);
      default: {
        // A target from a newer baton's outbox, say: nothing to send it with here.
        const unknown = target as { kind?: unknown; name?: unknown };
        return failed(
          `target "${String(unknown.name)}": unknown kind ${String(unknown.kind)}`,
          false,
        );
      }
    }
  } catch (err) {
    return failed(unexpected(target, err, options.env), true);
  }
}

/**
 * An unexpected error in words, redacted; when even the target's secrets cannot be listed (a
 * target not shaped as its type says), only the error's class: its text cannot be vetted.
 */
function unexpected(target: NotifyTarget, err: unknown, env: EnvLookup): string {
  const who = `${String(target.kind)} "${String(target.name)}"`;
  try {
    return `${who}: ${redact(oneLine(errorMessage(err), 300), targetSecrets(target, env, 'errors'))}`;
  } catch {
    return `${who}: unexpected error (${err instanceof Error ? err.name : typeof err})`;
  }
}
