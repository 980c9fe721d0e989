/**
 * `baton notifications`: the outbox as operators ask about it — what was told to whom, what is
 * waiting and why (its last error, its tries), what was given up. And `baton notify test
 * <target>`: sends a test event to one target from this host, right now, so a new webhook or
 * mail setting can be checked before a failure needs it. Neither ever prints a target's URL.
 */
import os from 'node:os';
import type { CommandModule } from 'yargs';
import { withheldVariables } from '../../config/connections.js';
import { isMissingSchemaError, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { deliverNotification } from '../../notify/deliver.js';
import { buildEvent } from '../../notify/event.js';
import { operatorName } from '../../operator.js';
import { openConnection } from '../../store/connect.js';
import { listNotices } from '../../store/notification-reads.js';
import type { NoticeRow, NoticeStatus } from '../../store/notifications.js';
import { formatInstant } from '../../text.js';
import { action } from '../action.js';
import { resolveConfig, resolveNamespace } from '../config-options.js';
import { table } from '../format.js';
import { didYouMean, resolveDatabase, withCommonOptions, type CommonArgs } from '../options.js';

const STATUSES: readonly NoticeStatus[] = [
  'pending',
  'sending',
  'sent',
  'failed',
  'held',
  'folded',
];

interface NotificationsArgs extends CommonArgs {
  namespace?: string;
  job?: string[];
  status?: string[];
  limit: number;
  json: boolean;
}

export function noticeToJson(n: NoticeRow) {
  return {
    id: n.id,
    event: n.event,
    subject: n.subject,
    fire: n.fire.toISOString(),
    slot: n.slot,
    rerun: n.rerun,
    target: n.target,
    runId: n.runId,
    status: n.status,
    createdAt: n.createdAt.toISOString(),
    attempts: n.attempts,
    sentAt: n.sentAt?.toISOString() ?? null,
    responseStatus: n.responseStatus,
    lastError: n.lastError,
    foldedInto: n.foldedInto,
    details: n.details,
  };
}

export const notificationsCommand: CommandModule<object, NotificationsArgs> = {
  command: 'notifications',
  describe: 'Notifications: what was told to whom, what is waiting and why',
  builder: (y) =>
    withCommonOptions(y)
      .option('namespace', { type: 'string', describe: 'namespace (default: the file’s)' })
      .option('job', { type: 'string', array: true, describe: 'only about this job (repeatable)' })
      .option('status', {
        type: 'string',
        array: true,
        describe: `only rows of this status: ${STATUSES.join(', ')} (repeatable)`,
      })
      .option('limit', { type: 'number', default: 50, describe: 'at most this many rows' })
      .option('json', { type: 'boolean', default: false, describe: 'print JSON' }) as never,
  handler: action(async (args: NotificationsArgs) => {
    const statuses = (args.status ?? []).map(String);
    for (const s of statuses) {
      if (!STATUSES.includes(s as NoticeStatus)) {
        throw new UsageError(
          `--status "${s}": expected one of ${STATUSES.join(', ')}${didYouMean(s, STATUSES)}`,
        );
      }
    }
    if (!Number.isInteger(args.limit) || args.limit < 1) {
      throw new UsageError('--limit must be a whole number of 1 or more');
    }
    const namespace = resolveNamespace(args);
    const target = resolveDatabase(args);
    let rows: NoticeRow[] = [];
    let conn;
    try {
      conn = await openConnection(target, { create: false });
      rows = await listNotices(conn, {
        namespace,
        subjects: (args.job ?? []).map(String),
        statuses: statuses as NoticeStatus[],
        limit: args.limit,
      });
    } catch (err) {
      if (!isMissingSchemaError(err)) throw err;
    } finally {
      await conn?.end().catch(() => {});
    }
    if (args.json) {
      const body = { namespace, notifications: rows.map(noticeToJson) };
      process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
      return ExitCode.Ok;
    }
    if (rows.length === 0) {
      process.stdout.write(`no notifications in namespace "${namespace}"\n`);
      return ExitCode.Ok;
    }
    const cells = rows.map((n) => [
      n.id,
      formatInstant(n.createdAt).slice(0, 19),
      n.event,
      n.subject,
      n.target,
      n.status + (n.foldedInto != null ? ` → ${n.foldedInto}` : ''),
      n.attempts,
      n.status === 'sent' ? String(n.responseStatus ?? '') : (n.lastError ?? ''),
    ]);
    process.stdout.write(
      `${table(['ID', 'RECORDED (UTC)', 'EVENT', 'ABOUT', 'TARGET', 'STATUS', 'TRIES', 'ANSWER / LAST ERROR'], cells)}\n`,
    );
    return ExitCode.Ok;
  }),
};

interface NotifyTestArgs extends CommonArgs {
  target: string;
  json: boolean;
}

/** `baton notify test <target>`: one test event, sent from here, now; not through the outbox. */
const notifyTestCommand: CommandModule<object, NotifyTestArgs> = {
  command: 'test <target>',
  describe: 'Send a test notification to one target of the schedules file',
  builder: (y) =>
    withCommonOptions(y)
      .positional('target', { type: 'string', demandOption: true, describe: 'a target name' })
      .option('json', { type: 'boolean', default: false, describe: 'print JSON' }) as never,
  handler: action(async (args: NotifyTestArgs) => {
    const config = resolveConfig(args);
    const name = String(args.target);
    const target = config.notifyTargets[name];
    if (!target) {
      const names = Object.keys(config.notifyTargets);
      throw new UsageError(
        `no notification target "${name}" in ${config.file}${didYouMean(name, names)} ` +
          `(targets: ${names.join(', ') || 'none'})`,
      );
    }
    const now = new Date();
    const event = await buildEvent(null, config.namespace, {
      id: 0,
      event: 'test',
      subject: os.hostname(),
      fire: now,
      slot: 0,
      rerun: 0,
      target: name,
      runId: null,
      status: 'pending',
      createdAt: now,
      decidedAt: now,
      attempts: 0,
      details: { by: `${operatorName()}@${os.hostname()}`, host: os.hostname() },
      sentAt: null,
      responseStatus: null,
      lastError: null,
      claimedBy: null,
      foldedInto: null,
    });
    const result = await deliverNotification(target, event, {
      env: (v) => process.env[v],
      withholdEnv: withheldVariables(config),
      targets: config.notifyTargets,
    });
    if (args.json) {
      process.stdout.write(`${JSON.stringify({ target: name, eventId: event.id, ...result })}\n`);
    } else if (result.ok) {
      process.stdout.write(
        `sent a test notification to "${name}" (${target.kind}${result.status != null ? `, answer ${result.status}` : ''}); event id ${event.id}\n`,
      );
    } else {
      process.stderr.write(
        `baton: test notification to "${name}" not delivered: ${result.error}\n`,
      );
    }
    return result.ok ? ExitCode.Ok : ExitCode.Unavailable;
  }),
};

export const notifyCommand: CommandModule = {
  command: 'notify <command>',
  describe: 'Notification targets: `baton notify test <target>`',
  builder: (y) => y.command(notifyTestCommand as never).demandCommand(1),
  handler: () => {},
};
