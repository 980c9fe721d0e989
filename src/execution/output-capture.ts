/**
 * Everything one attempt of a run prints, bounded: the history keeps it as chunks
 * (store/run-output.ts), each marked with its stream and its byte offset in the attempt's output.
 *
 * Up to `maxBytes` are kept: the first half as it comes (the head, handed out while the job runs,
 * so that `baton logs --follow` on any host sees it live), the second half as a sliding window
 * over the latest output (the tail, handed out when the job ends). What falls between them is
 * dropped, and shows as a gap between offsets: the reader says how many bytes. So a job that
 * prints a gigabyte costs at most `maxBytes` of memory here and of rows in the database.
 *
 * Bytes are kept as bytes: binary output, invalid UTF-8 and a line of 10 MB without a newline are
 * stored as printed (split into chunks of at most CHUNK_BYTES); readers decide how to show them.
 *
 * Imports stay within node: (the spawner loads this file and must stay small).
 */

/** 1: stdout, 2: stderr (the file descriptors). */
export type OutputStream = 1 | 2;

export interface OutputChunk {
  stream: OutputStream;
  /** Where the chunk starts in the attempt's whole output (both streams, in order). */
  offset: number;
  /** When it was read (epoch milliseconds, this host's clock). */
  at: number;
  data: Buffer;
}

/** No stored chunk is larger: a row stays well under `max_allowed_packet`. */
export const CHUNK_BYTES = 64 * 1024;

export class OutputCapture {
  private readonly headBytes: number;
  private readonly tailBytes: number;
  /** Bytes read so far (all of them, kept or not). */
  private total = 0;
  private headKept = 0;
  /** Head chunks not yet handed out. */
  private pending: OutputChunk[] = [];
  /** The sliding window past the head, oldest first. */
  private tail: OutputChunk[] = [];
  private tailSize = 0;

  constructor(maxBytes: number) {
    this.headBytes = Math.floor(maxBytes / 2);
    this.tailBytes = maxBytes - this.headBytes;
  }

  /** Bytes the job printed. */
  get printed(): number {
    return this.total;
  }

  push(stream: OutputStream, data: Buffer, at = Date.now()): void {
    let rest = data;
    while (rest.length > 0) {
      const room = this.headBytes - this.headKept;
      if (room > 0) {
        const piece = rest.subarray(0, Math.min(room, CHUNK_BYTES));
        this.pending.push({ stream, offset: this.total, at, data: own(piece, data) });
        this.headKept += piece.length;
        this.total += piece.length;
        rest = rest.subarray(piece.length);
        continue;
      }
      this.keepInTail(stream, rest, at);
      return;
    }
  }

  /** The head chunks read since the last call (the job is still running). */
  takeLive(): OutputChunk[] {
    const out = coalesce(this.pending);
    this.pending = [];
    return out;
  }

  /** What is left to store once the job has ended: the rest of the head, then the tail. */
  finish(): OutputChunk[] {
    const out = [...this.takeLive(), ...coalesce(this.tail)];
    this.tail = [];
    this.tailSize = 0;
    return out;
  }

  private keepInTail(stream: OutputStream, data: Buffer, at: number): void {
    if (this.tailBytes === 0) {
      this.total += data.length;
      return;
    }
    // Only the last tailBytes of a large chunk can survive: skip the rest at once.
    const skip = Math.max(0, data.length - this.tailBytes);
    this.total += skip;
    for (let from = skip; from < data.length; from += CHUNK_BYTES) {
      const piece = own(data.subarray(from, Math.min(from + CHUNK_BYTES, data.length)), data);
      this.tail.push({ stream, offset: this.total, at, data: piece });
      this.total += piece.length;
      this.tailSize += piece.length;
    }
    while (this.tailSize > this.tailBytes) {
      const oldest = this.tail[0]!;
      const over = this.tailSize - this.tailBytes;
      if (oldest.data.length <= over) {
        this.tail.shift();
        this.tailSize -= oldest.data.length;
      } else {
        this.tail[0] = {
          ...oldest,
          offset: oldest.offset + over,
          data: oldest.data.subarray(over),
        };
        this.tailSize -= over;
      }
    }
  }
}

/** An output chunk over the JSON channel: its bytes as base64. */
export interface WireChunk {
  stream: OutputStream;
  offset: number;
  at: number;
  base64: string;
}

/**
 * Neighbouring chunks of one stream that touch, merged up to CHUNK_BYTES: a job printing short
 * lines fast is read a few bytes at a time, and a row per read would cost more than its bytes.
 */
function coalesce(chunks: readonly OutputChunk[]): OutputChunk[] {
  const out: OutputChunk[] = [];
  let run: OutputChunk[] = [];
  let size = 0;
  const close = () => {
    if (run.length === 0) return;
    const data =
      run.length === 1
        ? run[0]!.data
        : Buffer.concat(
            run.map((c) => c.data),
            size,
          );
    out.push({ ...run[0]!, data });
    run = [];
    size = 0;
  };
  for (const c of chunks) {
    const last = run.at(-1);
    const touches =
      last != null &&
      last.stream === c.stream &&
      last.offset + last.data.length === c.offset &&
      size + c.data.length <= CHUNK_BYTES;
    if (!touches) close();
    run.push(c);
    size += c.data.length;
  }
  close();
  return out;
}

/** Chunks in groups of at most `bytes` each (one IPC message each; never a chunk split). */
export function inGroups(chunks: readonly OutputChunk[], bytes: number): OutputChunk[][] {
  const groups: OutputChunk[][] = [];
  let group: OutputChunk[] = [];
  let size = 0;
  for (const c of chunks) {
    if (group.length > 0 && size + c.data.length > bytes) {
      groups.push(group);
      group = [];
      size = 0;
    }
    group.push(c);
    size += c.data.length;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

/**
 * `piece` of `whole`, as a buffer of its own when it is a small part of it: a kept slice would
 * keep the whole read buffer alive. Most pieces are whole reads, and are kept without a copy.
 */
function own(piece: Buffer, whole: Buffer): Buffer {
  return piece.length * 2 < whole.length ? Buffer.from(piece) : piece;
}

/** For the spawner's JSON channel (spawner.ts). */
export function toWire(chunks: OutputChunk[]): WireChunk[] {
  return chunks.map(({ data, ...rest }) => ({ ...rest, base64: data.toString('base64') }));
}

export function fromWire(chunks: WireChunk[]): OutputChunk[] {
  return chunks.map(({ base64, ...rest }) => ({ ...rest, data: Buffer.from(base64, 'base64') }));
}
