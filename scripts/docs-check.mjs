#!/usr/bin/env node
/**
 * The documentation cannot drift from the code (`npm run check:docs`, part of `npm run verify`):
 *
 * - **links**: every relative link of README.md, BENCHMARKS.md and docs/*.md names a file or
 *   folder that exists, and its `#anchor` a heading (or `<a id>`) of the Markdown file it names;
 *   every repository path named in inline code (`src/…`, `scripts/…`) exists, and every source
 *   file docs/architecture.md names is under src/;
 * - **code**: every ```ts block compiles, each as a module of its own, against the package's
 *   public exports (`import … from 'sessionlog'` is src/index.ts) and the project's dependencies,
 *   with the project's compiler settings; a block uses `declare const` for what it assumes;
 * - **generated**: the configuration table, the HTTP reference and the TypeScript API reference
 *   equal what `scripts/docs-generate.mjs` makes from the code (and every public export has a doc
 *   comment), the performance tables equal bench/results.json (`scripts/bench-summary.mjs`), and
 *   docs/architecture.md's layer table lists the layers `scripts/check-layers.mjs` enforces, in
 *   order, and its table of long files names exactly the source files over 600 lines.
 *
 * Usage: node scripts/docs-check.mjs [links|code|generated]…   (none: all three)
 * Each problem is printed as `file:line: what is wrong`; exit 1 when there is any.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { anchorsOf, documentPaths, linksOf, parseMarkdown, readText } from './docs-markdown.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** README.md, BENCHMARKS.md and every Markdown file under docs/ of `root` (paths relative to it). */
export function documentsOf(root) {
  const docs = existsSync(join(root, 'docs')) ? readdirSync(join(root, 'docs')).map((name) => `docs/${name}`) : [];
  return documentPaths(docs).filter((path) => existsSync(join(root, path)));
}

/** Problems of the relative links of `documents` (paths relative to `root`). */
export function checkLinks(root, documents) {
  const problems = [];
  const anchorCache = new Map();
  const anchors = (file) => {
    if (!anchorCache.has(file)) anchorCache.set(file, anchorsOf(readText(file)));
    return anchorCache.get(file);
  };
  for (const document of documents) {
    const path = join(root, document);
    for (const { line, target } of linksOf(readText(path))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue; // https:, mailto:, …
      const [file, anchor] = target.split('#', 2);
      const destination = file === '' ? path : resolve(dirname(path), decodeURIComponent(file));
      if (file !== '' && !existsSync(destination)) {
        problems.push(`${document}:${line}: link to ${target}: ${relative(root, destination)} does not exist`);
        continue;
      }
      if (anchor === undefined || anchor === '') continue;
      if (!destination.endsWith('.md') || statSync(destination).isDirectory()) continue; // line anchors of code files
      if (!anchors(destination).has(decodeURIComponent(anchor)))
        problems.push(
          `${document}:${line}: link to ${target}: ${relative(root, destination)} has no heading whose anchor is #${anchor}`,
        );
    }
  }
  return problems;
}

/** Every file under `dir` (relative paths, `/`-separated). */
function filesUnder(dir, prefix = '') {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name), `${prefix}${entry.name}/`) : [`${prefix}${entry.name}`],
  );
}

const REPO_PATH = /^(?:src|test|scripts|bench|examples|converters|bin)\/[\w./-]*[\w/]$/;
const SOURCE_NAME = /^(?:[\w-]+\/)*[\w.-]+\.(?:ts|mjs|js)$/;

/**
 * Problems of the file paths the documents name in inline code: a path from the repository root
 * (`src/…`, `test/…`, `scripts/…`, `bench/…`, `examples/…`) must exist; in docs/architecture.md,
 * whose tables name source files relative to their folder, every source file name (`store.ts`,
 * `ops/model-step.ts`) must be the end of a path under src/.
 */
