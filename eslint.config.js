import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      '.tools/**',
      '.tmp/**',
      '.sessionlog/**',
      'test/fixtures/**',
      'coverage/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-empty': ['error', { allowEmptyCatch: false }],
    },
  },
  {
    // Data converters Temporal loads by path with `require` (CommonJS, as they are).
    files: ['converters/**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: globals.node },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Node scripts run as they are (no TypeScript): Node's globals (fetch, timers) are theirs.
    files: ['scripts/**/*.mjs', 'bin/**/*.mjs'],
    languageOptions: { globals: globals.node },
  },
  {
    // The inspector's page: plain ES modules that run in the browser, served as they are.
    files: ['src/gateway/ui/**/*.js'],
    languageOptions: { globals: globals.browser, sourceType: 'module' },
  },
);
