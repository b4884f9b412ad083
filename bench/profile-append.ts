/**
 * Where a batched SQLite append spends its CPU (issue 27): appends `--events` realistic events
 * in batches of `--batch` to a fresh SQLite store and, beside it, inserts the same rows raw;
 * run under `node --cpu-prof` to see the split by function:
 *
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/profile-append.ts [--events 50000]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openSqliteStore } from '../src/persistence/index.js';
import { benchHeader, realisticEvents, takeBatches } from './support/events.js';

const { values } = parseArgs({ options: { events: { type: 'string', default: '50000' }, batch: { type: 'string', default: '100' } } });
const dir = mkdtempSync(join(tmpdir(), 'sessionlog-profile-append-'));
const store = openSqliteStore(join(dir, 'sessions.db'));
const batches = takeBatches(realisticEvents(), Number(values.events), Number(values.batch));
await store.create(benchHeader('append'));
let seq = 0;
const start = performance.now();
for (let i = 0; i < batches.length; i++) {
  await store.append('append', batches[i]!, { expectedSeq: seq, op: `run/b${i}` });
  seq += batches[i]!.length;
}
const ms = performance.now() - start;
console.log(`${seq} events in ${ms.toFixed(0)} ms: ${Math.round((seq / ms) * 1000)} events/s`);
await store.close();
rmSync(dir, { recursive: true, force: true });
