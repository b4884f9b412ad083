/**
 * MCP servers as tool sources of a worker (DESIGN §5.4, issue 51), against MCP servers nobody
 * here wrote, from the npm registry: `@modelcontextprotocol/server-everything` and
 * `@modelcontextprotocol/server-filesystem` over stdio, and a Streamable HTTP server built with the
 * official SDK in the test (test/support/mcp-http-server.ts). The real stack (Temporal dev server,
 * SQLite, the offline model over HTTP scripted to call the tools, an in-process worker): tools are
 * listed and logged in the request header, called and logged as tool/call and tool/result (an
 * image as an image block), a list_changed reaches the next step's header, a server killed
 * mid-call, a hung one and a destructive tool's approval each end as the log says, and the
 * session serves the next turn.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runtimeOptions } from '../../src/cli/runtime.js';
import { ConfigError, resolveConfig } from '../../src/config.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import {
  isEventOfType,
  type JsonValue,
  type KnownEventType,
  type SessionEvent,
  type StoredEvent,
  type ToolResultBlock,
} from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import type { McpServerConfig } from '../../src/tools/mcp/index.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { createWorker, resolveWorkerOptions } from '../../src/worker.js';
import { startTestMcpServer, type TestMcpServer } from '../support/mcp-http-server.js';
import { eventually, waitForEvent } from '../support/log-wait.js';
import { startStack, temporalAddress, type Stack } from '../support/stack.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const FILESYSTEM = join(ROOT, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');
/** server-everything behind a proxy that garbles two of its answers (test/fixtures/mcp-garbage-proxy.mjs). */
const GARBAGE = join(ROOT, 'test/fixtures/mcp-garbage-proxy.mjs');
const TAP = join(ROOT, 'test/fixtures/mcp-tap.mjs');

const ofType = <K extends KnownEventType>(events: readonly StoredEvent[], type: K): Array<SessionEvent<K>> =>
  events.flatMap((e) => (isEventOfType(e, type) ? [e] : []));
const resultOf = (event: SessionEvent<'tool/result'>): ToolResultBlock => event.data.message.content[0];
const textOf = (block: ToolResultBlock): string => block.content.map((b) => (b.type === 'text' ? b.text : '')).join('');

let stack: Stack;
let web: TestMcpServer;
let dir: string;
let pidFile: string;
let tapDir: string;
/** How many calls of `tool` the tapped server has been handed. */
function callsReached(tool: string): number {
  const log = join(tapDir, 'calls.log');
  return existsSync(log)
    ? readFileSync(log, 'utf8')
        .split('\n')
        .filter((name) => name === tool).length
    : 0;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-mcp-'));
  tapDir = join(dir, 'tap');
  mkdirSync(tapDir);
  pidFile = join(tapDir, 'server.pid');
  writeFileSync(join(dir, 'notes.txt'), 'the MCP filesystem server read this line\n');
  web = await startTestMcpServer();
  const servers: McpServerConfig[] = [
    // Through a tap, so the test learns the server's pid and when a call has reached it, and can kill it mid-call.
    { name: 'everything', command: process.execPath, args: [TAP, tapDir, EVERYTHING, 'stdio'] },
    { name: 'fs', command: process.execPath, args: [FILESYSTEM, dir] },
    { name: 'web', url: web.url, timeoutMs: 1500 },
    // The same server under another name with the default timeout, for a turn cancelled mid-call.
    { name: 'patient', url: web.url },
    { name: 'garbage', command: process.execPath, args: [GARBAGE, EVERYTHING], timeoutMs: 1500 },
    // The same server again with a media limit below its tiny image's size.
    { name: 'small', command: process.execPath, args: [EVERYTHING, 'stdio'], maxMediaBytes: 64 },
  ];
  stack = await startStack({ worker: { mcpServers: servers } });
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await web?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => stack.fake.reset());

let counter = 0;
const sessionName = (name: string) => `mcp-${name}-${Date.now()}-${counter++}`;

