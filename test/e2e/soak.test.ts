/**
 * The fault soak (test/soak/), short: 50 s of seed 313's plan — one of every kind: a SIGHUP,
 * an 8.2 s SIGSTOP of the long job's runner with its lock session KILLed under it (the stalled-
 * runner overlap of issue 15), a `kill -9`, a frozen link, a SIGTERM, a plain stall, a server
 * restart and a KILL of a lock session — on five runners (one skewed, one behind the proxy) and
 * a private server. Every check of the full soak must hold: no fire
 * started twice, no overlap beyond the stated bound, history agrees with the jobs' journal, no
 * row left running, every fire accounted for, no job started after its runner knew its lock
 * session was lost. `npm run soak -- --seconds 180 --seed N` is the full one.
 */
import { describe, expect, it } from 'vitest';
import { formatReport, runSoak } from '../soak/soak.js';

const SEED = 313;
const SECONDS = 50;

describe('the fault soak, short', () => {
  it(`seed ${SEED}, ${SECONDS} s of faults: every check holds`, async () => {
    const report = await runSoak({ seconds: SECONDS, seed: SEED });
    const text = formatReport(report);

    // The faults were really made, and the key one met what it is for: a live long run whose
    // runner was stalled and whose lock session was killed under it.
    expect(
      report.faults.filter((f) => !f.applied).map((f) => `#${f.n} ${f.kind}: ${f.note}`),
      `faults not made\n${text}`,
    ).toEqual([]);
    expect(report.faults.map((f) => f.kind)).toEqual(
      expect.arrayContaining([
        'stall-kill',
        'server-restart',
        'freeze',
        'kill9',
        'sigterm',
        'kill-session',
        'stall',
        'sighup',
      ]),
    );
    expect(
      report.faults.some(
        (f) => f.kind === 'stall-kill' && /holds long run .* killed$/.test(f.note),
      ),
      `a stall + KILL under a live long run\n${text}`,
    ).toBe(true);
    // The soak soaked: the every-second jobs ran after every fault.
    expect(
      report.verdicts.recovery.filter((r) => r.fromFaultMs == null),
      text,
    ).toEqual([]);

    expect(report.failures, text).toEqual([]);
  }, 240_000);
});
