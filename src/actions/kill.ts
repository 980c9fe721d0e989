/**
 * The issuer's half of `baton kill` (and of the write API's kill): from any host, through the
 * database. It writes the kill request on the run's row (conditional on the row still being
 * `running`), records the action in the audit, and waits for the owner's verdict
 * (fire/kill-watch.ts acts on the request within about two seconds). What it can come to:
 *
 * - `killed`: the owner stopped the run; the row says `killed`, by whom and why;
 * - `finished`: the run was not running (any more) when asked — nothing changed; or it ended on
 *   its own before the owner acted (then the row says how, and the request is moot);
 * - `lost`: its runner is gone (the reaper's test: its lock session no longer holds its session
 *   lock), so nobody will act: the row is declared `lost` as the reaper would, not left "being
 *   killed" — the job itself was stopped by its watchdog when the runner died;
 * - `pending`: the owner is alive but did not act in time (a stalled runner); the request stands
 *   and will be acted on when it does;
 * - `not-found`: no run has that id (in the order's namespace, when it names one).
 *
 * An order for one namespace (the write API's: a runner acts for its own namespace only) is
 * checked before anything happens — the run is read in that namespace, so another namespace's run
 * is `not-found` and nothing is written — and again by every statement that changes the row
 * (the request, a `lost` verdict), which names the namespace as well as the id.
 */
import { declareLost, type ReapScope } from '../coordination/reaper.js';
import { delay } from '../delay.js';
import { recordAction, setActionOutcome, type AuditVia } from '../store/audit.js';
import type { Queryable } from '../store/deadline.js';
import {
  readKillState,
  requestKill,
  serverStartedBefore,
  type KillState,
} from '../store/kill-requests.js';
import { formatDuration } from '../config/duration.js';
import { authorize, scopeDetails, type ActionScope } from './scope.js';

/** How long past the grace the issuer waits for the verdict before it says `pending`. */
export const KILL_WAIT_SLACK_MS = 5_000;
const POLL_MS = 150;

export interface KillOrder {
  runId: number;
  /**
   * The only namespace whose run this order may touch (the write API's runner's); null for any
   * (`baton kill`, whose operator holds the database's credentials and so every namespace).
   */
  namespace: string | null;
  /** The OS user (src/operator.ts) or the API token's name. */
  operator: string;
  /** Where the order was given. */
  host: string;
  via: AuditVia;
  reason: string | null;
  /** A scoped write token's scope (actions/scope.ts): judged on the run's job and namespace. */
  scope?: ActionScope;
  graceMs: number;
  /** How long to wait for the outcome (default: the grace plus KILL_WAIT_SLACK_MS). */
  waitMs?: number;
  /** Whom a job's `lost` is told to, when the run is declared lost (as the reaper's). */
  targetsOf?: (namespace: string, job: string) => ReturnType<NonNullable<ReapScope['targetsOf']>>;
}

export type KillOutcome =
  | { kind: 'not-found'; runId: number }
  | {
      kind: 'killed' | 'finished' | 'lost' | 'pending';
      run: KillState;
      /** The request was already there, from someone else (`killed`, `pending`). */
      alreadyRequested: boolean;
      /** From the request to the verdict, by the database's clock (`killed`). */
      tookMs: number | null;
      /** `finished`: the run had ended before the request could be written. */
      beforeRequest: boolean;
    };

