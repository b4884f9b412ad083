#!/usr/bin/env node
// Runs the built CLI (dist/) when it is up to date, else the TypeScript sources through tsx
// (a checkout where src/ changed since the last `npm run build`, or was never built).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { URL, fileURLToPath, pathToFileURL } from 'node:url';

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

const useBuilt = existsSync(built) && (!existsSync(sources) || statSync(built).mtimeMs >= newestSource(sources));
if (useBuilt) {
  await import(pathToFileURL(built).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(join(sources, 'cli/main.ts')).href);
}
