/**
 * The write API's credentials: named tokens, one `name:token` a line, optionally followed by the
 * token's scope (`name:token jobs=report*,etl-* actions=run,rerun namespaces=prod`,
 * actions/scope.ts; a line without one grants every action on every job, as before), read from a
 * file that only
 * root can read (`--http-write-tokens-file`, `BATON_HTTP_WRITE_TOKENS_FILE`, or the systemd
 * credential `http-write-tokens`), never from a flag or an environment variable whose value
 * `ps` or a job could see. The name is what the audit records as the operator
 * (`baton_audit.operator`), so it says whose token took an action; a token is never printed,
 * logged or stored — a bad file is refused by its line number alone.
 *
 * Without any write token the write API is off (every POST is refused as before).
 */
import { readFileSync } from 'node:fs';
import { UsageError } from '../errors.js';
import { parseScope, type ActionScope } from '../actions/scope.js';
import { MIN_TOKEN_LENGTH } from './address.js';

export interface WriteToken {
  /** Who holds it, as the audit names them: letters, digits, `.`, `_`, `@`, `-`. */
  name: string;
  token: string;
  /** What it may do (actions/scope.ts); absent: everything, in any namespace. */
  scope?: ActionScope;
}

/** The name of the credential `LoadCredential=http-write-tokens:/etc/baton/http-write-tokens`. */
export const WRITE_TOKENS_CREDENTIAL = 'http-write-tokens';

const NAME = /^[A-Za-z0-9._@-]{1,64}$/;

/**
 * The tokens of `file`; `what` names where the file was given (`--http-write-tokens-file`, the
 * systemd credential …) for messages. Blank lines and `#` comments are skipped. The read token,
 * when there is one, must not also be a write token: a reader would otherwise be able to write.
 */
export function readWriteTokens(file: string, what: string, readToken?: string): WriteToken[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT' ? 'file not found' : code === 'EACCES' ? 'permission denied' : code;
    throw new UsageError(`${what} ${file}: cannot read: ${why ?? 'unreadable'}`);
  }
  const tokens: WriteToken[] = [];
  const lines = text.split(/\r?\n/);
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    // The place, never the line: it holds a token.
    const fail = (why: string) => new UsageError(`${what} ${file}:${i + 1}: ${why}`);
    const colon = line.indexOf(':');
    if (colon < 0) throw fail('expected name:token');
    const name = line.slice(0, colon).trim();
    // The token is the first word after the colon; the scope's words follow, then a comment.
    const words = line
      .slice(colon + 1)
      .trim()
      .split(/\s+/);
    const token = words[0] ?? '';
    const comment = words.findIndex((w, at) => at > 0 && w.startsWith('#'));
    const scopeWords = words.slice(1, comment < 0 ? undefined : comment);
    if (!NAME.test(name)) {
      throw fail("the name must be 1 to 64 letters, digits, '.', '_', '@' or '-'");
    }
    if (token.length < MIN_TOKEN_LENGTH) {
      throw fail(
        `the token of "${name}" is shorter than ${MIN_TOKEN_LENGTH} characters; use a random ` +
          'one (e.g. openssl rand -hex 24)',
      );
    }
    let scope: ActionScope | undefined;
    if (scopeWords.length > 0) {
      try {
        scope = parseScope(scopeWords);
      } catch (err) {
        throw fail(`the scope of "${name}": ${(err as Error).message}`);
      }
    }
    if (tokens.some((t) => t.name === name)) throw fail(`"${name}" is named twice`);
    if (tokens.some((t) => t.token === token)) {
      throw fail(`the token of "${name}" is also another name's: each needs its own`);
    }
    if (readToken != null && token === readToken) {
      throw fail(`the token of "${name}" is the read token (--http-token): use another one`);
    }
    tokens.push({ name, token, ...(scope ? { scope } : {}) });
  }
  if (tokens.length === 0) {
    throw new UsageError(`${what} ${file} has no name:token line (the write API would be off)`);
  }
  return tokens;
}
