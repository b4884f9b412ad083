/**
 * The telemetry's parts on their own: tracing off loads no OpenTelemetry SDK, model spans carry
 * prompt and reply text only when asked, log lines are scrubbed of credentials, and the settings
 * are validated at start-up.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { ConfigError, resolveConfig } from '../../src/config.js';
import { createEngineObserver } from '../../src/telemetry/engine-observer.js';
import { createLogger, scrubSecrets } from '../../src/telemetry/logging.js';
import { SessionlogMetrics } from '../../src/telemetry/metrics.js';
import { bundleScript } from '../support/spawn-ts.js';

const run = promisify(execFile);

async function modulesWith(endpoint: string | undefined): Promise<{ tracing: boolean; loaded: string[] }> {
  const child = await bundleScript('test/support/telemetry-modules-child.ts');
  const { stdout } = await run(process.execPath, [child, ...(endpoint ? [endpoint] : [])]);
  return JSON.parse(stdout) as { tracing: boolean; loaded: string[] };
}

describe('tracing off', () => {
  it('loads no OpenTelemetry SDK package without an endpoint, and the SDK with one', async () => {
    expect(await modulesWith(undefined)).toEqual({ tracing: false, loaded: [] });
    const on = await modulesWith('http://127.0.0.1:9');
    expect(on.tracing).toBe(true);
    expect(on.loaded).toEqual(
      expect.arrayContaining(['@opentelemetry/sdk-trace-base', '@opentelemetry/exporter-trace-otlp-proto']),
    );
  });
});

describe('model spans and message text', () => {
  const messages = [{ role: 'user', content: [{ type: 'text', text: 'the private prompt' }] }];
  const output = [{ type: 'text', text: 'the private reply' }];

  function spanOf(captureContent: boolean) {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const observer = createEngineObserver({
      tracer: provider.getTracer('test'),
      captureContent,
      metrics: new SessionlogMetrics({ processMetrics: false }),
    });
    const call = observer.modelCall({
      sessionId: 's1',
      turn: 3,
      step: 1,
      purpose: 'reply',
      provider: 'deepseek',
      model: 'deepseek-flash',
      messages,
    });
    call.firstToken();
    call.end({
      usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 90 },
      finishReason: 'stop',
      responseModel: 'deepseek-flash',
      output,
    });
    const [span] = exporter.getFinishedSpans();
    return span!;
  }

  it('records no prompt or reply text by default', () => {
    const span = spanOf(false);
    expect(span.name).toBe('chat deepseek-flash');
    expect(span.attributes).toMatchObject({
      'gen_ai.usage.input_tokens': 100,
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.usage.cache_read.input_tokens': 90,
      'session.id': 's1',
      'sessionlog.turn': 3,
    });
    expect(JSON.stringify(span.attributes)).not.toContain('private');
    expect(JSON.stringify(span.events)).not.toContain('private');
  });

  it('records them as gen_ai.input.messages and gen_ai.output.messages when enabled', () => {
    const span = spanOf(true);
    expect(JSON.parse(span.attributes['gen_ai.input.messages'] as string)).toEqual(messages);
    expect(JSON.parse(span.attributes['gen_ai.output.messages'] as string)).toEqual(output);
  });
});

describe('log lines', () => {
  it('never carry an API key or a bearer token, whichever field holds it', () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(line) } });
    const key = 'sk-proj-Abc123Def456Ghi789Jkl0';
    logger.info(
      { apiKey: key, nested: { header: `Bearer ${key}` }, err: new Error(`401 from provider: invalid key ${key}`) },
      `calling with OPENAI_API_KEY=${key}`,
    );
    logger.warn({ config: { token: 'averyveryverysecrettoken123' } }, 'bad token');
    const text = lines.join('\n');
    expect(text).not.toContain(key);
    expect(text).not.toContain(key.slice(3));
    expect(text).not.toContain('averyveryverysecrettoken123');
    expect(text).toContain('[REDACTED]');
    // Ordinary fields are left alone.
    expect(scrubSecrets('{"inputTokens":123456789,"sessionId":"support-42","turn":3}')).toBe(
      '{"inputTokens":123456789,"sessionId":"support-42","turn":3}',
    );
  });
});

describe('telemetry settings', () => {
  it('reads SESSIONLOG_LOG_LEVEL, OTEL_EXPORTER_OTLP_ENDPOINT, SESSIONLOG_TRACE_CONTENT and SESSIONLOG_METRICS_PORT, and refuses bad values by name', () => {
    expect(resolveConfig({}).telemetry).toEqual({ logLevel: 'info', otlpEndpoint: undefined, captureContent: false });
    expect(resolveConfig({}).ops).toEqual({ host: '127.0.0.1', port: undefined });
    const set = resolveConfig({
      SESSIONLOG_LOG_LEVEL: 'debug',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      SESSIONLOG_TRACE_CONTENT: 'true',
      SESSIONLOG_METRICS_PORT: '9464',
    });
    expect(set.telemetry).toEqual({ logLevel: 'debug', otlpEndpoint: 'http://collector:4318', captureContent: true });
    expect(set.ops.port).toBe(9464);
    expect(() => resolveConfig({ SESSIONLOG_LOG_LEVEL: 'loud' })).toThrow(ConfigError);
    expect(() => resolveConfig({ SESSIONLOG_LOG_LEVEL: 'loud' })).toThrow(/SESSIONLOG_LOG_LEVEL/);
    expect(() => resolveConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(() => resolveConfig({ SESSIONLOG_TRACE_CONTENT: 'yes' })).toThrow(/SESSIONLOG_TRACE_CONTENT/);
  });
});
