/**
 * A parsed YAML document that remembers where every key came from, so that a problem found at
 * `jobs.settle.schedule` can be reported as `schedules.yaml:12:5`. Syntax errors and duplicate
 * keys are collected here too (the `yaml` library refuses duplicate keys with `uniqueKeys`).
 */
import { LineCounter, isMap, isScalar, isSeq, parseDocument, type Document, type Node } from 'yaml';
import type { ConfigProblem } from '../errors.js';

export type PathSegment = string | number;

export class YamlSource {
  readonly file: string;
  readonly problems: ConfigProblem[] = [];
  private readonly doc: Document;
  private readonly lines = new LineCounter();

  constructor(file: string, text: string) {
    this.file = file;
    this.doc = parseDocument(text, {
      lineCounter: this.lines,
      prettyErrors: false,
      uniqueKeys: true,
      // Plain YAML 1.2 core schema: `on`/`yes` stay strings, no surprises with `no: true`.
      schema: 'core',
      merge: false,
    });
    for (const err of this.doc.errors) {
      const path = this.pathAtOffset(err.pos[0]);
      // An unclosed quote or bracket is noticed where the file ends; the key it belongs to is
      // where a person has to look.
      const where =
        err.code === 'MISSING_CHAR' && path.length > 0
          ? this.locate(path)
          : toLocation(this.lines.linePos(err.pos[0]));
      const message =
        err.code === 'DUPLICATE_KEY' ? 'duplicate key' : err.message.split('\n')[0] || err.code;
      this.problems.push({ file, ...where, path: path.join('.'), message });
    }
  }

  get ok(): boolean {
    return this.problems.length === 0;
  }

  toJS(): unknown {
    return this.doc.toJS({ maxAliasCount: 100 });
  }

  /**
   * The line and column of the deepest key of `path` that exists in the document. Pointing at the
   * key (not the value) reads best: `jobs.settle` for a job missing its schedule, the key itself
   * for a bad value or an unknown key.
   */
  locate(path: readonly PathSegment[]): { line?: number; column?: number } {
    let node: unknown = this.doc.contents;
    let offset: number | undefined;
    for (const segment of path) {
      if (isMap(node)) {
        const pair = node.items.find(
          (p) => isScalar(p.key) && String(p.key.value) === String(segment),
        );
        if (!pair) break;
        const keyRange = (pair.key as Node).range;
        if (keyRange) offset = keyRange[0];
        node = pair.value;
      } else if (isSeq(node) && typeof segment === 'number') {
        const item = node.items[segment] as Node | undefined;
        if (!item) break;
        if (item.range) offset = item.range[0];
        node = item;
      } else {
        break;
      }
    }
    if (offset == null) {
      const range = (this.doc.contents as Node | null)?.range;
      offset = range?.[0];
    }
    if (offset == null) return {};
    return toLocation(this.lines.linePos(offset));
  }

  problem(path: readonly PathSegment[], message: string): ConfigProblem {
    return { file: this.file, ...this.locate(path), path: path.join('.'), message };
  }

  /** Best-effort path of the key containing `offset`, for syntax errors. */
  private pathAtOffset(offset: number): string[] {
    const path: string[] = [];
    let node: unknown = this.doc.contents;
    while (isMap(node)) {
      // The last pair that spans the offset: a value's range runs up to the next key, so the
      // pair before a duplicate key spans the duplicate's offset too.
      const pair = node.items.findLast((p) => {
        const k = p.key as Node | null;
        const v = p.value as Node | null;
        const start = k?.range?.[0] ?? 0;
        const end = v?.range?.[2] ?? k?.range?.[2] ?? 0;
        return start <= offset && offset <= end;
      });
      if (!pair || !isScalar(pair.key)) break;
      path.push(String(pair.key.value));
      node = pair.value;
    }
    return path;
  }
}

function toLocation({ line, col }: { line: number; col: number }): {
  line: number;
  column: number;
} {
  return { line, column: col };
}
