/**
 * The write API (`POST /api/jobs/{job}/run|pause|resume|backfill`, `POST /api/runs/{id}/kill`):
 * on only when write tokens are configured (write-tokens.ts). docs/http-api.md is the reference.
 *
 * Every request goes through the same gate, in this order, and every refusal is a JSON
 * `{error: {code, message}}`:
 *
 *   401  no credential, a wrong one, or Basic: only `Authorization: Bearer` is taken here, since
 *        a browser resends Basic credentials by itself — also on a form another site posts here.
 *        No cookie is ever set or read, so nothing but a script that holds the token can write.
 *   405  not POST
 *   403  the read token (it reads, it does not write)
 *   429  the token's bucket is empty (rate-limit.ts), with Retry-After
 *   404  no such route (or run; a `{job}` no job can be called: write-actions.ts `possibleJobName`)
 *   415  not `Content-Type: application/json` (which a cross-site form cannot send either)
 *   413  a body over BODY_LIMIT; 400 a body that is not the route's JSON object
 *
 * then the action (write-actions.ts): a scoped token's action outside its scope is 403
 * `out-of-scope` (actions/scope.ts, audited), then 404 for a job not in the file. Tokens are
 * never logged: a line names the token's name.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { parseDuration } from '../config/duration.js';
import { errorMessage } from '../errors.js';
import { hasControlCharacter, REASON_MAX } from '../operator.js';
import { characterCount } from '../text.js';
import type { Logger } from '../log.js';
import { OutOfScopeError } from '../actions/scope.js';
import { namedToken, presentedCredential, sameSecret } from './auth.js';
import { RateLimiter } from './rate-limit.js';
import {
  ApiError,
  backfillAction,
  DEFAULT_KILL_GRACE_MS,
  killAction,
  pauseAction,
  possibleJobName,
  resumeAction,
  runAction,
  type ApiAnswer,
  type Who,
  type WriteSubject,
} from './write-actions.js';
import type { WriteToken } from './write-tokens.js';

/** Bodies are a reason and a few parameters: 16 KiB is plenty, and bounds what a request costs. */
export const BODY_LIMIT = 16 * 1024;

const reasonBody = z
  .object({
    reason: z
      .string()
      // Characters (code points), as the CLI and the VARCHAR(512) columns count them.
      .refine((r) => characterCount(r) <= REASON_MAX, `longer than ${REASON_MAX} characters`)
      .refine((r) => !hasControlCharacter(r), 'contains a control character: say it on one line')
      .optional(),
  })
  .strict();
const instant = z.string().min(1).max(64);
const backfillBody = reasonBody
  .extend({
    from: instant,
    to: instant,
    again: z.boolean().optional(),
    yes: z.boolean().optional(),
    withDependents: z.boolean().optional(),
  })
  .strict();
const runBody = reasonBody
  .extend({
    fire: instant.optional(),
    again: z.boolean().optional(),
    withDependents: z.boolean().optional(),
    // A runner's host id, compared with the registry's names only (HOST_MAX_CHARS).
    onHost: z.string().min(1).max(255).optional(),
    // `baton run --env K=V -- args`, checked against the job by runParamsOf.
    env: z.record(z.string(), z.string()).optional(),
    args: z.array(z.string()).optional(),
  })
  .strict();
const killBody = reasonBody.extend({ grace: z.string().max(32).optional() }).strict();

/** `target`: the job's name, or the run id (digits) for a run route. */
type Handler = (target: string, body: Record<string, unknown>, who: Who) => Promise<ApiAnswer>;

interface Route {
  body: z.ZodType<Record<string, unknown>>;
  handle: Handler;
}

export interface WriteApiOptions {
  tokens: readonly WriteToken[];
  /** The read token: recognised to answer 403 rather than 401. */
  readToken?: string;
  subject: WriteSubject;
  log: Logger;
}

