/**
 * The runner's timings (src/daemon/timings.ts): the defaults are today's values, a partial object
 * is laid over them group by group, and bad input is refused naming every bad key.
 */
import { describe, expect, it } from 'vitest';
import { runnerTimings } from '../../src/daemon/runner-options.js';
import { DEFAULT_TIMINGS, resolveTimings } from '../../src/daemon/timings.js';
import { ConfigError } from '../../src/errors.js';
import { createScheduler } from '../../src/library/scheduler.js';

describe('resolveTimings', () => {
  it('defaults to the values the modules had as constants', () => {
    const t = resolveTimings();
    expect(t).toEqual(DEFAULT_TIMINGS);
    // The literal numbers of before, not the constants they are built from.
    expect(t.notifier.evaluateMs).toBe(15_000);
    expect(t.notifier.passMs).toBe(1_000);
    expect(t.notifier.backoffFirstMs).toBe(1_000);
    expect(t.notifier.backoffMaxMs).toBe(300_000);
    expect(t.notifier.statementDeadlineMs).toBe(10_000);
    expect(t.fleetWatch.companionsMs).toBe(5_000);
    expect(t.fleetWatch.goneAfterMs).toBe(15_000);
    expect(t.fleetWatch.detachGraceMs).toBe(10_000);
    expect(t.reaper.intervalMs).toBe(10_000);
    expect(t.registrar.refreshMs).toBe(5_000);
    expect(t.link.heartbeatMs).toBe(1_000);
    expect(t.link.heartbeatDeadlineMs).toBe(3_000);
    expect(t.link.poolStatementDeadlineMs).toBe(10_000);
    expect(t.retention.statementDeadlineMs).toBe(30_000);
    expect(t.retention.intervalMs).toBe(3_600_000);
    expect(t.dispatcher.firstAskerLeadMs).toBe(50);
    expect(t.protocol).toMatchObject({ describeDelayMs: 20, staleFireMs: 250 });
    expect(t.protocol.lockPassingWaitMs).toBe(1_000);
    expect(t.runs).toEqual({
      killGraceMs: 5_000,
      lostKillGraceMs: 1_000,
      killWatchMs: 1_000,
      outputFlushMs: 250,
      bookkeepingWaitMaxMs: 10_000,
    });
    expect(t.link.lockStatementDeadlineMs).toBe(3_000);
    expect(t.notifier.commandKillGraceMs).toBe(2_000);
    expect(t.health.loopStuckMs).toBe(10_000);
    expect(t.recovery.missedSettleMs).toBe(5_000);
    expect(t.metrics).toEqual({ readReuseMs: 5_000, scrapeWaitMs: 2_000 });
  });

  it('lays a partial object over the defaults, key by key, without changing them', () => {
    const t = resolveTimings({ notifier: { evaluateMs: 500 }, fleetWatch: { companionsMs: 200 } });
    expect(t.notifier).toEqual({ ...DEFAULT_TIMINGS.notifier, evaluateMs: 500 });
    expect(t.fleetWatch.companionsMs).toBe(200);
    expect(t.fleetWatch.goneAfterMs).toBe(15_000);
    expect(t.link).toEqual(DEFAULT_TIMINGS.link);
    expect(DEFAULT_TIMINGS.notifier.evaluateMs).toBe(15_000);
  });

  it('refuses unknown groups and keys and values that are not positive finite numbers, all at once', () => {
    const bad = () =>
      resolveTimings({
        notifier: { evaluateMs: 0, passMs: '1s', bogus: 1 },
        link: { heartbeatMs: Number.POSITIVE_INFINITY },
        reaper: { intervalMs: -5 },
        nope: {},
        registrar: 5,
      });
    expect(bad).toThrow(/bad timings/);
    let message = '';
    try {
      bad();
    } catch (err) {
      message = (err as Error).message;
      expect((err as { exitCode?: number }).exitCode).toBe(64);
    }
    expect(message).toContain('timings.notifier.evaluateMs: must be a positive finite number');
    expect(message).toContain('timings.notifier.passMs: must be a positive finite number');
    expect(message).toContain('"1s"');
    expect(message).toMatch(/timings\.notifier\.bogus: unknown key \(known: passMs, evaluateMs/);
    expect(message).toContain('timings.link.heartbeatMs: must be a positive finite number');
    expect(message).toContain('got -5');
    expect(message).toMatch(/timings\.nope: unknown group \(known: link, /);
    expect(message).toContain('timings.registrar: must be an object');
    expect(() => resolveTimings([])).toThrow(/timings: must be an object of groups/);
    expect(() => resolveTimings(null)).toThrow(/timings: must be an object of groups/);
  });

  // JSON.parse makes `__proto__` an own key: a lookup through the prototype chain would accept
  // Object's own members as groups and keys, and write into Object.prototype for every object.
  it("refuses Object's own members as groups or keys, and changes no prototype", () => {
    const before = Object.prototype.toString;
    for (const json of [
      '{"__proto__":{"toString":1}}',
      '{"constructor":{"assign":1}}',
      '{"constructor":{"length":1}}',
      '{"link":{"toString":5}}',
      '{"link":{"__proto__":{"heartbeatMs":1}}}',
    ]) {
      expect(() => resolveTimings(JSON.parse(json)), json).toThrow(/unknown (group|key)/);
    }
    expect(Object.prototype.toString).toBe(before);
    expect(typeof Object.assign).toBe('function');
    expect(({} as Record<string, unknown>).heartbeatMs).toBeUndefined();
  });

  it('refuses a delay longer than a Node timer can take', () => {
    expect(() => resolveTimings({ reaper: { intervalMs: 1e10 } })).toThrow(
      /timings\.reaper\.intervalMs: at most 2147483647 ms/,
    );
    expect(resolveTimings({ reaper: { intervalMs: 2_147_483_647 } }).reaper.intervalMs).toBe(
      2_147_483_647,
    );
  });
});

describe('runnerTimings', () => {
  it("maps RunnerOptions' flat intervals into their groups, over `timings`", () => {
    const t = runnerTimings({
      timings: { link: { heartbeatMs: 200, reconnectMaxMs: 300 }, reaper: { intervalMs: 7 } },
      heartbeatMs: 400,
      registryMs: 900,
      clockWarnMs: 250,
    });
    expect(t.link).toMatchObject({
      heartbeatMs: 400,
      reconnectMaxMs: 300,
      heartbeatDeadlineMs: 3_000,
    });
    expect(t.reaper.intervalMs).toBe(7);
    expect(t.registrar.refreshMs).toBe(900);
    expect(t.clock.warnMs).toBe(250);
    expect(runnerTimings({})).toEqual(DEFAULT_TIMINGS);
  });
});

describe("library mode's timings option", () => {
  it('is checked at createScheduler, as a configuration problem at `timings`', () => {
    const bad = () =>
      createScheduler({
        databaseUrl: 'mysql://root@127.0.0.1:9/x',
        host: 'lib-1',
        timings: { notifier: { evaluateMs: 500, every: 1 } } as never,
      });
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/timings.*timings\.notifier\.every: unknown key/s);
    const good = createScheduler({
      databaseUrl: 'mysql://root@127.0.0.1:9/x',
      host: 'lib-1',
      timings: { notifier: { evaluateMs: 500 } },
    });
    expect(good.host).toBe('lib-1');
  });
});
