import { describe, expect, it } from 'vitest';
import {
  CHUNK_BYTES,
  OutputCapture,
  type OutputChunk,
} from '../../src/execution/output-capture.js';
import { SecretMask } from '../../src/execution/secret-mask.js';

/** The bytes kept, and the gaps between them, as the reader (`baton logs`) sees them. */
function reassemble(chunks: OutputChunk[]) {
  let next = 0;
  let dropped = 0;
  const parts: Buffer[] = [];
  for (const c of [...chunks].sort((a, b) => a.offset - b.offset)) {
    dropped += c.offset - next;
    next = c.offset + c.data.length;
    parts.push(c.data);
  }
  return { kept: Buffer.concat(parts), dropped };
}

describe('OutputCapture', () => {
  it('keeps everything under the bound, in order, head live', () => {
    const capture = new OutputCapture(1000);
    capture.push(1, Buffer.from('out 1\n'));
    capture.push(2, Buffer.from('err 1\n'));
    const live = capture.takeLive();
    expect(live.map((c) => [c.stream, c.offset, c.data.toString()])).toEqual([
      [1, 0, 'out 1\n'],
      [2, 6, 'err 1\n'],
    ]);
    capture.push(1, Buffer.from('out 2\n'));
    expect(reassemble([...live, ...capture.finish()])).toEqual({
      kept: Buffer.from('out 1\nerr 1\nout 2\n'),
      dropped: 0,
    });
  });

  it('past the bound keeps the head and the latest tail, and the gap says how much went', () => {
    const capture = new OutputCapture(100);
    const all = Buffer.from(Array.from({ length: 1000 }, (_, i) => String(i % 10)).join(''));
    for (let i = 0; i < all.length; i += 7) capture.push(1, all.subarray(i, i + 7));
    const live = capture.takeLive();
    expect(Buffer.concat(live.map((c) => c.data))).toEqual(all.subarray(0, 50));
    const { kept, dropped } = reassemble([...live, ...capture.finish()]);
    expect(kept).toEqual(Buffer.concat([all.subarray(0, 50), all.subarray(950)]));
    expect(dropped).toBe(900);
    expect(capture.printed).toBe(1000);
  });

  it('splits a long line without a newline into chunks, and keeps bytes that are not UTF-8', () => {
    const capture = new OutputCapture(1024 * 1024);
    const line = Buffer.alloc(CHUNK_BYTES * 2 + 10, 0xff);
    capture.push(2, line);
    const chunks = capture.finish();
    expect(chunks.map((c) => c.data.length)).toEqual([CHUNK_BYTES, CHUNK_BYTES, 10]);
    expect(Buffer.concat(chunks.map((c) => c.data))).toEqual(line);
  });

  it('merges small reads of one stream into one chunk', () => {
    const capture = new OutputCapture(1024 * 1024);
    for (let i = 0; i < 100; i++) capture.push(1, Buffer.from(`line ${i}\n`));
    capture.push(2, Buffer.from('oops\n'));
    const chunks = capture.takeLive();
    expect(chunks.map((c) => c.stream)).toEqual([1, 2]);
    expect(chunks[0]!.data.toString().split('\n')).toHaveLength(101);
  });

  it('with max 0 keeps nothing, whatever is printed', () => {
    const capture = new OutputCapture(0);
    capture.push(1, Buffer.alloc(10_000));
    expect(capture.finish()).toEqual([]);
  });
});

describe('SecretMask', () => {
  const run = (secrets: string[], pieces: string[]) => {
    const mask = new SecretMask(secrets);
    return pieces.map((p) => mask.push(Buffer.from(p)).toString()).join('') + mask.end().toString();
  };

  it('masks every occurrence, also when a read cuts it in two', () => {
    expect(run(['hunter22'], ['pw=hunter22 and hun', 'ter22!'])).toBe('pw=*** and ***!');
    expect(run(['hunter22'], ['h', 'u', 'n', 't', 'e', 'r', '2', '2'])).toBe('***');
  });

  it('masks the longer of two overlapping secrets whole, and ignores secrets too short to mask', () => {
    expect(run(['secret', 'secret-token'], ['a secret-token b secret'])).toBe('a *** b ***');
    expect(run(['abc'], ['abcabc'])).toBe('abcabc');
  });

  it('holds back only an end that could start a secret, so quiet output is not delayed', () => {
    const mask = new SecretMask(['hunter22']);
    expect(mask.push(Buffer.from('all done\n')).toString()).toBe('all done\n');
    expect(mask.push(Buffer.from('pw: hun')).toString()).toBe('pw: ');
    expect(mask.push(Buffer.from('gry')).toString()).toBe('hungry');
  });

  it('passes output through untouched without secrets', () => {
    const mask = new SecretMask([]);
    const data = Buffer.from('anything');
    expect(mask.push(data)).toBe(data);
  });
});
