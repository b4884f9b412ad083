/**
 * npm's `prepare` step (run by `npm install` and `npm ci` in a checkout) builds dist/, so the
 * `sessionlog` bin runs the compiled CLI from the first call instead of the TypeScript sources
 * through tsx (seconds a call). Run in a copy of the checkout: the real one's dist/ is left alone.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = new URL('../..', import.meta.url).pathname;
const copies: string[] = [];

/** A copy of the checkout's build inputs (without dist/), sharing its node_modules. */
function checkoutCopy(parts: readonly string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-prepare-'));
  copies.push(dir);
  for (const part of parts) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

function newestFile(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestFile(path) : statSync(path).mtimeMs);
  }
  return newest;
}

afterAll(() => {
  for (const dir of copies) rmSync(dir, { recursive: true, force: true });
});

describe("npm's prepare step", () => {
  it('builds dist/, newer than every source, and the bin then runs the built CLI', async () => {
    const dir = checkoutCopy([
      'package.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'src',
      'bin',
      'scripts',
      'converters',
    ]);
    await run('npm', ['run', 'prepare'], { cwd: dir, timeout: 600_000 });
    const built = join(dir, 'dist', 'src', 'cli', 'main.js');
    expect(existsSync(built)).toBe(true);
    expect(existsSync(join(dir, 'dist', 'src', 'gateway', 'ui', 'index.html'))).toBe(true);
    expect(statSync(built).mtimeMs).toBeGreaterThanOrEqual(newestFile(join(dir, 'src')));
    // Without the CLI's TypeScript source the bin still answers: it runs dist/, not the sources.
    rmSync(join(dir, 'src', 'cli', 'main.ts'));
    const { stdout } = await run(process.execPath, [join(dir, 'bin', 'sessionlog.mjs'), '--version'], { cwd: dir });
    expect(stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  }, 600_000);

  it('builds nothing and succeeds where there are no sources (the Docker image installs before copying them)', async () => {
    const dir = checkoutCopy(['package.json', 'scripts']);
    const { stderr } = await run('npm', ['run', 'prepare'], { cwd: dir, timeout: 60_000 });
    expect(stderr).toMatch(/no sources here; nothing to build/);
    expect(existsSync(join(dir, 'dist'))).toBe(false);
  });
});
