/**
 * Prometheus metrics of a real stack (Temporal dev server, SQLite store, the fake model over
 * HTTP): a scripted session through the gateway with a 429 retry, a tool call, a spilled tool
 * output and a manual compaction, then `/metrics` scraped from the gateway and from the
 * worker's operations listener and read with a Prometheus text-format parser. Expected values
 * come from the session's own log (usage, event counts), never from the code under test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPACTION_INSTRUCTION } from '../../src/context/compaction.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { DEFAULT_MODEL_CATALOGUE } from '../../src/model/catalogue.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import type { StoredEvent, TokenUsage } from '../../src/session/index.js';
import { startTelemetry, type Telemetry } from '../../src/telemetry/index.js';
import { startOpsServer, type RunningOpsServer } from '../../src/telemetry/ops-server.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { eventually, waitForEvent } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';
import { histogram, labelValues, names, scrape, value, type Scrape } from './scrape.js';

/** Looks like a provider key: it must never reach a log line or a metric. */
const API_KEY = 'sk-telemetrytest0123456789abcdef';
const PRICES = { input: 2, cachedInput: 0.5, output: 8 };

const dumpTool: Tool = {
  name: 'dump',
  description: 'Return a large text.',
  parameters: { type: 'object', properties: { size: { type: 'integer' } }, required: ['size'] },
  async run(args) {
    return { text: 'z'.repeat((args as { size: number }).size) };
  },
};

/** Waits for a person's approval on every call. */
const deployTool: Tool = {
  name: 'deploy',
  description: 'Deploy to a target.',
  parameters: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
  approval: 'always',
  async run(args) {
    return { text: `deployed to ${(args as { target: string }).target}` };
  },
};

let fake: FakeModelServer;
let stack: Stack;
let workerTelemetry: Telemetry;
let gatewayTelemetry: Telemetry;
let ops: RunningOpsServer;
let gateway: RunningGateway;
const workerLog: string[] = [];
const gatewayLog: string[] = [];

beforeAll(async () => {
  const settings = {
    logLevel: 'info' as const,
    logFormat: 'json' as const,
    otlpEndpoint: undefined,
    captureContent: false,
  };
  workerTelemetry = await startTelemetry(
    { ...settings, serviceName: 'sessionlog-worker' },
    { logDestination: { write: (line: string) => void workerLog.push(line) } },
  );
  gatewayTelemetry = await startTelemetry(
    { ...settings, serviceName: 'sessionlog-gateway' },
    { logDestination: { write: (line: string) => void gatewayLog.push(line) } },
  );
  // Before any Temporal connection of this process: the SDK's worker metrics go to the worker's registry.
  expect(await workerTelemetry.installTemporalRuntime()).toBe(true);

  fake = await startFakeModelServer({ apiKey: API_KEY });
  fake.setMatcher((request) => {
    if (request.lastUserText === COMPACTION_INSTRUCTION)
      return { text: '## Summary\n- the user asked for a calculation and a dump' };
    const last = request.body.messages.at(-1)!;
    if (last.role === 'tool') return { text: 'done' };
    if (request.lastUserText.includes('calculate'))
      return { text: 'calculating', toolCalls: [{ name: 'calculator', arguments: { expression: '6*7' } }] };
    if (request.lastUserText.includes('deploy')) {
      return {
        text: 'deploying',
        toolCalls: [
          { id: 'call_eu', name: 'deploy', arguments: { target: 'eu' } },
          { id: 'call_us', name: 'deploy', arguments: { target: 'us' } },
        ],
      };
    }
    if (request.lastUserText.includes('dump'))
      return { text: 'dumping', toolCalls: [{ name: 'dump', arguments: { size: 3000 } }] };
    return undefined;
  });
  const model = createOpenAIProvider({
    baseURL: fake.baseURL,
    apiKey: API_KEY,
    timeoutMs: 20_000,
    idleTimeoutMs: 20_000,
    provider: 'fake',
    coalesce: { maxDelayMs: 20 },
    // The fake model priced, so each reply logs a cost and the metrics count it.
    catalogue: {
      ...DEFAULT_MODEL_CATALOGUE,
      models: { ...DEFAULT_MODEL_CATALOGUE.models, fake: { ...DEFAULT_MODEL_CATALOGUE.models.fake!, prices: PRICES } },
    },
  });
  stack = await startStack({
    worker: {
      model,
      telemetry: workerTelemetry.engine,
      tools: new ToolRegistry([...BUILTIN_TOOLS, dumpTool, deployTool]),
      agent: {
        model: 'fake',
        system: 'You are a test assistant.',
        tools: ['calculator', 'dump', 'read_artifact', 'deploy'],
      },
      spillMaxInlineBytes: 1_024,
    },
  });
  ops = await startOpsServer({
    host: '127.0.0.1',
    port: 0,
    ready: () => ({ ready: true, checks: {} }),
    routes: workerTelemetry.metricsRoute(),
  });
  gateway = await startGateway({
    client: stack.client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 1 << 20,
    telemetry: gatewayTelemetry.gateway,
  });
});

