/**
 * Keeps the last `limit` bytes of a job's stdout+stderr. A batch that prints gigabytes must not
 * grow the daemon's memory or the history row; the tail is what an operator needs after a failure.
 */
export const DEFAULT_TAIL_BYTES = 8 * 1024;

export class OutputTail {
  private chunks: Buffer[] = [];
  private size = 0;
  private dropped = false;

  constructor(private readonly limit = DEFAULT_TAIL_BYTES) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size - (this.chunks[0]?.length ?? 0) >= this.limit && this.chunks.length > 1) {
      this.size -= this.chunks.shift()!.length;
      this.dropped = true;
    }
  }

  toString(): string {
    let buf = Buffer.concat(this.chunks);
    if (buf.length > this.limit) {
      buf = buf.subarray(buf.length - this.limit);
      this.dropped = true;
    }
    if (!this.dropped) return buf.toString('utf8');
    // The cut may split a multi-byte character; drop its broken start rather than show garbage.
    return `…${buf.toString('utf8').replace(/^\uFFFD+/, '')}`;
  }
}
