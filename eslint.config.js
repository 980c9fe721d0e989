import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** The dashboard's browser script (its own tsconfig: DOM types, no Node types). */
const BROWSER = ['src/http/dashboard/browser/**/*.ts'];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'test-artifacts/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-console': 'off',
    },
  },
  { ignores: BROWSER, languageOptions: { globals: { ...globals.node } } },
  {
    files: BROWSER,
    languageOptions: { globals: { ...globals.browser } },
    rules: {
      // Everything it shows is hostile input (job output, errors, host ids): text goes in by
      // textContent and createElement only, never parsed as markup (dashboard.ts's header).
      'no-restricted-properties': [
        'error',
        ...[
          { property: 'innerHTML' },
          { property: 'outerHTML' },
          { property: 'insertAdjacentHTML' },
          { object: 'document', property: 'write' },
          { object: 'document', property: 'writeln' },
        ].map((restricted) => ({
          ...restricted,
          message: 'the dashboard never parses text as markup: use el() and textContent',
        })),
      ],
    },
  },
);
