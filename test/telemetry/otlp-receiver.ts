/**
 * An OTLP/HTTP trace receiver for tests: a loopback HTTP server that accepts
 * `POST /v1/traces` with the standard protobuf payload (what the OTLP/HTTP exporter sends),
 * decodes it with the OpenTelemetry packages' own generated protobuf types, and keeps the spans.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

type Decoder = {
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: Record<string, unknown>): unknown;
};
// The package ships its generated protobufjs code untyped (a bare Root).
const root = createRequire(import.meta.url)('@opentelemetry/otlp-transformer/build/src/generated/root.js') as {
  opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: Decoder } } } } };
};
const ExportTraceServiceRequest = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
  kvlistValue?: { values?: KeyValue[] };
};
type KeyValue = { key: string; value?: AnyValue };
type WireSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  attributes?: KeyValue[];
  events?: Array<{ name: string; attributes?: KeyValue[] }>;
  status?: { code?: number; message?: string };
};
type WireRequest = {
  resourceSpans?: Array<{ resource?: { attributes?: KeyValue[] }; scopeSpans?: Array<{ spans?: WireSpan[] }> }>;
};

export type ReceivedSpan = {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
  events: string[];
  statusCode: number;
};

function valueOf(value: AnyValue | undefined): unknown {
  if (!value) return undefined;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue) return (value.arrayValue.values ?? []).map(valueOf);
  if (value.kvlistValue) return attributesOf(value.kvlistValue.values);
  return undefined;
}

function attributesOf(list: KeyValue[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of list ?? []) out[kv.key] = valueOf(kv.value);
  return out;
}

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Raw request bodies, to search for text that must never be exported. */
  readonly payloads: Buffer[] = [];
  private server: http.Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (chunk: Buffer) => parts.push(chunk));
      req.on('end', () => {
        if (
          req.method !== 'POST' ||
          req.url !== '/v1/traces' ||
          req.headers['content-type'] !== 'application/x-protobuf'
        ) {
          res.writeHead(404).end();
          return;
        }
        const body = Buffer.concat(parts);
        this.payloads.push(body);
        this.accept(body);
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private accept(body: Buffer): void {
    const request = ExportTraceServiceRequest.toObject(ExportTraceServiceRequest.decode(body), {
      longs: String,
      bytes: String,
      defaults: false,
    }) as WireRequest;
    for (const resourceSpans of request.resourceSpans ?? []) {
      const resource = attributesOf(resourceSpans.resource?.attributes);
      for (const scope of resourceSpans.scopeSpans ?? []) {
        for (const span of scope.spans ?? []) {
          this.spans.push({
            traceId: Buffer.from(span.traceId, 'base64').toString('hex'),
            spanId: Buffer.from(span.spanId, 'base64').toString('hex'),
            parentSpanId: span.parentSpanId ? Buffer.from(span.parentSpanId, 'base64').toString('hex') : '',
            name: span.name,
            kind: span.kind ?? 0,
            attributes: attributesOf(span.attributes),
            resource,
            events: (span.events ?? []).map((e) => e.name),
            statusCode: span.status?.code ?? 0,
          });
        }
      }
    }
  }

  /** Waits (bounded) until `ready(spans)` holds; returns the spans then, or throws with what arrived. */
  async waitFor(ready: (spans: readonly ReceivedSpan[]) => boolean, timeoutMs = 30_000): Promise<ReceivedSpan[]> {
    const deadline = Date.now() + timeoutMs;
    while (!ready(this.spans)) {
      if (Date.now() > deadline)
        throw new Error(
          `spans not complete after ${timeoutMs} ms; received: ${this.spans.map((s) => s.name).join(', ')}`,
        );
      await sleep(100);
    }
    return [...this.spans];
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      if (!this.server) return resolve();
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
