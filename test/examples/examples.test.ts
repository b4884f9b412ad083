/**
 * The examples run against the in-process stack (real Temporal, a worker, the fake model), so
 * an API change that breaks them fails here instead of rotting in examples/.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runExample } from '../../examples/backend-service.js';
import { findDev } from '../../examples/find-dev.js';
import { NATIVE_ROUTES, startGateway } from '../../src/gateway/index.js';
import { startStack, type Stack } from '../support/stack.js';

const execFileAsync = promisify(execFile);

function commandExists(command: string): boolean {
  try {
    execFileSync(command, ['--version'], { stdio: 'ignore' });
    return true;
  } catch (error) {
    // Not installed (ENOENT) or not runnable: the test that needs it is skipped.
    void error;
    return false;
  }
}
const hasCurl = commandExists('curl');

/** The environment of a user who set nothing: no key, no gateway, no data folder named. */
function bareEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of [
    'OPENAI_API_KEY',
    'GATEWAY',
    'SESSIONLOG_GATEWAY_TOKEN',
    'SESSIONLOG_HOME',
    'SESSIONLOG_OPENAI_URL',
  ])
    delete env[key];
  return { ...env, ...extra };
}

/**
 * A scratch folder whose .sessionlog/dev.json says a `sessionlog dev` runs (this test process's
 * pid) with `gatewayUrl`, as dev writes it; returns a folder two levels below it.
 */
function devFolder(gatewayUrl: string): { root: string; below: string } {
  const root = mkdtempSync(join(tmpdir(), 'sessionlog-examples-dev-'));
  mkdirSync(join(root, '.sessionlog'));
  writeFileSync(
    join(root, '.sessionlog', 'dev.json'),
    JSON.stringify({
      pid: process.pid,
      temporalAddress: '127.0.0.1:1',
      gatewayUrl,
      store: 'sqlite::memory:',
      startedAt: 0,
    }),
  );
  const below = join(root, 'app', 'src');
  mkdirSync(below, { recursive: true });
  return { root, below };
}

/** tsx's loader by absolute URL, so an example runs with tsx from any folder. */
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.close();
});

describe('examples/backend-service.ts', () => {
  it('starts a session, streams the reply tokens while send runs, and reads back the history', async () => {
    const long = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    // A matcher rather than a queued reply: a retried model call gets the same answer.
    stack.fake.setMatcher(({ lastUserText }) => (lastUserText === 'say forty words' ? { text: long } : undefined));
    stack.fake.configure({ tokenDelayMs: 5 });
    const lines: string[] = [];
    const result = await runExample(stack.client, (line) => lines.push(line), { text: 'say forty words' });
    stack.fake.setMatcher(undefined);

    expect(result.reply.outcome).toBe('completed');
    expect(result.reply.text).toBe(long);
    // Every token the reply is made of arrived through follow, in order, as more than one chunk.
    expect(result.streamed).toBe(long);
    const chunks = (await stack.store.readFrom(result.sessionId, 0)).filter((e) => e.type === 'assistant/chunk');
    expect(chunks.length).toBeGreaterThan(1);
    expect(result.history.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(lines[0]).toBe(`session ${result.sessionId}`);
    expect(lines).toContain(`turn ${result.reply.turn} completed: ${long}`);
    expect(lines.at(-1)).toBe(`  assistant: ${long}`);
  });

  it('continues an existing session when given its id', async () => {
    const first = await runExample(stack.client, () => undefined, { text: 'first' });
    const second = await runExample(stack.client, () => undefined, { sessionId: first.sessionId, text: 'second' });
    expect(second.sessionId).toBe(first.sessionId);
    expect(second.reply.turn).toBeGreaterThan(first.reply.turn);
    expect(second.streamed).toBe(second.reply.text);
    expect(second.history.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
  });
});

describe('examples/openai-chat.ts', () => {
  const scriptPath = fileURLToPath(new URL('../../examples/openai-chat.ts', import.meta.url));

  it('is an OpenAI SDK program that only changes baseURL and the key (the gateway token)', () => {
    const source = readFileSync(scriptPath, 'utf8');
    expect(source).toMatch(/new OpenAI\(\{\s*\/\/[^\n]*\n\s*baseURL: [^\n]*,\n\s*apiKey: [^\n]*,\n\}\)/);
    expect(source).not.toMatch(/from '\.\.\/src/);
  });

  /** Runs the example with `input` on stdin; resolves with its output, or rejects with it. */
  function runOpenAIChat(input: string, options: { env: NodeJS.ProcessEnv; cwd?: string }): Promise<string> {
    const child = spawn(process.execPath, ['--import', TSX_LOADER, scriptPath], {
      env: options.env,
      cwd: options.cwd ?? process.cwd(),
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: 60_000,
    });
    child.stdin.end(input);
    return new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
      child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
      child.once('exit', (code) =>
        code === 0 ? resolve(out) : reject(new Error(`openai-chat exited with ${code}:\n${out}`)),
      );
    });
  }

  it("finds the running dev's gateway (any port) from a folder below it, and needs no OPENAI_API_KEY", async () => {
    const gateway = await startGateway({
      client: stack.client,
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 64 * 1024,
      defaultAgent: { model: 'fake' },
    });
    try {
      const { below } = devFolder(gateway.url);
      const stdout = await runOpenAIChat('Found you\n', { env: bareEnv({ OPENAI_MODEL: 'fake' }), cwd: below });
      expect(stdout).not.toMatch(/Missing credentials/);
      expect(stdout).toContain('echo: Found you\n[completed;');
      const conversationId = /^conversation (\S+)$/m.exec(stdout)![1]!;
      const history = await stack.client.history(conversationId);
      expect(history.map((m) => m.role)).toEqual(['user', 'assistant']);
    } finally {
      await gateway.close();
    }
  });

  it('chats through a token-protected gateway: streams each reply, and the conversation is a session whose log holds the turns', async () => {
    const token = 'openai-example-token-0123456789';
    const gateway = await startGateway({
      client: stack.client,
      token,
      host: '127.0.0.1',
      port: 0,
      bodyLimitBytes: 64 * 1024,
      defaultAgent: { model: 'fake' },
    });
    try {
      const stdout = await runOpenAIChat('Hello, durable world\nWhat did I say?\n', {
        env: bareEnv({ GATEWAY: gateway.url, SESSIONLOG_GATEWAY_TOKEN: token, OPENAI_MODEL: 'fake' }),
      });
      const conversationId = /^conversation (\S+)$/m.exec(stdout)![1]!;
      expect(stdout).toContain('echo: Hello, durable world\n[completed;');
      expect(stdout).toContain('echo: What did I say?\n[completed;');
      expect(stdout).toContain(
        'history:\n  user: Hello, durable world\n  assistant: echo: Hello, durable world\n  user: What did I say?\n  assistant: echo: What did I say?\n',
      );
      const history = await stack.client.history(conversationId);
      expect(history.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    } finally {
      await gateway.close();
    }
  });
});

describe('examples/http-client.sh', () => {
  const scriptPath = fileURLToPath(new URL('../../examples/http-client.sh', import.meta.url));
  const script = readFileSync(scriptPath, 'utf8');

  it('calls only routes the gateway serves', () => {
    const served = NATIVE_ROUTES.map((r) => `${r.method} ${r.path.replace(/:id/g, 'ID')}`);
    const called = [...script.matchAll(/curl[^\n]*?-X (GET|POST) "\$GATEWAY(\/v1\/[^"?]*)/g)].map(
      ([, method, path]) => `${method} ${path!.replace(/\$SESSION_ID/g, 'ID')}`,
    );
    expect(called).toEqual([
      'POST /v1/sessions',
      'GET /v1/sessions/ID/events',
      'POST /v1/sessions/ID/messages',
      'GET /v1/sessions/ID/messages',
      'GET /v1/sessions/ID/events',
    ]);
    for (const call of called) expect(served).toContain(call);
  });

  it.skipIf(!hasCurl)(
    'runs against a token-protected gateway: creates the session, streams its events, gets the reply and the history',
    async () => {
      const token = 'example-token-0123456789';
      const gateway = await startGateway({
        client: stack.client,
        token,
        host: '127.0.0.1',
        port: 0,
        bodyLimitBytes: 64 * 1024,
      });
      try {
        const sessionId = `http-example-${Date.now()}`;
        const { stdout } = await execFileAsync('bash', [scriptPath, 'hello "quoted" script'], {
          env: { ...process.env, GATEWAY: gateway.url, SESSIONLOG_GATEWAY_TOKEN: token, SESSION_ID: sessionId },
          timeout: 60_000,
        });
        expect(stdout).toContain(`"id":"${sessionId}"`);
        expect(stdout).toContain('  event: assistant/chunk');
        expect(stdout).toContain('  event: turn/end');
        expect(stdout).toContain('"outcome":"completed"');
        expect(stdout).toContain('echo: hello \\"quoted\\" script');
        const history = await stack.client.history(sessionId);
        expect(history.map((m) => m.role)).toEqual(['user', 'assistant']);
      } finally {
        await gateway.close();
      }
    },
  );
});

