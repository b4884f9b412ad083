#!/usr/bin/env node
/**
 * `npm run check:layers`: fails when an import in src/ runs against the layering of DESIGN §2.
 *
 * Four rules, all from DESIGN §2 and issue 49:
 * - the order: folders are listed top to bottom; a folder never imports one listed below it;
 * - the "may import" column: a folder imports only what its row names (`MAY_IMPORT` below).
 *   Workflow code may import values only from @temporalio/workflow, its own folder and the
 *   error table (`session/errors.ts`, which must itself import nothing): everything else must
 *   be `import type`;
 * - an API folder of the gateway (`API_FOLDERS`) imports no other API folder: what two APIs
 *   share lives beside them in gateway/ (`turn-stream/`, `transcripts.ts`, `openai-errors.ts`);
 * - no import circle in src/ among value imports (see `circles` for why `import type` is left out).
 *
 * Usage: `node scripts/check-layers.mjs [SRC_DIR]` (default: this repository's src/). Exit 1
 * with one line per offending import: the file, the import, and the rule it breaks.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import process from 'node:process';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = resolve(process.argv[2] ?? join(ROOT, 'src'));
const SHOWN_FROM = process.argv[2] ? SRC : ROOT;

/**
 * DESIGN §2, top to bottom. The top-level files sit where their imports put them: the
 * configuration validates settings in the vocabulary of the folders above it (its row below
 * names which); the worker and the composition are assembled from every layer above them (the
 * composition opens the store and starts the model a validated `Config` names); the CLI uses
 * them all; the public index re-exports everything.
 */
const LAYERS = [
  'session',
  'persistence',
  'model',
  'context',
  'tools',
  'engine',
  'activities',
  'workflows',
  'client',
  'gateway',
  'telemetry',
  'config.ts',
  'worker.ts',
  'compose.ts',
  'cli',
  'index.ts',
];

/** Everything listed above `layer` in DESIGN §2 (what "everything above" means in a row). */
const above = (layer) => LAYERS.slice(0, LAYERS.indexOf(layer));

/** The one file outside its folder that workflow code may import values from (see MAY_IMPORT). */
const WORKFLOW_VALUE_IMPORT = 'session/errors.ts';

/**
 * DESIGN §2's "may import" column. A rule is a folder (`session`) or a file under src/
 * (`workflows/api.ts`), written as a string, or an object that narrows it to `import type`
 * (`typeOnly`) and says why (`why`) when the rule is an exception to the column's words.
 * `'*'`: the public index, which re-exports from every layer.
 */
const MAY_IMPORT = {
  session: [], // nothing of ours
  persistence: ['session'],
  model: ['session'],
  context: ['session', 'model', { target: 'persistence', typeOnly: true, why: 'persistence (interfaces)' }],
  tools: ['session', 'persistence'],
  engine: above('engine'), // everything above
  activities: above('activities'), // engine and everything above
  workflows: [
    {
      target: WORKFLOW_VALUE_IMPORT,
      why: 'the one error table (which codes stop a run): pure data that imports nothing (checked below), so it brings nothing nondeterministic into the workflow bundle',
    },
    ...above('workflows').map((target) => ({ target, typeOnly: true, why: 'types only' })),
  ],
  client: [
    'workflows/api.ts',
    'persistence',
    'session',
    {
      target: 'workflows/session-workflow.ts',
      typeOnly: true,
      why: 'the workflow function as a type, for a typed `workflow.start<typeof sessionWorkflow>` as in the Temporal samples; erased at run time',
    },
  ],
  gateway: [
    'client',
    {
      target: 'session',
      why: "the pure event and error vocabulary (no I/O): the row's folds from log events to each API's stream read events, and errors map to statuses; every operation still goes through SessionClient",
    },
  ],
  telemetry: [], // nothing of ours
  'config.ts': [
    // Validation only (DESIGN §2: "imports nothing of ours but the vocabulary it validates"): each
    // module below is the one that defines a setting's values, limits or defaults.
    {
      target: 'session',
      why: 'the error it throws (ConfigError), the secret registry every configured secret joins, and the budget and tenant vocabulary SESSIONLOG_TENANT_BUDGETS and SESSIONLOG_TENANT_CAPS are checked against',
    },
    {
      target: 'model/catalogue.ts',
      why: 'the model catalogue SESSIONLOG_MODEL is looked up in and SESSIONLOG_MODELS is merged over',
    },
    { target: 'model/stream.ts', why: "the chunk-coalescing window's default (SESSIONLOG_CHUNK_FLUSH_MS)" },
    { target: 'persistence/pacing.ts', why: 'the pace limits SESSIONLOG_PACING is checked against' },
    { target: 'tools/approval.ts', why: 'the approval policy grammar of SESSIONLOG_APPROVAL' },
    {
      target: 'tools/mcp/config.ts',
      why: 'the MCP server settings SESSIONLOG_MCP_SERVERS is checked as (names, commands, URLs)',
    },
    {
      target: 'workflows/api.ts',
      why: "the session tunables' defaults and limits (SESSIONLOG_MAX_STEPS, SESSIONLOG_MAX_MESSAGE_BYTES, …) and the default task queue",
    },
    { target: 'gateway/access.ts', why: 'the token grant grammar of SESSIONLOG_GATEWAY_TOKENS' },
    { target: 'gateway/settings.ts', why: "the gateway's timeouts and their bounds (SESSIONLOG_*_TIMEOUT_MS)" },
    {
      target: 'gateway/listener-guard.ts',
      why: 'the listener connection limits and their bounds (SESSIONLOG_MAX_*_CONNECTIONS*)',
    },
  ],
  'worker.ts': above('worker.ts'), // worker assembly: everything above
  'compose.ts': above('compose.ts'), // composition from a validated Config: everything above
  cli: [
    'client',
    'gateway',
    'worker.ts',
    'telemetry',
    {
      target: 'compose.ts',
      why: 'the row: "one function turns a `Config` into worker and gateway options" from the parts compose.ts opens, starts and builds',
    },
    { target: 'config.ts', why: 'the command resolves its settings (environment and flags) into a validated `Config`' },
    {
      target: 'session',
      why: 'the pure event and error vocabulary (no I/O): commands print events, verify exported logs offline and report SessionlogError codes',
    },
  ],
  'index.ts': '*',
};

