/**
 * Bench-only instrumentation of a turn, with no timing code in src/: wrappers around the
 * `SessionStore` and the `ModelPort` the worker is given, and around the global `fetch` the
 * `openai` client streams through. Each wrapped call is recorded as a span (start and end, on
 * the wall clock with sub-millisecond resolution so it lines up with Temporal's event times)
 * labelled with the turn the driver says is running.
 */
import { readFileSync } from 'node:fs';
import { TransformStream } from 'node:stream/web';
import type { ModelPort } from '../../src/model/provider.js';
import { serializeProjectionCacheRecord, type ProjectionCacheRecord } from '../../src/persistence/projection-cache.js';
import type { SessionStore, ProjectionCacheStore } from '../../src/persistence/store.js';

/** Wall-clock milliseconds with sub-millisecond resolution. */
export function wallNow(): number {
  return performance.timeOrigin + performance.now();
}

export type SpanOp =
  | 'store.exists'
  | 'store.header'
  | 'store.session'
  | 'store.append'
  | 'store.readFrom'
  | 'cache.get'
  | 'cache.put'
  | 'checkpoint'
  | 'model.stream'
  | 'model.onChunks'
  | 'fetch';

export type Span = {
  label: string;
  op: SpanOp;
  start: number;
  end: number;
  /** `store.append`: the batch's event types; `model.onChunks`: the chunk count. */
  detail?: string;
  /** `fetch`: when the response headers, the first and the last body bytes arrived. */
  headersAt?: number;
  firstByteAt?: number;
  lastByteAt?: number;
};

/** Block-layer and syscall write counters of this process (`/proc/self/io`), or undefined off Linux. */
export function processWrites(): { writeBytes: number; wchar: number } | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/self/io', 'utf8');
  } catch {
    // Not Linux (or no procfs): the bench prints n/a for bytes written.
    return undefined;
  }
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { writeBytes: field('write_bytes'), wchar: field('wchar') };
}

export class TurnProbe {
  /** The turn now being driven; every span recorded from here on carries it. */
  label = '';
  readonly spans: Span[] = [];
  /** The last projection checkpoint record written (for its size). */
  lastCheckpoint: ProjectionCacheRecord | undefined;
  /** How many projection checkpoint records were written. */
  checkpointWrites = 0;
  private checkpointStart: number | undefined;
  private checkpointDone: Array<() => void> = [];

  private record(span: Span): void {
    this.spans.push(span);
  }

  private async timed<T>(op: SpanOp, run: () => Promise<T>, detail?: string): Promise<T> {
    const label = this.label;
    const start = wallNow();
    try {
      return await run();
    } finally {
      this.record({ label, op, start, end: wallNow(), ...(detail !== undefined ? { detail } : {}) });
    }
  }

  /** Spans recorded for `label`, in start order. */
  spansOf(label: string): Span[] {
    return this.spans.filter((s) => s.label === label).sort((a, b) => a.start - b.start);
  }

  /** Drops recorded spans (between runs of the bench, to bound memory). */
  forget(labels: (label: string) => boolean): void {
    for (let i = this.spans.length - 1; i >= 0; i--) if (labels(this.spans[i]!.label)) this.spans.splice(i, 1);
  }

  /**
   * Resolves once no projection checkpoint is running (the worker writes one after each turn,
   * off the turn's promise chain), or after `timeoutMs`.
   */
  async checkpointSettled(timeoutMs = 10_000): Promise<void> {
    if (this.checkpointStart === undefined) return;
    await Promise.race([
      new Promise<void>((resolve) => this.checkpointDone.push(resolve)),
      new Promise((resolve) => setTimeout(resolve, timeoutMs).unref()),
    ]);
  }

