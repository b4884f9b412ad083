/**
 * Child processes for crash and concurrency tests, talked to by stdin lines and read by stdout
 * lines. A TypeScript script is bundled once with esbuild (the compiler tsx runs on) so each
 * child starts as plain `node` on JavaScript: a crash test spawns dozens of them, and
 * `node --import tsx` costs several hundred milliseconds of CPU per start.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BUNDLE_DIR = join(ROOT, '.tmp', 'test-bundles');

const bundles = new Map<string, Promise<string>>();

/**
 * Bundles `script` (repo-relative) to JavaScript under .tmp/ (git-ignored), keeping packages
 * external so they resolve from the repo's node_modules. Returns the bundle's path.
 */
export function bundleScript(script: string): Promise<string> {
  let bundle = bundles.get(script);
  if (!bundle) {
    mkdirSync(BUNDLE_DIR, { recursive: true });
    const outfile = join(BUNDLE_DIR, `${basename(script, '.ts')}-${process.pid}.mjs`);
    bundle = build({
      entryPoints: [join(ROOT, script)],
      outfile,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      packages: 'external',
      logLevel: 'silent',
    }).then(() => outfile);
    bundles.set(script, bundle);
  }
  return bundle;
}

export type LineChild = {
  process: ChildProcessWithoutNullStreams;
  /** Complete stdout lines received so far. */
  lines: string[];
  stderr: () => string;
  /** Resolves with the first line (from now or already received) matching `pattern`. */
  waitFor(pattern: RegExp): Promise<string>;
  send(line: string): void;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

/** Starts `node <file> ...args` (a bundle from {@link bundleScript}), with `env` added to this process's environment. */
export function spawnLineChild(file: string, args: readonly string[], env: Record<string, string> = {}): LineChild {
  const child = spawn(process.execPath, [file, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let partial = '';
  let stderr = '';
  const waiters = new Set<{ pattern: RegExp; resolve: (line: string) => void }>();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  child.stdout.on('data', (chunk: Buffer) => {
    partial += chunk.toString('utf8');
    let newline: number;
    while ((newline = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, newline);
      partial = partial.slice(newline + 1);
      lines.push(line);
      for (const waiter of [...waiters]) {
        if (waiter.pattern.test(line)) {
          waiters.delete(waiter);
          waiter.resolve(line);
        }
      }
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  // A child killed while we write to it must not crash the test process.
  child.stdin.on('error', () => undefined);
  return {
    process: child,
    lines,
    stderr: () => stderr,
    waitFor(pattern) {
      const seen = lines.find((line) => pattern.test(line));
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise<string>((resolve, reject) => {
        waiters.add({ pattern, resolve });
        void exited.then(({ code, signal }) =>
          reject(new Error(`child exited (${code ?? signal}) before printing ${pattern}: ${stderr}`)),
        );
      });
    },
    send(line) {
      child.stdin.write(`${line}\n`);
    },
    exited,
  };
}
