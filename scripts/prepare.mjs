#!/usr/bin/env node
/**
 * npm's `prepare` step, which `npm install` and `npm ci` run in a checkout (and `npm pack`
 * before packing): builds dist/ (`npm run build`), so that `sessionlog` (bin/sessionlog.mjs)
 * runs the compiled CLI from the first call instead of the TypeScript sources through tsx, which
 * costs seconds a call. bin/sessionlog.mjs still runs the sources once one is newer than dist/.
 *
 * Skipped where there is nothing to build (no src/: the Docker image's dependency layer copies
 * package.json before the sources) or no compiler (an install without dev dependencies). On
 * `npm install` / `npm ci` a failed build (a type error in a work in progress) warns and does
 * not fail the install: the CLI then runs from the sources, and `npm run build` shows why. On
 * `npm pack` and `npm publish` it fails them.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const say = (line) => process.stderr.write(`sessionlog prepare: ${line}\n`);

if (!existsSync(join(root, 'src')) || !existsSync(join(root, 'tsconfig.build.json'))) {
  say('no sources here; nothing to build');
  process.exit(0);
}
if (!existsSync(join(root, 'node_modules', 'typescript'))) {
  say('no TypeScript compiler (installed without dev dependencies); the CLI runs from dist/ if present');
  process.exit(0);
}

// npm_execpath is the npm that runs this step: the same one builds.
const npm = process.env.npm_execpath;
const build = npm
  ? spawnSync(process.execPath, [npm, 'run', 'build'], { cwd: root, stdio: 'inherit' })
  : spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
if (build.status === 0) process.exit(0);

const packing = ['pack', 'publish'].includes(process.env.npm_command ?? '');
// tsc writes its output even when it reports errors, and the build's copy of the inspector is
// then skipped: no half-built dist/ for bin/sessionlog.mjs to pick.
if (!packing) rmSync(join(root, 'dist', 'src'), { recursive: true, force: true });
say(
  packing
    ? 'the build failed; nothing is packed'
    : 'the build failed (see above); the CLI runs from the TypeScript sources through tsx, slower, until `npm run build` succeeds',
);
process.exit(packing ? 1 : 0);
