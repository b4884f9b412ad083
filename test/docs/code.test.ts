/**
 * check:docs, code: every ```ts block of the documentation compiles as a module of its own
 * against the package's public exports (`sessionlog` is src/index.ts) and its dependencies.
 */
import { describe, expect, it } from 'vitest';
import { ROOT, script, scratchTree, type DocsCheck } from './support.js';

const { checkCode, documentsOf } = await script<DocsCheck>('docs-check.mjs');

describe('check:docs code blocks', () => {
  it('passes on this repository: every TypeScript block of README.md and docs/ compiles', { timeout: 240_000 }, () => {
    expect(checkCode(ROOT, documentsOf(ROOT))).toEqual([]);
  });

  it(
    'fails on a block that calls what the API does not have, naming the document line; other languages are not compiled',
    { timeout: 240_000 },
    () => {
      const root = scratchTree({
        'README.md': [
          '# Example',
          '',
          '```ts',
          "import { SessionClient, openStore } from 'sessionlog';",
          '',
          "const store = await openStore('sqlite:./sessions.db');",
          "const client = await SessionClient.connect({ address: '127.0.0.1:7233', store });",
          "const reply = await client.send('s1', 'hello');",
          'console.log(reply.text);',
          '```',
          '',
          '```ts',
          "import type { SessionClient } from 'sessionlog';",
          'declare const client: SessionClient;',
          "await client.sendMessage('s1', 'hello');",
          '```',
          '',
          '```tsx',
          'this is not compiled <Chat />',
          '```',
          '',
        ].join('\n'),
      });
      const problems = checkCode(root, documentsOf(root), { codeRoot: ROOT });
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(
        /^README\.md:15: TS2339 Property 'sendMessage' does not exist on type 'SessionClient'/,
      );
    },
  );
});
