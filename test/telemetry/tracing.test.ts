/**
 * OpenTelemetry traces end to end: the gateway (this process) and a worker (a child process)
 * both export over OTLP/HTTP to an in-test receiver that decodes the standard protobuf
 * payload. A turn posted through the gateway is one trace from the HTTP request through the
 * client call, the workflow's update handler, the model activity and the model call, and the
 * tool, each span parented by the one before, with the GenAI attributes; a worker SIGKILLed
 * mid-turn and replaced still yields one trace for that turn.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionClient } from '../../src/client/session-client.js';
import { startGateway, type RunningGateway } from '../../src/gateway/index.js';
import { startFakeModelServer, type FakeModelServer } from '../../src/model/fake-server.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { startTelemetry, type Telemetry } from '../../src/telemetry/index.js';
import { workflowInterceptorModule } from '../../src/telemetry/tracing.js';
import { workflowBundle } from '../../src/worker.js';
import { bundleScript } from '../support/spawn-ts.js';
import { TEST_TUNABLES, temporalAddress } from '../support/stack.js';
import { OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const API_KEY = 'sk-tracetest0123456789abcdefgh';

/** A traced worker child (test/support/worker-child.ts) with its stdout events and stderr log lines. */
class TracedWorker {
  readonly proc: ChildProcess;
  readonly lines: Array<Record<string, unknown>> = [];
  readonly logs: string[] = [];
  readonly exited: Promise<unknown>;
  private readonly waiters = new Set<() => void>();

  constructor(file: string, env: Record<string, string>) {
    this.proc = spawn(process.execPath, [file], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.exited = new Promise((resolve) => this.proc.once('exit', resolve));
    createInterface({ input: this.proc.stdout! }).on('line', (text) => {
      try {
        this.lines.push(JSON.parse(text) as Record<string, unknown>);
      } catch {
        return;
      }
      for (const wake of this.waiters) wake();
    });
    createInterface({ input: this.proc.stderr! }).on('line', (line) => this.logs.push(line));
  }

  /** Resolves with the first stdout event named `event` (bounded). */
  async event(event: string, timeoutMs = 120_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.find((line) => line.event === event);
      if (found) return found;
      if (Date.now() > deadline || this.proc.exitCode !== null)
        throw new Error(`worker child: no ${event} event; stderr:\n${this.logs.slice(-20).join('\n')}`);
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiters.delete(wake);
          resolve();
        };
        this.waiters.add(wake);
        setTimeout(wake, 200);
      });
    }
  }

  /** Stops the child (SIGTERM drains it; SIGKILL after 15 s, or at once when asked). */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill(signal);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 15_000);
    await this.exited;
    clearTimeout(timer);
  }
}

let receiver: OtlpReceiver;
let telemetry: Telemetry;
let fake: FakeModelServer;
let store: SessionStore;
let client: SessionClient;
let gateway: RunningGateway;
let childFile: string;
let childEnv: Record<string, string>;
const workers: TracedWorker[] = [];

async function startWorker(): Promise<TracedWorker> {
  const worker = new TracedWorker(childFile, childEnv);
  workers.push(worker);
  await worker.event('ready');
  return worker;
}

