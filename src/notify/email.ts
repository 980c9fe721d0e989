/**
 * The `email` target: one mail over SMTP with nodemailer, on a transport of its own that is
 * closed after the send (deliveries are rare; a pooled connection the server timed out would
 * only fail the next one).
 *
 * What a failure means follows SMTP's reply classes: 4xx is "try again later" (greylisting, a
 * full queue), 5xx is "this will not work" (a rejected login, sender or recipient); a connection
 * that fails is a retry. The outcome is unknown only when the connection failed or timed out
 * after the whole message had been sent (DATA, the message, its final dot): the server may have
 * queued it without our hearing its 250. Not merely after the DATA command: with PIPELINING it
 * goes out with MAIL FROM, before the server has accepted anything. To know that, nodemailer's
 * log goes to a logger that only watches for the end of the message stream and keeps nothing.
 *
 * The SMTP URL holds a password: errors are built from the reply's code and a short, redacted
 * text of the server's words, never from nodemailer's message (which can carry the reply and,
 * for some failures, the address it connected to).
 */
import type { NotifyTarget } from '../config/schema.js';
import { formatDuration } from '../config/duration.js';
import { oneLine } from '../text.js';
import { emailMessage } from './message.js';
import { failed } from './result.js';
import { smtpSecrets } from '../config/notify-target-secrets.js';
import { redact, resolveSecret } from './secrets.js';
import type { DeliveryResult, EnvLookup, NotificationEvent } from './types.js';

export type EmailTarget = Extract<NotifyTarget, { kind: 'email' }>;

/** What nodemailer's errors carry (see its smtp-connection `_formatError`). */
interface SmtpError {
  code?: string;
  originalCode?: string;
  responseCode?: number;
  response?: string;
  command?: string;
  timeoutType?: string;
}

/** The SMTP command a rejection answered, in words. */
function stage(command: string | undefined): string {
  if (command == null) return 'the server';
  if (command.startsWith('AUTH')) return 'the login';
  if (command === 'MAIL FROM') return 'the sender';
  if (command === 'RCPT TO') return 'the recipient';
  if (command === 'DATA') return 'the message';
  return 'the server';
}

/** `535 5.7.8 Authentication failed` → `5.7.8 Authentication failed`, short, one line. */
function replyText(response: string | undefined): string {
  if (!response) return '';
  return oneLine(response.replace(/^\d{3}[ -]?/, ''), 120);
}

/**
 * A Message-ID's left part is an atom: the event id as it is when it is one, else with each
 * other character as `=XX` (still one id per event, and the same on every retry).
 */
export function messageId(eventId: string): string {
  const local = eventId.replace(
    /[^A-Za-z0-9.!#$%&'*+/?^_`{|}~-]/g,
    (c) => `=${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`,
  );
  return `<${local}@baton>`;
}

const CONNECTION_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
};

/** What a failed send means; `messageSent`: the whole message had gone out. */
export function classifySmtpError(
  err: SmtpError,
  messageSent: boolean,
  timeoutMs: number,
): DeliveryResult {
  const code = err.responseCode;
  if (code != null && code >= 400 && code < 600) {
    const text = replyText(err.response);
    const what = `${stage(err.command)} was refused: SMTP ${code}${text ? ` ${text}` : ''}`;
    return failed(what, code < 500, false, code);
  }
  if (err.code === 'ETIMEDOUT') {
    const limit = formatDuration(timeoutMs, 'brief');
    const before = err.timeoutType !== 'SOCKET_TIMEOUT' || !messageSent;
    return failed(
      before ? `timed out after ${limit}` : `timed out after ${limit} after the message was sent`,
      true,
      !before,
    );
  }
  if (err.code === 'EAUTH') return failed('the login failed (no credentials?)', false);
  if (err.code === 'EENVELOPE' || err.code === 'EMESSAGE') {
    return failed(`${stage(err.command)} was refused`, false);
  }
  const system = err.originalCode ?? err.code;
  const words = (system && CONNECTION_ERRORS[system]) ?? `SMTP error (${system ?? 'unknown'})`;
  return failed(messageSent ? `${words} after the message was sent` : words, true, messageSent);
}

export async function sendEmail(
  target: EmailTarget,
  event: NotificationEvent,
  options: { env: EnvLookup; signal?: AbortSignal | undefined },
): Promise<DeliveryResult> {
  const who = `email "${target.name}"`;
  const resolved = resolveSecret(target.smtp, options.env);
  if (!resolved.ok) return failed(`${who}: ${resolved.error}`, false);
  let url: URL;
  try {
    url = new URL(resolved.value);
  } catch {
    return failed(`${who}: the SMTP URL is not a valid URL`, false);
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') {
    return failed(`${who}: the SMTP URL is not smtp:// or smtps://`, false);
  }
  if (options.signal?.aborted) return failed(`${who}: not sent: the runner is stopping`, true);

  const secrets = smtpSecrets(resolved.value, 'errors');
  // Set when the whole message, its final dot included, has gone to the socket: nodemailer
  // logs that at info level with tnx 'message' (smtp-connection's _createSendStream).
  let messageSent = false;
  const watch = (...args: unknown[]): void => {
    if ((args[0] as { tnx?: string } | null)?.tnx === 'message') messageSent = true;
  };
  const quiet = (): void => {};
  const timeout = target.timeoutMs;
  // Imported on the first mail, not when the runner starts: most runners never send one, and
  // nodemailer's 41 modules were a sixth of what `baton start` loaded.
  const { default: nodemailer } = await import('nodemailer');
  const transport = nodemailer.createTransport({
    url: resolved.value,
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    socketTimeout: timeout,
    logger: { level: quiet, trace: quiet, debug: quiet, info: watch, warn: quiet, error: quiet },
  });
  const { subject, text } = emailMessage(event);
  try {
    const info = await transport.sendMail({
      from: target.from,
      to: target.to,
      subject,
      text,
      messageId: messageId(event.id),
      headers: { 'X-Baton-Event-Id': event.id, 'X-Baton-Event': event.event },
      signal: options.signal,
    });
    const status = Number(/^\d{3}/.exec(info.response ?? '')?.[0]);
    return { ok: true, status: Number.isFinite(status) ? status : null };
  } catch (err) {
    if ((err as { name?: string }).name === 'AbortError') {
      return failed(`${who}: stopped: the runner is stopping`, true, messageSent);
    }
    const r = classifySmtpError(err as SmtpError, messageSent, timeout);
    return r.ok ? r : { ...r, error: `${who}: ${redact(r.error, secrets)}` };
  } finally {
    transport.close();
  }
}
