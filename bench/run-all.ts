/**
 * `npm run bench [-- NAME…]`: runs every benchmark (`BENCHES` below), or the ones named, each
 * in its own process so one's heap and RSS do not colour another's. Those that need Temporal
 * use TEMPORAL_ADDRESS when set, else a private dev server from `scripts/temporal-dev-server
 * run` (started and stopped here); bench/fleet.ts starts its own servers (and builds the full
 * Temporal server the first time). The tables the benches print go to bench/results.json,
 * replacing those of the benches that ran, and the summary in README and BENCHMARKS.md is
 * generated from it (scripts/bench-summary.mjs).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSX = fileURLToPath(new URL('../node_modules/.bin/tsx', import.meta.url));
const DEV_SERVER = fileURLToPath(new URL('../scripts/temporal-dev-server', import.meta.url));

/** Every bench in the order they run; those that need Temporal get the dev server (unless TEMPORAL_ADDRESS). */
const BENCHES: ReadonlyArray<{ name: string; temporal: boolean }> = [
  { name: 'store', temporal: false },
  { name: 'search', temporal: false },
  { name: 'turns', temporal: true },
  { name: 'idle', temporal: true },
  { name: 'workflow-promises', temporal: true },
  { name: 'limits', temporal: true },
  { name: 'telemetry', temporal: true },
  { name: 'history-bytes', temporal: true },
  { name: 'media', temporal: true },
  { name: 'resume', temporal: true },
  { name: 'wal-bytes', temporal: true },
  { name: 'pacing', temporal: true },
  { name: 'mcp', temporal: true },
  { name: 'meter', temporal: false },
  { name: 'stream-read', temporal: false },
  { name: 'followers', temporal: false },
  { name: 'fleet', temporal: false },
  // Starts its own `sessionlog dev` stack (gateway, worker and Temporal dev server).
  { name: 'soak', temporal: false },
];

function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: 'inherit', env });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

async function main(): Promise<number> {
  const asked = process.argv.slice(2);
  const unknown = asked.filter((name) => !BENCHES.some((b) => b.name === name));
  if (unknown.length > 0) {
    console.error(`unknown bench ${unknown.join(', ')}; the benches are ${BENCHES.map((b) => b.name).join(', ')}`);
    return 2;
  }
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-'));
  const lines = join(dir, 'results.jsonl');
  writeFileSync(lines, '');
  const env = { ...process.env, SESSIONLOG_BENCH_RESULTS: lines };
  const failures: string[] = [];
  try {
    for (const bench of BENCHES.filter((b) => asked.length === 0 || asked.includes(b.name))) {
      const script = `bench/${bench.name}.ts`;
      const code =
        bench.temporal && !process.env.TEMPORAL_ADDRESS
          ? await run(DEV_SERVER, ['run', '--', TSX, script], env)
          : await run(TSX, [script], env);
      if (code !== 0) failures.push(script);
    }
    // The figures of every bench that printed any, failed or not, replace that bench's in the file.
    if (
      (await run(
        process.execPath,
        ['scripts/bench-summary.mjs', '--merge', lines, BENCHES.map((b) => b.name).join(',')],
        process.env,
      )) !== 0
    )
      failures.push('scripts/bench-summary.mjs');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (failures.length > 0) console.error(`\nfailed: ${failures.join(', ')}`);
  return failures.length === 0 ? 0 : 1;
}

process.exitCode = await main();
