/**
 * The notification targets (src/notify/) against real receivers on 127.0.0.1: a node:http
 * server for webhooks, real /bin/sh scripts for commands, a real smtp-server for mail. What the
 * outbox relies on is checked case by case: what reached the receiver (headers, body, the event
 * id), whether a failure is worth a retry, whether the receiver may have it already
 * (`outcomeUnknown`), and that no error shows the webhook's secret URL or the SMTP password.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NotifyTarget } from '../../src/config/schema.js';
import { NOTIFY_COMMAND_KILL_GRACE_MS } from '../../src/notify/command.js';
import { deliverNotification } from '../../src/notify/deliver.js';
import { eventDocument, slackText } from '../../src/notify/message.js';
import type { DeliveryResult, NotificationEvent } from '../../src/notify/types.js';
import { version } from '../../src/version.js';
import { processGone } from '../helpers/procfs.js';
import { waitFor } from '../helpers/wait.js';

const event: NotificationEvent = {
  id: 'n-19-settle-2026-12-03T03:00-ops',
  event: 'failed',
  namespace: 'default',
  job: 'settle',
  fire: '2026-12-03T03:00:00.000Z',
  slot: null,
  host: 'batch-2',
  status: 'failed',
  exitCode: 3,
  durationMs: 12_345,
  error: 'exit code 3',
  output: 'reading ledger\n<b>totals</b> & co\n```\nfenced\n```\nlast line: ledger mismatch',
  runId: 42,
  count: null,
  upstream: null,
  text: 'settle failed on batch-2 (exit 3), fire of 2026-12-03 03:00 UTC',
  at: '2026-12-03T03:00:13.000Z',
};

/** The webhook's secrets: none may appear in any error of this file. */
const PATH_TOKEN = 'T0KEN-in-the-path-7f3a';
const QUERY_TOKEN = 'sig-in-the-query-91bc';
const HEADER_SECRET = 'Bearer header-secret-5d2e';
const SMTP_PASSWORD = 'smtp-Passw0rd-e41f';
const errors: string[] = [];
function record(r: DeliveryResult): DeliveryResult {
  if (!r.ok) errors.push(r.error);
  return r;
}

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}
let server: http.Server;
let port: number;
const received: Received[] = [];
/** How the server answers the next requests, by path prefix. */
let answer: (req: http.IncomingMessage, res: http.ServerResponse) => void;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      answer(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  // The secrets of this file, in every error any test of it collected.
  expect(errors.length).toBeGreaterThan(10);
  for (const e of errors) {
    for (const secret of [PATH_TOKEN, QUERY_TOKEN, HEADER_SECRET, 'header-secret', SMTP_PASSWORD]) {
      expect(e).not.toContain(secret);
    }
    expect(e).not.toContain('127.0.0.1');
  }
});
afterEach(() => {
  received.length = 0;
});

const hookUrl = (p = 'hook'): string =>
  `http://127.0.0.1:${port}/${p}/${PATH_TOKEN}?token=${QUERY_TOKEN}`;
const env = (vars: Record<string, string>) => (name: string) => vars[name];

function webhook(over: Partial<Extract<NotifyTarget, { kind: 'webhook' }>> = {}): NotifyTarget {
  return {
    name: 'ops',
    kind: 'webhook',
    url: { kind: 'env', variable: 'OPS_HOOK_URL' },
    format: 'json',
    headers: { Authorization: HEADER_SECRET },
    timeoutMs: 2_000,
    ...over,
  };
}
const send = async (target: NotifyTarget, url = hookUrl()) =>
  record(await deliverNotification(target, event, { env: env({ OPS_HOOK_URL: url }) }));