/** Scripts one tool call (then a closing text reply) and runs the turn; returns the turn's tool/result. */
async function callOnce(
  sessionId: string,
  tool: string,
  args: { [key: string]: JsonValue },
): Promise<SessionEvent<'tool/result'>> {
  const callId = `call-${counter++}`;
  stack.fake.enqueueReplies(
    { text: `Calling ${tool}.`, toolCalls: [{ id: callId, name: tool, arguments: args }] },
    { text: 'done' },
  );
  const reply = await stack.client.send(sessionId, `please use ${tool}`);
  expect(reply.outcome).toBe('completed');
  const events = await stack.client.events(sessionId);
  return ofType(events, 'tool/result').find((e) => resultOf(e).toolCallId === callId)!;
}

describe('MCP tools over stdio and Streamable HTTP', () => {
  it('lists every server’s tools namespaced by server, offers them to the model and logs them in the request header', async () => {
    const id = sessionName('list');
    const reply = await stack.client.send(id, 'hello');
    expect(reply.outcome).toBe('completed');
    const header = ofType(await stack.client.events(id), 'request/header')[0]!;
    const names = (header.data.header.tools ?? []).map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'calculator',
        'everything__echo',
        'everything__get-sum',
        'everything__get-tiny-image',
        'fs__read_text_file',
        'fs__write_file',
        'web__greet',
        'web__hang',
      ]),
    );
    for (const name of names) expect(name).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    const echo = header.data.header.tools!.find((t) => t.name === 'everything__echo')!;
    expect(echo.description).toContain('MCP server everything');
    expect(echo.parameters).toMatchObject({ type: 'object', properties: { message: { type: 'string' } } });
    // The model was sent the same tools.
    const sent = stack.fake.chatRequests()[0]!.tools!.map((t) => t.function.name);
    expect(sent).toEqual(names);
  }, 60_000);

  it('runs echo and get-sum of server-everything inside the tool step and logs tool/call and tool/result', async () => {
    const id = sessionName('echo');
    const echo = await callOnce(id, 'everything__echo', { message: 'durable hello' });
    expect(textOf(resultOf(echo))).toBe('Echo: durable hello');
    expect(resultOf(echo).isError).toBeUndefined();
    const sum = await callOnce(id, 'everything__get-sum', { a: 19, b: 23 });
    expect(textOf(resultOf(sum))).toContain('42');
    const calls = ofType(await stack.client.events(id), 'tool/call');
    expect(calls.map((c) => [c.data.name, JSON.parse(c.data.arguments) as unknown])).toEqual([
      ['everything__echo', { message: 'durable hello' }],
      ['everything__get-sum', { a: 19, b: 23 }],
    ]);
  }, 60_000);

  it('turns the image of get-tiny-image into an image block whose stored bytes are the PNG the server sent', async () => {
    const id = sessionName('image');
    const result = await callOnce(id, 'everything__get-tiny-image', {});
    const blocks = resultOf(result).content;
    const image = blocks.find((b) => b.type === 'image');
    expect(image).toMatchObject({
      type: 'image',
      source: { kind: 'artifact', mediaType: 'image/png', locator: expect.stringMatching(/^artifact:/) },
    });
    const source = (image as { source: { locator: string; bytes: number; width?: number } }).source;
    const bytes = await stack.store.artifacts.readMedia(id, source.locator);
    expect(bytes.byteLength).toBe(source.bytes);
    expect(Buffer.from(bytes.subarray(1, 4)).toString('latin1')).toBe('PNG');
    expect(source.width).toBeGreaterThan(0);
    // The text around the image is kept as text.
    expect(textOf(resultOf(result)).length).toBeGreaterThan(0);
    expect(JSON.stringify(result.data)).not.toContain('iVBOR');
  }, 60_000);

  it("leaves out an image above the server's maxMediaBytes with a note", async () => {
    const id = sessionName('image-limit');
    const result = await callOnce(id, 'small__get-tiny-image', {});
    expect(resultOf(result).content.some((b) => b.type === 'image')).toBe(false);
    expect(textOf(resultOf(result))).toMatch(/image was left out: .*64/);
  }, 60_000);

  it('reads a file of a temporary directory through server-filesystem', async () => {
    const id = sessionName('fs');
    const result = await callOnce(id, 'fs__read_text_file', { path: join(dir, 'notes.txt') });
    expect(textOf(resultOf(result))).toContain('the MCP filesystem server read this line');
    // Outside the allowed directory the server refuses, and the model reads the refusal.
    const refused = await callOnce(id, 'fs__read_text_file', { path: '/etc/hostname' });
    expect(resultOf(refused).isError).toBe(true);
    expect(textOf(resultOf(refused))).toMatch(/denied|outside|not allowed/i);
  }, 60_000);

  it('calls a tool of the Streamable HTTP server, and a tool it adds later (notifications/tools/list_changed) is in the next step’s header and callable', async () => {
    const id = sessionName('http');
    const greet = await callOnce(id, 'web__greet', { who: 'temporal' });
    expect(textOf(resultOf(greet))).toBe('hello, temporal');
    const before = ofType(await stack.client.events(id), 'request/header').at(-1)!;
    expect(before.data.header.tools!.map((t) => t.name)).not.toContain('web__late_arrival');

    web.addTool('late_arrival', 'arrived after the start');
    await eventually(async () => (stack.worker ? await hasTool('web__late_arrival') : undefined), 15_000, 100);
    const late = await callOnce(id, 'web__late_arrival', {});
    expect(textOf(resultOf(late))).toBe('arrived after the start');
    const headers = ofType(await stack.client.events(id), 'request/header');
    const last = headers.at(-1)!;
    expect(last.data.reason).toBe('change');
    expect(last.data.header.tools!.map((t) => t.name)).toContain('web__late_arrival');
  }, 60_000);

  it('answers a call whose stdio server is killed mid-call with an error result; the next turn starts the server again', async () => {
    const { sessionId: id } = await stack.client.start({ sessionId: sessionName('killed') });
    const callId = `call-killed-${counter++}`;
    stack.fake.enqueueReplies(
      {
        text: 'A long one.',
        toolCalls: [
          { id: callId, name: 'everything__trigger-long-running-operation', arguments: { duration: 60, steps: 60 } },
        ],
      },
      { text: 'the server died' },
    );
    const oldPid = Number(readFileSync(pidFile, 'utf8'));
    const reached = callsReached('trigger-long-running-operation');
    const reply = stack.client.send(id, 'run the long operation');
    // Killed once the server has been handed the call (the tap says so), not before.
    await eventually(
      async () => (callsReached('trigger-long-running-operation') > reached ? true : undefined),
      60_000,
      20,
    );
    process.kill(oldPid, 'SIGKILL');
    const done = await reply;
    expect(done.outcome).toBe('completed');
    expect(done.text).toBe('the server died');
    const result = ofType(await stack.client.events(id), 'tool/result').at(-1)!;
    expect(resultOf(result).isError).toBe(true);
    expect(result.data.error).toMatchObject({ code: 'MCP_SERVER_UNAVAILABLE' });
    expect(textOf(resultOf(result))).toContain('MCP server "everything" went away');

    const echo = await callOnce(id, 'everything__echo', { message: 'back again' });
    expect(textOf(resultOf(echo))).toBe('Echo: back again');
    const newPid = Number(readFileSync(pidFile, 'utf8'));
    expect(newPid).not.toBe(oldPid);
  }, 90_000);

  it('answers a call of a hung server with a timeout error result and sends notifications/cancelled', async () => {
    const id = sessionName('hung');
    const result = await callOnce(id, 'web__hang', {});
    expect(resultOf(result).isError).toBe(true);
    expect(result.data.error).toMatchObject({ code: 'MCP_TIMEOUT' });
    expect(textOf(resultOf(result))).toContain('did not answer the call of hang within 1500 ms');
    // The server heard the cancellation (its handler's signal aborted).
    await eventually(async () => (web.cancelled.length > 0 ? true : undefined), 10_000, 50);
    expect(web.cancelled[0]!.tool).toBe('hang');
    const next = await stack.client.send(id, 'still there?');
    expect(next.outcome).toBe('completed');
  }, 60_000);

  it('answers a call whose server answers garbage with an error result, and the session serves the next turn', async () => {
    const id = sessionName('garbage');
    const notAResult = await callOnce(id, 'garbage__echo', { message: 'x' });
    expect(resultOf(notAResult).isError).toBe(true);
    expect(notAResult.data.error).toMatchObject({ code: 'MCP_BAD_RESPONSE' });
    expect(textOf(resultOf(notAResult))).toContain(
      'answered the call of echo with something that is not an MCP tool result',
    );
    // A line that is not JSON-RPC at all leaves the call unanswered: its timeout ends it.
    const notJson = await callOnce(id, 'garbage__get-sum', { a: 1, b: 2 });
    expect(notJson.data.error).toMatchObject({ code: 'MCP_TIMEOUT' });
    const echo = await callOnce(id, 'everything__echo', { message: 'still serving' });
    expect(textOf(resultOf(echo))).toBe('Echo: still serving');
  }, 60_000);

  it('sends notifications/cancelled when the turn is cancelled during a call, and the turn ends aborted', async () => {
    const { sessionId: id } = await stack.client.start({ sessionId: sessionName('cancel') });
    const before = web.cancelled.length;
    const hangsBefore = web.runs.get('hang') ?? 0;
    stack.fake.enqueueReplies({
      text: 'Waiting.',
      toolCalls: [{ id: 'call-cancel', name: 'patient__hang', arguments: {} }],
    });
    const reply = stack.client.send(id, 'wait forever');
    // The server has the call once it counted it.
    await eventually(async () => ((web.runs.get('hang') ?? 0) > hangsBefore ? true : undefined), 20_000, 50);
    expect(await stack.client.cancel(id)).toBe(true);
    const done = await reply;
    expect(done.outcome).not.toBe('completed');
    await eventually(async () => (web.cancelled.length > before ? true : undefined), 10_000, 50);
    const ends = ofType(await stack.client.events(id), 'turn/end');
    expect(ends.map((e) => e.data.reason.kind)).toEqual(['aborted']);
    expect((await stack.client.send(id, 'and now?')).outcome).toBe('completed');
  }, 60_000);

  it('makes a destructive tool (write_file) wait for approval, and runs it once approved', async () => {
    const { sessionId: id } = await stack.client.start({ sessionId: sessionName('approve') });
    const target = join(dir, 'written.txt');
    stack.fake.enqueueReplies(
      {
        text: 'Writing.',
        toolCalls: [
          { id: 'call-write', name: 'fs__write_file', arguments: { path: target, content: 'approved text' } },
        ],
      },
      { text: 'written' },
    );
    const reply = stack.client.send(id, 'write the file');
    const request = (await waitForEvent(
      stack.client,
      id,
      (e) => e.type === 'tool/approval-request',
    )) as SessionEvent<'tool/approval-request'>;
    expect(request.data).toMatchObject({ callId: 'call-write', tool: 'fs__write_file', kind: 'approval' });
    expect(existsSync(target)).toBe(false);
    // A read-only tool of the same server did not ask (the test above ran read_text_file unanswered).
    await stack.client.approve(id, 'call-write', { decision: 'approve' });
    expect((await reply).outcome).toBe('completed');
    expect(readFileSync(target, 'utf8')).toBe('approved text');
  }, 60_000);
});

