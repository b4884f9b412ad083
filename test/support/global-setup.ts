/**
 * Vitest global setup. First, better-sqlite3 built for the Node that runs the tests
 * (scripts/native-modules.mjs: a stamp check; after a switch of Node versions, the addon from the
 * per-user cache or compiled from local headers, never downloaded). Then a real Temporal dev
 * server for the integration tests. When TEMPORAL_ADDRESS is set (e.g. by `.ci/run` or a
 * developer's own server) it is used as is; otherwise `scripts/temporal-dev-server start`
 * provisions the binary and starts a private server on a free loopback port, stopped again at
 * teardown.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';

const ROOT = new URL('../..', import.meta.url).pathname;
const SCRIPT = join(ROOT, 'scripts/temporal-dev-server');
const NATIVE_MODULES = join(ROOT, 'scripts/native-modules.mjs');

/** Low enough that multi-turn tests cross continue-as-new (DESIGN §5). */
export const TEST_SUGGEST_CONTINUE_AS_NEW = 150;

export default function setup(project: TestProject): (() => void) | undefined {
  execFileSync(process.execPath, [NATIVE_MODULES, '--offline'], { cwd: ROOT, stdio: 'inherit' });
  if (process.env.TEMPORAL_ADDRESS) {
    project.provide('temporalAddress', process.env.TEMPORAL_ADDRESS);
    return undefined;
  }
  const stateDir = mkdtempSync(join(tmpdir(), 'sessionlog-temporal-'));
  const args = [
    'start',
    '--port',
    '0',
    '--state-dir',
    stateDir,
    '--dynamic-config-value',
    `limit.historyCount.suggestContinueAsNew=${TEST_SUGGEST_CONTINUE_AS_NEW}`,
  ];
  const out = execFileSync(SCRIPT, args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const match = /TEMPORAL_ADDRESS=(\S+)/.exec(out);
  if (!match) throw new Error(`temporal-dev-server start printed no address:\n${out}`);
  process.env.TEMPORAL_ADDRESS = match[1];
  project.provide('temporalAddress', match[1]!);
  return () => {
    execFileSync(SCRIPT, ['stop', '--state-dir', stateDir], { cwd: ROOT, stdio: 'inherit' });
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
  }
}
