/**
 * The notification settings of schedules.yaml (docs/notifications.md): the top-level `notify:`
 * map of targets, and a job's (or `defaults:`') `notify: {on, to, throttle}`. Their shapes are
 * declared here; the checks that need more than the shape (a target name that exists, a URL that
 * parses, an environment variable that is set) are notify-config.ts's.
 */
import { z } from 'zod';
import { MAX_NOTIFY_AFTER, NOTIFY_EVENTS, type NotifyEventName } from './defaults.js';
import { durationOrZero, timerDuration } from './value-schemas.js';

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not an environment variable name');
const targetName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'a target name: letters, digits, . _ -, ≤ 64');

const webhookSchema = z.strictObject({
  url: z.string().min(1).optional(),
  urlFromEnv: envName.optional(),
  format: z.enum(['json', 'slack']).optional(),
  headers: z.record(z.string(), z.string()).optional(),
});

const emailSchema = z.strictObject({
  smtp: z.string().min(1).optional(),
  smtpFromEnv: envName.optional(),
  from: z.string().min(3),
  to: z.union([z.string().min(3), z.array(z.string().min(3)).min(1)]),
});

/** One target: exactly one of `webhook`, `command`, `email` (checked in notify-config.ts). */
export const targetSchema = z.strictObject({
  webhook: webhookSchema.optional(),
  command: z
    .union([z.array(z.string()).min(1, 'command must not be empty'), z.string().min(1)])
    .optional(),
  /** A string `command` runs through /bin/sh -c; must be said, as for jobs. */
  shell: z.boolean().optional(),
  env: z
    .record(z.string(), z.union([z.string(), z.number(), z.boolean()]).transform(String))
    .optional(),
  email: emailSchema.optional(),
  timeout: timerDuration.optional(),
});
export type RawTarget = z.infer<typeof targetSchema>;

export const targetsSchema = z.record(targetName, targetSchema);

const jobNotifyObject = z.strictObject({
  on: z.array(z.enum(NOTIFY_EVENTS)).optional(),
  to: z.array(z.string().min(1)).optional(),
  throttle: durationOrZero.optional(),
  /** Tell a run's failure only from the Nth in a row (docs/notifications.md, "After N failures"). */
  after: z
    .number()
    .int('after must be a whole number of failures in a row')
    .min(1, 'after must be 1 or more (1: every failure is told)')
    .max(MAX_NOTIFY_AFTER, `after must be at most ${MAX_NOTIFY_AFTER}`)
    .optional(),
});

/**
 * `notify:` in a job or in `defaults:`; `false` turns off what `defaults:` would give. Told apart
 * by the value rather than by a union, so that a mistake is reported in the form written.
 */
export const jobNotifySchema = z
  .unknown()
  .transform((value, ctx): false | z.infer<typeof jobNotifyObject> => {
    if (value === false) return false;
    const parsed = jobNotifyObject.safeParse(value);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) ctx.addIssue(issue as never);
      return z.NEVER;
    }
    return parsed.data;
  });
export type RawJobNotify = z.infer<typeof jobNotifySchema>;

/** Where a secret-bearing URL comes from (a webhook's, an SMTP server's): written, or an env var. */
export type SecretSource = { kind: 'url'; url: string } | { kind: 'env'; variable: string };

/**
 * A notification target from the top-level `notify:` map, with every default applied. Jobs name
 * targets in `notify: {to: [...]}`.
 */
export type NotifyTarget =
  | {
      name: string;
      kind: 'webhook';
      /** May carry a secret (a Slack hook's path): resolved at delivery, never logged. */
      url: SecretSource;
      /** `json`: baton's event document; `slack`: `{text}` (Slack, Mattermost, Teams). */
      format: 'json' | 'slack';
      headers: Record<string, string>;
      timeoutMs: number;
    }
  | {
      name: string;
      kind: 'command';
      /** argv, or a script for /bin/sh -c when written as a string with `shell: true`. */
      run: { kind: 'command'; argv: string[] } | { kind: 'shell'; script: string };
      env: Record<string, string>;
      timeoutMs: number;
    }
  | {
      name: string;
      kind: 'email';
      /** `smtp://user:pass@host:587` or `smtps://…`: holds a password, so usually `smtpFromEnv`. */
      smtp: SecretSource;
      from: string;
      to: string[];
      timeoutMs: number;
    };

/** What a job asks to be told of: `notify: {on, to, throttle}`, defaults applied. */
export interface JobNotify {
  on: NotifyEventName[];
  /** Names from the top-level `notify:` map. */
  to: string[];
  /** Failures after the first are summed up at most this often; 0: each one is told. */
  throttleMs: number;
  /**
   * A run's failure (failed, timeout, lost) is told once the job has failed this many runs in a
   * row, and a success is a recovery only after as many; 1 (the default): every failure.
   */
  after: number;
}
