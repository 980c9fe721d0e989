/**
 * The metrics' series life, without a runner: every counter series of a loaded job starts at 0,
 * a reload keeps the counts of the jobs it keeps, starts the new ones at 0 and removes the
 * series of the ones it drops (and does not count them afterwards); the dead-man window; the
 * per-job timestamps are absent until the history was read. The exposition passes promtool.
 */
import { describe, expect, it } from 'vitest';
import type { RunnerEventMap } from '../../src/daemon/runner-events.js';
import { Events } from '../../src/events.js';
import { RunnerMetrics, type MetricsSource } from '../../src/http/metrics.js';
import { parseSchedule } from '../../src/schedule/cron.js';
import { parseMetrics, promtoolCheck, total } from '../helpers/prometheus.js';

const NOW = new Date('2026-12-03T12:00:00Z');

function setUp(jobs: { name: string; expectMs: number | null; expression: string }[]) {
  let loaded = jobs;
  const source: MetricsSource = {
    gauges: () => ({
      databaseUp: false,
      readOnly: false,
      detached: false,
      clockOffsetMs: null,
      runningRuns: 0,
      jobsLoaded: loaded.length,
      sinceLastWakeMs: 1_500,
    }),
    jobs: () => loaded.map((j) => ({ ...j, schedule: parseSchedule(j.expression, 'UTC') })),
    namespace: () => 'default',
    notifyTargets: () => ['ops'],
    pools: () => [],
    poolPlace: () => ({ database: 'baton', namespace: 'default', host: 'h1' }),
    // Not connected: the per-job timestamps have nothing to show.
    readPool: () => null,
    now: () => NOW,
  };
  const metrics = new RunnerMetrics({ host: 'h1', namespace: 'default', version: '0.0.0' }, source);
  const events = new Events<RunnerEventMap>((event, err) => {
    throw new Error(`${event}: ${String(err)}`);
  });
  metrics.observe(events);
  const load = (next: typeof jobs) => {
    loaded = next;
    events.emit('schedule:loaded', { jobs: next.map((j) => j.name) });
  };
  const finish = (job: string, status: 'done' | 'failed') =>
    events.emit('run:finished', {
      fire: { job, scheduledAt: NOW, trigger: 'schedule' },
      runId: 1,
      status,
      exitCode: status === 'done' ? 0 : 1,
      attempts: 1,
      error: null,
      durationMs: 10,
    });
  const scrape = async () => {
    const text = await metrics.render();
    return { text, samples: parseMetrics(text) };
  };
  const deliver = (target: string, outcome: 'sent' | 'retry' | 'failed') =>
    events.emit('notify:delivery', { target, outcome });
  return { load, finish, scrape, deliver };
}

const job = (name: string, expression = '*/5 * * * *', expectMs: number | null = null) => ({
  name,
  expression,
  expectMs,
});

describe('the per-job series', () => {
  it('start at 0 when loaded, keep their counts over a reload, and go with their job', async () => {
    const m = setUp([]);
    m.load([job('a'), job('b')]);
    const { text, samples } = await m.scrape();
    expect(promtoolCheck(text)).toEqual({ code: 0, output: '' });
    for (const baton_job of ['a', 'b']) {
      const of = (name: string) =>
        samples.filter((s) => s.name === name && s.labels.baton_job === baton_job);
      expect(of('baton_runs_total')).toHaveLength(6); // done, failed, timeout, interrupted, killed, lost
      expect(of('baton_skips_total')).toHaveLength(5); // taken, overlap, paused, upstream, pool
      expect(of('baton_fires_not_attempted_total')).toHaveLength(5); // no-database, read-only, late-wake, error, stale-schedule
      expect(of('baton_fires_missed_total')).toHaveLength(1);
      expect(
        [...of('baton_runs_total'), ...of('baton_skips_total')].every((s) => s.value === 0),
      ).toBe(true);
    }
    expect(samples.some((s) => 'job' in s.labels)).toBe(false);

    m.finish('a', 'failed');
    m.load([job('a'), job('c')]);
    m.finish('b', 'failed'); // a run of b still going at the reload
    const after = (await m.scrape()).samples;
    expect(total(after, 'baton_runs_total', { baton_job: 'a', status: 'failed' })).toBe(1);
    expect(after.filter((s) => s.labels.baton_job === 'b')).toEqual([]);
    expect(total(after, 'baton_runs_total', { baton_job: 'c' })).toBe(0);
    expect(
      after.filter((s) => s.name === 'baton_runs_total' && s.labels.baton_job === 'c'),
    ).toHaveLength(6);
    // Histograms of a job have series once it ran; they go with the job too.
    expect(total(after, 'baton_run_duration_seconds_count', { baton_job: 'a' })).toBe(1);
  });

  it('gives the dead-man window, and no timestamps before the history was read', async () => {
    const m = setUp([job('every5'), job('daily', '0 3 * * *', 26 * 3_600_000)]);
    m.load([job('every5'), job('daily', '0 3 * * *', 26 * 3_600_000)]);
    const { samples } = await m.scrape();
    const expect_ = (name: string) =>
      samples.find((s) => s.name === 'baton_job_expect_seconds' && s.labels.baton_job === name)
        ?.value;
    // Never succeeded: from now (12:00), two fires (12:05, 12:10) plus the minimum grace of 1 min.
    expect(expect_('every5')).toBe(11 * 60);
    expect(expect_('daily')).toBe(26 * 3_600);
    expect(samples.filter((s) => s.name.startsWith('baton_job_last_'))).toEqual([]);
    const wake = total(samples, 'baton_scheduler_last_wake_timestamp_seconds');
    expect(Math.abs(Date.now() / 1000 - 1.5 - wake)).toBeLessThan(1);
  });
});

describe('the notification series', () => {
  it('start at 0 per target and count this runner’s deliveries by outcome', async () => {
    const m = setUp([]);
    m.load([job('a')]);
    const { text, samples } = await m.scrape();
    expect(promtoolCheck(text)).toEqual({ code: 0, output: '' });
    const of = (name: string) => samples.filter((s) => s.name === name);
    expect(
      of('baton_notifications_total')
        .map((s) => s.labels.outcome)
        .sort(),
    ).toEqual(['failed', 'retry', 'sent']);
    for (const name of [
      'baton_notifications_pending',
      'baton_notifications_oldest_pending_seconds',
      'baton_notifications_failed_recent',
    ]) {
      expect(of(name), name).toEqual([
        expect.objectContaining({ value: 0, labels: { target: 'ops' } }),
      ]);
    }
    m.deliver('ops', 'retry');
    m.deliver('ops', 'sent');
    const after = (await m.scrape()).samples;
    expect(total(after, 'baton_notifications_total', { target: 'ops', outcome: 'sent' })).toBe(1);
    expect(total(after, 'baton_notifications_total', { target: 'ops', outcome: 'retry' })).toBe(1);
  });
});