export interface WriteApi {
  /** Whether `path` is one of the write API's (answered by `handle`, whatever the method). */
  owns(path: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void>;
  /** Whether the request carries a write token (a write token also reads). */
  reads(req: IncomingMessage): boolean;
}

const JOB_ROUTE = /^\/api\/jobs\/([^/]+)\/([a-z]+)$/;
const RUN_ROUTE = /^\/api\/runs\/([^/]+)\/([a-z]+)$/;

export function writeApi(o: WriteApiOptions): WriteApi {
  const limiter = new RateLimiter();
  const s = o.subject;
  const jobRoutes: Record<string, Route> = {
    run: {
      body: runBody,
      handle: (job, body, who) => runAction(s, job, body as z.infer<typeof runBody>, who),
    },
    pause: { body: reasonBody, handle: (job, _b, who) => pauseAction(s, job, who) },
    resume: { body: reasonBody, handle: (job, _b, who) => resumeAction(s, job, who) },
    backfill: {
      body: backfillBody,
      handle: (job, body, who) => backfillAction(s, job, body as z.infer<typeof backfillBody>, who),
    },
  };
  const runRoutes: Record<string, Route> = {
    kill: {
      body: killBody,
      handle: (id, body, who) => {
        if (!/^[1-9]\d{0,15}$/.test(id)) {
          throw new ApiError(404, 'not-found', `no run with id "${id}"`);
        }
        const grace = body.grace as string | undefined;
        const graceMs = grace == null ? DEFAULT_KILL_GRACE_MS : parseDuration(grace);
        if (graceMs == null || graceMs <= 0 || graceMs > 3_600_000) {
          throw new ApiError(
            400,
            'bad-request',
            'grace: expected a duration such as 10s, at most 1h',
          );
        }
        return killAction(s, Number(id), graceMs, who);
      },
    },
  };

  function route(path: string): { route: Route; target: string } | null {
    const job = JOB_ROUTE.exec(path);
    const run = RUN_ROUTE.exec(path);
    const match = job ?? run;
    if (!match) return null;
    const table = job ? jobRoutes : runRoutes;
    const found = Object.hasOwn(table, match[2]!) ? table[match[2]!] : undefined;
    if (!found) return null;
    let target: string;
    try {
      target = decodeURIComponent(match[1]!);
    } catch {
      return null;
    }
    // A run id is a positive integer; anything else names no run.
    if (run && !/^[1-9]\d{0,17}$/.test(target)) return null;
    // A job's name, taken literally (a `*` in it is no glob); what no job can be called is no
    // route: nothing is read or recorded for it (it could not even be stored in the audit).
    if (job && !possibleJobName(target)) return null;
    return { route: found, target };
  }

  async function gate(req: IncomingMessage, path: string): Promise<ApiAnswer> {
    const credential = presentedCredential(req.headers.authorization);
    if (credential?.scheme === 'basic') {
      throw new ApiError(
        401,
        'bearer-required',
        'the write API takes Authorization: Bearer <write token> only (not Basic)',
      );
    }
    const token = credential ? namedToken(credential.secret, o.tokens) : null;
    const isReadToken =
      credential != null && o.readToken != null && sameSecret(credential.secret, o.readToken);
    if (!token && !isReadToken) {
      throw new ApiError(
        401,
        'unauthorized',
        credential
          ? 'unknown token'
          : 'a write token is required: Authorization: Bearer <write token>',
      );
    }
    if (req.method !== 'POST') {
      throw new ApiError(405, 'method-not-allowed', `${req.method} ${path}: only POST is answered`);
    }
    if (!token)
      throw new ApiError(403, 'forbidden', 'the read token cannot write; use a write token');
    const waitMs = limiter.take(token.name);
    if (waitMs > 0) {
      throw new ApiError(429, 'rate-limited', `too many requests for token "${token.name}"`, {
        retryAfterSeconds: Math.ceil(waitMs / 1000),
      });
    }
    const found = route(path);
    if (!found) throw new ApiError(404, 'not-found', `no such route: POST ${path}`);
    const type = String(req.headers['content-type'] ?? '');
    if (!/^application\/json\s*(;|$)/i.test(type)) {
      throw new ApiError(415, 'unsupported-media-type', 'send Content-Type: application/json');
    }
    const body = parseBody(await readBody(req), found.route.body);
    const reason = typeof body.reason === 'string' ? body.reason.trim() || null : null;
    const who: Who = {
      operator: token.name,
      reason,
      ...(token.scope ? { scope: token.scope } : {}),
    };
    const facts = { action: path.split('/').pop(), target: found.target, operator: who.operator };
    try {
      const answer = await found.route.handle(found.target, body, who);
      o.log.info({ ...facts, status: answer.status }, 'write api: action taken');
      return answer;
    } catch (thrown) {
      // Outside the token's scope: 403 saying what the scope lacks (its refusal is audited).
      const err =
        thrown instanceof OutOfScopeError
          ? new ApiError(403, 'out-of-scope', thrown.message, { missing: thrown.missing })
          : thrown;
      if (err instanceof ApiError) {
        o.log.info({ ...facts, status: err.status, error: err.message }, 'write api: refused');
      }
      throw err;
    }
  }

  return {
    owns: (path) => JOB_ROUTE.test(path) || RUN_ROUTE.test(path),
    reads(req) {
      const credential = presentedCredential(req.headers.authorization);
      return credential != null && namedToken(credential.secret, o.tokens) != null;
    },
    async handle(req, res, path) {
      let answer: ApiAnswer;
      const headers: Record<string, string> = {};
      try {
        answer = await gate(req, path);
      } catch (err) {
        if (!(err instanceof ApiError)) {
          o.log.warn({ path, err: errorMessage(err) }, 'write api: action failed');
        }
        const e =
          err instanceof ApiError
            ? err
            : new ApiError(500, 'internal', `the action failed: ${errorMessage(err)}`);
        if (e.status === 401) headers['www-authenticate'] = 'Bearer realm="baton-write"';
        if (e.status === 405) headers.allow = 'POST';
        if (e.status === 429) headers['retry-after'] = String(e.extra.retryAfterSeconds);
        // The rest of an oversized body is not read: the connection goes with the answer.
        if (e.status === 413) headers.connection = 'close';
        answer = {
          status: e.status,
          body: { error: { code: e.code, message: e.message, ...e.extra } },
        };
      }
      res.writeHead(answer.status, {
        'content-type': 'application/json',
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
        ...headers,
      });
      res.end(JSON.stringify(answer.body));
    },
  };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const tooLarge = () =>
    new ApiError(413, 'payload-too-large', `the body is larger than ${BODY_LIMIT} bytes`);
  if (Number(req.headers['content-length'] ?? 0) > BODY_LIMIT) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > BODY_LIMIT) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** An empty body is `{}`; anything else must be the route's JSON object. */
function parseBody(
  raw: Buffer,
  schema: z.ZodType<Record<string, unknown>>,
): Record<string, unknown> {
  let value: unknown = {};
  if (raw.length > 0) {
    try {
      value = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new ApiError(400, 'bad-request', 'the body is not JSON');
    }
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `${issue.path.join('.')}: ` : '';
    throw new ApiError(400, 'bad-request', `the body: ${where}${issue?.message ?? 'invalid'}`);
  }
  return parsed.data;
}
