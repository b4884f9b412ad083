/**
 * One `sessionlog dev` stack for a bench, as `npm run dev` runs it (`node bin/sessionlog.mjs
 * dev`: Temporal dev server, worker and gateway), with its data in a fresh temporary
 * SESSIONLOG_HOME, the offline model, free ports and the V8 inspector on a free local port; and
 * what the bench reads of it from outside: /proc figures of its process and of its Temporal dev
 * server, and the sizes of its SQLite store files. `stop()` leaves no process and no folder behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The first start may build the Temporal CLI. */
const START_TIMEOUT_MS = 600_000;
const STOP_TIMEOUT_MS = 60_000;

export type RunningDevStack = {
  pid: number;
  gatewayUrl: string;
  /** The `ws://` URL of the dev process's inspector. */
  inspectorUrl: string;
  home: string;
  /** The SQLite store file (its WAL and shared-memory files beside it: `-wal`, `-shm`). */
  storePath: string;
  /** The Temporal dev server's pid, as scripts/temporal-dev-server recorded it. */
  temporalPid(): number | undefined;
  /** Whether the dev process is still running. */
  running(): boolean;
  /** Everything dev printed so far. */
  output(): string;
  /** SIGTERM, then SIGKILL after a minute; the Temporal dev server killed if it outlived dev; the data removed. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; clean: boolean }>;
};

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Starts `node --inspect=127.0.0.1:0 bin/sessionlog.mjs dev --port 0` and waits until it is ready. */
export async function startDevStack(log: (line: string) => void): Promise<RunningDevStack> {
  const home = mkdtempSync(join(tmpdir(), 'sessionlog-soak-'));
  const env: NodeJS.ProcessEnv = { ...process.env, SESSIONLOG_HOME: home, TEMPORAL_DEV_PORT: '0' };
  for (const key of [
    'TEMPORAL_ADDRESS',
    'OPENAI_API_KEY',
    'DEEPSEEK_API_KEY',
    'OPENAI_BASE_URL',
    'SESSIONLOG_STORE',
    'SESSIONLOG_PORT',
    'NODE_OPTIONS',
  ])
    delete env[key];
  let output = '';
  const child: ChildProcess = spawn(
    process.execPath,
    ['--inspect=127.0.0.1:0', join(ROOT, 'bin/sessionlog.mjs'), 'dev', '--port', '0'],
    { cwd: home, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  // Should the bench die without calling stop() (an uncaught error), dev still gets its SIGTERM,
  // and stops its Temporal dev server itself.
  const killOnExit = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('exit', killOnExit);
  const temporalPid = (): number | undefined => {
    const file = join(home, 'temporal', 'temporal.pid');
    if (!existsSync(file)) return undefined;
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  };

  let stopped: ReturnType<RunningDevStack['stop']> | undefined;
  const stop = (): ReturnType<RunningDevStack['stop']> =>
    (stopped ??= (async () => {
      // Read before dev removes it on the way out.
      const serverPid = temporalPid();
      let exit: { code: number | null; signal: NodeJS.Signals | null };
      let clean = true;
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = new Promise<'timeout'>((resolve) =>
          setTimeout(() => resolve('timeout'), STOP_TIMEOUT_MS).unref(),
        );
        const first = await Promise.race([exited, timer]);
        if (first === 'timeout') {
          log(`sessionlog dev did not stop within ${STOP_TIMEOUT_MS / 1000} s of SIGTERM; killing it`);
          clean = false;
          child.kill('SIGKILL');
          exit = await exited;
        } else exit = first;
      } else exit = await exited;
      const leftover = serverPid ?? temporalPid();
      if (leftover !== undefined && alive(leftover)) {
        log(`the Temporal dev server (pid ${leftover}) outlived sessionlog dev; killing it`);
        clean = false;
        process.kill(leftover, 'SIGKILL');
      }
      process.off('exit', killOnExit);
      rmSync(home, { recursive: true, force: true });
      return { ...exit, clean: clean && exit.code === 0 };
    })());

  try {
    const deadline = Date.now() + START_TIMEOUT_MS;
    let gatewayUrl: string | undefined;
    let inspectorUrl: string | undefined;
    while (!gatewayUrl || !inspectorUrl) {
      inspectorUrl ??= /Debugger listening on (ws:\/\/\S+)/.exec(output)?.[1];
      if (output.includes('Press Ctrl-C')) gatewayUrl = /Gateway: (http:\/\/\S+)\/v1/.exec(output)?.[1];
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`sessionlog dev exited while starting:\n${output}`);
      if (Date.now() > deadline)
        throw new Error(`sessionlog dev was not ready within ${START_TIMEOUT_MS / 1000} s:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    return {
      pid: child.pid!,
      gatewayUrl,
      inspectorUrl,
      home,
      storePath: join(home, 'sessionlog.db'),
      temporalPid,
      running: () => child.exitCode === null && child.signalCode === null,
      output: () => output,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Resident set size of `pid` in bytes (`VmRSS` of /proc/PID/status); undefined when it is gone. */
export function residentBytes(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const kib = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kib === undefined ? undefined : Number(kib) * 1024;
  } catch {
    // The process ended (or /proc is not Linux's): no figure.
    return undefined;
  }
}

/** Open file descriptors of `pid` (entries of /proc/PID/fd): all of them, and how many are sockets (in-flight connections come and go). */
export function openFdKinds(pid: number): { total: number; sockets: number } {
  const dir = `/proc/${pid}/fd`;
  let total = 0;
  let sockets = 0;
  for (const fd of readdirSync(dir)) {
    let target: string;
    try {
      target = readlinkSync(`${dir}/${fd}`);
    } catch {
      // Closed between the listing and the look: not open any more.
      continue;
    }
    total += 1;
    if (target.startsWith('socket:')) sockets += 1;
  }
  return { total, sockets };
}

/** Size of `path` in bytes, 0 when it does not exist (a WAL after a truncating checkpoint, say). */
export function fileBytes(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    // Not there (yet, or any more): nothing on disk.
    return 0;
  }
}
