/**
 * What an image costs a session (issue 50): a 1 MiB PNG in turn 1, then 50 text turns, through
 * the real stack (a worker on the Temporal dev server, a SQLite store, the offline model), beside
 * a control session that sends the same texts without the image. Each session has a store and a
 * worker of its own, the turns interleaved, so the two differ only by the image.
 *
 * - Stored bytes: the image session's store (database and WAL, after close) minus the
 *   control's; stored once, so within 1.05 MiB of growth for a 1 MiB image.
 * - Temporal history bytes per turn (`History.encode` of the run's history before and after each
 *   turn): the image crosses Temporal as a reference only, so every turn is ≤ 3 KiB, the image's too.
 * - Model request bytes per turn (the offline model's recorded request bodies): the image is in
 *   the turns the media policy says (the last `recentTurns` user turns: 1–3 by default) and a
 *   stand-in naming it after; the turns whose request carried the image are compared with those.
 * - The meter's image estimate (OpenAI's tile rule, model/media-tokens.ts) against the image
 *   tokens the offline model reported, and the meter's prompt total against the reported prompt
 *   tokens for a turn with the image and one with its stand-in. The offline model prices images
 *   with the same tile rule and counts text with the same tokenizer, so agreement is what the
 *   wiring should give: the figure checks the meter is fed what the model received, not the rule.
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/media.ts [--turns N]
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { deflateSync } from 'node:zlib';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { SessionClient } from '../src/client/session-client.js';
import { DEFAULT_MEDIA_POLICY } from '../src/context/media-policy.js';
import { createTokenMeter } from '../src/context/token-meter.js';
import { imageBlockTokens } from '../src/model/media-tokens.js';
import { startFakeModelServer, type FakeModelServer } from '../src/model/fake-server.js';
import { createOpenAIProvider } from '../src/model/provider.js';
import { openSqliteStore } from '../src/persistence/index.js';
import type { SessionStore } from '../src/persistence/store.js';
import {
  Session,
  type ImageBlock,
  type RequestHeader,
  type SessionHeader,
  type StoredEvent,
} from '../src/session/index.js';
import { workflowIdFor } from '../src/workflows/api.js';
import { createWorker } from '../src/worker.js';
import { historyStats } from './support/history.js';
import { fmtBytes, fmtInt, machineLine, printGrid, printTable, type Figure } from './support/report.js';
import { pngChunk } from '../test/support/media.js';

const { values } = parseArgs({ options: { turns: { type: 'string', default: '50' } } });
const TEXT_TURNS = Number(values.turns);
const MiB = 1024 * 1024;
const KiB = 1024;

// ---- a 1 MiB PNG of random pixels (incompressible, so the file is the size it says) ------------

/** An RGB PNG of random pixels whose file is `bytes` long to within a row. */
function randomPng(bytes: number): { png: Uint8Array; width: number; height: number } {
  const width = 1024;
  const height = Math.floor(bytes / (width * 3 + 1));
  const raw = Buffer.alloc(height * (width * 3 + 1));
  for (let y = 0; y < height; y++) randomBytes(width * 3).copy(raw, y * (width * 3 + 1) + 1);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  const png = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(raw, { level: 0 })),
    pngChunk('IEND', new Uint8Array()),
  ]);
  return { png: new Uint8Array(png), width, height };
}

// ---- the two stacks ----------------------------------------------------------------------------

type Side = {
  name: string;
  dir: string;
  file: string;
  store: SessionStore;
  fake: FakeModelServer;
  client: SessionClient;
  stop(): Promise<void>;
};