afterAll(async () => {
  await gateway?.close();
  await ops?.close();
  await stack?.close();
  await fake?.close();
  await workerTelemetry?.shutdown();
  await gatewayTelemetry?.shutdown();
});

async function post(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${gateway.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const ofType = <K extends StoredEvent['type']>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<Extract<StoredEvent, { type: K }>>;

describe('Prometheus metrics after a scripted session', () => {
  const sessionId = `metrics-${Date.now()}`;
  let events: StoredEvent[];
  let worker: Scrape;
  let gatewayScrape: Scrape;
  const prompts = ['hello there, first message', 'please calculate six times seven', 'please dump a lot of text'];

  beforeAll(async () => {
    expect((await post('/v1/sessions', { id: sessionId })).status).toBe(201);
    fake.injectFault({ kind: 'rate_limit', retryAfterSeconds: 1 });
    for (const text of prompts) {
      const reply = await post(`/v1/sessions/${sessionId}/messages?wait=true`, { text });
      expect(reply.status).toBe(200);
      expect(reply.body.outcome).toBe('completed');
    }
    const compacted = await post(`/v1/sessions/${sessionId}/compact`, {});
    expect(compacted.status).toBe(200);
    expect((compacted.body.compaction as { compactionId?: unknown } | null)?.compactionId).toBeTypeOf('string');
    events = await stack.client.events(sessionId);

    // One live SSE follower while the gateway is scraped.
    const follower = new AbortController();
    const stream = await fetch(`${gateway.url}/v1/sessions/${sessionId}/events?from=0`, {
      headers: { accept: 'text/event-stream' },
      signal: follower.signal,
    });
    expect(stream.status).toBe(200);
    await stream.body!.getReader().read();
    gatewayScrape = await scrape(`${gateway.url}/metrics`);
    follower.abort();
    worker = await scrape(`${ops.url}/metrics`);
  });

  it('counts turns by outcome, with one duration sample per turn', () => {
    expect(value(worker, 'sessionlog_turns_started_total')).toBe(3);
    expect(value(worker, 'sessionlog_turns_finished_total', { outcome: 'completed' })).toBe(3);
    expect(labelValues(worker, 'sessionlog_turns_finished_total', 'outcome')).toEqual(['completed']);
    const durations = histogram(worker, 'sessionlog_turn_duration_seconds', { outcome: 'completed' });
    expect(durations.count).toBe(3);
    // The 429's retry-after (1 s) sits inside the first turn.
    expect(durations.sum).toBeGreaterThan(1);
  });

  it('counts model calls by purpose and outcome, the 429 as a retry, and times each call', () => {
    expect(
      value(worker, 'sessionlog_model_calls_total', { model: 'fake', purpose: 'reply', outcome: 'rate_limit' }),
    ).toBe(1);
    expect(value(worker, 'sessionlog_model_calls_total', { model: 'fake', purpose: 'reply', outcome: 'ok' })).toBe(5);
    expect(value(worker, 'sessionlog_model_calls_total', { model: 'fake', purpose: 'summary', outcome: 'ok' })).toBe(1);
    expect(value(worker, 'sessionlog_model_retries_total', { code: 'rate_limit' })).toBe(1);
    expect(ofType(events, 'llm/retry')).toHaveLength(1);
    expect(histogram(worker, 'sessionlog_model_call_duration_seconds', { model: 'fake' }).count).toBe(7);
    // Every successful call streamed, so each has a time to first token; the refused one has none.
    expect(histogram(worker, 'sessionlog_model_time_to_first_token_seconds', { model: 'fake' }).count).toBe(6);
    expect(fake.chatRequests()).toHaveLength(7);
  });

  it('counts the tokens the log records, by kind, and their cost as logged at the catalogue prices', () => {
    const usages: TokenUsage[] = [
      ...ofType(events, 'assistant/message').flatMap((e) => (e.data.usage ? [e.data.usage] : [])),
      ...ofType(events, 'compaction/summary').flatMap((e) => (e.data.usage ? [e.data.usage] : [])),
    ];
    expect(usages).toHaveLength(6);
    const sum = (pick: (u: TokenUsage) => number) => usages.reduce((n, u) => n + pick(u), 0);
    const input = sum((u) => u.inputTokens);
    const cached = sum((u) => u.cacheReadTokens ?? 0);
    const output = sum((u) => u.outputTokens);
    expect(input).toBeGreaterThan(0);
    expect(cached).toBeGreaterThan(0);
    expect(value(worker, 'sessionlog_model_tokens_total', { model: 'fake', kind: 'input' })).toBe(input);
    expect(value(worker, 'sessionlog_model_tokens_total', { model: 'fake', kind: 'cached_input' })).toBe(cached);
    expect(value(worker, 'sessionlog_model_tokens_total', { model: 'fake', kind: 'output' })).toBe(output);
    const usd = (input * PRICES.input + cached * PRICES.cachedInput + output * PRICES.output) / 1_000_000;
    expect(value(worker, 'sessionlog_model_cost_usd_total', { model: 'fake' })).toBeCloseTo(usd, 9);
    // The metric is the sum of the costs logged with the replies and summaries (the session's ledger).
    const logged = [...ofType(events, 'assistant/message'), ...ofType(events, 'compaction/summary')].map(
      (e) => (e.data as { cost?: number }).cost ?? 0,
    );
    expect(logged.filter((cost) => cost > 0)).toHaveLength(6);
    expect(value(worker, 'sessionlog_model_cost_usd_total', { model: 'fake' })).toBeCloseTo(
      logged.reduce((a, b) => a + b, 0),
      12,
    );
  });

  it('counts the tool calls, the spill and the compaction', () => {
    expect(value(worker, 'sessionlog_tool_calls_total', { tool: 'calculator', outcome: 'ok' })).toBe(1);
    expect(value(worker, 'sessionlog_tool_calls_total', { tool: 'dump', outcome: 'ok' })).toBe(1);
    expect(histogram(worker, 'sessionlog_tool_duration_seconds').count).toBe(2);
    expect(value(worker, 'sessionlog_spills_total', { tool: 'dump' })).toBe(1);
    expect(labelValues(worker, 'sessionlog_spills_total', 'tool')).toEqual(['dump']);
    expect(value(worker, 'sessionlog_compactions_total', { trigger: 'manual', outcome: 'ok' })).toBe(1);
    expect(ofType(events, 'compaction/end')).toHaveLength(1);
    expect(value(worker, 'sessionlog_prunes_total')).toBe(0);
    expect(value(worker, 'sessionlog_context_overflows_total')).toBe(0);
  });

  it('times every append by backend and sizes its batch: the batches add up to the whole log', () => {
    const batches = histogram(worker, 'sessionlog_append_batch_events', { backend: 'sqlite' });
    expect(batches.sum).toBe(events.length);
    expect(new Set(events.map((e) => e.op)).size).toBe(batches.count);
    expect(histogram(worker, 'sessionlog_append_duration_seconds', { backend: 'sqlite' }).count).toBe(batches.count);
  });

  it("exposes the Temporal SDK's worker metrics on the same endpoint", () => {
    const temporal = names(worker).filter((name) => name.startsWith('temporal_'));
    expect(temporal.length).toBeGreaterThan(5);
    // Activities ran on this worker: the SDK counted their executions.
    expect(
      histogram(worker, 'temporal_activity_execution_latency', { activity_type: 'modelStep' }).count,
    ).toBeGreaterThanOrEqual(3);
  });

  it('reports the gateway its SSE followers', () => {
    expect(value(worker, 'sessionlog_pending_approvals')).toBe(0);
    expect(value(gatewayScrape, 'sessionlog_sse_clients')).toBe(1);
    expect(gatewayScrape.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    // The gateway's registry is its own: the turns ran on the worker.
    expect(value(gatewayScrape, 'sessionlog_turns_started_total')).toBe(0);
  });

  it('logs a JSON line per turn with session id, turn, run id and activity; no prompt text and no key anywhere', () => {
    const ended = workerLog
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.msg === 'turn ended' && line.sessionId === sessionId);
    expect(ended.map((line) => line.turn)).toEqual([1, 2, 3]);
    for (const line of ended) {
      expect(line).toMatchObject({
        outcome: 'completed',
        name: 'sessionlog-worker',
        activity: expect.stringMatching(/^(modelStep|appendToolResults)$/),
      });
      expect(line.runId).toBeTypeOf('string');
    }
    const retry = workerLog
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((line) => line.msg === 'model call failed; retrying');
    expect(retry).toMatchObject({ sessionId, turn: 1, code: 'rate_limit', activity: 'modelStep' });
    const everything = [...workerLog, ...gatewayLog, worker.text, gatewayScrape.text].join('\n');
    for (const prompt of prompts) expect(everything).not.toContain(prompt);
    expect(everything).not.toContain(API_KEY);
    expect(everything).not.toContain(API_KEY.slice(3));
  });
});

describe('the pending-approvals gauge', () => {
  it('counts the calls waiting for an answer as the log shows them: 2 requested, 1 after one answer, 0 once the turn ends', async () => {
    const id = `metrics-approvals-${Date.now()}`;
    await stack.client.start({ sessionId: id });
    await stack.client.post(id, 'please deploy to both regions');
    const listed = async () => (await stack.client.pendingApprovals({ sessionId: id })).length;
    // The gauge is reported right after the batch is appended: wait for it, then compare with the log.
    const gaugeReaches = (n: number) =>
      eventually(async () =>
        value(await scrape(`${ops.url}/metrics`), 'sessionlog_pending_approvals') === n ? true : undefined,
      );
    await gaugeReaches(2);
    expect(await listed()).toBe(2);
    await stack.client.approve(id, 'call_eu', { decision: 'approve' });
    await gaugeReaches(1);
    expect(await listed()).toBe(1);
    await stack.client.approve(id, 'call_us', { decision: 'deny' });
    await waitForEvent(stack.client, id, (e) => e.type === 'turn/end');
    await gaugeReaches(0);
    expect(await listed()).toBe(0);
  });
});
