/**
 * `output: {log: true}`: a run's output as lines for the runner's own log (journald, a log
 * shipper), each with its stream. Chunks end anywhere; a line is passed on once its newline came
 * (or at the end, or where output was dropped over `output.max`: the gap ends the line).
 * Bytes are read as UTF-8 (invalid sequences become U+FFFD): a log line is text.
 */
import { StringDecoder } from 'node:string_decoder';
import type { OutputChunk, OutputStream } from '../execution/output-capture.js';

export interface OutputLine {
  stream: 'stdout' | 'stderr';
  line: string;
  /** Bytes dropped (over `output.max`) right before this line. */
  droppedBefore?: number;
}

const NAMES = { 1: 'stdout', 2: 'stderr' } as const;
/** A line longer than this is passed on in pieces: a log line is not a place for 10 MB. */
const LINE_MAX = 16 * 1024;

export class OutputLines {
  private readonly partial = { 1: '', 2: '' };
  /** One decoder per stream: a character cut between two chunks is read whole. */
  private readonly decoders = { 1: new StringDecoder('utf8'), 2: new StringDecoder('utf8') };
  private next = 0;

  push(chunks: readonly OutputChunk[]): OutputLine[] {
    const out: OutputLine[] = [];
    for (const chunk of chunks) {
      const dropped = chunk.offset - this.next;
      this.next = chunk.offset + chunk.data.length;
      if (dropped > 0) {
        this.endLines(out);
        out.push({ stream: NAMES[chunk.stream], line: '…', droppedBefore: dropped });
      }
      this.split(chunk.stream, this.decoders[chunk.stream].write(chunk.data), out);
    }
    return out;
  }

  /** What is left at the end of an attempt (a last line without a newline). */
  end(): OutputLine[] {
    const out: OutputLine[] = [];
    this.endLines(out);
    this.next = 0;
    return out;
  }

  private split(stream: OutputStream, text: string, out: OutputLine[]): void {
    const parts = (this.partial[stream] + text).split('\n');
    this.partial[stream] = parts.pop()!;
    for (const line of parts) out.push({ stream: NAMES[stream], line });
    while (this.partial[stream].length > LINE_MAX) {
      out.push({ stream: NAMES[stream], line: this.partial[stream].slice(0, LINE_MAX) });
      this.partial[stream] = this.partial[stream].slice(LINE_MAX);
    }
  }

  private endLines(out: OutputLine[]): void {
    for (const stream of [1, 2] as const) {
      this.partial[stream] += this.decoders[stream].end();
      if (this.partial[stream] !== '')
        out.push({ stream: NAMES[stream], line: this.partial[stream] });
      this.partial[stream] = '';
    }
  }
}