/** The gateway's API folders (DESIGN §2): none imports another; what two of them share lives beside them. */
const API_FOLDERS = ['native', 'openai', 'langgraph', 'ai-sdk'];

/** The API folder `target` (a path under src/, `/`-separated) lies in, if any. */
function apiFolderOf(target) {
  const [top, folder] = target.split('/');
  return top === 'gateway' && API_FOLDERS.includes(folder) ? folder : undefined;
}

function layerOf(file) {
  return relative(SRC, file).split(sep)[0];
}

function ruleText(rule) {
  if (typeof rule === 'string') return rule;
  return `${rule.target}${rule.typeOnly ? ' (import type only)' : ''}`;
}

/** The column's words for `layer`, as a reader of DESIGN §2 sees them. */
function columnText(layer) {
  const rules = MAY_IMPORT[layer];
  if (rules === '*') return 'anything';
  if (rules.length === 0) return 'nothing of ours';
  return rules.map(ruleText).join(', ');
}

function targetMatches(rule, target) {
  const name = typeof rule === 'string' ? rule : rule.target;
  return target === name || target.startsWith(`${name}/`);
}

/** Whether `from` may import `target` (a path under src/, `/`-separated) this way. */
function allowed(from, target, typeOnly) {
  const rules = MAY_IMPORT[from];
  if (rules === '*') return true;
  return rules.some((rule) => targetMatches(rule, target) && (typeof rule === 'string' || !rule.typeOnly || typeOnly));
}

function* sourceFiles(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|mts)$/.test(name) && !name.endsWith('.d.ts')) yield path;
  }
}

