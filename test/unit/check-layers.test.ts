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

  it('fails on an import of one gateway API folder by another, and lets them share code that lives beside them', () => {
    const shared = sourceTree({
      'gateway/turn-stream/fold.ts': 'export const fold = 1;\n',
      'gateway/openai/stream.ts': "import { fold } from '../turn-stream/fold.js';\nexport const s = fold;\n",
      'gateway/native/sse.ts': "import { fold } from '../turn-stream/fold.js';\nexport const n = fold;\n",
    });
    expect(checkLayers(shared).stderr).toBe('');
    const crossed = sourceTree({
      'gateway/openai/stream.ts': 'export const followResponse = 1;\n',
      'gateway/native/sse.ts': "import type { X } from '../openai/stream.js';\nexport type N = X;\n",
    });
    const result = checkLayers(crossed);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      "gateway/native/sse.ts: imports '../openai/stream.js' (gateway/openai/stream.ts): an API folder imports no other API folder (native → openai)",
    );
  });

  it('refuses every cross-import between API folders, naming each file pair (no exceptions are listed)', () => {
    // langgraph/routes.ts -> openai/stream.ts was one of the exceptions the check once listed; none is left.
    const files = {
      'gateway/openai/stream.ts': 'export const followResponse = 1;\n',
      'gateway/openai/ids.ts': 'export const itemTag = 1;\n',
      'gateway/langgraph/routes.ts': 'export const r = 1;\n',
    };
    expect(checkLayers(sourceTree(files)).stderr).toBe('');
    const result = checkLayers(
      sourceTree({
        ...files,
        'gateway/langgraph/routes.ts':
          "import { followResponse } from '../openai/stream.js';\nimport { itemTag } from '../openai/ids.js';\nexport const r = [followResponse, itemTag];\n",
      }),
    );
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      "gateway/langgraph/routes.ts: imports '../openai/ids.js' (gateway/openai/ids.ts): an API folder imports no other API folder (langgraph → openai)",
    );
    expect(result.stderr).toContain(
      "gateway/langgraph/routes.ts: imports '../openai/stream.js' (gateway/openai/stream.ts): an API folder imports no other API folder (langgraph → openai)",
    );
  });

  it('fails on a circle of value imports, naming the files around it, and leaves a circle of `import type` alone', () => {
    const typesOnly = sourceTree({
      'persistence/store.ts': "import type { Inbox } from './inbox.js';\nexport type Store = { inbox: Inbox };\n",
      'persistence/inbox.ts': "import type { Store } from './store.js';\nexport type Inbox = { store: Store };\n",
    });
    expect(checkLayers(typesOnly).stderr).toBe('');
    const values = sourceTree({
      'session/a.ts': "import { b } from './b.js';\nexport const a = () => b;\n",
      'session/b.ts': "import { c } from './c.js';\nexport const b = () => c;\n",
      'session/c.ts': "import type { X } from './x.js';\nimport { a } from './a.js';\nexport const c = () => a;\n",
      'session/x.ts': 'export type X = number;\n',
    });
    const result = checkLayers(values);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      'session/a.ts: import circle (value imports) session/a.ts → session/b.ts → session/c.ts → session/a.ts',
    );
  });

  it('fails on a file that imports itself through a dynamic import', () => {
    const result = checkLayers(sourceTree({ 'model/fake.ts': "export const load = () => import('./fake.js');\n" }));
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('model/fake.ts: import circle (value imports) model/fake.ts → model/fake.ts');
  });

  it('lets config.ts import only the vocabulary it validates, and compose.ts everything above it', () => {
    const files = {
      'persistence/open.ts': 'export const openStore = () => undefined;\n',
      'model/catalogue.ts': 'export const lookupModel = () => undefined;\n',
      'config.ts': "import { lookupModel } from './model/catalogue.js';\nexport const c = lookupModel;\n",
      'compose.ts':
        "import { openStore } from './persistence/open.js';\nimport { c } from './config.js';\nexport const s = [openStore, c];\n",
    };
    expect(checkLayers(sourceTree(files)).stderr).toBe('');
    const opensStore = checkLayers(
      sourceTree({
        ...files,
        'config.ts': "import { openStore } from './persistence/open.js';\nexport const c = openStore;\n",
      }),
    );
    expect(opensStore.status).toBe(1);
    expect(opensStore.stderr).toContain(
      "config.ts: imports './persistence/open.js' (persistence/open.ts): DESIGN §2 says config.ts may import session, model/catalogue.ts",
    );
    const composedByConfig = checkLayers(
      sourceTree({ ...files, 'config.ts': "import { s } from './compose.js';\nexport const c = s;\n" }),
    );
    expect(composedByConfig.status).toBe(1);
    expect(composedByConfig.stderr).toContain(
      "config.ts: imports './compose.js' (compose.ts): compose.ts is listed below config.ts in DESIGN §2",
    );
  });

  it('fails on a folder DESIGN §2 has no row for', () => {
    const result = checkLayers(sourceTree({ 'helpers/misc.ts': 'export const z = 1;\n' }));
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('helpers/misc.ts: helpers is not a folder of DESIGN §2');
  });
});
