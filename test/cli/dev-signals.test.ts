/**
 * `sessionlog dev` must not leave its Temporal dev server behind (issue: a closed terminal left
 * an orphaned server holding port 7233). The dev server runs in its own session, so only `dev`
 * itself can stop it: on SIGHUP (the terminal closed: its output pipes are gone too), on
 * SIGTERM, and on a signal that arrives while it is still starting. Also under `npm run dev`,
 * when the signal goes to the npm process only (what a supervisor does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../support/log-wait.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/sessionlog.mjs');

/** A new user's environment, but the dev server on a free port: other tests race for 7233. */
function userEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, SESSIONLOG_PORT: '0', TEMPORAL_DEV_PORT: '0' };
  for (const key of ['TEMPORAL_ADDRESS', 'OPENAI_API_KEY', 'DEEPSEEK_API_KEY', 'OPENAI_BASE_URL', 'SESSIONLOG_STORE'])
    delete env[key];
  return env;
}

/** Alive and not a zombie (a killed process whose parent has not reaped it holds nothing). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // ESRCH: gone. EPERM would mean alive but not ours.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (error) {
    // ENOENT: without /proc (not Linux) trust kill(0); with it, the process ended just now.
    void error;
    return !existsSync('/proc/self');
  }
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] !== 'Z';
}

function accepts(address: string): Promise<boolean> {
  const [host, port] = [
    address.slice(0, address.lastIndexOf(':')),
    Number(address.slice(address.lastIndexOf(':') + 1)),
  ];
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

type Dev = {
  child: ChildProcess;
  dir: string;
  log: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The `sessionlog dev` process when it is not `child` itself (under npm), once known. */
  devPid?: number;
};

const started: Dev[] = [];

/**
 * `sessionlog dev` in a new scratch folder: run directly, or as `npm run dev` in the checkout
 * (npm runs scripts there) with SESSIONLOG_HOME pointing its data into the scratch folder.
 */
