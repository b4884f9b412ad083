/**
 * MCP tool calls inside a turn against calling the same server directly (issue 51): the
 * per-call overhead sessionlog adds to an MCP stdio tool call. One process, one run:
 *
 * - direct: the official MCP SDK client over stdio to `@modelcontextprotocol/server-everything`,
 *   `echo` called `--calls` times one after another (the floor: the server and the transport);
 * - in a turn: a sessionlog worker with the same server as its tool source (`mcpServers`), the
 *   offline model scripted to call `everything__echo` once per turn; beside it, turns of the same
 *   session that call no tool, interleaved, so the difference is what one call costs a turn (a
 *   second model step included, as it is for any tool call);
 * - from the log: the time between the logged `tool/call` and its `tool/result` (the tool
 *   activity scheduled, the MCP call, its output stored, the result appended), and the same for
 *   the built-in `calculator` in turns of the same session: what any tool step costs, so the
 *   difference is what going through MCP adds inside the step.
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/mcp.ts [--calls 200] [--turns 40]
 *
 * Needs TEMPORAL_ADDRESS (the command above provides a private dev server).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { SessionClient } from '../src/client/session-client.js';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { createOpenAIProvider } from '../src/model/provider.js';
import { openSqliteStore } from '../src/persistence/index.js';
import { isEventOfType, type StoredEvent } from '../src/session/index.js';
import { createWorker } from '../src/worker.js';
import { fmtMs, machineLine, median, percentile, printTable, since } from './support/report.js';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '200' },
    turns: { type: 'string', default: '40' },
    warmup: { type: 'string', default: '5' },
  },
});
const CALLS = Number(values.calls);
const TURNS = Number(values.turns);
const WARMUP = Number(values.warmup);
const ADDRESS = process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
const EVERYTHING = fileURLToPath(
  new URL('../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url),
);
const SERVER = { command: process.execPath, args: [EVERYTHING, 'stdio'] };

Runtime.install({ logger: new DefaultLogger('WARN') });

/** Median and p95 of `calls` direct `echo` calls through the SDK's stdio client. */
async function direct(): Promise<number[]> {
  const client = new McpClient({ name: 'bench-direct', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ ...SERVER, stderr: 'ignore' }));
  try {
    for (let i = 0; i < WARMUP * 4; i++) await client.callTool({ name: 'echo', arguments: { message: 'warm' } });
    const times: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      const start = performance.now();
      await client.callTool({ name: 'echo', arguments: { message: `call ${i}` } });
      times.push(since(start));
    }
    return times;
  } finally {
    await client.close();
  }
}

type TurnTimes = { plain: number[]; withCall: number[]; logged: number[]; loggedBuiltin: number[] };

/** Interleaved turns with and without one `everything__echo` call on an in-process worker. */
async function inTurns(): Promise<TurnTimes> {
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-mcp-'));
  const store = openSqliteStore(join(dir, 'sessions.db'));
  const fake = await startFakeModelServer({});
  const taskQueue = `bench-mcp-${randomUUID()}`;
  const worker = await createWorker({
    connection: await NativeConnection.connect({ address: ADDRESS }),
    taskQueue,
    store,
    model: createOpenAIProvider({ baseURL: fake.baseURL, apiKey: 'bench-key', provider: 'fake', timeoutMs: 30_000 }),
    agent: { model: 'fake', system: 'You are a test assistant.', tools: ['calculator'] },
    context: false,
    pacing: false,
    mcpServers: [{ name: 'everything', ...SERVER }],
  });
  const run = worker.run();
  const connection = await Connection.connect({ address: ADDRESS });
  const client = new SessionClient({ temporal: new Client({ connection }), store, taskQueue });
  const times: TurnTimes = { plain: [], withCall: [], logged: [], loggedBuiltin: [] };
  try {
    const id = `bench-mcp-${randomUUID().slice(0, 8)}`;
    await client.create({ sessionId: id });
    for (let turn = 0; turn < WARMUP + TURNS; turn++) {
      const measured = turn >= WARMUP;
      // Plain turn.
      fake.enqueueReplies({ text: 'plain reply' });
      let start = performance.now();
      let reply = await client.send(id, `plain ${turn}`);
      if (reply.outcome !== 'completed') throw new Error(`plain turn ${turn}: ${reply.outcome}`);
      if (measured) times.plain.push(since(start));
      // A turn with one MCP call.
      const callId = `call-${turn}`;
      fake.enqueueReplies(
        { text: 'calling', toolCalls: [{ id: callId, name: 'everything__echo', arguments: { message: `t${turn}` } }] },
        { text: 'called' },
      );
      start = performance.now();
      reply = await client.send(id, `call ${turn}`);
      if (reply.outcome !== 'completed') throw new Error(`tool turn ${turn}: ${reply.outcome}`);
      if (measured) times.withCall.push(since(start));
      if (measured) times.logged.push(loggedCallTime(await client.events(id), callId));
      // The same turn with the built-in calculator: what any tool step costs, MCP or not.
      const builtinId = `calc-${turn}`;
      fake.enqueueReplies(
        { text: 'calling', toolCalls: [{ id: builtinId, name: 'calculator', arguments: { expression: '6*7' } }] },
        { text: 'called' },
      );
      reply = await client.send(id, `calculate ${turn}`);
      if (reply.outcome !== 'completed') throw new Error(`calculator turn ${turn}: ${reply.outcome}`);
      if (measured) times.loggedBuiltin.push(loggedCallTime(await client.events(id), builtinId));
    }
    return times;
  } finally {
    worker.shutdown();
    await run;
    await connection.close();
    await fake.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Milliseconds between the logged tool/call of `callId` and its tool/result. */
function loggedCallTime(events: readonly StoredEvent[], callId: string): number {
  const call = events.find((e) => isEventOfType(e, 'tool/call') && e.data.callId === callId);
  const result = events.find((e) => isEventOfType(e, 'tool/result') && e.data.message.content[0].toolCallId === callId);
  if (!call || !result) throw new Error(`call ${callId} is not logged with its result`);
  return result.time - call.time;
}

const directTimes = await direct();
const turnTimes = await inTurns();
const directMedian = median(directTimes);
const perTurn = median(turnTimes.withCall) - median(turnTimes.plain);
const logged = median(turnTimes.logged);
console.log(machineLine());
printTable(
  `MCP stdio tool call (server-everything echo): direct SDK call against one call inside a turn (${CALLS} direct calls, ${TURNS} turns of each kind, interleaved)`,
  [
    { name: 'direct SDK call, median', value: fmtMs(directMedian) },
    { name: 'direct SDK call, p95', value: fmtMs(percentile(directTimes, 95)) },
    { name: 'turn without a tool call, median', value: fmtMs(median(turnTimes.plain)) },
    { name: 'turn with one MCP call, median', value: fmtMs(median(turnTimes.withCall)) },
    { name: 'what one call adds to a turn (median difference; a second model step included)', value: fmtMs(perTurn) },
    { name: 'logged tool/call → tool/result, median', value: fmtMs(logged) },
    { name: 'logged tool/call → tool/result, p95', value: fmtMs(percentile(turnTimes.logged, 95)) },
    {
      name: 'overhead of the tool step over the direct call (logged median − direct median)',
      value: fmtMs(logged - directMedian),
    },
    {
      name: 'logged tool/call → tool/result of the built-in calculator, median (same session)',
      value: fmtMs(median(turnTimes.loggedBuiltin)),
    },
    {
      name: 'an MCP call against a built-in tool in the tool step (logged medians)',
      value: fmtMs(logged - median(turnTimes.loggedBuiltin)),
    },
  ],
);
