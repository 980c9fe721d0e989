/**
 * Which runner of the fleet asks first for a fire.
 *
 * Every runner wakes for a fire at the same moment (they fire by the database's clock). When all
 * of them asked for the job's lock then, the first `GET_LOCK` statement to reach the server took
 * the lock of every fire of that instant (a runner asks for all of an instant's locks in one
 * statement: "Many fires at once" in docs/design.md). One runner won all of the instant's jobs and
 * ran them alone — their spawns and verdicts one after another, while the others only wrote
 * skips — and every runner's statements at the instant stood in the way of that winner's claims.
 *
 * So each fire has a *first asker*: of the runners that run the job (this one, and the live
 * runners of the namespace that the registry showed running it at the last look: fleet-watch.ts),
 * the one whose rendezvous hash of (job, instant, host) is highest. It contends at the fire's
 * instant; every other runner contends FIRST_ASKER_LEAD_MS later, and looks the fire's winner up
 * first (fire-protocol.ts): a fire its first asker won is skipped without asking for the lock.
 *
 * The protocol itself does not change: every runner still contends for every fire, and the lock
 * and the fire key still decide. Only the order of asking is spread. A first asker that is gone,
 * stalled or slow is overtaken after the lead; two runners that both think they ask first (views
 * differ for a few seconds after a runner joins or leaves) contend at once, as before; a fire that
 * no runner thinks its own is contended by all of them after the lead.
 *
 * Rendezvous (highest random weight) hashing, because every runner finds the same answer from
 * the same list without talking to the others; a runner that joins or leaves moves only its own
 * share; and the instant is part of the key, so a job's fires are spread over the fleet rather
 * than one runner taking a heavy job for good.
 */

/**
 * How long after a fire's instant the runners that do not ask first contend. Well above a first
 * asker's claim (GET_LOCK and one INSERT: milliseconds, some tens on a saturated 2-core machine),
 * so that its fires are found won; and far below STALE_FIRE_MS, a second of any schedule and a
 * lock session's heartbeat: a first asker that died costs its share of fires this much lag, until
 * the registry shows it gone (up to 20 s: gone after 15 s, looked at every 5 s).
 */
export const FIRST_ASKER_LEAD_MS = 50;

/** The runner of `hosts` that asks first for `job`'s fire at `instant`; null without hosts. */
export function firstAsker(hosts: Iterable<string>, job: string, instant: Date): string | null {
  let best: string | null = null;
  let bestWeight = -1;
  const key = `${job}\n${instant.getTime()}\n`;
  for (const host of hosts) {
    const weight = hash32(key + host);
    // Ties (rare in 32 bits) go to the smaller name, so every runner picks the same one.
    if (weight > bestWeight || (weight === bestWeight && best != null && host < best)) {
      best = host;
      bestWeight = weight;
    }
  }
  return best;
}

/**
 * FNV-1a over the UTF-16 code units, then MurmurHash3's finaliser: fast, stable across versions
 * and platforms (every runner of a mixed fleet must agree), and well mixed in every bit, which
 * FNV alone is not for keys that differ only at their end.
 */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