async function startSide(name: string, native: NativeConnection, connection: Connection): Promise<Side> {
  const dir = mkdtempSync(join(tmpdir(), `sessionlog-bench-media-${name}-`));
  const file = join(dir, 'sessions.db');
  const store = openSqliteStore(file);
  const fake = await startFakeModelServer({});
  const taskQueue = `bench-media-${name}-${randomUUID()}`;
  const worker = await createWorker({
    connection: native,
    taskQueue,
    store,
    model: createOpenAIProvider({ baseURL: fake.baseURL, apiKey: 'bench', provider: 'fake' }),
    agent: { model: 'fake', tools: ['read_artifact'] },
  });
  const running = worker.run();
  const client = new SessionClient({
    temporal: new Client({ connection }),
    store,
    taskQueue,
    tunables: { maxMessageBytes: 9 * MiB, continueAsNewAfterTurns: 1_000 },
  });
  return {
    name,
    dir,
    file,
    store,
    fake,
    client,
    async stop() {
      worker.shutdown();
      await running;
      await fake.close();
    },
  };
}

/** The store's bytes on disk: the database with its WAL and shared-memory files. */
function storeBytes(file: string): number {
  return ['', '-wal', '-shm'].reduce(
    (sum, suffix) => sum + (existsSync(file + suffix) ? statSync(file + suffix).size : 0),
    0,
  );
}

const utf8Bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');

/** The meter's prompt total for the request of `turn`'s first step: the log up to just before its reply. */
function meterBefore(
  sessionHeader: SessionHeader,
  events: readonly StoredEvent[],
  header: RequestHeader,
  turn: number,
): number {
  const reply = events.find((e) => e.type === 'assistant/message' && (e.data as { turn: number }).turn === turn)!;
  const session = Session.fromEvents(sessionHeader, events.slice(0, reply.seq));
  return createTokenMeter().measure(session, header).totalTokens;
}

function lastHeader(events: readonly StoredEvent[], before: number): RequestHeader {
  const found = events.filter((e) => e.type === 'request/header' && e.seq < before).at(-1);
  if (!found) throw new Error('no request/header before the reply');
  return (found.data as { header: RequestHeader }).header;
}

