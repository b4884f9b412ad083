#!/usr/bin/env node
// Runs the built CLI (dist/) when it is up to date, else the TypeScript sources through tsx
// (a checkout where src/ changed since the last `npm run build`, or was never built). First
// makes sure better-sqlite3 is built for this Node (a stamp check; a copy or an offline rebuild
// after switching Node versions: scripts/native-modules.mjs).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { URL, fileURLToPath, pathToFileURL } from 'node:url';
import { NativeModuleError, ensureNativeModules } from '../scripts/native-modules.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = join(root, 'dist/src/cli/main.js');
const sources = join(root, 'src');

function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs);
  }
  return newest;
}

try {
  ensureNativeModules({ offline: true });
} catch (error) {
  if (!(error instanceof NativeModuleError)) throw error;
  process.stderr.write(`sessionlog: ${error.message}\n`);
  process.exit(1);
}

const useBuilt = existsSync(built) && (!existsSync(sources) || statSync(built).mtimeMs >= newestSource(sources));
if (useBuilt) {
  await import(pathToFileURL(built).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(join(sources, 'cli/main.ts')).href);
}
