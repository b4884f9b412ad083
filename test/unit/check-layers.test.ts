/**
 * `scripts/check-layers.mjs` (npm run check:layers) enforces DESIGN §2: the order of the layers
 * and each row's "may import" column. Run on small source trees written here, and on ours.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const SCRIPT = fileURLToPath(new URL('../../scripts/check-layers.mjs', import.meta.url));

function checkLayers(srcDir?: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [SCRIPT, ...(srcDir ? [srcDir] : [])], { encoding: 'utf8' });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const trees: string[] = [];
afterEach(() => {
  for (const dir of trees.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A src/ tree holding `files` (path under src/ → text). */
function sourceTree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'sessionlog-layers-'));
  trees.push(root);
  const src = join(root, 'src');
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(src, path)), { recursive: true });
    writeFileSync(join(src, path), text);
  }
  return src;
}

describe('check:layers', () => {
  it('passes on this repository’s src/', () => {
    const result = checkLayers();
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('fails on an import the "may import" column forbids though the order allows it, naming the file, the import and the rule', () => {
    // gateway is listed below persistence (the order allows it), but its row names only client.
    const src = sourceTree({
      'persistence/store.ts': 'export const openStore = () => undefined;\n',
      'gateway/server.ts': "import { openStore } from '../persistence/store.js';\nexport const s = openStore;\n",
    });
    const result = checkLayers(src);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      "gateway/server.ts: imports '../persistence/store.js' (persistence/store.ts): DESIGN §2 says gateway may import client",
    );
  });

  it('fails on an import of a layer listed below, naming both layers', () => {
    const src = sourceTree({
      'session/events.ts': "import { x } from '../engine/run.js';\nexport const y = x;\n",
      'engine/run.ts': 'export const x = 1;\n',
    });
    const result = checkLayers(src);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      "session/events.ts: imports '../engine/run.js' (engine/run.ts): engine is listed below session in DESIGN §2",
    );
  });

  it('lets context import persistence interfaces as `import type` only', () => {
    const files = {
      'persistence/store.ts': 'export type SessionStore = { id: string };\nexport const openStore = () => undefined;\n',
      'context/deps.ts':
        "import type { SessionStore } from '../persistence/store.js';\nexport type D = SessionStore;\n",
    };
    expect(checkLayers(sourceTree(files)).status).toBe(0);
    const valueImport = sourceTree({
      ...files,
      'context/deps.ts': "import { openStore } from '../persistence/store.js';\nexport const o = openStore;\n",
    });
    const result = checkLayers(valueImport);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      "context/deps.ts: imports '../persistence/store.js' (persistence/store.ts): DESIGN §2 says context may import session, model, persistence (import type only)",
    );
  });

  it('lets workflow code import values from the error table only, and only while the table imports nothing', () => {
    const files = {
      'session/errors.ts': "export const FATAL_CODES = new Set(['LOG_AHEAD']);\n",
      'session/events.ts': "export const EVENT_TYPES = ['turn/start'];\n",
      'workflows/run.ts': "import { FATAL_CODES } from '../session/errors.js';\nexport const f = FATAL_CODES;\n",
    };
    expect(checkLayers(sourceTree(files)).stderr).toBe('');
    const otherValue = checkLayers(
      sourceTree({
        ...files,
        'workflows/run.ts': "import { EVENT_TYPES } from '../session/events.js';\nexport const e = EVENT_TYPES;\n",
      }),
    );
    expect(otherValue.status).toBe(1);
    expect(otherValue.stderr).toContain("workflows/run.ts: imports '../session/events.js' (session/events.ts)");
    const tableImports = checkLayers(
      sourceTree({
        ...files,
        'session/errors.ts': "import { EVENT_TYPES } from './events.js';\nexport const FATAL_CODES = EVENT_TYPES;\n",
      }),
    );
    expect(tableImports.status).toBe(1);
    expect(tableImports.stderr).toContain(
      'session/errors.ts: workflow code imports it as a value, so it must import nothing itself',
    );
  });

  it('fails on a folder DESIGN §2 has no row for', () => {
    const result = checkLayers(sourceTree({ 'helpers/misc.ts': 'export const z = 1;\n' }));
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('helpers/misc.ts: helpers is not a folder of DESIGN §2');
  });
});
