/**
 * `sessionlog` commands as real child processes (`bin/sessionlog.mjs`), for tests that treat the
 * gateway and the worker as the world does: over sockets, from outside.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { eventually } from './log-wait.js';
import { temporalAddress } from './stack.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/sessionlog.mjs');

export type CliProcess = {
  readonly proc: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** True while the process has not exited. */
  alive(): boolean;
  /** Waits for a line matching `pattern` on stdout; returns its first group. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** SIGTERM, then waits for the exit; returns the exit code. */
  stop(): Promise<number | null>;
};

/**
 * Starts `sessionlog COMMAND` in `cwd` on the tests' Temporal server, with no provider key (the
 * offline model) and `env` on top.
 */
export function startCli(command: string, cwd: string, env: Record<string, string>): CliProcess {
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const key of ['OPENAI_API_KEY', 'DEEPSEEK_API_KEY', 'OPENAI_BASE_URL', 'OTEL_EXPORTER_OTLP_ENDPOINT'])
    delete base[key];
  const proc = spawn(process.execPath, [BIN, command], {
    cwd,
    env: { ...base, TEMPORAL_ADDRESS: temporalAddress(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return {
    proc,
    stdout: () => stdout,
    stderr: () => stderr,
    alive: () => proc.exitCode === null && proc.signalCode === null,
    async waitFor(pattern, timeoutMs = 60_000) {
      try {
        return await eventually(async () => {
          if (proc.exitCode !== null) throw new Error(`sessionlog ${command} exited with ${proc.exitCode}`);
          return pattern.exec(stdout)?.[1];
        }, timeoutMs);
      } catch (error) {
        throw new Error(`sessionlog ${command}: ${(error as Error).message}\nstdout:\n${stdout}\nstderr:\n${stderr}`, {
          cause: error,
        });
      }
    },
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      return exited;
    },
  };
}