beforeAll(async () => {
  receiver = new OtlpReceiver();
  await receiver.start();
  telemetry = await startTelemetry(
    {
      serviceName: 'sessionlog-gateway',
      logLevel: 'warn',
      logFormat: 'json',
      otlpEndpoint: receiver.url,
      captureContent: false,
    },
    { processMetrics: false, logDestination: { write: () => undefined } },
  );
  expect(telemetry.tracing).toBeDefined();

  fake = await startFakeModelServer({ apiKey: API_KEY });
  fake.setMatcher(({ body, lastUserText }) => {
    const last = body.messages.at(-1)!;
    if (last.role === 'tool') return { text: 'the tools are done' };
    if (lastUserText.includes('[calc]'))
      return { text: 'computing', toolCalls: [{ name: 'calculator', arguments: { expression: '6*7' } }] };
    if (lastUserText.includes('[sleep]'))
      return { text: 'sleeping', toolCalls: [{ name: 'sleep', arguments: { ms: 4_000 } }] };
    return undefined;
  });
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-trace-'));
  const storeUrl = `sqlite:${join(dir, 'sessions.db')}`;
  store = await openStore(storeUrl, { pollIntervalMs: 20 });
  const taskQueue = `trace-${randomUUID()}`;
  const bundlePath = join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, (await workflowBundle([workflowInterceptorModule()])).code);
  childFile = await bundleScript('test/support/worker-child.ts');
  childEnv = {
    TEMPORAL_ADDRESS: temporalAddress(),
    SESSIONLOG_STORE: storeUrl,
    FAKE_MODEL_BASE_URL: fake.baseURL,
    SESSIONLOG_TASK_QUEUE: taskQueue,
    WORKFLOW_BUNDLE_PATH: bundlePath,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    // The child's provider authenticates with this key-looking string (the fake server checks it).
    FAKE_MODEL_API_KEY: API_KEY,
  };
  client = await SessionClient.connect({
    address: temporalAddress(),
    store,
    taskQueue,
    tunables: TEST_TUNABLES,
    interceptors: telemetry.tracing!.clientInterceptors(),
  });
  gateway = await startGateway({
    client,
    host: '127.0.0.1',
    port: 0,
    bodyLimitBytes: 1 << 20,
    telemetry: telemetry.gateway,
  });
});

afterAll(async () => {
  for (const worker of workers) await worker.stop();
  await gateway?.close();
  await client?.temporal.connection.close();
  await store?.close();
  await fake?.close();
  await telemetry?.shutdown();
  await receiver?.close();
});