describe('webhook', () => {
  it('posts the JSON document with the event id and the target headers', async () => {
    answer = (_req, res) => res.writeHead(204).end();
    expect(await send(webhook())).toEqual({ ok: true, status: 204 });
    expect(received).toHaveLength(1);
    const [r] = received;
    expect(r!.method).toBe('POST');
    expect(r!.url).toBe(`/hook/${PATH_TOKEN}?token=${QUERY_TOKEN}`);
    expect(r!.headers['content-type']).toBe('application/json');
    expect(r!.headers['user-agent']).toBe(`baton/${version}`);
    expect(r!.headers['idempotency-key']).toBe(event.id);
    expect(r!.headers['x-baton-event']).toBe('failed');
    expect(r!.headers.authorization).toBe(HEADER_SECRET);
    const doc = JSON.parse(r!.body) as Record<string, unknown>;
    expect(doc).toEqual({ version: 1, ...event, limitMs: null, blackout: null });
    expect(doc).toEqual(eventDocument(event));
  });

  it('posts {text} for Slack, escaped, the output in one code block', async () => {
    answer = (_req, res) => res.writeHead(200).end('ok');
    expect(await send(webhook({ format: 'slack' }))).toEqual({ ok: true, status: 200 });
    const body = JSON.parse(received[0]!.body) as { text: string };
    expect(Object.keys(body)).toEqual(['text']);
    expect(body).toEqual(slackText(event));
    const lines = body.text.split('\n');
    expect(lines[0]).toBe(event.text);
    expect(lines).toContain('host: batch-2');
    expect(lines).toContain('exit code: 3');
    expect(lines).toContain('duration: 12.3s');
    expect(body.text).toContain('&lt;b&gt;totals&lt;/b&gt; &amp; co');
    expect(body.text).not.toMatch(/<|>/);
    // Only the block's own fences: the output's ``` are broken up.
    expect(body.text.match(/```/g)).toHaveLength(2);
    expect(body.text.endsWith('last line: ledger mismatch\n```')).toBe(true);
    expect(received[0]!.headers['idempotency-key']).toBe(event.id);
  });

  it('a 5xx or 429 is retried, another 4xx is not', async () => {
    for (const [status, retryable] of [
      [503, true],
      [429, true],
      [408, true],
      [400, false],
      [404, false],
    ] as const) {
      answer = (_req, res) => res.writeHead(status).end(`echo ${PATH_TOKEN}`);
      expect(await send(webhook())).toEqual({
        ok: false,
        status,
        retryable,
        outcomeUnknown: false,
        error: `webhook "ops": HTTP ${status}`,
      });
    }
  });

  it('a redirect is a failure and is not followed', async () => {
    answer = (_req, res) => res.writeHead(302, { location: hookUrl('elsewhere') }).end();
    const r = await send(webhook());
    expect(r).toMatchObject({ ok: false, status: 302, retryable: false, outcomeUnknown: false });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(received.map((x) => x.url.split('/')[1])).toEqual(['hook']);
  });

  it('a refused connection is retried and was not delivered', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const r = await send(webhook(), `http://127.0.0.1:${closedPort}/x/${PATH_TOKEN}`);
    expect(r).toEqual({
      ok: false,
      status: null,
      retryable: true,
      outcomeUnknown: false,
      error: 'webhook "ops": connection refused',
    });
  });

  it('an answer after the timeout: retried, the receiver may have it', async () => {
    const late: http.ServerResponse[] = [];
    answer = (_req, res) => late.push(res);
    const started = Date.now();
    const r = await send(webhook({ timeoutMs: 400 }));
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(r).toEqual({
      ok: false,
      status: null,
      retryable: true,
      outcomeUnknown: true,
      error: 'webhook "ops": timed out after 400ms waiting for the answer',
    });
    expect(received).toHaveLength(1);
    for (const res of late) res.writeHead(200).end();
  });

  it('a connection dropped after the request: retried, the receiver may have it', async () => {
    answer = (req) => req.socket.destroy();
    expect(await send(webhook())).toEqual({
      ok: false,
      status: null,
      retryable: true,
      outcomeUnknown: true,
      error: 'webhook "ops": connection reset after the request was sent',
    });
    expect(received).toHaveLength(1);
  });

  it('a runner that stops ends the delivery, as a retry', async () => {
    const held: http.ServerResponse[] = [];
    const stop = new AbortController();
    // The runner stops once the receiver has the request (and holds its answer): the request's
    // outcome is then unknown. (A fixed delay raced the request's arrival on a loaded machine.)
    answer = (_req, res) => {
      held.push(res);
      stop.abort();
    };
    const options = { env: env({ OPS_HOOK_URL: hookUrl() }), signal: stop.signal };
    const r = record(await deliverNotification(webhook(), event, options));
    expect(r).toEqual({
      ok: false,
      status: null,
      retryable: true,
      outcomeUnknown: true,
      error: 'webhook "ops": stopped: the runner is stopping',
    });
    const before = record(await deliverNotification(webhook(), event, options));
    expect(before).toMatchObject({ ok: false, retryable: true, outcomeUnknown: false });
    expect(received).toHaveLength(1);
    for (const res of held) res.writeHead(200).end();
  });

  it('refuses a missing variable, a URL that is not http(s), a bad header', async () => {
    const missing = record(await deliverNotification(webhook(), event, { env: env({}) }));
    expect(missing).toMatchObject({ ok: false, retryable: false, outcomeUnknown: false });
    expect(!missing.ok && missing.error).toBe(
      'webhook "ops": environment variable OPS_HOOK_URL is not set',
    );
    const ftp = await send(webhook(), `ftp://127.0.0.1:${port}/${PATH_TOKEN}`);
    expect(ftp).toMatchObject({ ok: false, retryable: false });
    expect(!ftp.ok && ftp.error).toBe('webhook "ops": the URL is not http(s)');
    const header = await send(webhook({ headers: { 'X-Token': `a\nb${HEADER_SECRET}` } }));
    expect(header).toMatchObject({ ok: false, retryable: false });
    expect(!header.ok && header.error).toBe(
      'webhook "ops": header "X-Token" is not a valid HTTP header',
    );
    expect(received).toHaveLength(0);
  });

  it('an unexpected error is a retryable result, not a throw', async () => {
    const broken = { ...webhook(), headers: null } as unknown as NotifyTarget;
    const r = await send(broken);
    expect(r).toMatchObject({ ok: false, retryable: true, outcomeUnknown: false });
    expect(!r.ok && r.error).toMatch(/^webhook "ops": /);
    // An error whose text holds the URL: redacted.
    let calls = 0;
    const headers = {
      get 'X-Trap'(): string {
        calls += 1;
        if (calls === 1) throw new Error(`cannot send to ${hookUrl()}`);
        return 'x';
      },
    };
    const trap = await send({ ...webhook(), headers } as NotifyTarget);
    expect(trap).toMatchObject({ ok: false, retryable: true });
    expect(!trap.ok && trap.error).toBe('webhook "ops": cannot send to ***');
  });
});

describe('command', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'baton-notify-cmd-'));
    // The runner's own settings, and a connection's variable: no command may see them.
    process.env.BATON_DATABASE_URL = 'mysql://baton:db-Passw0rd@127.0.0.1/baton';
    process.env.REPORTS_DB_URL = 'mysql://r:reports-Passw0rd@127.0.0.1/r';
  });
  afterAll(() => {
    delete process.env.BATON_DATABASE_URL;
    delete process.env.REPORTS_DB_URL;
    rmSync(dir, { recursive: true, force: true });
  });
  const command = (script: string, timeoutMs = 5_000): NotifyTarget => ({
    name: 'pager',
    kind: 'command',
    run: { kind: 'shell', script },
    env: { OUT: dir, BATON_EVENT_JOB: 'spoofed' },
    timeoutMs,
  });
  const run = async (target: NotifyTarget) =>
    record(
      await deliverNotification(target, event, {
        env: env({}),
        withholdEnv: ['REPORTS_DB_URL'],
      }),
    );

  it('gets the event as JSON on stdin and as BATON_EVENT_* variables', async () => {
    const r = await run(command('cat > "$OUT/stdin.json"; env > "$OUT/env.txt"'));
    expect(r).toEqual({ ok: true, status: 0 });
    expect(JSON.parse(readFileSync(path.join(dir, 'stdin.json'), 'utf8'))).toEqual(
      eventDocument(event),
    );
    const vars = new Map(
      readFileSync(path.join(dir, 'env.txt'), 'utf8')
        .split('\n')
        .filter((l) => /^[A-Z_]+=/.test(l))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    expect(vars.get('BATON_EVENT_ID')).toBe(event.id);
    expect(vars.get('BATON_EVENT')).toBe('failed');
    expect(vars.get('BATON_EVENT_NAMESPACE')).toBe('default');
    expect(vars.get('BATON_EVENT_JOB')).toBe('settle');
    expect(vars.get('BATON_EVENT_FIRE')).toBe(event.fire);
    expect(vars.get('BATON_EVENT_HOST')).toBe('batch-2');
    expect(vars.get('BATON_EVENT_STATUS')).toBe('failed');
    expect(vars.get('BATON_EVENT_EXIT_CODE')).toBe('3');
    expect(vars.get('BATON_EVENT_DURATION_MS')).toBe('12345');
    expect(vars.get('BATON_EVENT_ERROR')).toBe('exit code 3');
    expect(vars.get('BATON_EVENT_RUN_ID')).toBe('42');
    expect(vars.get('BATON_EVENT_COUNT')).toBe('');
    expect(vars.get('BATON_EVENT_TEXT')).toBe(event.text);
    expect(vars.get('OUT')).toBe(dir);
    expect(vars.get('PATH')).toBe(process.env.PATH);
    expect(vars.has('BATON_DATABASE_URL')).toBe(false);
    expect(vars.has('REPORTS_DB_URL')).toBe(false);
  });

  it('a non-zero exit is retried, with the end of stderr', async () => {
    const r = await run(command('echo "starting" >&2; echo "pager API said 503" >&2; exit 3'));
    expect(r).toEqual({
      ok: false,
      status: 3,
      retryable: true,
      outcomeUnknown: false,
      error: 'command "pager" exited with 3: starting pager API said 503',
    });
  });

  // The timeouts of the two tests below leave the shell time to start and write its child's pid
  // on a loaded machine: 300 ms did not, once, in the full suite (no pid file).
  const SETTLE_MS = 2_000;

  it('a command that hangs is stopped at its timeout, with what it started', async () => {
    const pidFile = path.join(dir, 'child.pid');
    const started = Date.now();
    const r = await run(command(`sleep 30 & echo $! > "${pidFile}"; wait`, SETTLE_MS));
    expect(Date.now() - started).toBeLessThan(SETTLE_MS + 1_500);
    expect(r).toEqual({
      ok: false,
      status: null,
      retryable: true,
      outcomeUnknown: true,
      error: 'command "pager": timed out after 2s, stopped',
    });
    const pid = Number(readFileSync(pidFile, 'utf8'));
    await waitFor('the background sleep to be gone', () => processGone(pid), {
      timeoutMs: 1_000,
    });
  });

  it('what it started that ignores SIGTERM is killed 2 s later', async () => {
    const pidFile = path.join(dir, 'stubborn.pid');
    const started = Date.now();
    const r = await run(
      command(`(trap '' TERM; sleep 30) & echo $! > "${pidFile}"; wait`, SETTLE_MS),
    );
    expect(r).toMatchObject({ ok: false, retryable: true, outcomeUnknown: true });
    const pid = Number(readFileSync(pidFile, 'utf8'));
    // The shell died of the SIGTERM; its child did not, and holds on until the SIGKILL.
    expect(processGone(pid)).toBe(false);
    await waitFor('the SIGKILL', () => processGone(pid), {
      timeoutMs: NOTIFY_COMMAND_KILL_GRACE_MS + 2_000,
    });
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(SETTLE_MS + NOTIFY_COMMAND_KILL_GRACE_MS - 50);
    expect(took).toBeLessThan(SETTLE_MS + NOTIFY_COMMAND_KILL_GRACE_MS + 1_700);
  });

  it('a command that cannot start is not retried', async () => {
    const target: NotifyTarget = {
      name: 'pager',
      kind: 'command',
      run: { kind: 'command', argv: [path.join(dir, 'no-such-pager'), '--page'] },
      env: {},
      timeoutMs: 1_000,
    };
    const r = await run(target);
    expect(r).toEqual({
      ok: false,
      status: null,
      retryable: false,
      outcomeUnknown: false,
      error: `command "pager": not found: ${path.join(dir, 'no-such-pager')}`,
    });
    writeFileSync(path.join(dir, 'not-executable'), '#!/bin/sh\n');
    const denied = await run({
      ...target,
      run: { kind: 'command', argv: [path.join(dir, 'not-executable')] },
    });
    expect(denied).toMatchObject({ ok: false, retryable: false });
  });
});

