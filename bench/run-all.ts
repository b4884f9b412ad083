/**
 * `npm run bench`: runs every benchmark (store, turns, telemetry cost, token meter, idle followers), each in its own process so one's heap and RSS do not
 * colour the other's. bench/turns.ts and bench/telemetry.ts need Temporal: they use TEMPORAL_ADDRESS when set, else a
 * private dev server from `scripts/temporal-dev-server run` (started and stopped here).
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
  const turns = process.env.TEMPORAL_ADDRESS ? run(TSX, ['bench/turns.ts']) : run(DEV_SERVER, ['run', '--', TSX, 'bench/turns.ts']);
  if ((await turns) !== 0) failures.push('bench/turns.ts');
  const telemetry = process.env.TEMPORAL_ADDRESS ? run(TSX, ['bench/telemetry.ts']) : run(DEV_SERVER, ['run', '--', TSX, 'bench/telemetry.ts']);
  if ((await telemetry) !== 0) failures.push('bench/telemetry.ts');
  if ((await run(TSX, ['bench/meter.ts'])) !== 0) failures.push('bench/meter.ts');
  if ((await run(TSX, ['bench/followers.ts'])) !== 0) failures.push('bench/followers.ts');
  if (failures.length > 0) console.error(`\nfailed: ${failures.join(', ')}`);
  return failures.length === 0 ? 0 : 1;
}

process.exitCode = await main();
