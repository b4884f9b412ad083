/**
 * check:docs, generated parts: the configuration reference, the HTTP reference and the
 * TypeScript API reference equal what scripts/docs-generate.mjs makes from the code, every
 * public export has a doc comment, and the configuration table's bounds are those the
 * configuration enforces. (The performance tables' check is test/unit/bench-summary.test.ts.)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, resolveConfig } from '../../src/config.js';
import { ROOT, script, scratchTree, type DocsGenerate } from './support.js';

const generate = await script<DocsGenerate>('docs-generate.mjs');
const GENERATED = ['docs/configuration.md', 'docs/http-reference.md', 'docs/typescript-reference.md'];

let documents: Record<string, string>;
let undocumented: string[];
beforeAll(async () => {
  ({ documents, undocumented } = await generate.generatedDocuments(ROOT));
}, 240_000);

/** A scratch copy of the three generated documents as they are in this repository. */
function copyOfDocs(): string {
  return scratchTree(Object.fromEntries(GENERATED.map((path) => [path, readFileSync(join(ROOT, path), 'utf8')])));
}

describe('check:docs generated references', () => {
  it('passes on this repository: the three references are as generated and every public export is documented', () => {
    expect(Object.keys(documents).sort()).toEqual([...GENERATED].sort());
    expect(generate.staleDocuments(ROOT, documents)).toEqual([]);
    expect(undocumented).toEqual([]);
  });

  it('fails when a row of the configuration table was edited by hand', () => {
    const root = copyOfDocs();
    const path = join(root, 'docs/configuration.md');
    const text = readFileSync(path, 'utf8');
    const row = text.split('\n').find((line) => line.startsWith('| `SESSIONLOG_MAX_STEPS` |'));
    expect(row, 'the table has a row for SESSIONLOG_MAX_STEPS').toBeDefined();
    scratchWrite(path, text.replace(row!, row!.replace('`8`', '`12`')));
    expect(generate.staleDocuments(root, documents)).toEqual(['docs/configuration.md']);
  });

  it('fails when a route of the HTTP reference or an entry of the API reference was edited or removed', () => {
    const root = copyOfDocs();
    const http = join(root, 'docs/http-reference.md');
    scratchWrite(http, readFileSync(http, 'utf8').replace('### `POST /v1/sessions`\n', '### `POST /v1/session`\n'));
    const api = join(root, 'docs/typescript-reference.md');
    scratchWrite(api, readFileSync(api, 'utf8').replace(/\n## openStore\n[\s\S]*?(?=\n## )/, ''));
    expect(generate.staleDocuments(root, documents).sort()).toEqual([
      'docs/http-reference.md',
      'docs/typescript-reference.md',
    ]);
  });

  it('names a public export without a doc comment', () => {
    const root = scratchTree({
      'index.ts': "export { documented, undocumented } from './lib.js';\nexport type { Shape } from './lib.js';\n",
      'lib.ts': [
        '/** Says hello. */',
        "export function documented(): string { return 'hello'; }",
        "export function undocumented(): string { return 'hi'; }",
        'export type Shape = { side: number };',
        '',
      ].join('\n'),
      'package.json': '{"type": "module"}',
    });
    expect(generate.apiExports(join(root, 'index.ts'), root).undocumented).toEqual(['undocumented', 'Shape']);
  });

  it('states the bounds the configuration enforces: each bound is accepted and one past it is refused', () => {
    const bounded = Object.entries(CONFIG_VARIABLES).filter(([, v]) => 'min' in v || 'max' in v);
    expect(bounded.length).toBeGreaterThan(20);
    const outOfRange = (name: string) => new RegExp(`${name}: ${name} must be (between|a whole number)`);
    for (const [name, variable] of bounded) {
      const { min, max } = variable as { min?: number; max?: number };
      const at = (value: number) => () => resolveConfig({ [name]: String(value) });
      if (min !== undefined) {
        expect(at(min), `${name} = ${min}`).not.toThrow(outOfRange(name));
        if (min > 0) expect(at(min - 1), `${name} = ${min - 1}`).toThrow(outOfRange(name));
      }
      if (max !== undefined) {
        expect(at(max), `${name} = ${max}`).not.toThrow(outOfRange(name));
        expect(at(max + 1), `${name} = ${max + 1}`).toThrow(outOfRange(name));
      } else expect(at(Number.MAX_SAFE_INTEGER), `${name} unbounded above`).not.toThrow(outOfRange(name));
    }
  });

  it('renders each variable once, under its section, with its bounds', () => {
    const block = generate.renderConfig(CONFIG_VARIABLES);
    for (const name of Object.keys(CONFIG_VARIABLES))
      expect(block.split('\n').filter((line) => line.startsWith(`| \`${name}\` |`))).toHaveLength(1);
    expect(block).toContain('| `SESSIONLOG_MAX_STEPS` | `8` | 1 – 100 |');
    expect(block.startsWith(generate.CONFIG_START) && block.endsWith(generate.CONFIG_END)).toBe(true);
  });
});

function scratchWrite(path: string, text: string): void {
  expect(text).not.toBe(readFileSync(path, 'utf8'));
  writeFileSync(path, text);
}
