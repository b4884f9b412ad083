/**
 * `npm run bench`: runs every benchmark (store, search, turns, token meter, learned limits,
 * telemetry cost, history bytes per turn, resuming a stream, where a turn's bytes go, pacing a fleet under a provider limit, idle followers, fleet), each in its own process so
 * one's heap and RSS do not colour the other's. bench/turns.ts, bench/limits.ts,
 * bench/telemetry.ts and bench/history-bytes.ts need Temporal: they
 * use TEMPORAL_ADDRESS when set, else a
 * private dev server from `scripts/temporal-dev-server run` (started and stopped here).
 * bench/fleet.ts starts its own servers (and builds the full Temporal server the first time).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSX = fileURLToPath(new URL('../node_modules/.bin/tsx', import.meta.url));
const DEV_SERVER = fileURLToPath(new URL('../scripts/temporal-dev-server', import.meta.url));

function run(command: string, args: readonly string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

async function main(): Promise<number> {
  const failures: string[] = [];
  if ((await run(TSX, ['bench/store.ts'])) !== 0) failures.push('bench/store.ts');
  if ((await run(TSX, ['bench/search.ts'])) !== 0) failures.push('bench/search.ts');
  const withTemporal = (script: string) =>
    process.env.TEMPORAL_ADDRESS ? run(TSX, [script]) : run(DEV_SERVER, ['run', '--', TSX, script]);
  for (const script of [
    'bench/turns.ts',
    'bench/limits.ts',
    'bench/telemetry.ts',
    'bench/history-bytes.ts',
    'bench/resume.ts',
    'bench/wal-bytes.ts',
    'bench/pacing.ts',
  ])
    if ((await withTemporal(script)) !== 0) failures.push(script);
  if ((await run(TSX, ['bench/meter.ts'])) !== 0) failures.push('bench/meter.ts');
  if ((await run(TSX, ['bench/followers.ts'])) !== 0) failures.push('bench/followers.ts');
  if ((await run(TSX, ['bench/fleet.ts'])) !== 0) failures.push('bench/fleet.ts');
  if (failures.length > 0) console.error(`\nfailed: ${failures.join(', ')}`);
  return failures.length === 0 ? 0 : 1;
}

process.exitCode = await main();