/** Gives the order and waits for what came of it (see the header). */
export async function killRun(db: Queryable, order: KillOrder): Promise<KillOutcome> {
  const since = await serverStartedBefore(db);
  const read = () => readKillState(db, order.runId, order.namespace, since);
  let run = await read();
  if (!run) return { kind: 'not-found', runId: order.runId };
  // Judged on the run as read (its job, its namespace), before anything is written but the
  // refusal's audit row.
  await authorize(db, order, {
    action: 'kill',
    job: run.job,
    namespace: run.namespace,
    runId: run.id,
  });
  const audit = (outcome: string | null) =>
    recordAction(db, {
      namespace: run!.namespace,
      action: 'kill',
      job: run!.job,
      runId: run!.id,
      operator: order.operator,
      via: order.via,
      host: order.host,
      reason: order.reason,
      details: { graceMs: order.graceMs, ...scopeDetails(order) },
      outcome,
    });
  const result = (
    kind: 'killed' | 'finished' | 'lost' | 'pending',
    r: KillState,
    extra: { alreadyRequested?: boolean; beforeRequest?: boolean } = {},
  ): KillOutcome => ({
    kind,
    run: r,
    alreadyRequested: extra.alreadyRequested ?? false,
    beforeRequest: extra.beforeRequest ?? false,
    tookMs:
      kind === 'killed' && r.request && r.finishedAt
        ? Math.max(0, r.finishedAt.getTime() - r.request.at.getTime())
        : null,
  });

  if (run.status !== 'running') {
    await audit(`nothing changed: the run had already ended (${run.status})`);
    return result('finished', run, { beforeRequest: true });
  }
  if (run.orphaned) {
    await audit('its runner is gone: declared lost');
    return result('lost', await declareGone(db, run, order, read));
  }
  const wrote = await requestKill(db, run, {
    by: order.operator,
    reason: order.reason,
    graceMs: order.graceMs,
  });
  run = (await read())!;
  if (!wrote && run.status !== 'running') {
    await audit(`nothing changed: the run had already ended (${run.status})`);
    return result('finished', run, { beforeRequest: true });
  }
  const alreadyRequested = !wrote;
  const auditId = await audit(null);
  const deadline = performance.now() + (order.waitMs ?? order.graceMs + KILL_WAIT_SLACK_MS);
  for (;;) {
    if (run.status !== 'running') {
      const killed = run.status === 'killed';
      const outcome = result(killed ? 'killed' : 'finished', run, { alreadyRequested });
      const took = outcome.kind === 'killed' && outcome.tookMs != null ? outcome.tookMs : null;
      await setActionOutcome(
        db,
        auditId,
        killed
          ? `killed${took != null ? ` in ${formatDuration(took)}` : ''}`
          : `the run ended first (${run.status}): nothing killed`,
      );
      return outcome;
    }
    if (run.orphaned) {
      await setActionOutcome(db, auditId, 'its runner is gone: declared lost');
      return result('lost', await declareGone(db, run, order, read), { alreadyRequested });
    }
    if (performance.now() >= deadline) {
      await setActionOutcome(db, auditId, 'requested; the runner had not acted yet');
      return result('pending', run, { alreadyRequested });
    }
    await delay(POLL_MS);
    run = (await read())!;
  }
}

/** The reaper's verdict on a run whose runner is gone (whoever writes first wins). */
async function declareGone(
  db: Queryable,
  run: KillState,
  order: KillOrder,
  read: () => Promise<KillState | null>,
): Promise<KillState> {
  const { id, job, host, lockConnectionId, scheduledAt, slot, rerun } = run;
  // The run's own generation: the outbox keys a `lost` by it, so a re-run's is not taken for
  // (and dropped as a duplicate of) generation 0's.
  await declareLost(db, [{ id, job, host, lockConnectionId, scheduledAt, slot, rerun }], {
    namespace: run.namespace,
    job,
    serverStartedBefore: new Date(0),
    noticedBy: order.host,
    occasion: `when asked to kill it at ${new Date().toISOString()}`,
    ...(order.targetsOf ? { targetsOf: (j: string) => order.targetsOf!(run.namespace, j) } : {}),
  });
  return (await read()) ?? run;
}

/**
 * What came of a kill, as `baton kill --json` prints it and `POST /api/runs/{id}/kill` answers:
 * the run, how the order ended, and the request on its row.
 */
export function killOutcomeDocument(
  o: Exclude<KillOutcome, { kind: 'not-found' }>,
  graceMs: number,
) {
  const { run } = o;
  return {
    runId: run.id,
    job: run.job,
    namespace: run.namespace,
    host: run.host,
    outcome: o.kind,
    status: run.status,
    finishedAt: run.finishedAt?.toISOString() ?? null,
    error: run.error,
    tookMs: o.tookMs,
    graceMs,
    alreadyRequested: o.alreadyRequested,
    request: run.request ? { ...run.request, at: run.request.at.toISOString() } : null,
  };
}