describe('email', () => {
  interface Mail {
    raw: string;
    from: string | undefined;
    to: string[];
  }
  const mails: Mail[] = [];
  const servers: SMTPServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  });
  afterEach(() => {
    mails.length = 0;
  });

  /** A real SMTP server on a free loopback port; hooks default to accepting everything. */
  async function smtp(options: SMTPServerOptions = {}): Promise<number> {
    const s = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      allowInsecureAuth: true,
      logger: false,
      onData(stream, session, callback) {
        let raw = '';
        stream.setEncoding('utf8');
        stream.on('data', (c: string) => (raw += c));
        stream.on('end', () => {
          mails.push({
            raw,
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : undefined,
            to: session.envelope.rcptTo.map((a) => a.address),
          });
          callback();
        });
      },
      ...options,
    });
    servers.push(s);
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()));
    return (s.server.address() as AddressInfo).port;
  }
  const email = (
    _port: number,
    over: Partial<Extract<NotifyTarget, { kind: 'email' }>> = {},
  ): NotifyTarget => ({
    name: 'ops',
    kind: 'email',
    smtp: { kind: 'env', variable: 'OPS_SMTP_URL' },
    from: 'baton@example.test',
    to: ['ops@example.test', 'oncall@example.test'],
    timeoutMs: 2_000,
    ...over,
  });
  const mailTo = async (target: NotifyTarget, url: string) =>
    record(await deliverNotification(target, event, { env: env({ OPS_SMTP_URL: url }) }));

  it('sends the mail with the event id and the output excerpt', async () => {
    const p = await smtp();
    const r = await mailTo(email(p), `smtp://127.0.0.1:${p}`);
    expect(r).toEqual({ ok: true, status: 250 });
    expect(mails).toHaveLength(1);
    const [m] = mails;
    expect(m!.from).toBe('baton@example.test');
    expect(m!.to).toEqual(['ops@example.test', 'oncall@example.test']);
    const [folded, ...rest] = m!.raw.split('\r\n\r\n');
    const body = rest.join('\r\n\r\n');
    const head = folded!.replace(/\r\n(?=[ \t])/g, '').split('\r\n');
    expect(head).toContain(`Subject: [baton] ${event.text}`);
    // The id's ':' is not allowed in a Message-ID: written as =3A.
    expect(head).toContain('Message-ID: <n-19-settle-2026-12-03T03=3A00-ops@baton>');
    expect(head.map((h) => h.toLowerCase())).toContain(
      `x-baton-event-id: ${event.id}`.toLowerCase(),
    );
    expect(body).toContain('host: batch-2');
    expect(body).toContain('exit code: 3');
    expect(body).toContain('last line: ledger mismatch');
    expect(body).toContain('<b>totals</b> & co');
  });

  it('a rejected login is not retried, and its error holds no password', async () => {
    const p = await smtp({
      authOptional: false,
      // A server that echoes what it was sent: the error must still not show the password.
      onAuth(auth, _session, callback) {
        callback(new Error(`bad credentials ${auth.username}:${auth.password}`));
      },
    });
    const url = `smtp://baton:${SMTP_PASSWORD}@127.0.0.1:${p}`;
    // Named as its login: the name (the operator's own word) stays, the echoed login goes.
    const r = await mailTo(email(p, { name: 'baton' }), url);
    expect(r).toMatchObject({ ok: false, status: 535, retryable: false, outcomeUnknown: false });
    expect(!r.ok && r.error).toMatch(/^email "baton": the login was refused: SMTP 535 /);
    expect(!r.ok && r.error).toContain('***');
    expect(mails).toHaveLength(0);
  });

  it('a 4xx reply is retried, a 5xx is not', async () => {
    const greylist = await smtp({
      onRcptTo(_address, _session, callback) {
        callback(Object.assign(new Error('Greylisted, try again later'), { responseCode: 451 }));
      },
    });
    const r4 = await mailTo(email(greylist), `smtp://127.0.0.1:${greylist}`);
    expect(r4).toMatchObject({ ok: false, status: 451, retryable: true, outcomeUnknown: false });
    expect(!r4.ok && r4.error).toContain('SMTP 451');
    const reject = await smtp({
      onMailFrom(_address, _session, callback) {
        callback(Object.assign(new Error('Sender not allowed'), { responseCode: 550 }));
      },
    });
    const r5 = await mailTo(email(reject), `smtp://127.0.0.1:${reject}`);
    expect(r5).toEqual({
      ok: false,
      status: 550,
      retryable: false,
      outcomeUnknown: false,
      error: 'email "ops": the sender was refused: SMTP 550 Sender not allowed',
    });
    expect(mails).toHaveLength(0);
  });

  it('a timeout after DATA may have delivered; one before it did not', async () => {
    const silentAfterData = await smtp({
      onData(stream) {
        stream.resume(); // takes the message, never answers
      },
    });
    const after = await mailTo(
      email(silentAfterData, { timeoutMs: 500 }),
      `smtp://127.0.0.1:${silentAfterData}`,
    );
    expect(after).toEqual({
      ok: false,
      status: null,
      retryable: true,
      outcomeUnknown: true,
      error: 'email "ops": timed out after 500ms after the message was sent',
    });
    const silentAtMailFrom = await smtp({
      onMailFrom() {
        // never answers
      },
    });
    const before = await mailTo(
      email(silentAtMailFrom, { timeoutMs: 500 }),
      `smtp://127.0.0.1:${silentAtMailFrom}`,
    );
    expect(before).toEqual({
      ok: false,
      status: null,
      retryable: true,
      outcomeUnknown: false,
      error: 'email "ops": timed out after 500ms',
    });
  });

  it('a refused connection is retried', async () => {
    const p = await smtp();
    await new Promise<void>((resolve) => servers.pop()!.close(() => resolve()));
    const r = await mailTo(email(p), `smtp://baton:${SMTP_PASSWORD}@127.0.0.1:${p}`);
    expect(r).toEqual({
      ok: false,
      status: null,
      retryable: true,
      outcomeUnknown: false,
      error: 'email "ops": connection refused',
    });
  });
});
