/**
 * check:docs, the architecture's long files: docs/architecture.md names exactly the source
 * files over 600 lines, each with why, so a file that grows past it (or shrinks below) fails.
 */
import { describe, expect, it } from 'vitest';
import { ROOT, script, scratchTree, type DocsCheck } from './support.js';

const { checkLongFiles, LONG_FILE_LINES } = await script<DocsCheck>('docs-check.mjs');

const lines = (count: number) => 'const x = 1;\n'.repeat(count);

function architecture(rows: string[]): string {
  return ['# Architecture', '', '## Long files, and why', '', '| file | why |', '|---|---|', ...rows, ''].join('\n');
}

describe('check:docs long files', () => {
  it('passes on this repository: the table names exactly the source files over 600 lines', () => {
    expect(checkLongFiles(ROOT)).toEqual([]);
  });

  it('fails on a long file the table does not name, and on a named file that is no longer long', () => {
    const root = scratchTree({
      'src/client/big.ts': lines(LONG_FILE_LINES + 1),
      'src/client/small.ts': lines(LONG_FILE_LINES),
      'src/gateway/ui/page.js': lines(LONG_FILE_LINES + 50),
      'docs/architecture.md': architecture([
        '| `src/client/big.ts` | one concept |',
        '| `src/client/small.ts` | it was long |',
      ]),
    });
    expect(checkLongFiles(root)).toEqual([
      `docs/architecture.md:3: src/gateway/ui/page.js has more than ${LONG_FILE_LINES} lines; add it to "Long files" with why one concept needs them, or split it`,
      `docs/architecture.md:3: src/client/small.ts is listed under "Long files" but is not over ${LONG_FILE_LINES} lines`,
    ]);
  });
});