describe('examples/http-client.sh finding the gateway', () => {
  const scriptPath = fileURLToPath(new URL('../../examples/http-client.sh', import.meta.url));

  it.skipIf(!hasCurl)("without GATEWAY, talks to the running dev's gateway found from a folder below it", async () => {
    const gateway = await startGateway({ client: stack.client, host: '127.0.0.1', port: 0, bodyLimitBytes: 64 * 1024 });
    try {
      const { below } = devFolder(gateway.url);
      const sessionId = `http-found-${Date.now()}`;
      const { stdout } = await execFileAsync('bash', [scriptPath, 'found by dev.json'], {
        env: bareEnv({ SESSION_ID: sessionId }),
        cwd: below,
        timeout: 60_000,
      });
      expect(stdout).toContain('echo: found by dev.json');
      expect((await stack.client.history(sessionId)).map((m) => m.role)).toEqual(['user', 'assistant']);
    } finally {
      await gateway.close();
    }
  });
});

describe('examples/find-dev.ts: the running dev, found as the CLI finds it', () => {
  it('is the nearest .sessionlog/dev.json above the folder whose dev still runs', () => {
    const { root, below } = devFolder('http://127.0.0.1:1111');
    expect(findDev({}, below)?.gatewayUrl).toBe('http://127.0.0.1:1111');
    // A dev.json nearer by, left by a dev that has stopped, is passed over.
    mkdirSync(join(root, 'app', '.sessionlog'));
    writeFileSync(
      join(root, 'app', '.sessionlog', 'dev.json'),
      JSON.stringify({ pid: 2 ** 22 + 12345, gatewayUrl: 'http://127.0.0.1:2222' }),
    );
    expect(findDev({}, below)?.gatewayUrl).toBe('http://127.0.0.1:1111');
  });

  it("with SESSIONLOG_HOME, is that folder's dev and no other", () => {
    const { root } = devFolder('http://127.0.0.1:3333');
    const elsewhere = mkdtempSync(join(tmpdir(), 'sessionlog-examples-elsewhere-'));
    expect(findDev({ SESSIONLOG_HOME: join(root, '.sessionlog') }, elsewhere)?.gatewayUrl).toBe(
      'http://127.0.0.1:3333',
    );
    expect(findDev({ SESSIONLOG_HOME: elsewhere }, join(root, 'app', 'src'))).toBeUndefined();
  });
});
