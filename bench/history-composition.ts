/**
 * Where a turn's Temporal history bytes go (issue 50): runs a session for a few turns of an
 * 80-byte message, then breaks the events those turns added down by event type and their
 * payloads into data and metadata, with what the sealed payloads hold in the clear (the encoded
 * payload, and that deflated). Prints plain lines; not one of `npm run bench`'s tables.
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/history-composition.ts [--turns N] [--dump]
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { deflateRawSync } from 'node:zlib';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { SessionClient } from '../src/client/session-client.js';
import { SessionPayloadCodec } from '../src/client/session-codec.js';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { createOpenAIProvider } from '../src/model/provider.js';
import { openSqliteStore } from '../src/persistence/index.js';
import { workflowIdFor } from '../src/workflows/api.js';
import { createWorker } from '../src/worker.js';

type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;
type IPayload = proto.temporal.api.common.v1.IPayload;
const { HistoryEvent, History } = proto.temporal.api.history.v1;
const { Payload } = proto.temporal.api.common.v1;
const { EventType } = proto.temporal.api.enums.v1;

const { values } = parseArgs({
  options: { turns: { type: 'string', default: '4' }, dump: { type: 'boolean', default: false } },
});
const TURNS = Number(values.turns);

type Totals = Map<string, { count: number; bytes: number }>;

function add(totals: Totals, key: string, bytes: number): void {
  const entry = totals.get(key) ?? { count: 0, bytes: 0 };
  entry.count += 1;
  entry.bytes += bytes;
  totals.set(key, entry);
}

function isPayload(value: object): value is IPayload {
  return 'data' in value && (value as { data: unknown }).data instanceof Uint8Array && 'metadata' in value;
}

/** The payloads in `value` (an event), each with the path of fields that leads to it. */
function payloadsIn(value: unknown, path: string, out: Array<[string, IPayload]>): void {
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return;
  if (isPayload(value)) {
    out.push([path, value]);
    return;
  }
  for (const [key, child] of Object.entries(value))
    payloadsIn(child, /^\d+$/.test(key) ? path : path ? `${path}.${key}` : key, out);
}

async function allEvents(temporal: Client, workflowId: string): Promise<HistoryEvent[]> {
  const events: HistoryEvent[] = [];
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await temporal.workflowService.getWorkflowExecutionHistory({
      namespace: temporal.options.namespace,
      execution: { workflowId },
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    events.push(...(page.history?.events ?? []));
    nextPageToken = page.nextPageToken && page.nextPageToken.length > 0 ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return events;
}

function print(title: string, totals: Totals, order: (a: string, b: string) => number): void {
  console.log(`\n${title} (per turn: count, bytes)`);
  for (const [key, { count, bytes }] of [...totals].sort((a, b) => order(a[0], b[0]) || b[1].bytes - a[1].bytes))
    console.log(
      `  ${key.padEnd(96)} ${(count / TURNS).toFixed(1).padStart(5)} ${(bytes / TURNS).toFixed(1).padStart(8)}`,
    );
}

async function main(): Promise<void> {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address)
    throw new Error(
      'set TEMPORAL_ADDRESS (run: scripts/temporal-dev-server run -- npx tsx bench/history-composition.ts)',
    );
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-composition-'));
  const store = openSqliteStore(join(dir, 'sessions.db'));
  const fake = await startFakeModelServer({});
  const taskQueue = `bench-composition-${randomUUID()}`;
  const native = await NativeConnection.connect({ address });
  const worker = await createWorker({
    connection: native,
    taskQueue,
    store,
    model: createOpenAIProvider({ baseURL: fake.baseURL, apiKey: 'bench', provider: 'fake' }),
    agent: { model: 'fake', tools: ['read_artifact'] },
  });
  const running = worker.run();
  const connection = await Connection.connect({ address });
  const client = new SessionClient({ temporal: new Client({ connection }), store, taskQueue });
  const codec = new SessionPayloadCodec(store.sessionKeys);
  try {
    // A session id as long as history-bytes.ts uses for its 80-byte row.
    const id = `history-80-${randomUUID()}`;
    const workflowId = workflowIdFor(id);
    await client.send(id, 'hello');
    const before = (await allEvents(client.temporal, workflowId)).length;
    for (let turn = 1; turn <= TURNS; turn++)
      await client.send(id, `turn ${turn}: ${'lorem ipsum dolor sit amet '.repeat(3)}`.slice(0, 80));
    const events = (await allEvents(client.temporal, workflowId)).slice(before);
    const byType: Totals = new Map();
    const byPayload: Totals = new Map();
    const byMetadata: Totals = new Map();
    let payloadBytes = 0;
    for (const event of events) {
      const type = (EventType[event.eventType ?? 0] ?? String(event.eventType)).replace(/^EVENT_TYPE_/, '');
      add(byType, type, HistoryEvent.encode(event).finish().length);
      const found: Array<[string, IPayload]> = [];
      payloadsIn(event, '', found);
      for (const [path, payload] of found) {
        const size = Payload.encode(payload).finish().length;
        const data = payload.data?.length ?? 0;
        payloadBytes += size;
        add(byPayload, `${path}: whole payload`, size);
        add(byPayload, `${path}: data`, data);
        add(byPayload, `${path}: metadata and framing`, size - data);
        const [plain] = await codec.decode([Payload.fromObject(payload)], {
          type: 'workflow',
          namespace: 'default',
          workflowId,
        });
        const encoded = Payload.encode(plain!).finish();
        add(byPayload, `${path}: in the clear, encoded`, encoded.length);
        add(byPayload, `${path}: in the clear, deflate-raw`, deflateRawSync(encoded).length);
        if (values.dump) console.log(`${path}: ${Buffer.from(plain!.data ?? []).toString('utf8')}`);
        for (const [key, value] of Object.entries(payload.metadata ?? {}))
          add(byMetadata, `${key} (${Buffer.from(value).toString('utf8').slice(0, 40)})`, key.length + value.length);
      }
    }
    const whole = History.encode({ events }).finish().length;
    console.log(
      `${TURNS} turns, ${events.length / TURNS} events and ${(whole / TURNS).toFixed(1)} B per turn, ` +
        `of which payloads ${(payloadBytes / TURNS).toFixed(1)} B; session id ${id.length} characters`,
    );
    print('by event type', byType, () => 0);
    print('by payload', byPayload, (a, b) => a.localeCompare(b));
    print('by metadata entry, key and value bytes', byMetadata, () => 0);
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
    await native.close();
    await fake.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
