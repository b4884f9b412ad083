/**
 * A small client of the V8 inspector protocol of another Node process (started with
 * `--inspect=127.0.0.1:0`), for measuring it from outside without changing its code: its heap
 * after a full collection, on the main thread and on each worker thread (the Temporal SDK runs
 * workflows in worker threads, whose isolates the main thread's heap figures leave out), and heap
 * snapshots summarised by constructor.
 *
 * Uses the WebSocket global of Node 22 and later (the `@types/node` of this project predates it,
 * hence the local type).
 */
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';

type Message = { id?: number; method?: string; params?: Record<string, unknown>; result?: unknown; error?: unknown };

type MinimalWebSocket = {
  send(data: string): void;
  close(): void;
  addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void;
  addEventListener(type: 'open' | 'close', listener: () => void): void;
  addEventListener(type: 'error', listener: (event: unknown) => void): void;
};

/** One inspector target: the main thread, or a worker thread reached through it. */
export type InspectorTarget = {
  /** `main`, or the worker's title (e.g. the Temporal SDK's workflow thread). */
  title: string;
  send(method: string, params?: Record<string, unknown>): Promise<unknown>;
  onEvent(listener: (method: string, params: Record<string, unknown>) => void): () => void;
};

/** Heap in use after a full collection, per thread. */
export type HeapUsage = { main: number; workers: Array<{ title: string; used: number }> };

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Routes commands and events of one target over a message channel (the socket, or a worker session). */
class Channel implements InspectorTarget {
  private nextId = 1;
  private readonly pending = new Map<number, ReturnType<typeof deferred<unknown>>>();
  private readonly listeners = new Set<(method: string, params: Record<string, unknown>) => void>();

  constructor(
    readonly title: string,
    private readonly post: (text: string) => void,
  ) {}

  send(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.nextId++;
    const waiting = deferred<unknown>();
    this.pending.set(id, waiting);
    this.post(JSON.stringify({ id, method, params }));
    return waiting.promise;
  }

  onEvent(listener: (method: string, params: Record<string, unknown>) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  receive(message: Message): void {
    if (message.id !== undefined) {
      const waiting = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (message.error) waiting?.reject(new Error(`inspector (${this.title}): ${JSON.stringify(message.error)}`));
      else waiting?.resolve(message.result);
    } else if (message.method) {
      for (const listener of this.listeners) listener(message.method, message.params ?? {});
    }
  }

  failAll(error: Error): void {
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }
}

/** An inspector connection to a process, with its worker threads attached. */
export class InspectorClient {
  private readonly workerChannels = new Map<string, Channel>();

  private constructor(
    private readonly socket: MinimalWebSocket,
    readonly main: Channel,
  ) {}

  /** Connects to `url` (the `ws://…` the process printed) and attaches to its worker threads. */
  static async connect(url: string): Promise<InspectorClient> {
    const WebSocketClass = (globalThis as { WebSocket?: new (url: string) => MinimalWebSocket }).WebSocket;
    if (!WebSocketClass) throw new Error('the inspector client needs the WebSocket global of Node 22 or later');
    const socket = new WebSocketClass(url);
    const open = deferred<void>();
    socket.addEventListener('open', () => open.resolve());
    socket.addEventListener('error', () => open.reject(new Error(`could not connect to the inspector at ${url}`)));
    await open.promise;
    const client = new InspectorClient(socket, new Channel('main', (text) => socket.send(text)));
    socket.addEventListener('message', (event) => client.dispatch(JSON.parse(String(event.data)) as Message));
    socket.addEventListener('close', () => client.main.failAll(new Error('the inspector connection closed')));
    await client.main.send('NodeWorker.enable', { waitForDebuggerOnStart: false });
    return client;
  }

  private dispatch(message: Message): void {
    const params = message.params ?? {};
    switch (message.method) {
      case 'NodeWorker.attachedToWorker': {
        const sessionId = String(params.sessionId);
        const info = params.workerInfo as { title?: string; url?: string } | undefined;
        const title = info?.title || info?.url || `worker ${sessionId}`;
        this.workerChannels.set(
          sessionId,
          new Channel(
            title,
            (text) => void this.main.send('NodeWorker.sendMessageToWorker', { sessionId, message: text }),
          ),
        );
        return;
      }
      case 'NodeWorker.detachedFromWorker': {
        const sessionId = String(params.sessionId);
        this.workerChannels.get(sessionId)?.failAll(new Error('the worker thread ended'));
        this.workerChannels.delete(sessionId);
        return;
      }
      case 'NodeWorker.receivedMessageFromWorker':
        this.workerChannels.get(String(params.sessionId))?.receive(JSON.parse(String(params.message)) as Message);
        return;
      default:
        this.main.receive(message);
    }
  }