export function checkPaths(root, documents) {
  const problems = [];
  const sources = filesUnder(join(root, 'src'));
  for (const document of documents) {
    const architecture = document === 'docs/architecture.md';
    for (const { line, text } of parseMarkdown(readText(join(root, document))).prose) {
      for (const match of text.matchAll(/`([^`\s]+)`/g)) {
        const token = match[1].replace(/[),.:;]+$/, '');
        if (REPO_PATH.test(token)) {
          if (!existsSync(join(root, token))) problems.push(`${document}:${line}: \`${token}\` does not exist`);
        } else if (architecture && SOURCE_NAME.test(token)) {
          if (!sources.some((path) => path === token || path.endsWith(`/${token}`)))
            problems.push(`${document}:${line}: \`${token}\` is no file under src/`);
        }
      }
    }
  }
  return problems;
}

/** The compiler settings of the project (tsconfig.json) with `sessionlog` mapped to src/index.ts. */
function compilerOptions(root) {
  const configPath = join(root, 'tsconfig.json');
  const { config } = ts.readConfigFile(configPath, ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, root);
  return {
    ...options,
    noEmit: true,
    declaration: false,
    sourceMap: false,
    noUnusedLocals: false,
    baseUrl: root,
    paths: { sessionlog: [join(root, 'src/index.ts')] },
  };
}

const TS_LANGS = new Set(['ts', 'typescript']);

/**
 * Problems of the TypeScript blocks of `documents`: each ```ts block is written to
 * `.tmp/docs-code/` under `root` as a module and typechecked; an error is reported at its line in
 * the document. Blocks of other languages (```tsx for React components, ```bash, …) are not compiled.
 */
