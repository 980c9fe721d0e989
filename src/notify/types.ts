/**
 * What a notification target is handed, and what it answers. A target (webhook, command, email)
 * only renders and sends; whether to send, how often, and the retries are the outbox's
 * (store/notifications.ts) and the deliverer's (daemon/notifier.ts).
 */
import type { NotifyEventName } from '../config/defaults.js';

/** The events of a job, plus `summary` (failures folded by the throttle) and `test`. */
export type NotificationKind = NotifyEventName | 'summary' | 'test';

/** One event as every target is told of it. Built once per outbox row: the same on every retry. */
export interface NotificationEvent {
  /**
   * Stable id of the event (the same for every target and every retry): sent as the webhook's
   * `Idempotency-Key`, the mail's Message-ID and `BATON_EVENT_ID`, so a receiver can drop a
   * repeat after a delivery whose outcome was unknown.
   */
  id: string;
  event: NotificationKind;
  namespace: string;
  /** The job; null for `runner-gone` and `test`. */
  job: string | null;
  /** The fire's instant (ISO); for an episode, when it began. */
  fire: string | null;
  /** Worker slot of a fan-out fire; null when the job has one worker. */
  slot: number | null;
  /** The runner that ran the fire, or the runner that is gone. */
  host: string | null;
  /** The run's status (`failed`, `done`, …), when the event is about a run. */
  status: string | null;
  exitCode: number | null;
  /** How long the run took; for `slow`, how long it had run when told. */
  durationMs: number | null;
  /** For `slow` and `too-short`: the limit it passed (its warn, or the job's `min`); else null
   * (absent: none). */
  limitMs?: number | null;
  error: string | null;
  /** The end of the run's output, already masked, at most a few KiB; null when none is kept. */
  output: string | null;
  runId: number | null;
  /** For `summary`: how many failures it tells of. */
  count: number | null;
  /** For `upstream`: the parent that did not let the child run, and why; null otherwise. */
  upstream: UpstreamFacts | null;
  /** For `blackout-started` and `blackout-ended`: the blackout; null (or absent) otherwise. */
  blackout?: BlackoutFacts | null;
  /** One line for people: "settle failed on batch-2 (exit 3), fire of 2026-12-03 03:00 UTC". */
  text: string;
  /** When the event was recorded (ISO). */
  at: string;
}

/**
 * Why a child job (`after:`) was skipped as `upstream`: its parent, the parent's run at the fire
 * (null when it had none) and that run's status (`failed`, `timeout`, `missed`, `skipped`, …, or
 * `running` when it had not ended by the child's deadline), and the reason as the history has it.
 */
export interface UpstreamFacts {
  parent: string | null;
  parentRunId: number | null;
  parentStatus: string | null;
  reason: string | null;
}

/**
 * A blackout (`baton blackout`) as its two events tell it: its id, its range [from, until), when
 * it ends or ended (`endsAt`: its cancel, when that came first, then `cancelledBy` says who), the
 * jobs it covers (null: every job), why, and who recorded it (`operator@host`).
 */
export interface BlackoutFacts {
  id: number;
  from: string;
  until: string;
  endsAt: string;
  jobs: string[] | null;
  reason: string;
  by: string;
  cancelledBy: string | null;
}

/** How a delivery went. */
export type DeliveryResult =
  | { ok: true; status: number | null }
  | {
      ok: false;
      /** Never contains the target's URL or credentials. */
      error: string;
      status: number | null;
      /** Worth trying again (a refused connection, a 5xx, a 429), or not (a 4xx, bad config). */
      retryable: boolean;
      /**
       * The receiver may have it already (a timeout after the request was sent): a retry can
       * repeat it, with the same event id.
       */
      outcomeUnknown: boolean;
    };

/** Looks up an environment variable of the runner (a `urlFromEnv`); undefined when unset. */
export type EnvLookup = (name: string) => string | undefined;