const IMPORT = /(^|\n)\s*(import|export)\s+(type\s+)?([^'";]*?\s+from\s+)?['"]([^'"]+)['"]/g;
const DYNAMIC = /import\(\s*['"]([^'"]+)['"]\s*\)/g;

const problems = [];
{
  // What workflow code imports as a value is bundled into the workflow: it must bring nothing else in.
  const file = join(SRC, ...WORKFLOW_VALUE_IMPORT.split('/'));
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    // A tree without the error table (a fixture tree): nothing to check.
  }
  if (/(^|\n)\s*(import|export)\s[^;]*?\sfrom\s/.test(text))
    problems.push(
      `${relative(SHOWN_FROM, file)}: workflow code imports it as a value, so it must import nothing itself`,
    );
}
/** Value imports between files under src/ (path → paths, `/`-separated): the graph `circles` reads. */
const valueImports = new Map();
for (const file of sourceFiles(SRC)) {
  const text = readFileSync(file, 'utf8');
  const from = layerOf(file);
  const shown = relative(SHOWN_FROM, file);
  const source = relative(SRC, file).split(sep).join('/');
  valueImports.set(source, []);
  if (!(from in MAY_IMPORT)) {
    problems.push(
      `${shown}: ${from} is not a folder of DESIGN §2 (add its row to MAY_IMPORT in scripts/check-layers.mjs)`,
    );
    continue;
  }
  const specifiers = [];
  for (const m of text.matchAll(IMPORT))
    specifiers.push({
      spec: m[5],
      typeOnly: Boolean(m[3]) || (/^\s*\{\s*type\s/.test(m[4] ?? '') && !/,\s*(?!type\s)\w/.test(m[4] ?? '')),
    });
  for (const m of text.matchAll(DYNAMIC)) specifiers.push({ spec: m[1], typeOnly: false });
  for (const { spec, typeOnly } of specifiers) {
    if (!spec.startsWith('.')) {
      if (from === 'workflows' && !typeOnly && !spec.startsWith('@temporalio/workflow'))
        problems.push(
          `${shown}: imports '${spec}': workflow code imports only @temporalio/workflow and \`import type\``,
        );
      continue;
    }
    const targetFile = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
    if (!targetFile.startsWith(SRC + sep)) continue;
    const to = layerOf(targetFile);
    const target = relative(SRC, targetFile).split(sep).join('/');
    if (!typeOnly) valueImports.get(source).push(target);
    const fromApi = apiFolderOf(source);
    const toApi = apiFolderOf(target);
    if (fromApi && toApi && fromApi !== toApi)
      problems.push(
        `${shown}: imports '${spec}' (${target}): an API folder imports no other API folder (${fromApi} → ${toApi}); ` +
          'move what both use beside them in gateway/',
      );
    if (to === from) continue;
    if (LAYERS.indexOf(to) > LAYERS.indexOf(from)) {
      problems.push(`${shown}: imports '${spec}' (${target}): ${to} is listed below ${from} in DESIGN §2`);
    } else if (!allowed(from, target, typeOnly)) {
      problems.push(
        `${shown}: imports '${spec}'${typeOnly ? ' (import type)' : ''} (${target}): ` +
          `DESIGN §2 says ${from} may import ${columnText(from)}`,
      );
    }
  }
}
/**
 * The import circles of `graph` (file → imported files): its strongly connected components of
 * more than one file, or of one file importing itself (Tarjan's algorithm), each as one shortest
 * circle through its first file, for the message.
 *
 * Only value imports (and `import()`) count. A circle costs at run time: in one, a module's top
 * level can run while the other's exports are not yet initialised (a ReferenceError or
 * `undefined`, depending on which file was imported first). `import type` is erased by the
 * compiler and loads nothing, so a circle of types only (an interface and the parts it names) has
 * no such cost and is left out.
 */
function circles(graph) {
  const order = new Map();
  const lowest = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  const visit = (file) => {
    order.set(file, order.size);
    lowest.set(file, order.get(file));
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue;
      if (!order.has(next)) {
        visit(next);
        lowest.set(file, Math.min(lowest.get(file), lowest.get(next)));
      } else if (onStack.has(next)) lowest.set(file, Math.min(lowest.get(file), order.get(next)));
    }
    if (lowest.get(file) !== order.get(file)) return;
    const component = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || graph.get(file).includes(file)) found.push(shortestCircle(graph, component.sort()));
  };
  for (const file of [...graph.keys()].sort()) if (!order.has(file)) visit(file);
  return found;
}

/** The shortest path from `component[0]` back to itself within `component` (breadth first). */
function shortestCircle(graph, component) {
  const start = component[0];
  const inside = new Set(component);
  const cameFrom = new Map();
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift();
    for (const next of graph.get(file)) {
      if (!inside.has(next)) continue;
      if (next === start) {
        const path = [file];
        while (path[0] !== start) path.unshift(cameFrom.get(path[0]));
        return [...path, start];
      }
      if (cameFrom.has(next)) continue;
      cameFrom.set(next, file);
      queue.push(next);
    }
  }
  return [start, start];
}

for (const circle of circles(valueImports))
  problems.push(
    `${relative(SHOWN_FROM, join(SRC, circle[0]))}: import circle (value imports) ${circle.join(' → ')}: ` +
      'no file may reach itself through its imports; move what the circle shares into a file its members import',
  );

if (problems.length > 0) {
  process.stderr.write(
    `check:layers: ${problems.length} import problem(s) (DESIGN §2):\n${problems.map((p) => `  ${p}`).join('\n')}\n`,
  );
  process.exit(1);
}
process.stdout.write(
  'check:layers: every import follows DESIGN §2 (order, "may import" column, API folders apart, no import circle)\n',
);