  /**
   * The store as the worker and client see it, every call timed. A projection checkpoint is
   * the span from the cache read that starts it to the cache write that ends it: nothing else
   * in the bench reads the projection cache.
   */
  wrapStore(store: SessionStore): SessionStore {
    const cache: ProjectionCacheStore = {
      get: (sessionId) => {
        this.checkpointStart ??= wallNow();
        return this.timed('cache.get', () => store.projectionCache.get(sessionId));
      },
      put: async (sessionId, record) => {
        const label = this.label;
        try {
          await this.timed('cache.put', () => store.projectionCache.put(sessionId, record));
          this.lastCheckpoint = record;
          this.checkpointWrites++;
        } finally {
          const start = this.checkpointStart ?? wallNow();
          this.checkpointStart = undefined;
          this.record({ label, op: 'checkpoint', start, end: wallNow() });
          for (const done of this.checkpointDone.splice(0)) done();
        }
      },
    };
    return {
      kind: store.kind,
      spend: store.spend,
      create: (header) => store.create(header),
      header: (id) => this.timed('store.header', () => store.header(id)),
      exists: (id) => this.timed('store.exists', () => store.exists(id)),
      append: (id, events, options) =>
        this.timed('store.append', () => store.append(id, events, options), events.map((e) => e.type).join(',')),
      readFrom: (id, fromSeq, limit) => this.timed('store.readFrom', () => store.readFrom(id, fromSeq, limit)),
      nextSeq: (id) => store.nextSeq(id),
      load: (id) => store.load(id),
      inspect: (id) => store.inspect(id),
      session: (id) => this.timed('store.session', () => store.session(id)),
      readAnchored: (id, anchor, surface) => store.readAnchored(id, anchor, surface),
      prefixAnchor: (id, seq) => store.prefixAnchor(id, seq),
      search: (id, query, options) => store.search(id, query, options),
      scan: (id) => store.scan(id),
      erase: (id, scope) => store.erase(id, scope),
      list: (scope) => store.list(scope),
      watch: (id, fromSeq, options) => store.watch(id, fromSeq, options),
      artifacts: store.artifacts,
      projectionCache: cache,
      inbox: store.inbox,
      sessionKeys: store.sessionKeys,
      transcripts: store.transcripts,
      pacing: store.pacing,
      close: () => store.close(),
    };
  }

  /** The model port with `stream` (called once the request is derived) and each chunk delivery timed. */
  wrapModel(model: ModelPort): ModelPort {
    return {
      provider: model.provider,
      model: (name) => model.model(name),
      stream: (request) => {
        const onChunks = request.onChunks;
        return this.timed('model.stream', () =>
          model.stream({
            ...request,
            ...(onChunks
              ? {
                  onChunks: (chunks) =>
                    this.timed('model.onChunks', async () => onChunks(chunks), String(chunks.length)),
                }
              : {}),
          }),
        );
      },
    };
  }

  /**
   * Replaces the global `fetch` (which the `openai` client uses when created afterwards) with
   * one that timestamps the response headers and the first and last body bytes. Returns the
   * function that puts the original back.
   */
  installFetch(): () => void {
    const original = globalThis.fetch;
    const probed: typeof fetch = async (input, init) => {
      const label = this.label;
      const start = wallNow();
      const response = await original(input, init);
      const span: Span = { label, op: 'fetch', start, end: Number.NaN, headersAt: wallNow() };
      if (!response.body) {
        span.end = span.headersAt!;
        this.record(span);
        return response;
      }
      const timing = new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          const at = wallNow();
          span.firstByteAt ??= at;
          span.lastByteAt = at;
          controller.enqueue(chunk);
        },
        flush: () => {
          span.end = wallNow();
          this.record(span);
        },
      });
      const body = (response.body as unknown as ReadableStream<Uint8Array>).pipeThrough(
        timing as unknown as TransformStream<Uint8Array, Uint8Array>,
      );
      return new Response(body as unknown as ConstructorParameters<typeof Response>[0], {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
    };
    globalThis.fetch = probed;
    return () => {
      globalThis.fetch = original;
    };
  }
}

/** Whether `span` is an append of streamed chunks only (a reply's own append may carry its last chunks too). */
export function isChunkAppend(span: Span): boolean {
  return (
    span.op === 'store.append' &&
    span.detail !== undefined &&
    span.detail.split(',').every((type) => type === 'assistant/chunk')
  );
}

/** Bytes of a projection checkpoint record as the store writes it. */
export function checkpointBytes(record: ProjectionCacheRecord): number {
  return Buffer.byteLength(serializeProjectionCacheRecord(record));
}