  /** The worker threads attached now. */
  workers(): InspectorTarget[] {
    return [...this.workerChannels.values()];
  }

  /**
   * Heap in use on every thread right after a full collection on it (`HeapProfiler.collectGarbage`
   * then `Runtime.getHeapUsage`): what is retained, not what awaits collection.
   */
  async heapAfterGc(): Promise<HeapUsage> {
    const usedAfterGc = async (target: InspectorTarget): Promise<number> => {
      await target.send('HeapProfiler.collectGarbage');
      const usage = (await target.send('Runtime.getHeapUsage')) as { usedSize: number };
      return usage.usedSize;
    };
    const main = await usedAfterGc(this.main);
    const workers: HeapUsage['workers'] = [];
    for (const worker of this.workers()) {
      try {
        workers.push({ title: worker.title, used: await usedAfterGc(worker) });
      } catch (error) {
        // A thread that ended between the listing and the call has no heap left to count.
        if (!/worker thread ended/.test((error as Error).message)) throw error;
      }
    }
    return { main, workers };
  }

  close(): void {
    this.socket.close();
  }
}

/** Writes a heap snapshot of `target` (after a full collection) to `path`. */
export async function writeHeapSnapshot(target: InspectorTarget, path: string): Promise<void> {
  const out = createWriteStream(path);
  const stop = target.onEvent((method, params) => {
    if (method === 'HeapProfiler.addHeapSnapshotChunk') out.write(String(params.chunk));
  });
  try {
    await target.send('HeapProfiler.enable');
    await target.send('HeapProfiler.collectGarbage');
    await target.send('HeapProfiler.takeHeapSnapshot', { reportProgress: false, captureNumericValue: false });
  } finally {
    stop();
    await new Promise<void>((resolve, reject) =>
      out.end((error?: Error | null) => (error ? reject(error) : resolve())),
    );
  }
}

/** Count and self size of a heap snapshot's nodes, by node type and constructor name. */
export type HeapSummary = Map<string, { count: number; size: number }>;

/** Reads a `.heapsnapshot` file and sums its nodes by `type:name` (e.g. `object:Map`, `closure:onAbort`). */
export async function summarizeHeapSnapshot(path: string): Promise<HeapSummary> {
  const snapshot = JSON.parse(await readFile(path, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const typeNames = snapshot.snapshot.meta.node_types[0];
  const stride = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const summary: HeapSummary = new Map();
  for (let i = 0; i < snapshot.nodes.length; i += stride) {
    const type = typeNames[snapshot.nodes[i + typeAt]!] ?? '?';
    // Strings are named by their content: one bucket for all of them of a type.
    const name =
      type === 'string' || type === 'concatenated string' || type === 'sliced string'
        ? ''
        : snapshot.strings[snapshot.nodes[i + nameAt]!];
    const key = `${type}:${(name ?? '').slice(0, 60)}`;
    const entry = summary.get(key) ?? { count: 0, size: 0 };
    entry.count += 1;
    entry.size += snapshot.nodes[i + sizeAt]!;
    summary.set(key, entry);
  }
  return summary;
}

/** The `limit` node kinds whose self size grew most from `before` to `after`. */
export function heapGrowth(
  before: HeapSummary,
  after: HeapSummary,
  limit: number,
): Array<{ key: string; count: number; countDelta: number; size: number; sizeDelta: number }> {
  return [...after.entries()]
    .map(([key, now]) => {
      const then = before.get(key) ?? { count: 0, size: 0 };
      return {
        key,
        count: now.count,
        countDelta: now.count - then.count,
        size: now.size,
        sizeDelta: now.size - then.size,
      };
    })
    .sort((a, b) => b.sizeDelta - a.sizeDelta)
    .slice(0, limit);
}