describe('bad MCP settings at worker start', () => {
  const base = () => ({
    store: stack.store,
    model: createOpenAIProvider({ baseURL: stack.fake.baseURL, apiKey: 'k', provider: 'fake' }),
    agent: { model: 'fake', tools: [] },
  });

  it('names the setting and field of a missing command, a non-http(s) URL and a duplicate server name', () => {
    const resolve = (mcpServers: unknown) => () =>
      resolveWorkerOptions({ ...base(), mcpServers: mcpServers as McpServerConfig[] });
    expect(resolve([{ name: 'gone', command: 'no-such-mcp-server-here' }])).toThrow(
      /mcpServers\[0\]\.command "no-such-mcp-server-here" was not found on PATH/,
    );
    expect(resolve([{ name: 'ftp', url: 'ftp://example.com/mcp' }])).toThrow(
      /mcpServers\[0\]\.url "ftp:\/\/example\.com\/mcp" is not an http\(s\) URL/,
    );
    expect(
      resolve([
        { name: 'twice', url: 'http://127.0.0.1:1/mcp' },
        { name: 'twice', url: 'http://127.0.0.1:2/mcp' },
      ]),
    ).toThrow(/mcpServers\[1\]\.name names the server "twice" a second time/);
    expect(resolve([{ name: 'a__b', url: 'http://127.0.0.1:1/mcp' }])).toThrow(/mcpServers\[0\]\.name must be/);
    expect(resolve([{ name: 'both', url: 'http://x', command: 'sh' }])).toThrow(/mcpServers\[0\] must be an object/);
  });

  it('refuses SESSIONLOG_MCP_SERVERS that is not JSON or names a missing command, naming the variable', () => {
    expect(() => resolveConfig({ SESSIONLOG_MCP_SERVERS: '[{' })).toThrow(ConfigError);
    expect(() => resolveConfig({ SESSIONLOG_MCP_SERVERS: '[{' })).toThrow(/SESSIONLOG_MCP_SERVERS is not JSON/);
    expect(() =>
      resolveConfig({ SESSIONLOG_MCP_SERVERS: JSON.stringify([{ name: 'x', command: 'no-such-mcp-server-here' }]) }),
    ).toThrow(/SESSIONLOG_MCP_SERVERS\[0\]\.command/);
    const ok = resolveConfig({ SESSIONLOG_MCP_SERVERS: JSON.stringify([{ name: 'web', url: web.url }]) });
    expect(ok.mcpServers).toEqual([{ name: 'web', url: web.url }]);
    // `sessionlog worker` hands them to createWorker, with the media limit of SESSIONLOG_MAX_MEDIA_BYTES
    // unless a server sets its own.
    const parts = { connection: undefined as never, store: stack.store, model: base().model };
    expect(runtimeOptions(ok).worker(parts).mcpServers).toEqual([
      { name: 'web', url: web.url, maxMediaBytes: ok.media.maxBytes },
    ]);
    const limited = resolveConfig({
      SESSIONLOG_MAX_MEDIA_BYTES: '4096',
      SESSIONLOG_MCP_SERVERS: JSON.stringify([
        { name: 'web', url: web.url },
        { name: 'own', url: web.url, maxMediaBytes: 100 },
      ]),
    });
    expect(runtimeOptions(limited).worker(parts).mcpServers).toEqual([
      { name: 'web', url: web.url, maxMediaBytes: 4096 },
      { name: 'own', url: web.url, maxMediaBytes: 100 },
    ]);
  });

  it('starts a worker whose HTTP server is down, warning with the setting and server named', async () => {
    const warnings: string[] = [];
    const listen = (warning: Error) => warnings.push(warning.message);
    process.on('warning', listen);
    const worker = await createWorker({
      ...base(),
      address: temporalAddress(),
      taskQueue: `mcp-down-${Date.now()}`,
      mcpServers: [{ name: 'down', url: 'http://127.0.0.1:1/mcp' }],
    });
    const run = worker.run();
    worker.shutdown();
    await run;
    process.off('warning', listen);
    expect(warnings.some((w) => w.startsWith('mcpServers: MCP server "down" could not be reached'))).toBe(true);
  });

  it('fails the start when a server’s tool would take the name of a registered tool', async () => {
    const clash = { ...BUILTIN_TOOLS.find((t) => t.name === 'calculator')!, name: 'web__greet' };
    await expect(
      createWorker({
        ...base(),
        address: temporalAddress(),
        taskQueue: `mcp-clash-${Date.now()}`,
        tools: new ToolRegistry([clash]),
        mcpServers: [{ name: 'web', url: web.url }],
      }),
    ).rejects.toThrow(
      /mcpServers: the tool "greet" of MCP server "web" would be named "web__greet", which another tool already has/,
    );
  });
});

/** Whether a fresh session's first request header offers `name`. */
async function hasTool(name: string): Promise<true | undefined> {
  const id = sessionName('probe');
  await stack.client.send(id, 'probe');
  const header = ofType(await stack.client.events(id), 'request/header')[0]!;
  return header.data.header.tools!.some((t) => t.name === name) ? true : undefined;
}
