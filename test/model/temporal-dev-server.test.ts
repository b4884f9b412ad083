/**
 * `scripts/temporal-dev-server run -- CMD` starts a real Temporal dev server, runs CMD with
 * TEMPORAL_ADDRESS set, stops the server, and exits with CMD's status.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { homedir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const script = path.join(root, 'scripts/temporal-dev-server');

function commandWorks(command: string, args: string[]): boolean {
  return spawnSync(command, args, { stdio: 'ignore' }).status === 0;
}

const binaryAvailable =
  (process.env.TEMPORAL_CLI_PATH !== undefined && existsSync(process.env.TEMPORAL_CLI_PATH)) ||
  commandWorks('temporal', ['--version']) ||
  existsSync(path.join(root, '.tools/bin/temporal')) ||
  existsSync(path.join(homedir(), '.cache/sessionlog/bin/temporal'));
const goAvailable = commandWorks('go', ['version']);
if (!binaryAvailable && !goAvailable) {
  console.warn(
    'temporal-dev-server tests skipped: no `temporal` binary found and no Go toolchain to build one (see scripts/temporal-dev-server)',
  );
}

function run(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(script, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

function portAcceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

describe.skipIf(!binaryAvailable && !goAvailable)('scripts/temporal-dev-server run', () => {
  // Building the CLI the first time takes minutes; with a binary present a run takes seconds.
  const timeout = binaryAvailable ? 120_000 : 900_000;

  it(
    'runs the command against a healthy server, stops the server, and exits with the command status',
    async () => {
      const inner =
        'echo "ADDR=$TEMPORAL_ADDRESS"; "$(scripts/temporal-dev-server ensure)" operator cluster health --address "$TEMPORAL_ADDRESS" && exit 3';
      const result = await run([
        'run',
        '--dynamic-config-value',
        'limit.historyCount.suggestContinueAsNew=40',
        '--',
        'bash',
        '-c',
        inner,
      ]);
      expect(result.stderr).not.toMatch(/exited during start-up/);
      expect(result.status).toBe(3);
      const address = /ADDR=127\.0\.0\.1:(\d+)/.exec(result.stdout);
      expect(address).not.toBeNull();
      expect(result.stdout).toMatch(/SERVING/);
      expect(await portAcceptsConnections(Number(address?.[1]))).toBe(false);
    },
    timeout,
  );

  it(
    'starts the server with eager activity dispatch on, unless the caller sets it',
    async () => {
      // The server's own command line, found by the port the run exported.
      const inner =
        'port="${TEMPORAL_ADDRESS##*:}"; ps -eo args | grep -- "start-dev" | grep -- "--port $port " | grep -v grep';
      const eagerOf = (stdout: string) =>
        [...stdout.matchAll(/system\.enableActivityEagerExecution=(\w+)/g)].map((m) => m[1]);
      const byDefault = await run(['run', '--', 'bash', '-c', inner]);
      expect(byDefault.status).toBe(0);
      expect(eagerOf(byDefault.stdout)).toEqual(['true']);
      const turnedOff = await run([
        'run',
        '--dynamic-config-value',
        'system.enableActivityEagerExecution=false',
        '--',
        'bash',
        '-c',
        inner,
      ]);
      expect(turnedOff.status).toBe(0);
      expect(eagerOf(turnedOff.stdout)).toEqual(['false']);
    },
    timeout,
  );

  it(
    'ensure prints an executable temporal binary that reports a version',
    async () => {
      const result = await run(['ensure']);
      expect(result.status).toBe(0);
      const binary = result.stdout.trim();
      expect(spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout).toMatch(/temporal version/);
    },
    timeout,
  );
});
