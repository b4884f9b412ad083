/**
 * The examples run against the in-process stack (real Temporal, a worker, the fake model), so
 * an API change that breaks them fails here instead of rotting in examples/.
 */
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runExample } from '../../examples/backend-service.js';
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

  it('is an OpenAI SDK program that only changes baseURL', () => {
    const source = readFileSync(scriptPath, 'utf8');
    expect(source).toMatch(/new OpenAI\(\{\s*\/\/[^\n]*\n\s*baseURL: [^\n]*,\n\}\)/);
    expect(source).not.toMatch(/from '\.\.\/src/);
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
      const child = execFile(process.execPath, ['--import', 'tsx', scriptPath], {
        env: {
          ...process.env,
          SESSIONLOG_OPENAI_URL: `${gateway.url}/openai/v1`,
          OPENAI_API_KEY: token,
          OPENAI_MODEL: 'fake',
        },
        timeout: 60_000,
      });
      child.stdin!.end('Hello, durable world\nWhat did I say?\n');
      const stdout = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
        child.once('exit', (code) =>
          code === 0 ? resolve(out) : reject(new Error(`openai-chat exited with ${code}:\n${out}`)),
        );
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
