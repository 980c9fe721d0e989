/**
 * The pure parts of blackouts: which fires one covers (its edges, a cancel, a job's schedules
 * created at run time), the checks of a request, where one stands, the typed instants of the
 * command, the fires it will skip, and which notices are due when.
 */
import { describe, expect, it } from 'vitest';
import { blackoutProblem, MAX_BLACKOUT_MS } from '../../src/actions/blackout.js';
import { expectedSkips, readInstant } from '../../src/cli/commands/blackout.js';
import type { Config } from '../../src/config/schema.js';
import { blackoutNotices } from '../../src/daemon/blackout-notices.js';
import { blackoutState, blackoutWarnings } from '../../src/fleet/blackouts.js';
import {
  blackoutCovers,
  blackoutReason,
  coveringBlackout,
  endOf,
  takesEffect,
  type Blackout,
} from '../../src/store/blackouts.js';
import { paused } from '../../src/coordination/skip-reasons.js';

const T = (s: string) => new Date(`2027-01-02T${s}Z`);
const plus = (d: Date, ms: number) => new Date(d.getTime() + ms);

function blackout(over: Partial<Blackout> = {}): Blackout {
  return {
    id: 3,
    startsAt: T('00:00:00.000'),
    endsAt: T('06:00:00.000'),
    jobs: ['settle'],
    reason: 'deploy freeze',
    createdBy: 'ops@laptop',
    createdAt: T('00:00:00.000'),
    cancelledAt: null,
    cancelledBy: null,
    ...over,
  };
}

describe('which fires a blackout covers', () => {
  it('covers [from, until): the start included, the end not, to the millisecond', () => {
    const b = blackout();
    expect(blackoutCovers(b, 'settle', T('00:00:00.000'))).toBe(true);
    expect(blackoutCovers(b, 'settle', T('05:59:59.999'))).toBe(true);
    expect(blackoutCovers(b, 'settle', plus(T('00:00:00.000'), -1))).toBe(false);
    expect(blackoutCovers(b, 'settle', T('06:00:00.000'))).toBe(false);
  });

  it('covers its jobs and their schedules created at run time, or every job', () => {
    const b = blackout({ jobs: ['settle', 'report'] });
    expect(blackoutCovers(b, 'report', T('01:00:00.000'))).toBe(true);
    expect(blackoutCovers(b, 'settle:eu-west', T('01:00:00.000'))).toBe(true);
    expect(blackoutCovers(b, 'export', T('01:00:00.000'))).toBe(false);
    expect(blackoutCovers(blackout({ jobs: null }), 'export', T('01:00:00.000'))).toBe(true);
  });

  it('a cancel ends it there; one cancelled before its start covers nothing', () => {
    const cancelled = blackout({ cancelledAt: T('02:00:00.000'), cancelledBy: 'bob@srv' });
    expect(endOf(cancelled)).toEqual(T('02:00:00.000'));
    expect(blackoutCovers(cancelled, 'settle', T('01:59:59.999'))).toBe(true);
    expect(blackoutCovers(cancelled, 'settle', T('02:00:00.000'))).toBe(false);
    const never = blackout({ startsAt: T('03:00:00.000'), cancelledAt: T('02:00:00.000') });
    expect(takesEffect(never)).toBe(false);
    expect(blackoutCovers(never, 'settle', T('03:00:00.000'))).toBe(false);
    // A cancel after its planned end changes nothing.
    expect(endOf(blackout({ cancelledAt: T('07:00:00.000') }))).toEqual(T('06:00:00.000'));
  });

  it('of several, the first to start (then the lowest id) names the skip, of kind paused', () => {
    const a = blackout({ id: 9, startsAt: T('01:00:00.000') });
    const b = blackout({ id: 7, startsAt: T('00:30:00.000'), jobs: null });
    const c = blackout({ id: 5, startsAt: T('00:30:00.000'), jobs: null });
    expect(coveringBlackout([a, b, c], 'settle', T('02:00:00.000'))?.id).toBe(5);
    expect(coveringBlackout([a, b, c], 'settle', T('07:00:00.000'))).toBeNull();
    expect(paused(blackout())).toEqual({
      kind: 'paused',
      text: 'paused by blackout #3 (ops@laptop) until 2027-01-02T06:00:00.000Z: deploy freeze',
    });
    expect(blackoutReason(blackout())).toMatch(/^paused /);
  });
});