async function createSession(sessionId: string): Promise<void> {
  const response = await fetch(`${gateway.url}/v1/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: sessionId }),
  });
  expect(response.status).toBe(201);
}

async function postMessage(
  sessionId: string,
  text: string,
  wait: boolean,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${gateway.url}/v1/sessions/${sessionId}/messages${wait ? '?wait=true' : ''}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const named = (spans: readonly ReceivedSpan[], name: string) => spans.filter((s) => s.name === name);

/** The one span named `name` among `spans`. */
function one(spans: readonly ReceivedSpan[], name: string): ReceivedSpan {
  const found = named(spans, name);
  expect(
    found.map((s) => s.name),
    `spans named ${name}`,
  ).toEqual([name]);
  return found[0]!;
}

/** The chain of span names from `span` up to its trace's root (through spans received). */
function ancestry(spans: readonly ReceivedSpan[], span: ReceivedSpan): string[] {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const chain: string[] = [];
  for (
    let current: ReceivedSpan | undefined = span;
    current && chain.length < 20;
    current = byId.get(current.parentSpanId)
  )
    chain.push(current.name);
  return chain;
}

/**
 * A turn's trace has arrived: its model steps' and its tool's activity spans (which carry the
 * turn), and, in their trace, the request's span, the workflow's handler span and every
 * ancestor of the model calls and the tool.
 */
function turnComplete(sessionId: string, turn: number, tool: string, modelSteps = 2) {
  return (spans: readonly ReceivedSpan[]) => {
    const ofTurn = spans.filter(
      (s) => s.attributes['session.id'] === sessionId && s.attributes['sessionlog.turn'] === turn,
    );
    if (
      ofTurn.filter((s) => s.name === 'RunActivity:modelStep').length < modelSteps ||
      !ofTurn.some((s) => s.name === `execute_tool ${tool}`)
    )
      return false;
    const traces = new Set(ofTurn.map((s) => s.traceId));
    const trace = spans.filter((s) => traces.has(s.traceId));
    // The model calls' and the tool's ancestors have arrived up to the request's root span: the
    // workflow's spans come through a sink, and may be exported after the spans they parent.
    // (Not every span's parent: the workflow's own run span stays open as long as the session.)
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const rooted = (span: ReceivedSpan): boolean => {
      let current: ReceivedSpan | undefined = span;
      for (let depth = 0; current && depth < 20; depth++) {
        if (current.parentSpanId === '') return true;
        current = byId.get(current.parentSpanId);
      }
      return false;
    };
    return (
      trace.some((s) => s.name.startsWith('POST ')) &&
      trace.some((s) => s.name === 'HandleUpdate:send' || s.name === 'HandleSignal:userMessage') &&
      ofTurn.filter((s) => s.name === 'chat fake' || s.name === `execute_tool ${tool}`).every(rooted)
    );
  };
}

describe('one trace per turn', () => {
  it('follows a turn from the HTTP request through workflow, model activity, model call and tool, parented in that order', async () => {
    const worker = await startWorker();
    try {
      await followOneTurn(worker);
    } finally {
      await worker.stop();
    }
  });

  async function followOneTurn(worker: TracedWorker): Promise<void> {
    const sessionId = `trace-${randomUUID()}`;
    await createSession(sessionId);
    const reply = await postMessage(sessionId, 'please compute [calc] for my secret plan', true);
    expect(reply.status).toBe(200);
    expect(reply.body.text).toBe('the tools are done');
    await telemetry.tracing!.forceFlush();
    const spans = await receiver.waitFor(turnComplete(sessionId, 1, 'calculator'));

    const root = one(
      spans.filter((s) => s.attributes['session.id'] === sessionId),
      'POST /v1/sessions/:id/messages',
    );
    expect(root.parentSpanId).toBe('');
    expect(root.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/v1/sessions/:id/messages',
      'http.response.status_code': 200,
      'sessionlog.turn': 1,
    });
    const trace = spans.filter((s) => s.traceId === root.traceId);
    // Every span of the turn, in whichever process it was made, carries the session id.
    for (const span of trace) expect(span.attributes['session.id'], span.name).toBe(sessionId);
    // And no span of turn 1 is in another trace.
    expect(
      new Set(
        spans
          .filter((s) => s.attributes['session.id'] === sessionId && s.attributes['sessionlog.turn'] === 1)
          .map((s) => s.traceId),
      ),
    ).toEqual(new Set([root.traceId]));

    const chat = named(trace, 'chat fake');
    expect(chat).toHaveLength(2);
    for (const call of chat) {
      expect(ancestry(trace, call)).toEqual([
        'chat fake',
        'RunActivity:modelStep',
        'StartActivity:modelStep',
        'HandleUpdate:send',
        'UpdateWithStartWorkflow:send',
        'POST /v1/sessions/:id/messages',
      ]);
      expect(call.kind).toBe(3); // CLIENT
      expect(call.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.system': 'fake',
        'gen_ai.request.model': 'fake',
        'gen_ai.response.model': 'fake',
        'gen_ai.conversation.id': sessionId,
        'session.id': sessionId,
        'sessionlog.turn': 1,
      });
      expect(call.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
      expect(call.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
      expect(call.attributes['gen_ai.server.time_to_first_token']).toBeGreaterThan(0);
      expect(call.events).toContain('gen_ai.first_token');
      expect(call.resource['service.name']).toBe('sessionlog-worker');
      expect(call.resource['process.pid']).toBe(worker.proc.pid);
    }
    const tool = one(trace, 'execute_tool calculator');
    expect(ancestry(trace, tool)).toEqual([
      'execute_tool calculator',
      'RunActivity:runTool',
      'StartActivity:runTool',
      'HandleUpdate:send',
      'UpdateWithStartWorkflow:send',
      'POST /v1/sessions/:id/messages',
    ]);
    expect(tool.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'calculator',
      'sessionlog.turn': 1,
      'sessionlog.step': 1,
    });
    expect(tool.attributes['gen_ai.tool.call.id']).toBeTypeOf('string');
    // The workflow's spans (from the sandbox, through the sink) and the activities' carry the turn too.
    for (const name of [
      'HandleUpdate:send',
      'StartActivity:modelStep',
      'RunActivity:modelStep',
      'StartActivity:runTool',
      'RunActivity:runTool',
    ]) {
      for (const span of named(trace, name)) expect(span.attributes['sessionlog.turn'], name).toBe(1);
    }
    expect(one(trace, 'HandleUpdate:send').resource['service.name']).toBe('sessionlog-worker');
    // With content tracing off, no span and no worker log line at the default level holds what the user wrote.
    expect(JSON.stringify(spans).includes('my secret plan'), 'an exported span holds the message text').toBe(false);
    expect(worker.logs.join('\n').includes('my secret plan'), 'a worker log line holds the message text').toBe(false);

    // A second turn, posted without waiting, is a trace of its own.
    expect((await postMessage(sessionId, 'and again [calc]', false)).status).toBe(202);
    await telemetry.tracing!.forceFlush();
    const after = await receiver.waitFor(turnComplete(sessionId, 2, 'calculator'));
    const second = after.filter(
      (s) => s.attributes['session.id'] === sessionId && s.attributes['sessionlog.turn'] === 2,
    );
    const traces = new Set(second.map((s) => s.traceId));
    expect(traces.size).toBe(1);
    expect(traces.has(root.traceId)).toBe(false);
    const secondChat = named(
      after.filter((s) => traces.has(s.traceId)),
      'chat fake',
    );
    expect(secondChat).toHaveLength(2);
    for (const call of secondChat)
      expect(ancestry(after, call)).toEqual([
        'chat fake',
        'RunActivity:modelStep',
        'StartActivity:modelStep',
        'HandleSignal:userMessage',
        'SignalWithStartWorkflow:sessionWorkflow',
        'POST /v1/sessions/:id/messages',
      ]);

    // Nothing of the prompts, the replies or the key is in any exported span or log line.
    const exported = Buffer.concat(receiver.payloads).toString('latin1');
    const logs = worker.logs.join('\n');
    for (const text of [
      'secret plan',
      'please compute',
      'and again',
      'the tools are done',
      'computing',
      API_KEY,
      API_KEY.slice(3),
    ]) {
      expect(exported).not.toContain(text);
      expect(logs).not.toContain(text);
    }
    expect(logs).toContain('"msg":"turn ended"');
  }

  it('keeps a turn in one trace when its worker is SIGKILLed mid-tool and another worker finishes it', async () => {
    const first = await startWorker();
    const sessionId = `trace-crash-${randomUUID()}`;
    // Kill the first worker while the tool runs; a second one retries the tool.
    await createSession(sessionId);
    const replied = postMessage(sessionId, 'a long one [sleep]', true);
    await first.event('tool-start');
    await first.stop('SIGKILL');
    const second = await startWorker();
    const reply = await replied;
    expect(reply.status).toBe(200);
    expect(reply.body.text).toBe('the tools are done');
    await telemetry.tracing!.forceFlush();
    // The killed worker's unexported spans (its first model step's) are lost with it: the batch was in its memory.
    const spans = await receiver.waitFor(turnComplete(sessionId, 1, 'sleep', 1));

    const root = one(
      spans.filter((s) => s.attributes['session.id'] === sessionId),
      'POST /v1/sessions/:id/messages',
    );
    // Every span of turn 1 from both workers is in the request's trace.
    const turnSpans = spans.filter(
      (s) => s.attributes['session.id'] === sessionId && s.attributes['sessionlog.turn'] === 1,
    );
    expect(new Set(turnSpans.map((s) => s.traceId))).toEqual(new Set([root.traceId]));
    const ofTurn = spans.filter((s) => s.traceId === root.traceId);
    // The retried tool ran on the second worker, under the same StartActivity span the first run had.
    const runs = named(ofTurn, 'execute_tool sleep').filter((s) => s.resource['process.pid'] === second.proc.pid);
    expect(runs).toHaveLength(1);
    expect(ancestry(ofTurn, runs[0]!)).toEqual([
      'execute_tool sleep',
      'RunActivity:runTool',
      'StartActivity:runTool',
      'HandleUpdate:send',
      'UpdateWithStartWorkflow:send',
      'POST /v1/sessions/:id/messages',
    ]);
    expect(named(ofTurn, 'chat fake').length).toBeGreaterThanOrEqual(1);
    await second.stop();
  }, 180_000);
});
