/** Runs a TypeScript script under test/support in a child `node --import tsx` process. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export type ChildOutcome = { code: number | null; stdout: string; stderr: string };

export function runTsScript(script: string, args: string[]): Promise<ChildOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Parses the last JSON line a child printed. */
export function lastJsonLine<T>(outcome: ChildOutcome): T {
  const lines = outcome.stdout.trim().split('\n');
  const last = lines[lines.length - 1];
  if (!last) throw new Error(`child printed nothing (exit ${outcome.code}): ${outcome.stderr}`);
  return JSON.parse(last) as T;
}
