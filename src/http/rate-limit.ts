/**
 * The write API's rate limit: a token bucket per write token, so that a script gone wrong (or a
 * stolen token) cannot start a job a thousand times a second or flood the audit. A bucket holds
 * `capacity` requests and refills at `capacity` per `windowMs`; an empty one answers 429 with
 * how long until the next request is allowed (Retry-After). Kept in memory, per runner.
 */
export interface RateLimitOptions {
  capacity: number;
  windowMs: number;
}

export const WRITE_RATE_LIMIT: RateLimitOptions = { capacity: 10, windowMs: 10_000 };

interface Bucket {
  tokens: number;
  at: number;
}

/** Buckets kept at most; full ones are forgotten first (a full bucket is the default). */
const MAX_BUCKETS = 1_000;

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly o: RateLimitOptions = WRITE_RATE_LIMIT,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Takes one request from `key`'s bucket: 0 when allowed, else the ms until one would be. */
  take(key: string): number {
    const now = this.now();
    const perMs = this.o.capacity / this.o.windowMs;
    const bucket = this.buckets.get(key) ?? { tokens: this.o.capacity, at: now };
    bucket.tokens = Math.min(this.o.capacity, bucket.tokens + (now - bucket.at) * perMs);
    bucket.at = now;
    if (!this.buckets.has(key)) {
      if (this.buckets.size >= MAX_BUCKETS) this.forgetFull(now, perMs);
      this.buckets.set(key, bucket);
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil((1 - bucket.tokens) / perMs);
  }

  private forgetFull(now: number, perMs: number): void {
    for (const [key, b] of this.buckets) {
      if (b.tokens + (now - b.at) * perMs >= this.o.capacity) this.buckets.delete(key);
    }
  }
}