export function checkCode(root, documents, { codeRoot = ROOT } = {}) {
  const dir = join(codeRoot, '.tmp', `docs-code-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const files = new Map(); // file → { document, line }
  for (const document of documents) {
    const { blocks } = parseMarkdown(readText(join(root, document)));
    for (const block of blocks) {
      if (!TS_LANGS.has(block.lang)) continue;
      const file = join(dir, `${document.replace(/[^A-Za-z0-9]+/g, '_')}_${block.line}.ts`);
      writeFileSync(file, `${block.code}\nexport {};\n`);
      files.set(file, { document, line: block.line });
    }
  }
  const problems = [];
  try {
    if (files.size === 0) return problems;
    const program = ts.createProgram([...files.keys()], compilerOptions(codeRoot));
    for (const [file, where] of files) {
      const source = program.getSourceFile(file);
      const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
      for (const diagnostic of diagnostics) {
        const { line } =
          diagnostic.start === undefined ? { line: 0 } : source.getLineAndCharacterOfPosition(diagnostic.start);
        const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
        problems.push(`${where.document}:${where.line + 1 + line}: TS${diagnostic.code} ${message}`);
      }
    }
    return problems;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Problems of docs/architecture.md's layer table against the table `scripts/check-layers.mjs`
 * enforces (its `LAYERS`, DESIGN §2's order): the first column of the table under the heading
 * "Layers" names the same folders and files in the same order (`src/session/`, `src/config.ts`, …).
 */
export function checkLayersTable(root) {
  const script = join(root, 'scripts/check-layers.mjs');
  const doc = join(root, 'docs/architecture.md');
  if (!existsSync(script) || !existsSync(doc)) return [];
  const list = /const LAYERS = \[([^\]]*)\]/.exec(readText(script));
  if (!list) return ['scripts/check-layers.mjs: no `const LAYERS = [...]` to compare docs/architecture.md with'];
  const layers = [...list[1].matchAll(/'([^']+)'/g)].map((m) => m[1]);
  const lines = readText(doc).split('\n');
  const heading = lines.findIndex((line) => /^##\s+Layers\b/.test(line));
  if (heading < 0) return ['docs/architecture.md: no "## Layers" section with the layer table'];
  const rows = [];
  for (let i = heading + 1; i < lines.length && !/^#{1,2}\s/.test(lines[i]); i++) {
    const row = /^\|\s*`src\/([^`]+?)\/?`/.exec(lines[i]);
    if (row) rows.push({ name: row[1], line: i + 1 });
    else if (rows.length > 0 && !lines[i].startsWith('|')) break;
  }
  const names = rows.map((row) => row.name);
  if (names.join(',') === layers.join(',')) return [];
  const at = names.findIndex((name, i) => name !== layers[i]);
  const line = rows[at]?.line ?? rows.at(-1)?.line ?? heading + 1;
  return [
    `docs/architecture.md:${line}: the layer table lists ${names.join(', ')}; scripts/check-layers.mjs enforces ${layers.join(', ')} (DESIGN §2 is the source: change both together)`,
  ];
}

/** The line above which docs/architecture.md says why a source file is that long. */
export const LONG_FILE_LINES = 600;

/**
 * Problems of docs/architecture.md's table of long files (the section "Long files"): it names
 * exactly the files under src/ longer than {@link LONG_FILE_LINES} lines, each with its reason.
 */
export function checkLongFiles(root) {
  const doc = join(root, 'docs/architecture.md');
  if (!existsSync(doc)) return [];
  const long = filesUnder(join(root, 'src'))
    .filter((path) => /\.(ts|mts|js|mjs)$/.test(path))
    .filter((path) => readText(join(root, 'src', path)).split('\n').length - 1 > LONG_FILE_LINES)
    .map((path) => `src/${path}`)
    .sort();
  const lines = readText(doc).split('\n');
  const heading = lines.findIndex((line) => /^##\s+Long files\b/.test(line));
  if (heading < 0) return ['docs/architecture.md: no "## Long files" section naming the source files over 600 lines'];
  const listed = [];
  for (let i = heading + 1; i < lines.length && !/^#{1,2}\s/.test(lines[i]); i++) {
    const row = /^\|\s*`(src\/[^`]+)`/.exec(lines[i]);
    if (row) listed.push(row[1]);
  }
  const problems = [];
  for (const path of long.filter((p) => !listed.includes(p)))
    problems.push(
      `docs/architecture.md:${heading + 1}: ${path} has more than ${LONG_FILE_LINES} lines; add it to "Long files" with why one concept needs them, or split it`,
    );
  for (const path of listed.filter((p) => !long.includes(p)))
    problems.push(
      `docs/architecture.md:${heading + 1}: ${path} is listed under "Long files" but is not over ${LONG_FILE_LINES} lines`,
    );
  return problems;
}

/** Problems of the generated parts: scripts/docs-generate.mjs --check and scripts/bench-summary.mjs --check. */
export function checkGenerated(root) {
  const problems = [];
  for (const script of ['scripts/docs-generate.mjs', 'scripts/bench-summary.mjs']) {
    const result = spawnSync(process.execPath, [join(root, script), '--check'], { cwd: root, encoding: 'utf8' });
    if (result.status !== 0) problems.push(`${script}: ${(result.stderr || result.stdout).trim()}`);
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const asked = process.argv.slice(2);
  const which = asked.length > 0 ? asked : ['links', 'code', 'generated'];
  const unknown = which.filter((name) => !['links', 'code', 'generated'].includes(name));
  if (unknown.length > 0) {
    console.error(`docs-check: unknown check ${unknown.join(', ')}; use links, code or generated`);
    process.exit(2);
  }
  const documents = documentsOf(ROOT);
  const problems = [];
  if (which.includes('links')) problems.push(...checkLinks(ROOT, documents), ...checkPaths(ROOT, documents));
  if (which.includes('code')) problems.push(...checkCode(ROOT, documents));
  if (which.includes('generated'))
    problems.push(...checkGenerated(ROOT), ...checkLayersTable(ROOT), ...checkLongFiles(ROOT));
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`docs-check: ${problems.length} problem${problems.length === 1 ? '' : 's'} in the documentation`);
    process.exit(1);
  }
  console.log(`docs-check: ${which.join(', ')}: ${documents.length} documents agree with the code`);
}
