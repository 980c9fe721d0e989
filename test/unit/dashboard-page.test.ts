/**
 * The dashboard page as the package serves it: dist/http/dashboard/page.js finds the browser
 * script that `npm run build` compiled beside it (src/http/dashboard/browser/, its own tsconfig),
 * inlines it as the page's one classic script, and its Content-Security-Policy allows exactly that
 * script and the stylesheet, by hash. Imported from dist/ (as in load-isolated.test.ts): run from
 * src/, page.ts has no compiled script beside it. Needs `npm run build`. That the script runs in
 * a browser under that policy is test/e2e/dashboard.test.ts's.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dashboardPage } from '../../dist/http/dashboard/page.js';
import { ROOT } from '../helpers/cli.js';

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

describe('the dashboard page', () => {
  const { html, csp } = dashboardPage();
  const compiled = readFileSync(
    path.join(ROOT, 'dist/http/dashboard/browser/dashboard.js'),
    'utf8',
  );

  it('inlines the compiled browser script as its one classic script', () => {
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.map(([, attributes]) => attributes)).toEqual(['']);
    expect(scripts[0]![2]).toBe(compiled);
    // An import or export (even `import type`) makes tsc emit a module: a syntax error here.
    expect(compiled).not.toMatch(/^\s*(import|export)\b/m);
  });

  it('allows that script and the stylesheet by hash, in its header and in its <meta>', () => {
    const style = /<style>([\s\S]*?)<\/style>/.exec(html)![1]!;
    expect(csp).toBe(
      [
        "default-src 'none'",
        `script-src ${sha256(compiled)}`,
        `style-src ${sha256(style)}`,
        "connect-src 'self'",
        'img-src data:',
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
      ].join('; '),
    );
    const meta = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(html)?.[1];
    expect(meta).toBe(csp.replace("; frame-ancestors 'none'", ''));
  });

  it('is built once', () => {
    expect(dashboardPage()).toBe(dashboardPage());
  });
});
