/**
 * check:docs, the architecture's layer table: docs/architecture.md lists the layers
 * scripts/check-layers.mjs enforces (DESIGN §2's order), the same ones in the same order.
 */
import { describe, expect, it } from 'vitest';
import { ROOT, script, scratchTree, type DocsCheck } from './support.js';

const { checkLayersTable } = await script<DocsCheck>('docs-check.mjs');

const CHECK_LAYERS = "const LAYERS = [\n  'session',\n  'persistence',\n  'engine',\n  'config.ts',\n];\n";

function architecture(rows: string[]): string {
  return [
    '# Architecture',
    '',
    '## Layers',
    '',
    '| layer | what | may import |',
    '|---|---|---|',
    ...rows,
    '',
    '## Next',
    '',
  ].join('\n');
}

describe('check:docs layer table', () => {
  it('passes on this repository: docs/architecture.md lists the layers check:layers enforces, in order', () => {
    expect(checkLayersTable(ROOT)).toEqual([]);
  });

  it('fails when two layers are swapped or one is missing, naming the row', () => {
    const rows = [
      '| `src/session/` | a | b |',
      '| `src/persistence/` | a | b |',
      '| `src/engine/` | a | b |',
      '| `src/config.ts` | a | b |',
    ];
    const good = scratchTree({ 'scripts/check-layers.mjs': CHECK_LAYERS, 'docs/architecture.md': architecture(rows) });
    expect(checkLayersTable(good)).toEqual([]);

    const swapped = scratchTree({
      'scripts/check-layers.mjs': CHECK_LAYERS,
      'docs/architecture.md': architecture([rows[0]!, rows[2]!, rows[1]!, rows[3]!]),
    });
    expect(checkLayersTable(swapped)).toEqual([
      'docs/architecture.md:8: the layer table lists session, engine, persistence, config.ts; scripts/check-layers.mjs enforces session, persistence, engine, config.ts (DESIGN §2 is the source: change both together)',
    ]);

    const missing = scratchTree({
      'scripts/check-layers.mjs': CHECK_LAYERS,
      'docs/architecture.md': architecture(rows.slice(0, 3)),
    });
    expect(checkLayersTable(missing)[0]).toMatch(
      /lists session, persistence, engine; scripts\/check-layers\.mjs enforces session, persistence, engine, config\.ts/,
    );
  });
});
