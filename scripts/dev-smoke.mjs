#!/usr/bin/env node
/**
 * End-to-end check of `npm run dev` on the Node that runs this script (CI runs it on each
 * supported version, `.ci/run`): starts `node bin/sessionlog.mjs dev` (what `npm run dev` runs)
 * in a scratch directory, so a developer's ./.sessionlog is never touched, with the offline model
 * and free ports; creates a session through the HTTP gateway, sends one message with ?wait=true,
 * checks that the reply is the offline model's echo of it, then stops dev with SIGTERM and checks
 * that it exits cleanly, its Temporal dev server with it. Exit status 0 on success.
 *
 * Usage: node scripts/dev-smoke.mjs
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const START_TIMEOUT_MS = 300_000; // the first start may build the Temporal CLI
const REPLY_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 60_000;

const say = (line) => process.stdout.write(`dev-smoke: ${line}\n`);

const scratch = mkdtempSync(join(tmpdir(), 'sessionlog-dev-smoke-'));
const env = { ...process.env, SESSIONLOG_PORT: '0', TEMPORAL_DEV_PORT: '0' };
for (const key of ['TEMPORAL_ADDRESS', 'OPENAI_API_KEY', 'DEEPSEEK_API_KEY', 'OPENAI_BASE_URL', 'SESSIONLOG_STORE'])
  delete env[key];

let output = '';
const dev = spawn(process.execPath, [join(ROOT, 'bin/sessionlog.mjs'), 'dev'], {
  cwd: scratch,
  env,
  stdio: ['ignore', 'pipe', 'pipe'],
});
dev.stdout.on('data', (chunk) => (output += chunk));
dev.stderr.on('data', (chunk) => (output += chunk));
const exited = new Promise((resolve) => dev.once('exit', (code, signal) => resolve({ code, signal })));

function fail(message) {
  throw new Error(`${message}\n--- sessionlog dev output ---\n${output}`);
}

async function waitFor(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = predicate();
    if (value) return value;
    if (dev.exitCode !== null || dev.signalCode !== null) fail(`sessionlog dev exited while waiting for ${what}`);
    if (Date.now() > deadline) fail(`no ${what} within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function request(method, url, body) {
  const response = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(REPLY_TIMEOUT_MS),
  });
  const text = await response.text();
  if (!response.ok) fail(`${method} ${url} answered ${response.status}: ${text}`);
  return JSON.parse(text);
}

/** The Temporal dev server `dev` started, as scripts/temporal-dev-server recorded it. */
function temporalPid() {
  const file = join(scratch, '.sessionlog', 'temporal', 'temporal.pid');
  return existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) : undefined;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

let status = 1;
let serverPid;
try {
  const started = Date.now();
  const gateway = await waitFor(
    () => output.includes('Press Ctrl-C') && /Gateway: (http:\/\/\S+)\/v1/.exec(output)?.[1],
    START_TIMEOUT_MS,
    'ready gateway',
  );
  serverPid = temporalPid();
  say(`Node ${process.version}: dev ready at ${gateway} after ${((Date.now() - started) / 1000).toFixed(1)} s`);

  await request('POST', `${gateway}/v1/sessions`, { id: 'smoke' });
  const text = `hello from Node ${process.version}`;
  const reply = await request('POST', `${gateway}/v1/sessions/smoke/messages?wait=true`, { text });
  if (reply.outcome !== 'completed' || !reply.text.includes(text))
    fail(`unexpected reply to "${text}": ${JSON.stringify(reply)}`);
  say(`reply: ${JSON.stringify(reply.text)}`);

  dev.kill('SIGTERM');
  const exit = await Promise.race([
    exited,
    new Promise((resolve) => setTimeout(() => resolve('timeout'), STOP_TIMEOUT_MS)),
  ]);
  if (exit === 'timeout') fail(`sessionlog dev did not stop within ${STOP_TIMEOUT_MS / 1000} s of SIGTERM`);
  if (exit.code !== 0) fail(`sessionlog dev exited with ${JSON.stringify(exit)} after SIGTERM`);
  if (serverPid && alive(serverPid)) fail(`the Temporal dev server (pid ${serverPid}) outlived sessionlog dev`);
  say('stopped cleanly');
  status = 0;
} catch (error) {
  process.stderr.write(`dev-smoke: ${error instanceof Error ? error.message : String(error)}\n`);
} finally {
  if (dev.exitCode === null && dev.signalCode === null) {
    dev.kill('SIGKILL');
    await exited;
  }
  serverPid ??= temporalPid();
  if (serverPid && alive(serverPid)) process.kill(serverPid, 'SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(status);
