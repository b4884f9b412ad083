/**
 * The running `sessionlog dev` the examples talk to, found as the `sessionlog` CLI finds it:
 * with SESSIONLOG_HOME set, the dev whose data folder that is; else the nearest
 * `.sessionlog/dev.json` of a running dev in the current folder or any folder above it (as git
 * finds `.git`). `dev` writes that file while it runs, with its gateway's URL, its Temporal
 * address and its store.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

export type DevState = { pid: number; gatewayUrl: string; temporalAddress: string; store: string };

/** The state in `home`/dev.json if the dev it names still runs. */
function runningIn(home: string): DevState | undefined {
  let state: DevState;
  try {
    state = JSON.parse(readFileSync(join(home, 'dev.json'), 'utf8')) as DevState;
  } catch (error) {
    // No file (or half written): no dev runs with this data folder.
    void error;
    return undefined;
  }
  try {
    process.kill(state.pid, 0);
    return state;
  } catch (error) {
    // EPERM: alive, but another user's process; ESRCH: that dev has stopped.
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? state : undefined;
  }
}

export function findDev(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): DevState | undefined {
  if (env.SESSIONLOG_HOME) return runningIn(resolve(cwd, env.SESSIONLOG_HOME));
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    const state = runningIn(join(dir, '.sessionlog'));
    if (state) return state;
    if (dirname(dir) === dir) return undefined;
  }
}
