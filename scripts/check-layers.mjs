#!/usr/bin/env node
/**
 * `npm run check:layers`: fails when an import in src/ runs against the layering of DESIGN §2.
 * Folders are listed top to bottom in the order of that table; a folder may import only folders
 * listed above it (and itself), never one below. Workflow code may import values only from
 * @temporalio/workflow and its own folder: everything else must be `import type`.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import process from 'node:process';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');

/**
 * DESIGN §2, top to bottom. The top-level files sit where their imports put them: the worker
 * and the configuration are assembled from every layer and used by the CLI (whose row names
 * `worker`); the public index re-exports everything.
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
  'worker.ts',
  'config.ts',
  'cli',
  'index.ts',
];

function layerOf(file) {
  const parts = relative(SRC, file).split('/');
  return parts[0];
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
for (const file of sourceFiles(SRC)) {
  const text = readFileSync(file, 'utf8');
  const from = layerOf(file);
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
          `${relative(ROOT, file)}: workflow code imports ${spec} (only @temporalio/workflow and \`import type\`)`,
        );
      continue;
    }
    const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
    if (!target.startsWith(SRC)) continue;
    const to = layerOf(target);
    if (to === from) continue;
    if (from === 'workflows' && !typeOnly)
      problems.push(`${relative(ROOT, file)}: workflow code imports ${spec} as a value (use \`import type\`)`);
    if (LAYERS.indexOf(to) > LAYERS.indexOf(from) && !(from === 'workflows' && typeOnly)) {
      problems.push(
        `${relative(ROOT, file)}: ${from} imports ${relative(ROOT, target)} (${to} is listed below ${from} in DESIGN §2)`,
      );
    }
  }
}
if (problems.length > 0) {
  process.stderr.write(
    `check:layers: ${problems.length} import(s) against DESIGN §2:\n${problems.map((p) => `  ${p}`).join('\n')}\n`,
  );
  process.exit(1);
}
process.stdout.write('check:layers: every import follows DESIGN §2\n');
