/**
 * How the soft duration limits (`duration: {warn, min}`) read, without a database: `baton
 * status`'s `slow` finding (a run going on past the row's `warn_at`), the `slow` and `too-short`
 * events' words and documents, and the history's marks.
 */
import { describe, expect, it } from 'vitest';
import { buildStatus, severityOf, statusToJson } from '../../src/fleet/status.js';
import { groupFires, renderAttempts, summarise } from '../../src/cli/history-view.js';
import { buildEvent } from '../../src/notify/event.js';
import { eventDocument, eventEnv, slackText } from '../../src/notify/message.js';
import type { RunningRun } from '../../src/store/fleet-reads.js';
import type { NoticeKind, NoticeRow } from '../../src/store/notifications.js';
import type { Run } from '../../src/store/runs.js';

const NOW = new Date('2027-03-10T12:00:00.000Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms);

function running(o: Partial<RunningRun>): RunningRun {
  return {
    id: 42,
    job: 'crawl',
    scheduledAt: ago(300_000),
    trigger: 'schedule',
    host: 'srv-02',
    pid: 4242,
    startedAt: ago(300_000),
    attempts: 1,
    ...o,
  };
}

const report = (runs: RunningRun[]) =>
  buildStatus({
    now: NOW,
    namespace: 'ns',
    runners: [],
    running: runs,
    config: null,
    pauses: [],
    history: new Map(),
  });

describe('baton status', () => {
  it('warns `slow` for a job with a run going on past its warn, once per job', () => {
    const r = report([
      running({ warnAt: ago(180_000) }),
      running({ id: 43, host: 'srv-03', warnAt: ago(1) }),
      running({ id: 44, job: 'fresh', warnAt: new Date(NOW.getTime() + 1) }),
      running({ id: 45, job: 'plain', warnAt: null }),
    ]);
    const slow = r.warnings.filter((w) => w.kind === 'slow');
    expect(slow).toEqual([
      {
        kind: 'slow',
        job: 'crawl',
        message:
          'job "crawl" is slow: run 42 on srv-02 has been running for 5m, past its warn of 2m; ' +
          'run 43 on srv-03 has been running for 5m, past its warn of 5m',
      },
    ]);
    expect(severityOf('slow')).toBe('warning');
    const json = statusToJson(r);
    expect(json.running.map((x) => [x.runId, x.slow, x.warnAt])).toEqual([
      [42, true, ago(180_000).toISOString()],
      [43, true, ago(1).toISOString()],
      [44, false, new Date(NOW.getTime() + 1).toISOString()],
      [45, false, null],
    ]);
  });
});

function notice(event: NoticeKind, details: Record<string, unknown>): NoticeRow {
  return {
    id: 1,
    event,
    subject: 'crawl',
    fire: new Date('2027-03-10T11:55:00.000Z'),
    slot: 1,
    rerun: 0,
    target: 'ops',
    runId: 42,
    status: 'pending',
    createdAt: NOW,
    decidedAt: null,
    attempts: 0,
    details,
    sentAt: null,
    responseStatus: null,
    lastError: null,
    claimedBy: null,
    foldedInto: null,
  };
}

describe('the slow and too-short events', () => {
  it('say the job, the run, the host, how long it ran and the limit, as flagged', async () => {
    const slow = await buildEvent(
      null,
      'ns',
      notice('slow', { host: 'srv-02', status: 'running', ranMs: 2_004, limitMs: 2_000 }),
    );
    expect(slow.text).toBe(
      'crawl is slow on srv-02: run 42 has been running for 2s, past its warn of 2s, fire of ' +
        '2027-03-10 11:55:00 UTC',
    );
    expect(eventDocument(slow)).toMatchObject({
      event: 'slow',
      job: 'crawl',
      host: 'srv-02',
      status: 'running',
      durationMs: 2_004,
      limitMs: 2_000,
      exitCode: null,
      runId: 42,
    });
    expect(slackText(slow).text).toContain('\nwarn: 2s');
    expect(eventEnv(slow).BATON_EVENT_LIMIT_MS).toBe('2000');

    const ended = await buildEvent(
      null,
      'ns',
      notice('slow', { host: 'srv-02', status: 'lost', ranMs: 65_000, limitMs: 60_000 }),
    );
    expect(ended.text).toBe(
      'crawl was slow on srv-02: run 42 ran 1m5s, past its warn of 1m, and ended lost, fire of ' +
        '2027-03-10 11:55:00 UTC',
    );

    const short = await buildEvent(
      null,
      'ns',
      notice('too-short', { host: 'srv-01', status: 'done', ranMs: 35, limitMs: 1_000 }),
    );
    expect(short.text).toBe(
      'crawl finished too soon on srv-01: run 42 took 35ms, less than its min of 1s, fire of ' +
        '2027-03-10 11:55:00 UTC',
    );
    expect(slackText(short).text).toContain('\nmin: 1s');
  });
});

function run(o: Partial<Run>): Run {
  const startedAt = o.startedAt ?? ago(60_000);
  return {
    id: 1,
    namespace: 'ns',
    job: 'crawl',
    scheduledAt: ago(60_000),
    rerun: 0,
    winner: true,
    workerSlot: 1,
    trigger: 'schedule',
    status: 'done',
    reason: null,
    reasonKind: null,
    host: 'srv-01',
    pid: 1,
    lockConnectionId: null,
    startedAt,
    finishedAt: new Date(startedAt.getTime() + 5_000),
    exitCode: 0,
    attempts: 1,
    error: null,
    outputTail: null,
    params: null,
    pool: null,
    warnAt: null,
    slowAt: null,
    tooShort: false,
    ...o,
  };
}

describe('the history', () => {
  it('marks a fire whose run was slow or too short, and the row in the wide view', () => {
    const slow = run({ id: 1, warnAt: ago(58_000), slowAt: ago(58_000) });
    const short = run({ id: 2, job: 'quick', tooShort: true });
    const plain = run({ id: 3, job: 'plain', warnAt: ago(1_000) });
    const fires = groupFires([slow, short, plain]);
    expect(fires.map((f) => [summarise(f).slow, summarise(f).tooShort])).toEqual([
      [true, false],
      [false, true],
      [false, false],
    ]);
    const wide = renderAttempts([slow, short, plain], (_style, text) => text);
    expect(wide).toMatch(/done slow/);
    expect(wide).toMatch(/done too-short/);
    expect(wide.match(/slow|too-short/g)).toHaveLength(2);
  });
});
