/**
 * Not a job. A warm module host whose jobs are TypeScript imports this file before its run
 * (src/execution/tsx-warm-up.ts), so that tsx's and Node's first use of the path a `.ts` job of
 * this package scope takes — resolve, load, the lexers, the CommonJS translator — is paid ahead
 * of the fire. It is shaped like a job (imports, types, `import.meta`, a default export), and
 * never changes: tsx's disk cache keeps a single entry for it, so warming writes nothing more
 * however many hosts start.
 */
import { basename } from 'node:path';

export interface WarmedUp {
  file: string;
  job: string;
}

export default async (ctx: { job: string }): Promise<WarmedUp> => ({
  file: basename(new URL(import.meta.url).pathname),
  job: ctx.job,
});
