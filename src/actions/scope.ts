/**
 * A write token's scope (issue 42): which jobs, which actions and which namespaces the holder of
 * a scoped token may act on (http/write-tokens.ts reads it from the tokens file). One judgement
 * for every action and every surface: each operator action here (run, re-run, backfill, pause,
 * resume, kill) asks `authorize` before it writes anything, so the write API and the dashboard
 * (whose buttons post to the write API) are held to the same rule. An actor without a scope (the
 * CLI's, library mode's, an unscoped token's) may do everything, as before.
 *
 * - jobs: names or globs (`*` any run of characters, `?` one), matched case-sensitively against
 *   the whole name. The job an action targets is a name, never a glob: `report*` asked for is
 *   the job literally called so, which the glob `report*` matches and `report-daily` does not.
 * - actions: SCOPE_ACTIONS (`re-run` is taken for `rerun`).
 * - namespaces: names, compared exactly with the namespace of the runner taking the action.
 *
 * A refusal is recorded in the audit (outcome `refused: …`, the scope in its details) and thrown
 * as OutOfScopeError (the write API answers 403 with its message); an allowed action records the
 * scope that allowed it in its own audit row's details (`scopeDetails`).
 */
import { JOB_NAME_MAX, JOB_NAME_PATTERN, NAMESPACE_MAX } from '../config/names.js';
import { BatonError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import { recordAction, type AuditVia } from '../store/audit.js';
import type { Queryable } from '../store/deadline.js';

/** The actions a scope may grant: every write action the write API takes. */
export const SCOPE_ACTIONS = ['run', 'rerun', 'backfill', 'pause', 'resume', 'kill'] as const;
export type ScopeAction = (typeof SCOPE_ACTIONS)[number];

/** Other spellings an operator may write in the file. */
const ACTION_ALIASES: ReadonlyMap<string, ScopeAction> = new Map([['re-run', 'rerun']]);

/** What a scoped token may do; a key left out grants every value of it. */
export interface ActionScope {
  jobs?: readonly string[];
  actions?: readonly ScopeAction[];
  namespaces?: readonly string[];
}

/** One action about to be taken. */
export interface ScopedAttempt {
  action: ScopeAction;
  /** The job's name, exactly as asked (never read as a glob). */
  job: string;
  namespace: string;
  runId?: number | null;
  fire?: Date | null;
}

/** Who acts (the shape of actions/pause.ts's Actor, which carries the scope). */
export interface ScopedActor {
  operator: string;
  host: string;
  via: AuditVia;
  reason: string | null;
  scope?: ActionScope;
}

/** An action outside the actor's scope: refused before anything was done but its audit row. */
export class OutOfScopeError extends BatonError {
  constructor(
    message: string,
    /** What the scope lacked. */
    readonly missing: 'namespace' | 'action' | 'job',
  ) {
    super('OUT_OF_SCOPE', message, ExitCode.Usage);
  }
}

/**
 * Whether `glob` (`*`, `?`) matches the whole of `name`, case-sensitively. No regular expression:
 * the name is the requester's, and a glob of many stars would make one backtrack for ever; this
 * walk (the last star's place is the only one taken back) takes at most |glob| × |name| steps.
 */
export function globMatches(glob: string, name: string): boolean {
  const g = [...glob];
  const n = [...name];
  let gi = 0;
  let ni = 0;
  let star = -1;
  let resume = 0;
  while (ni < n.length) {
    if (gi < g.length && (g[gi] === '?' || (g[gi] !== '*' && g[gi] === n[ni]))) {
      gi++;
      ni++;
    } else if (gi < g.length && g[gi] === '*') {
      star = gi++;
      resume = ni;
    } else if (star >= 0) {
      gi = star + 1;
      ni = ++resume;
    } else {
      return false;
    }
  }
  while (gi < g.length && g[gi] === '*') gi++;
  return gi === g.length;
}

/**
 * Why `holder`'s scope does not allow the attempt, in words that name what is missing; null
 * when it does (or there is no scope). The namespace is judged first, then the action, the job.
 */
export function scopeRefusal(
  holder: string,
  scope: ActionScope | undefined,
  a: ScopedAttempt,
): { missing: OutOfScopeError['missing']; message: string } | null {
  if (!scope) return null;
  const who = `token ${JSON.stringify(holder)}`;
  if (scope.namespaces && !scope.namespaces.includes(a.namespace)) {
    return {
      missing: 'namespace',
      message:
        `${who} may not act in namespace ${JSON.stringify(a.namespace)} ` +
        `(its namespaces: ${scope.namespaces.join(', ')})`,
    };
  }
  if (scope.actions && !scope.actions.includes(a.action)) {
    return {
      missing: 'action',
      message: `${who} may not ${a.action} (its actions: ${scope.actions.join(', ')})`,
    };
  }
  if (scope.jobs && !scope.jobs.some((glob) => globMatches(glob, a.job))) {
    return {
      missing: 'job',
      message:
        `${who} may not ${a.action} ${JSON.stringify(a.job)} ` +
        `(its jobs: ${scope.jobs.join(', ')})`,
    };
  }
  return null;
}

/** What an allowed action's audit row adds to its details: the scope that allowed it. */
export function scopeDetails(actor: { scope?: ActionScope }): { scope?: ActionScope } {
  return actor.scope ? { scope: actor.scope } : {};
}

/**
 * Lets the attempt go ahead, or records its refusal in the audit (the holder as operator, the
 * action, the job, `refused: …`, the scope) and throws OutOfScopeError. Nothing else is written.
 */
export async function authorize(
  db: Queryable,
  actor: ScopedActor,
  a: ScopedAttempt,
): Promise<void> {
  const refusal = scopeRefusal(actor.operator, actor.scope, a);
  if (!refusal) return;
  await recordAction(db, {
    namespace: a.namespace,
    action: a.action,
    job: a.job,
    runId: a.runId ?? null,
    fire: a.fire ?? null,
    operator: actor.operator,
    via: actor.via,
    host: actor.host,
    reason: actor.reason,
    details: { scope: actor.scope, refused: refusal.missing },
    outcome: `refused: ${refusal.message}`,
  });
  throw new OutOfScopeError(refusal.message, refusal.missing);
}

/** A glob in the file: a job name's characters, `*` and `?`; null when it is one, else why not. */
function globProblem(glob: string): string | null {
  if (glob === '') return 'an empty job name or glob';
  if (glob.length > JOB_NAME_MAX) return `a job glob longer than ${JOB_NAME_MAX} characters`;
  // The wildcards stand for a name's characters: what is left must be a name's.
  const probe = glob.replace(/[*?]/g, 'a');
  if (!JOB_NAME_PATTERN.test(probe)) {
    return (
      `the job glob ${JSON.stringify(glob)} may contain only letters, digits, '.', '_', '-', ` +
      "'*' and '?', and must start with a letter, a digit or a wildcard"
    );
  }
  return null;
}

function namespaceProblem(name: string): string | null {
  if (name === '') return 'an empty namespace';
  if (name.length > NAMESPACE_MAX || !JOB_NAME_PATTERN.test(name)) {
    return (
      `the namespace ${JSON.stringify(name)} is no namespace name (up to ${NAMESPACE_MAX} ` +
      "letters, digits, '.', '_' and '-', starting with a letter or digit; no wildcards)"
    );
  }
  return null;
}

/**
 * The scope of the words after a token in the tokens file (`jobs=report*,etl-*`,
 * `actions=run,rerun`, `namespaces=prod`); an Error saying what is wrong otherwise (the caller
 * adds the file and line). The words hold no secret, but an unknown key is not echoed: it could
 * be the rest of a token that held white space.
 */
export function parseScope(words: readonly string[]): ActionScope {
  const scope: { jobs?: string[]; actions?: ScopeAction[]; namespaces?: string[] } = {};
  for (const word of words) {
    const eq = word.indexOf('=');
    const key = word.slice(0, eq);
    if (eq < 0 || (key !== 'jobs' && key !== 'actions' && key !== 'namespaces')) {
      throw new Error(
        'after the token, expected jobs=…, actions=… or namespaces=… (a token holds no white ' +
          'space; # starts a comment)',
      );
    }
    if (scope[key] != null) throw new Error(`${key}= is given twice: list every value in one`);
    const values = word.slice(eq + 1).split(',');
    if (key === 'jobs') {
      for (const v of values) {
        const why = globProblem(v);
        if (why) throw new Error(`jobs=: ${why}`);
      }
      scope.jobs = [...new Set(values)];
    } else if (key === 'namespaces') {
      for (const v of values) {
        const why = namespaceProblem(v);
        if (why) throw new Error(`namespaces=: ${why}`);
      }
      scope.namespaces = [...new Set(values)];
    } else {
      const actions: ScopeAction[] = [];
      for (const v of values) {
        const action =
          ACTION_ALIASES.get(v) ??
          (SCOPE_ACTIONS as readonly string[]).find((a) => a === v) ??
          null;
        if (action == null) {
          throw new Error(
            `actions=: ${v === '' ? 'an empty action' : `unknown action ${JSON.stringify(v)}`} ` +
              `(expected ${SCOPE_ACTIONS.join(', ')})`,
          );
        }
        if (!actions.includes(action as ScopeAction)) actions.push(action as ScopeAction);
      }
      scope.actions = actions;
    }
  }
  return scope;
}
