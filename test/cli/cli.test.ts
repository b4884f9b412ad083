/**
 * The CLI end to end, through child processes: `sessionlog dev` (embedded Temporal dev server,
 * worker, offline model, gateway) in a fresh data directory, then `send`, `sessions …`, a
 * Ctrl-C and a second `dev` that finds the session intact.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/persistence/open.js';
import { SESSION_FORMAT_VERSION } from '../../src/session/index.js';
import { eventually } from '../support/log-wait.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/sessionlog.mjs');
const dir = mkdtempSync(join(tmpdir(), 'sessionlog-cli-'));

/** The environment of a new user: no API keys, no Temporal address, a free gateway port. */
function userEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, SESSIONLOG_PORT: '0' };
  for (const key of ['TEMPORAL_ADDRESS', 'OPENAI_API_KEY', 'DEEPSEEK_API_KEY', 'OPENAI_BASE_URL', 'SESSIONLOG_STORE'])
    delete env[key];
  return env;
}

function cli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: options.cwd ?? dir,
      env: { ...userEnv(), ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

let dev: ChildProcess | undefined;
let devLog = '';

async function startDev(): Promise<{ gatewayUrl: string }> {
  devLog = '';
  dev = spawn(process.execPath, [BIN, 'dev'], { cwd: dir, env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  dev.stdout!.on('data', (d: Buffer) => (devLog += d.toString()));
  dev.stderr!.on('data', (d: Buffer) => (devLog += d.toString()));
  const stateFile = join(dir, '.sessionlog', 'dev.json');
  await eventually(
    async () => (devLog.includes('Press Ctrl-C') && existsSync(stateFile) ? true : undefined),
    240_000,
    200,
  ).catch((error: unknown) => {
    throw new Error(`sessionlog dev did not start:\n${devLog}`, { cause: error });
  });
  return JSON.parse(readFileSync(stateFile, 'utf8')) as { gatewayUrl: string };
}

async function stopDev(): Promise<void> {
  const child = dev;
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGINT');
  await exited;
}

beforeAll(async () => {
  await startDev();
}, 300_000);
afterAll(async () => {
  await stopDev();
}, 60_000);

describe('the sessionlog CLI against a real dev stack', () => {
  it('dev says it runs the offline model and prints the gateway, inspector and Temporal UI URLs', async () => {
    expect(devLog).toMatch(/Model: offline model/);
    expect(devLog).toMatch(/Gateway: http:\/\/127\.0\.0\.1:\d+\/v1/);
    expect(devLog).toMatch(/Temporal UI: http:\/\/127\.0\.0\.1:\d+/);
    const inspector = /Inspector: (http:\/\/127\.0\.0\.1:\d+\/ui\/)/.exec(devLog)?.[1];
    expect(inspector).toBeDefined();
    const page = await fetch(inspector!);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('sessionlog inspector');
  });

  it('dev says nothing of building the Temporal binary when it is already there', () => {
    expect(devLog).toMatch(/Temporal: starting the local dev server/);
    expect(devLog).not.toMatch(/can take minutes|building/i);
  });

  it("dev's HTTP example creates a session of its own, not the `demo` a first `send demo` starts (a 409 after it)", () => {
    expect(devLog).toContain(`-d '{"id":"http-demo"}'`);
    expect(devLog).toMatch(/\/v1\/sessions\/http-demo\/messages\?wait=true/);
    expect(devLog).not.toMatch(/"id":"demo"/);
  });

  it('dev.json names the store by an absolute path, so it is the same store from any folder', () => {
    const state = JSON.parse(readFileSync(join(dir, '.sessionlog', 'dev.json'), 'utf8')) as { store: string };
    expect(state.store).toBe(`sqlite:${join(dir, '.sessionlog', 'sessionlog.db')}`);
  });

  it("send's help says it starts a session that does not exist yet", async () => {
    const help = await cli(['send', '--help']);
    // Commander wraps the description to the terminal's width.
    expect(help.stdout.replace(/\s+/g, ' ')).toMatch(/starts session ID when it does not exist yet/);
  });

  it('send to a new id starts that session (the CLI creates, unlike POST /v1/sessions/:id/messages)', async () => {
    const sent = await cli(['send', 'cli-new', 'first words']);
    expect(sent.code).toBe(0);
    expect(sent.stdout.trim()).toBe('echo: first words');
    const shown = await cli(['--json', 'sessions', 'show', 'cli-new']);
    expect((JSON.parse(shown.stdout) as { header: { id: string } }).header.id).toBe('cli-new');
  });

  it('works from a folder below the one dev runs in: it finds the nearest .sessionlog/dev.json above, and its store', async () => {
    const deeper = join(dir, 'sub', 'deeper');
    mkdirSync(deeper, { recursive: true });
    const sent = await cli(['send', 'cli-sub', 'from', 'below'], { cwd: deeper });
    expect(sent.stderr).toBe('');
    expect(sent.stdout.trim()).toBe('echo: from below');
    const list = await cli(['sessions', 'list'], { cwd: deeper });
    expect(list.stdout).toMatch(/^cli-sub\s/m);
    // No second data folder was made where the command ran.
    expect(existsSync(join(deeper, '.sessionlog'))).toBe(false);
    expect(existsSync(join(dir, 'sub', '.sessionlog'))).toBe(false);
  });

  it("works from any folder with SESSIONLOG_HOME set to dev's data folder", async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'sessionlog-cli-elsewhere-'));
    const env = { SESSIONLOG_HOME: join(dir, '.sessionlog') };
    const sent = await cli(['send', 'cli-home', 'via', 'home'], { cwd: elsewhere, env });
    expect(sent.stderr).toBe('');
    expect(sent.stdout.trim()).toBe('echo: via home');
    const history = await cli(['--json', 'sessions', 'history', 'cli-home'], { cwd: elsewhere, env });
    expect((JSON.parse(history.stdout) as unknown[]).length).toBe(2);
    expect(existsSync(join(elsewhere, '.sessionlog'))).toBe(false);
  });

  it('without a running dev found, send says how to point the CLI at one', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'sessionlog-cli-nodev-'));
    const sent = await cli(['send', 'x', 'hello'], { cwd: elsewhere });
    expect(sent.code).toBe(2);
    expect(sent.stderr).toMatch(/no running `sessionlog dev` was found/);
    expect(sent.stderr).toMatch(/SESSIONLOG_HOME/);
  });

  it('send returns the reply and sessions history matches it', async () => {
    const sent = await cli(['send', 'cli-1', 'hello', 'from', 'the', 'cli']);
    expect(sent.stderr).toBe('');
    expect(sent.stdout.trim()).toBe('echo: hello from the cli');
    const history = await cli(['--json', 'sessions', 'history', 'cli-1']);
    const messages = JSON.parse(history.stdout) as Array<{ role: string; content: Array<{ text?: string }> }>;
    expect(messages.map((m) => [m.role, m.content[0]?.text])).toEqual([
      ['user', 'hello from the cli'],
      ['assistant', 'echo: hello from the cli'],
    ]);
    const list = await cli(['sessions', 'list']);
    expect(list.stdout).toMatch(/^cli-1\s/m);
  });

  it('export writes header plus one event per line, and verify passes on the export and the store', async () => {
    const out = join(dir, 'cli-1.jsonl');
    const exported = await cli(['sessions', 'export', 'cli-1', '--out', out]);
    expect(exported.code).toBe(0);
    const lines = readFileSync(out, 'utf8').trim().split('\n');
    expect(JSON.parse(lines[0]!)).toMatchObject({ type: 'session', id: 'cli-1' });
    const events = lines.slice(1).map((l) => JSON.parse(l) as { seq: number });
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    const verifyFile = await cli(['sessions', 'verify', '--file', out]);
    expect(verifyFile.code).toBe(0);
    expect(verifyFile.stdout).toMatch(/^ok:/);
    const verifyStored = await cli(['sessions', 'verify', 'cli-1']);
    expect(verifyStored.code).toBe(0);
  });

  it('verify exits non-zero on a broken export', async () => {
    const out = join(dir, 'cli-1.jsonl');
    const broken = join(dir, 'broken.jsonl');
    const lines = readFileSync(out, 'utf8').trim().split('\n');
    // Drop the final turn/end: the last turn is left open.
    const { writeFileSync } = await import('node:fs');
    writeFileSync(broken, `${lines.slice(0, -1).join('\n')}\n`);
    const verified = await cli(['sessions', 'verify', '--file', broken]);
    expect(verified.code).toBe(1);
    expect(verified.stdout).toMatch(/balanced-turns/);
  });

  it('fork gives a child whose header names its parent', async () => {
    const forked = await cli(['--json', 'sessions', 'fork', 'cli-1', '--child', 'cli-1-child']);
    expect(forked.code).toBe(0);
    const shown = await cli(['--json', 'sessions', 'show', 'cli-1-child']);
    const { header } = JSON.parse(shown.stdout) as { header: { parentSession?: string; seedLength?: number } };
    expect(header.parentSession).toBe('cli-1');
    expect(header.seedLength).toBeGreaterThan(0);
    const reply = await cli(['send', 'cli-1-child', 'hi child']);
    expect(reply.stdout.trim()).toBe('echo: hi child');
  });

  it("lists every tenant's sessions with their tenant; --tenant narrows list and erase to one tenant's", async () => {
    const store = await openStore(`sqlite:${join(dir, '.sessionlog', 'sessionlog.db')}`);
    try {
      await store.create({ version: SESSION_FORMAT_VERSION, id: 'acme-1', createdAt: Date.now(), tenant: 'acme' });
    } finally {
      await store.close();
    }
    const all = await cli(['sessions', 'list']);
    expect(all.stdout).toMatch(/^acme-1\s+acme\s/m);
    expect(all.stdout).toMatch(/^cli-1\s+default\s/m);
    const acme = await cli(['--json', 'sessions', 'list', '--tenant', 'acme']);
    expect((JSON.parse(acme.stdout) as Array<{ id: string }>).map((s) => s.id)).toEqual(['acme-1']);
    const refused = await cli(['sessions', 'erase', 'cli-1', '--tenant', 'acme', '--yes']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/SESSION_NOT_FOUND|does not exist/);
    expect((await cli(['sessions', 'list'])).stdout).toMatch(/^cli-1\s/m);
    const bad = await cli(['sessions', 'list', '--tenant', 'Not A Tenant']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/invalid tenant/);
    expect((await cli(['sessions', 'erase', 'acme-1', '--tenant', 'acme', '--yes'])).code).toBe(0);
    expect((await cli(['sessions', 'list'])).stdout).not.toMatch(/^acme-1\s/m);
  });

  it('bad input gets a clear error and a non-zero exit', async () => {
    const badId = await cli(['send', '../etc', 'x']);
    expect(badId.code).toBe(1);
    expect(badId.stderr).toMatch(/INVALID_SESSION_ID/);
    const badSeq = await cli(['sessions', 'fork', 'cli-1', '--at', '-3']);
    expect(badSeq.code).not.toBe(0);
    const missing = await cli(['sessions', 'history', 'no-such-session']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/SESSION_NOT_FOUND/);
  });

  it('after Ctrl-C and a second dev, the session is intact and keeps answering', async () => {
    await stopDev();
    expect(devLog).toMatch(/Stopped\./);
    await startDev();
    const reply = await cli(['send', 'cli-1', 'still there?']);
    expect(reply.stdout.trim()).toBe('echo: still there?');
    const history = JSON.parse((await cli(['--json', 'sessions', 'history', 'cli-1'])).stdout) as unknown[];
    expect(history).toHaveLength(4);
  }, 300_000);
});
