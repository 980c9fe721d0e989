/**
 * The pure parts of a chain's views (issue 37, `after:`): how `baton explain` judges a child's
 * chain row with its parents' rows (fleet/explain-chain.ts), the history's chain note, the parent
 * runs as stored, and the `upstream` event — a notify event like `missed`, not told by default,
 * counted by the throttle as a failure — in its words, its JSON document, a chat message, a mail
 * and a command's variables.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_NOTIFY_EVENTS, NOTIFY_EVENTS } from '../../src/config/defaults.js';
import { parseConfig } from '../../src/config/load.js';
import { eventTargets } from '../../src/config/notify-targets.js';
import type { JobAfter } from '../../src/config/schema.js';
import { judgeChain, parentAtFire, type ChainInput } from '../../src/fleet/explain-chain.js';
import { chainNote, groupFires } from '../../src/cli/history-view.js';
import { buildEvent, parentOutcome } from '../../src/notify/event.js';
import { emailMessage, eventDocument, eventEnv, slackText } from '../../src/notify/message.js';
import {
  parseParentRuns,
  parentRunsWords,
  type DependentFire,
} from '../../src/store/dependent-fire-reads.js';
import type { RunnerNow } from '../../src/store/fire-reads.js';
import { FAILURE_EVENTS, upstreamNotice, type NoticeRow } from '../../src/store/notifications.js';
import type { Run } from '../../src/store/runs.js';

const NOW = new Date('2027-03-10T12:00:00.000Z');
const FIRE = new Date('2027-03-10T11:00:00.000Z');
const plus = (d: Date, ms: number) => new Date(d.getTime() + ms);
const AFTER: JobAfter = { jobs: ['settle', 'export'], on: 'success', withinMs: 2 * 3_600_000 };

function run(o: Partial<Run> = {}): Run {
  const startedAt = o.startedAt ?? plus(FIRE, 10);
  return {
    id: 1,
    namespace: 'ns',
    job: 'settle',
    scheduledAt: FIRE,
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
    finishedAt: o.status === 'running' ? null : plus(startedAt, 2_000),
    exitCode: 0,
    attempts: 1,
    error: null,
    outputTail: null,
    params: null,
    pool: null,
    ...o,
  };
}

function chainRow(o: Partial<DependentFire> = {}): DependentFire {
  return {
    namespace: 'ns',
    job: 'report',
    scheduledAt: FIRE,
    rerun: 0,
    status: 'waiting',
    checkAt: plus(NOW, 5_000),
    deadline: plus(FIRE, 2 * 3_600_000),
    parentRuns: null,
    runId: null,
    reason: null,
    createdAt: FIRE,
    updatedAt: FIRE,
    ...o,
  };
}

function runner(jobs: string[], alive = true): RunnerNow {
  return {
    namespace: 'ns',
    host: 'srv-01',
    pid: 1,
    version: '0.1.0',
    startedAt: FIRE,
    lastSeenAt: NOW,
    stoppedAt: null,
    clockOffsetMs: 0,
    lockConnectionId: 1,
    jobs: new Map(jobs.map((j) => [j, { fingerprint: 'f', since: FIRE }])),
    alive,
    lockSessionHeld: true,
    lastSeenAgoMs: 0,
  };
}

function input(o: Partial<ChainInput> = {}): ChainInput {
  return {
    name: 'report',
    after: AFTER,
    now: NOW,
    fires: [],
    parentRows: new Map(),
    rows: [],
    runners: [runner(['settle', 'export', 'report'])],
    describeRun: (r) => `ran on ${r.host} (${r.status})`,
    ...o,
  };
}

describe('judgeChain', () => {
  it('waiting: names the parents still without a verdict, when it is judged again, the deadline', () => {
    const judged = judgeChain(
      input({
        fires: [chainRow()],
        parentRows: new Map([
          ['settle', [run({ id: 7, status: 'running', finishedAt: null })]],
          ['export', [run({ id: 8, job: 'export' })]],
        ]),
      }),
    );
    expect(judged.state).toBe('waiting');
    expect(judged.verdict).toBe(
      'waiting for settle: running on srv-01 since 2027-03-10 11:00:00.010, for 1h00m (run 7) — ' +
        'judged again at 2027-03-10 12:00:05.000; ' +
        'skipped as upstream at 2027-03-10 13:00:00.000 if it has not ended by then',
    );
    expect(judged.parents.map((p) => [p.job, p.state, p.run?.id ?? null])).toEqual([
      ['settle', 'running', 7],
      ['export', 'done', 8],
    ]);
    expect(judged.notes).toEqual([]);
  });

  it('waiting with every parent ended: to be judged; past the deadline; nobody to judge it', () => {
    const ended = judgeChain(
      input({
        fires: [chainRow({ checkAt: plus(NOW, -60_000) })],
        parentRows: new Map([
          ['settle', [run({ id: 7, status: 'failed' })]],
          ['export', [run({ id: 8, job: 'export' })]],
        ]),
        runners: [runner(['settle']), runner(['report'], false)],
      }),
    );
    expect(ended.verdict).toBe(
      'waiting to be judged: settle failed (run 7), export done (run 8) — ' +
        'due to be judged since 2027-03-10 11:59:00.000',
    );
    expect(ended.notes).toEqual([
      'no live runner has report in its schedule: nobody judges this row until one does',
    ]);
    const late = judgeChain(input({ fires: [chainRow({ deadline: plus(NOW, -1) })] }));
    expect(late.verdict).toMatch(
      /^waiting for settle: no run of this instant yet, and export: no run of this instant yet — .*; its deadline, 2027-03-10 11:59:59.999, has passed: skipped as upstream when judged$/,
    );
  });

  it('started: by the parent runs (their statuses), then the child’s run; or a run no longer there', () => {
    const parents = new Map([
      ['settle', [run({ id: 7 })]],
      ['export', [run({ id: 8, job: 'export' })]],
    ]);
    const fires = [chainRow({ status: 'started', parentRuns: { settle: 7, export: 8 }, runId: 9 })];
    const child = run({ id: 9, job: 'report', trigger: 'after', host: 'srv-02' });
    expect(judgeChain(input({ fires, parentRows: parents, rows: [child] })).verdict).toBe(
      'started by settle#7 (done), export#8 (done) → run 9: ran on srv-02 (done)',
    );
    expect(judgeChain(input({ fires, parentRows: new Map() })).verdict).toBe(
      'started by settle#7, export#8 → run 9 (not in the history: pruned?)',
    );
  });

  it('skipped: the row’s reason, else the parent run that stopped it; earlier generations noted', () => {
    const parents = new Map([['settle', [run({ id: 7, status: 'timeout' })]]]);
    const stopped = chainRow({ status: 'skipped', parentRuns: { settle: 7 }, runId: 10 });
    expect(judgeChain(input({ fires: [{ ...stopped, reason: 'settle timed out' }] })).verdict).toBe(
      'skipped (upstream): settle timed out',
    );
    const judged = judgeChain(
      input({
        fires: [stopped, chainRow({ rerun: 1, status: 'started', runId: 11 })],
        parentRows: parents,
      }),
    );
    expect(judged.state).toBe('started');
    expect(judged.notes).toEqual([
      'earlier chain generation 0: skipped (run 10)',
      'chain generation 1 (a re-run of a parent)',
    ]);
    expect(judgeChain(input({ fires: [stopped], parentRows: parents })).verdict).toBe(
      'skipped (upstream): settle timeout (run 7)',
    );
  });

  it('no row: not an instant of its parents, or nobody with the child was there', () => {
    const judged = judgeChain(input());
    expect(judged.state).toBe('no-row');
    expect(judged.verdict).toBe(
      "no chain row for this instant (baton_dependent_fires): not an instant of settle's or export's, " +
        'or no runner with report was there when they fired',
    );
  });

  it('without the schedules file, the parents are those the rows name', () => {
    const judged = judgeChain(
      input({ after: null, fires: [chainRow({ status: 'skipped', parentRuns: { settle: 7 } })] }),
    );
    expect(judged.parents.map((p) => p.job)).toEqual(['settle']);
    expect(judgeChain(input({ after: null, fires: [chainRow()] })).verdict).toMatch(
      /^waiting for its parents \(report is not in the local schedules file/,
    );
  });

  it('a parent at the instant: the latest generation, a missed mark, skips, nothing', () => {
    const regen = [run({ id: 1, status: 'failed' }), run({ id: 2, rerun: 1, status: 'done' })];
    expect(parentAtFire('settle', regen, NOW)).toMatchObject({
      state: 'done',
      words: 'done (run 2)',
    });
    expect(
      parentAtFire(
        'settle',
        [run({ id: 3, winner: false, workerSlot: null, status: 'missed' })],
        NOW,
      ),
    ).toMatchObject({ state: 'missed' });
    expect(
      parentAtFire(
        'settle',
        [run({ id: 4, winner: false, workerSlot: null, status: 'skipped', reasonKind: 'paused' })],
        NOW,
      ).words,
    ).toBe('skipped by every runner (paused)');
    expect(parentAtFire('settle', [], NOW)).toMatchObject({ state: 'none', run: null });
  });
});

describe('the parent runs in the history', () => {
  it('parses what is stored, keeping what is sound', () => {
    expect(parseParentRuns('{"settle": 123, "export": "124"}')).toEqual({
      settle: 123,
      export: 124,
    });
    expect(parseParentRuns('{"settle": -1, "x": "y"}')).toBeNull();
    expect(parseParentRuns('[1]')).toBeNull();
    expect(parseParentRuns('not json')).toBeNull();
    expect(parseParentRuns(null)).toBeNull();
    expect(parentRunsWords({ settle: 123, export: 124 })).toBe('settle#123 export#124');
  });

  it('the fire view’s note: the runs that let the latest generation start, or stopped it', () => {
    const child = run({ id: 9, job: 'report', trigger: 'after' });
    const skip = run({
      id: 10,
      job: 'report',
      trigger: 'after',
      winner: false,
      workerSlot: null,
      status: 'skipped',
      reasonKind: 'upstream',
    });
    const upstream = new Map([
      [9, { settle: 7 }],
      [10, { settle: 6 }],
    ]);
    const [started] = groupFires([child, skip]);
    expect(chainNote(started!, upstream)).toBe('after settle#7');
    const [stopped] = groupFires([skip]);
    expect(chainNote(stopped!, upstream)).toBe('stopped by settle#6');
    expect(chainNote(stopped!, new Map())).toBe('');
  });
});

describe('the upstream event', () => {
  it('is a job event to subscribe to, not told by default, and a failure for the throttle', () => {
    expect(NOTIFY_EVENTS).toContain('upstream');
    expect(DEFAULT_NOTIFY_EVENTS).not.toContain('upstream');
    expect(FAILURE_EVENTS).toContain('upstream');
    const config = parseConfig(
      '/etc/baton/schedules.yaml',
      `
notify:
  ops: {webhook: {url: "https://hooks.example.com/x"}}
jobs:
  report:
    schedule: "0 * * * *"
    command: ["true"]
    notify: {to: [ops], on: [upstream, failed]}
`,
    );
    expect(eventTargets(config.jobs[0]!.notify)).toEqual({ upstream: ['ops'], failed: ['ops'] });
  });

  const details = { parent: 'settle', parentRunId: 123, parentStatus: 'failed', reason: 'r' };
  const notice = upstreamNotice(
    { namespace: 'ns', subject: 'report', fire: FIRE, rerun: 1 },
    ['ops'],
    456,
    { ...details, reason: 'settle failed (run 123)' },
  );

  it('upstreamNotice is the notice the chain enqueues', () => {
    expect(notice).toEqual({
      namespace: 'ns',
      subject: 'report',
      fire: FIRE,
      rerun: 1,
      event: 'upstream',
      targets: ['ops'],
      runId: 456,
      details: { ...details, reason: 'settle failed (run 123)' },
    });
  });

  const row: NoticeRow = {
    id: 1,
    event: 'upstream',
    subject: 'report',
    fire: FIRE,
    slot: 0,
    rerun: 1,
    target: 'ops',
    runId: 456,
    status: 'pending',
    createdAt: NOW,
    decidedAt: null,
    attempts: 0,
    details: notice.details!,
    sentAt: null,
    responseStatus: null,
    lastError: null,
    claimedBy: null,
    foldedInto: null,
  };

  it('says which parent stopped the child, in words and in every form', async () => {
    const e = await buildEvent(null, 'ns', row);
    expect(e.text).toBe(
      'report did not run: its parent settle failed (run 123), fire of 2027-03-10 11:00:00 UTC',
    );
    expect(e.upstream).toEqual({
      parent: 'settle',
      parentRunId: 123,
      parentStatus: 'failed',
      reason: 'settle failed (run 123)',
    });
    expect(eventDocument(e)).toMatchObject({
      event: 'upstream',
      job: 'report',
      upstream: e.upstream,
    });
    expect(slackText(e).text.split('\n')).toContain('parent: settle#123 (failed)');
    expect(emailMessage(e).text).toContain('\nreason: settle failed (run 123)\n');
    expect(eventEnv(e)).toMatchObject({
      BATON_EVENT: 'upstream',
      BATON_EVENT_PARENT: 'settle',
      BATON_EVENT_PARENT_RUN_ID: '123',
      BATON_EVENT_PARENT_STATUS: 'failed',
      BATON_EVENT_REASON: 'settle failed (run 123)',
    });
    // Another event has no parent: empty variables, a null field.
    const failed = await buildEvent(null, 'ns', { ...row, event: 'failed', details: null });
    expect(failed.upstream).toBeNull();
    expect(eventEnv(failed).BATON_EVENT_PARENT).toBe('');
  });

  it('words each outcome of the parent', () => {
    const words = (parentStatus: string | null, parentRunId: number | null = 5) =>
      parentOutcome({ parent: 'settle', parentRunId, parentStatus, reason: null });
    expect(words('timeout')).toBe('timed out (run 5)');
    expect(words('missed')).toBe('did not run (missed) (run 5)');
    expect(words('running')).toBe('had not finished in time (run 5)');
    expect(words('done')).toBe('succeeded (run 5)');
    expect(words(null, null)).toBe('had no run of it in time');
  });
});