async function main(): Promise<void> {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address)
    throw new Error('set TEMPORAL_ADDRESS (run: scripts/temporal-dev-server run -- npx tsx bench/media.ts)');
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  console.log(`bench/media.ts · ${machineLine()} · 1 image turn + ${TEXT_TURNS} text turns · SQLite store, dev server`);
  const native = await NativeConnection.connect({ address });
  const connection = await Connection.connect({ address });
  const media = await startSide('image', native, connection);
  const control = await startSide('control', native, connection);
  const image = randomPng(MiB);
  const imageBase64 = Buffer.from(image.png).toString('base64');
  // A window of the image's base64 from its middle: present in a request body only if the image is.
  const probe = imageBase64.slice(imageBase64.length / 2, imageBase64.length / 2 + 64);
  // Ids of one length, so the two histories differ only by what the turns carry.
  const mediaId = `bench-image-${randomUUID()}`;
  const controlId = `bench-plain-${randomUUID()}`;
  const turns = 1 + TEXT_TURNS;
  const rows: Array<{
    turn: number;
    historyImage: number;
    historyControl: number;
    requestImage: number;
    requestControl: number;
    carried: boolean;
  }> = [];
  let events: StoredEvent[] = [];
  let sessionHeader: SessionHeader | undefined;
  let imageUsage: { promptTokens: number; imageTokens: number }[] = [];
  let controlUsage: { promptTokens: number }[] = [];
  const before = { image: storeBytes(media.file), control: storeBytes(control.file) };
  try {
    // The session's first send also records the run's start, so both sessions are started with a hello first.
    await media.client.send(mediaId, 'hello');
    await control.client.send(controlId, 'hello');
    media.fake.reset();
    control.fake.reset();
    for (let turn = 1; turn <= turns; turn++) {
      const text = turn === 1 ? 'What is in this picture?' : `text turn ${turn}: tell me more about it.`;
      const measure = async (side: Side, id: string, send: () => Promise<{ outcome: string }>) => {
        const wid = workflowIdFor(id);
        const h0 = await historyStats(side.client.temporal, wid);
        const r0 = side.fake.chatRequests().length;
        const reply = await send();
        if (reply.outcome !== 'completed') throw new Error(`${side.name} turn ${turn}: ${reply.outcome}`);
        const h1 = await historyStats(side.client.temporal, wid);
        const bodies = side.fake.chatRequests().slice(r0);
        return { history: h1.bytes - h0.bytes, bodies };
      };
      const withImage = await measure(media, mediaId, () =>
        media.client.send(mediaId, text, {
          ...(turn === 1
            ? {
                content: [
                  { type: 'text', text },
                  { type: 'image', data: image.png, mediaType: 'image/png' },
                ],
              }
            : {}),
        }),
      );
      const without = await measure(control, controlId, () => control.client.send(controlId, text));
      rows.push({
        turn,
        historyImage: withImage.history,
        historyControl: without.history,
        requestImage: withImage.bodies.reduce((sum, body) => sum + utf8Bytes(body), 0),
        requestControl: without.bodies.reduce((sum, body) => sum + utf8Bytes(body), 0),
        carried: withImage.bodies.some((body) => JSON.stringify(body).includes(probe)),
      });
    }
    imageUsage = media.fake.reportedUsage().map((u) => {
      const usage = u as { prompt_tokens: number; prompt_tokens_details?: { image_tokens?: number } };
      return { promptTokens: usage.prompt_tokens, imageTokens: usage.prompt_tokens_details?.image_tokens ?? 0 };
    });
    controlUsage = control.fake
      .reportedUsage()
      .map((u) => ({ promptTokens: (u as { prompt_tokens: number }).prompt_tokens }));
    const loaded = await media.store.load(mediaId);
    events = loaded.events as StoredEvent[];
    sessionHeader = loaded.header;
  } finally {
    await media.stop();
    await control.stop();
    await media.store.close();
    await control.store.close();
    await connection.close();
    await native.close();
  }
  const after = { image: storeBytes(media.file), control: storeBytes(control.file) };
  rmSync(media.dir, { recursive: true, force: true });
  rmSync(control.dir, { recursive: true, force: true });

  // ---- figures ----
  const growth = after.image - before.image - (after.control - before.control);
  const textRows = rows.slice(1);
  const maxHistory = Math.max(...rows.map((r) => r.historyImage));
  const meanText = textRows.reduce((sum, r) => sum + r.historyImage, 0) / textRows.length;
  const meanControl = rows.reduce((sum, r) => sum + r.historyControl, 0) / rows.length;
  const carried = rows.filter((r) => r.carried).map((r) => r.turn);
  const expected = rows.map((r) => r.turn).filter((turn) => turn <= DEFAULT_MEDIA_POLICY.recentTurns);
  const span = (list: number[]) =>
    list.length === 0 ? 'none' : list.length === 1 ? `${list[0]}` : `${list[0]}–${list.at(-1)}`;
  const contiguous = (list: number[]) => list.every((v, i) => i === 0 || v === list[i - 1]! + 1);

  const userWithImage = events.find(
    (e) => e.type === 'user/message' && JSON.stringify(e.data).includes('"type":"image"'),
  );
  const block = (userWithImage?.data as { content: ImageBlock[] } | undefined)?.content.find((b) => b.type === 'image');
  const meterImage = block ? imageBlockTokens(block) : Number.NaN;
  // Turn 1's request is the first the image session made after the hello (reset above).
  const reportedImage = imageUsage[0]?.imageTokens ?? Number.NaN;
  const firstReply = (turn: number, list: readonly StoredEvent[]) =>
    list.find((e) => e.type === 'assistant/message' && (e.data as { turn: number }).turn === turn)!;
  // Turn numbers in the log count the hello as turn 1: bench turn t is log turn t + 1.
  const meterFor = (turn: number) =>
    meterBefore(sessionHeader!, events, lastHeader(events, firstReply(turn + 1, events).seq), turn + 1);
  const standInTurn = DEFAULT_MEDIA_POLICY.recentTurns + 1;

  const figures: Figure[] = [
    { name: 'image size', value: `${fmtBytes(image.png.length)} (${image.width}×${image.height} PNG)` },
    {
      name: 'store growth of the image session vs the text-only control',
      value: `${fmtBytes(growth)} (${fmtInt(growth)} B)`,
      target: '≥ the image, ≤ 1.05 MiB',
      met: growth >= image.png.length && growth <= 1.05 * MiB,
    },
    {
      name: 'Temporal history bytes, the image turn',
      value: `${fmtInt(rows[0]!.historyImage)} B (control ${fmtInt(rows[0]!.historyControl)} B)`,
      target: '≤ 3 KiB',
      met: rows[0]!.historyImage <= 3 * KiB,
    },
    {
      name: `Temporal history bytes per turn, max over ${turns} turns`,
      value: `${fmtInt(maxHistory)} B (text turns mean ${fmtInt(meanText)} B; control mean ${fmtInt(meanControl)} B)`,
      target: '≤ 3 KiB',
      met: maxHistory <= 3 * KiB,
    },
    {
      name: 'Temporal history bytes per turn, image session minus control (max over the turns)',
      value: `${fmtInt(Math.max(...rows.map((r) => r.historyImage - r.historyControl)))} B`,
      target: '≤ 64 B (unchanged)',
      met: Math.max(...rows.map((r) => r.historyImage - r.historyControl)) <= 64,
    },
    {
      name: 'turns whose model request carried the image',
      value: span(carried) + (contiguous(carried) ? '' : ` (${carried.join(', ')})`),
      target: `the policy's: turns ${span(expected)} (last ${DEFAULT_MEDIA_POLICY.recentTurns} user turns)`,
      met: JSON.stringify(carried) === JSON.stringify(expected),
    },
    {
      name: 'model request bytes, turn 1 (image) vs control',
      value: `${fmtBytes(rows[0]!.requestImage)} vs ${fmtBytes(rows[0]!.requestControl)}`,
    },
    {
      name: `model request bytes, turn ${standInTurn} (stand-in) minus control`,
      value: `${fmtInt(rows[standInTurn - 1]!.requestImage - rows[standInTurn - 1]!.requestControl)} B`,
      target: '< 1 KiB',
      met: rows[standInTurn - 1]!.requestImage - rows[standInTurn - 1]!.requestControl < KiB,
    },
    {
      name: "meter's image estimate vs the offline model's reported image tokens (turn 1)",
      value: `${fmtInt(meterImage)} vs ${fmtInt(reportedImage)}`,
      target: 'equal',
      met: meterImage === reportedImage,
    },
    {
      name: "meter's prompt total vs reported prompt tokens, turn 1 (image sent)",
      value: `${fmtInt(meterFor(1))} vs ${fmtInt(imageUsage[0]?.promptTokens ?? Number.NaN)}`,
      target: 'equal',
      met: meterFor(1) === imageUsage[0]?.promptTokens,
    },
    {
      name: `meter's prompt total vs reported prompt tokens, turn ${standInTurn} (stand-in)`,
      value: `${fmtInt(meterFor(standInTurn))} vs ${fmtInt(imageUsage[standInTurn - 1]?.promptTokens ?? Number.NaN)}`,
      target: 'equal',
      met: meterFor(standInTurn) === imageUsage[standInTurn - 1]?.promptTokens,
    },
    {
      name: `reported prompt tokens, turn ${standInTurn}: image session minus control`,
      value: `${fmtInt((imageUsage[standInTurn - 1]?.promptTokens ?? Number.NaN) - (controlUsage[standInTurn - 1]?.promptTokens ?? Number.NaN))}`,
    },
  ];
  printTable('A 1 MiB image, then text turns', figures);
  const shown = new Set([1, 2, 3, 4, 5, 10, 25, turns]);
  printGrid(
    'Per turn: Temporal history and model request bytes, image session vs control',
    ['turn', 'history B (image)', 'history B (control)', 'request B (image)', 'request B (control)', 'image sent'],
    rows
      .filter((r) => shown.has(r.turn))
      .map((r) => [
        String(r.turn),
        fmtInt(r.historyImage),
        fmtInt(r.historyControl),
        fmtInt(r.requestImage),
        fmtInt(r.requestControl),
        r.carried ? 'yes' : 'no',
      ]),
  );
}

await main();