function startDev(how: 'direct' | 'npm' = 'direct'): Dev {
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-dev-signals-'));
  const child =
    how === 'direct'
      ? spawn(process.execPath, [BIN, 'dev'], { cwd: dir, env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn('npm', ['run', 'dev'], {
          cwd: ROOT,
          env: { ...userEnv(), SESSIONLOG_HOME: join(dir, '.sessionlog') },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
  let log = '';
  child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const dev = { child, dir, log: () => log, exited };
  started.push(dev);
  return dev;
}

const temporalDir = (dev: Dev) => join(dev.dir, '.sessionlog', 'temporal');

async function waitReady(dev: Dev): Promise<void> {
  await eventually(async () => (dev.log().includes('Press Ctrl-C') ? true : undefined), 240_000, 200).catch(
    (error: unknown) => {
      throw new Error(`sessionlog dev did not start:\n${dev.log()}`, { cause: error });
    },
  );
}

/** The dev server dev launched: its pid and address, as scripts/temporal-dev-server recorded them. */
function temporalServer(dev: Dev): { pid: number; address: string } {
  return {
    pid: Number(readFileSync(join(temporalDir(dev), 'temporal.pid'), 'utf8').trim()),
    address: readFileSync(join(temporalDir(dev), 'temporal.address'), 'utf8').trim(),
  };
}

async function expectEverythingStopped(
  dev: Dev,
  server: { pid: number; address: string },
  gatewayUrl?: string,
): Promise<void> {
  const exit = await Promise.race([
    dev.exited,
    new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 60_000)),
  ]);
  expect(exit, `dev did not exit within 60 s:\n${dev.log()}`).not.toBe('timeout');
  // It stopped by itself after cleaning up, not by the signal's default action.
  expect(exit).toMatchObject({ signal: null });
  expect(processAlive(server.pid), `the Temporal dev server (pid ${server.pid}) is still running`).toBe(false);
  expect(await accepts(server.address), `something still listens on ${server.address}`).toBe(false);
  if (gatewayUrl) expect(await accepts(new URL(gatewayUrl).host)).toBe(false);
  expect(existsSync(join(dev.dir, '.sessionlog', 'dev.json'))).toBe(false);
}

afterEach(async () => {
  for (const dev of started.splice(0)) {
    // Under npm, a dev process the signal did not reach (npm waits for it): stopped first.
    if (dev.devPid !== undefined && processAlive(dev.devPid)) {
      process.kill(dev.devPid, 'SIGTERM');
      await eventually(async () => (processAlive(dev.devPid!) ? undefined : true), 60_000, 100).catch(() =>
        process.kill(dev.devPid!, 'SIGKILL'),
      );
    }
    if (dev.child.exitCode === null && dev.child.signalCode === null) {
      dev.child.kill('SIGINT');
      await dev.exited;
    }
    // A failed assertion above must not leave a server behind either.
    if (existsSync(join(temporalDir(dev), 'temporal.pid'))) {
      const { pid } = temporalServer(dev);
      if (processAlive(pid)) process.kill(pid, 'SIGKILL');
    }
    rmSync(dev.dir, { recursive: true, force: true });
  }
}, 90_000);

describe('sessionlog dev stops its Temporal dev server', () => {
  it('on SIGHUP, when its terminal is gone (output pipes closed)', async () => {
    const dev = startDev();
    await waitReady(dev);
    const server = temporalServer(dev);
    const { gatewayUrl } = JSON.parse(readFileSync(join(dev.dir, '.sessionlog', 'dev.json'), 'utf8')) as {
      gatewayUrl: string;
    };
    expect(processAlive(server.pid)).toBe(true);
    expect(await accepts(server.address)).toBe(true);
    // A closed terminal: nobody reads dev's output any more, then the kernel sends SIGHUP.
    dev.child.stdout!.destroy();
    dev.child.stderr!.destroy();
    dev.child.kill('SIGHUP');
    await expectEverythingStopped(dev, server, gatewayUrl);
  }, 300_000);

  it('on SIGTERM', async () => {
    const dev = startDev();
    await waitReady(dev);
    const server = temporalServer(dev);
    dev.child.kill('SIGTERM');
    await expectEverythingStopped(dev, server);
    expect(dev.log()).toMatch(/Stopped\./);
  }, 300_000);

  it('on SIGTERM while it is still starting, once the dev server was launched', async () => {
    const dev = startDev();
    await eventually(
      async () =>
        existsSync(join(temporalDir(dev), 'temporal.pid')) && existsSync(join(temporalDir(dev), 'temporal.address'))
          ? true
          : undefined,
      240_000,
      20,
    );
    const server = temporalServer(dev);
    dev.child.kill('SIGTERM');
    await expectEverythingStopped(dev, server);
    expect(dev.log()).not.toMatch(/Press Ctrl-C/);
  }, 300_000);
});

describe('npm run dev stops the whole process tree when only the npm process is signalled', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)(
    'on %s to npm: the dev process (worker and gateway), and the Temporal dev server, are gone',
    async (signal) => {
      const dev = startDev('npm');
      await waitReady(dev);
      const server = temporalServer(dev);
      const state = JSON.parse(readFileSync(join(dev.dir, '.sessionlog', 'dev.json'), 'utf8')) as {
        pid: number;
        gatewayUrl: string;
      };
      dev.devPid = state.pid;
      expect(state.pid).not.toBe(dev.child.pid);
      expect(processAlive(state.pid)).toBe(true);
      expect(await accepts(new URL(state.gatewayUrl).host)).toBe(true);
      // Only npm's pid, not its process group: what a supervisor or `kill PID` does.
      dev.child.kill(signal);
      await expectEverythingStopped(dev, server, state.gatewayUrl);
      expect(processAlive(state.pid), `the dev process (pid ${state.pid}) is still running`).toBe(false);
      expect(dev.log()).toMatch(/Stopped\./);
    },
    300_000,
  );
});