describe('a request', () => {
  const now = T('00:00:00.000');
  const ok = { from: T('01:00:00.000'), until: T('02:00:00.000'), jobs: null, reason: 'x' };

  it('is refused backwards, empty, past, too long, without jobs or reason', () => {
    expect(blackoutProblem(ok, now)).toBeNull();
    expect(blackoutProblem({ ...ok, until: ok.from }, now)).toMatch(/--until .* is not after/);
    expect(blackoutProblem({ ...ok, from: T('00:00:00.000'), until: now }, now)).toMatch(
      /is not after|in the past/,
    );
    expect(
      blackoutProblem({ ...ok, from: new Date(0), until: T('00:00:00.000') }, T('00:00:00.001')),
    ).toMatch(/in the past/);
    const longest = new Date(ok.from.getTime() + MAX_BLACKOUT_MS);
    expect(blackoutProblem({ ...ok, until: longest }, now)).toBeNull();
    expect(blackoutProblem({ ...ok, until: new Date(longest.getTime() + 1) }, now)).toMatch(
      /longer than a blackout may last \(90d\)/,
    );
    expect(blackoutProblem({ ...ok, jobs: [] }, now)).toMatch(/--job/);
    expect(blackoutProblem({ ...ok, reason: ' ' }, now)).toMatch(/--reason is empty/);
    expect(blackoutProblem({ ...ok, reason: 'a\nb' }, now)).toMatch(/control character/);
    // One already going on (from in the past) is fine while its end is to come.
    expect(blackoutProblem({ ...ok, from: new Date(0) }, now)).toMatch(/longer/);
    expect(blackoutProblem({ ...ok, from: T('00:00:00.000') }, T('00:30:00.000'))).toBeNull();
  });

  it('reads now, +durations and instants; refuses anything else naming the option', () => {
    expect(readInstant('--from', 'now')).toEqual({ kind: 'now' });
    expect(readInstant('--until', '+90m')).toEqual({ kind: 'after', ms: 5_400_000 });
    expect(readInstant('--until', '2027-01-02T06:00:00+01:00')).toEqual({
      kind: 'at',
      at: T('05:00:00.000'),
    });
    // As history prints fires: UTC.
    expect(readInstant('--from', '2027-01-02 05:00:00.000')).toEqual({
      kind: 'at',
      at: T('05:00:00.000'),
    });
    expect(() => readInstant('--from', undefined)).toThrow(/--from is required/);
    expect(() => readInstant('--until', '+soon')).toThrow(/--until "\+soon"/);
    expect(() => readInstant('--from', 'tomorrow')).toThrow(/^--from: /);
    expect(() => readInstant('--until', '--all')).toThrow(/^--until: /);
  });
});

describe('where one stands', () => {
  it('upcoming, active, ended, cancelled; status tells those going on', () => {
    const b = blackout();
    expect(blackoutState(b, plus(b.startsAt, -1))).toBe('upcoming');
    expect(blackoutState(b, T('00:00:00.000'))).toBe('active');
    expect(blackoutState(b, T('06:00:00.000'))).toBe('ended');
    const cancelled = blackout({ cancelledAt: T('01:00:00.000') });
    expect(blackoutState(cancelled, T('00:30:00.000'))).toBe('active');
    expect(blackoutState(cancelled, T('01:00:00.000'))).toBe('cancelled');
    expect(blackoutWarnings([b], T('01:00:00.000'))).toEqual([
      expect.objectContaining({ kind: 'blackout', job: 'settle' }),
    ]);
    expect(blackoutWarnings([b], T('07:00:00.000'))).toEqual([]);
  });

  it('previews the fires of the schedules file it skips', () => {
    const jobs = [
      { name: 'settle', enabled: true, schedule: '*/30 * * * *', timezone: 'UTC' },
      { name: 'report', enabled: true, schedule: '0 3 * * *', timezone: 'UTC' },
    ] as unknown as Config['jobs'];
    expect(expectedSkips({ jobs }, blackout())).toEqual([
      { job: 'settle', fires: 12, first: T('00:00:00.000'), more: false },
    ]);
    expect(expectedSkips({ jobs }, blackout({ jobs: null })).map((s) => s.fires)).toEqual([12, 1]);
  });
});

describe("a blackout's notices", () => {
  const jobs = [
    {
      name: 'settle',
      notify: { to: ['ops', 'chat'], on: ['failed', 'blackout-started', 'blackout-ended'] },
    },
    { name: 'report', notify: { to: ['ops'], on: ['blackout-started', 'blackout-ended'] } },
    { name: 'export', notify: { to: ['dev'], on: ['failed'] } },
    { name: 'quiet', notify: null },
  ] as unknown as Config['jobs'];

  it('none before it starts; the next edge is its start', () => {
    const before = plus(T('00:00:00.000'), -1);
    const { notices, nextEdge } = blackoutNotices('ns', jobs, [blackout()], before);
    expect(notices).toEqual([]);
    expect(nextEdge).toEqual(T('00:00:00.000'));
  });

  it('the start at its start, to the targets of the jobs it covers, once per target', () => {
    const all = blackout({ jobs: null });
    const { notices, nextEdge } = blackoutNotices('ns', jobs, [all], T('00:00:00.000'));
    expect(notices).toEqual([
      expect.objectContaining({
        subject: 'blackout #3',
        event: 'blackout-started',
        fire: T('00:00:00.000'),
        targets: ['ops', 'chat'],
        runId: null,
      }),
    ]);
    expect(notices[0]!.details).toMatchObject({ blackout: 3, reason: 'deploy freeze', jobs: null });
    expect(nextEdge).toEqual(T('06:00:00.000'));
    // Only `report` covered: its target alone.
    const one = blackoutNotices('ns', jobs, [blackout({ jobs: ['report'] })], T('01:00:00.000'));
    expect(one.notices.map((n) => n.targets)).toEqual([['ops']]);
  });

  it('start then end once over; the end of a cancelled one at its cancel; nothing for one that never began', () => {
    const cancelled = blackout({ cancelledAt: T('02:00:00.000'), cancelledBy: 'bob@srv' });
    const never = blackout({ id: 4, startsAt: T('05:00:00.000'), cancelledAt: T('02:00:00.000') });
    const { notices, nextEdge } = blackoutNotices(
      'ns',
      jobs,
      [cancelled, never],
      T('03:00:00.000'),
    );
    expect(notices.map((n) => [n.event, n.fire])).toEqual([
      ['blackout-started', T('00:00:00.000')],
      ['blackout-ended', T('02:00:00.000')],
    ]);
    expect(notices[1]!.details).toMatchObject({
      cancelledBy: 'bob@srv',
      endsAt: T('02:00:00.000').toISOString(),
    });
    expect(nextEdge).toBeNull();
    // A week later it is history, not news.
    const weekLater = plus(T('02:00:00.000'), 8 * 86_400_000);
    expect(blackoutNotices('ns', jobs, [cancelled], weekLater).notices).toEqual([]);
  });
});
