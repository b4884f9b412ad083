/**
 * Where the bytes a turn writes go (issue 27): runs turns of one session (80-character
 * questions, 1,600-character replies from the zero-latency fake model) through a real worker
 * on a SQLite store and, after each turn, reads the WAL frames the turn appended: how many
 * commits, and which table or index each written page belongs to (SQLite's `dbstat`). Beside
 * it, the log bytes the turn added (its events' JSON) and the process's block-layer
 * `write_bytes` (WAL frames, checkpoints copying them into the database, everything else).
 * Byte counts do not depend on the machine's load.
 *
 *   scripts/temporal-dev-server run -- npx tsx bench/wal-bytes.ts [--turns 12] [--report 3-12]
 */
import { randomUUID } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { startFakeModelServer } from '../src/model/fake-server.js';
import { openSqliteStore } from '../src/persistence/index.js';
import { replyTextFor } from './support/fake-model-process.js';
import { startInProcessStack } from './support/in-process.js';
import { fmtBytes, fmtRatio, machineLine, printGrid, printTable } from './support/report.js';
import { processWrites } from './support/turn-probe.js';

const { values } = parseArgs({
  options: { turns: { type: 'string', default: '12' }, from: { type: 'string', default: '3' } },
});
const TURNS = Number(values.turns);
const FROM = Number(values.from);

/** Reads the WAL frames appended since the last call: page numbers and commit marks. */
class WalReader {
  private salt = -1;
  private next = 0;
  constructor(private readonly path: string) {}

  read(): { pages: number[]; commits: number; pageSize: number } {
    const pages: number[] = [];
    let commits = 0;
    let size: number;
    try {
      size = statSync(this.path).size;
    } catch {
      return { pages, commits, pageSize: 4096 };
    }
    if (size < 32) return { pages, commits, pageSize: 4096 };
    const fd = openSync(this.path, 'r');
    try {
      const header = Buffer.alloc(32);
      readSync(fd, header, 0, 32, 0);
      const pageSize = header.readUInt32BE(8);
      const salt = header.readUInt32BE(16);
      if (salt !== this.salt) {
        // A new WAL generation (after a checkpoint restart): its frames start at 0.
        this.salt = salt;
        this.next = 0;
      }
      const frameSize = 24 + pageSize;
      const frameHeader = Buffer.alloc(24);
      for (;;) {
        const at = 32 + this.next * frameSize;
        if (at + frameSize > size) break;
        readSync(fd, frameHeader, 0, 24, at);
        // Frames of this generation carry its salt; stale frames of an older one end the log.
        if (frameHeader.readUInt32BE(8) !== salt) break;
        pages.push(frameHeader.readUInt32BE(0));
        if (frameHeader.readUInt32BE(4) !== 0) commits += 1;
        this.next += 1;
      }
      return { pages, commits, pageSize };
    } finally {
      closeSync(fd);
    }
  }
}

async function main(): Promise<void> {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address) throw new Error('set TEMPORAL_ADDRESS (scripts/temporal-dev-server run -- npx tsx bench/wal-bytes.ts)');
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  console.log(`bench/wal-bytes.ts · ${machineLine()} · ${TURNS} turns, turns ${FROM}–${TURNS} reported`);
  const dir = mkdtempSync(join(tmpdir(), 'sessionlog-bench-wal-'));
  const dbPath = join(dir, 'sessions.db');
  const store = openSqliteStore(dbPath);
  const fake = await startFakeModelServer({ tokenDelayMs: 0, firstTokenDelayMs: 0 });
  fake.setMatcher(({ lastUserText }) => {
    const turn = /^question (\d+)/.exec(lastUserText)?.[1];
    return turn === undefined ? undefined : { text: replyTextFor(Number(turn)) };
  });
  const stack = await startInProcessStack({ address, store, baseURL: fake.baseURL, name: 'wal' });
  const client = stack.client;
  const reader = new WalReader(`${dbPath}-wal`);
  const pageOwners = new Database(dbPath, { readonly: true });
  const owners = (): Map<number, string> =>
    new Map(
      (pageOwners.prepare('SELECT name, pageno FROM dbstat').all() as Array<{ name: string; pageno: number }>).map(
        (row) => [row.pageno, row.name],
      ),
    );
  const byOwner = new Map<string, number>();
  let frames = 0;
  let commits = 0;
  let logBytes = 0;
  let diskBytes = 0;
  let pageSize = 4096;
  const id = `wal-${randomUUID().slice(0, 8)}`;
  try {
    await client.create({ sessionId: id });
    reader.read();
    for (let turn = 1; turn <= TURNS; turn++) {
      const before = processWrites();
      const seqBefore = await client.nextSeq(id);
      await client.send(id, `question ${turn}: ${'x'.repeat(60)}`.slice(0, 80));
      const after = processWrites();
      const read = reader.read();
      if (turn < FROM) continue;
      pageSize = read.pageSize;
      frames += read.pages.length;
      commits += read.commits;
      const map = owners();
      for (const page of read.pages) {
        const owner = map.get(page) ?? (page === 1 ? 'database header' : 'free or new pages');
        byOwner.set(owner, (byOwner.get(owner) ?? 0) + 1);
      }
      for (const event of await client.events(id, seqBefore)) logBytes += Buffer.byteLength(JSON.stringify(event));
      if (before && after) diskBytes += after.writeBytes - before.writeBytes;
    }
  } finally {
    pageOwners.close();
    await stack.close();
    await fake.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const turns = TURNS - FROM + 1;
  const frameBytes = pageSize + 24;
  printGrid(
    `Bytes per turn, turns ${FROM}–${TURNS} (mean of ${turns})`,
    ['figure', 'per turn', '× log bytes'],
    [
      ['log events (their JSON)', fmtBytes(logBytes / turns), '1.0'],
      [
        `WAL frames written (${(frames / turns).toFixed(1)} pages of ${pageSize} B in ${(commits / turns).toFixed(1)} commits)`,
        fmtBytes((frames * frameBytes) / turns),
        ((frames * frameBytes) / logBytes).toFixed(1),
      ],
      ['block-layer write_bytes of the process', fmtBytes(diskBytes / turns), (diskBytes / logBytes).toFixed(1)],
    ],
  );
  printGrid(
    'WAL pages per turn by table or index',
    ['table or index', 'pages per turn', 'bytes per turn', 'share'],
    [...byOwner]
      .sort((a, b) => b[1] - a[1])
      .map(([owner, count]) => [
        owner,
        (count / turns).toFixed(1),
        fmtBytes((count * frameBytes) / turns),
        `${((count / frames) * 100).toFixed(0)}%`,
      ]),
  );
  const walRatio = (frames * frameBytes) / logBytes;
  printTable(`Bytes written per turn against issue 27's target, turns ${FROM}–${TURNS}`, [
    {
      name: `WAL bytes per turn ÷ log bytes (${pageSize} B pages)`,
      value: fmtRatio(walRatio),
      target: '≤ 10×',
      met: walRatio <= 10,
    },
    { name: 'block-layer write_bytes per turn ÷ log bytes', value: fmtRatio(diskBytes / logBytes) },
  ]);
}

await main();
