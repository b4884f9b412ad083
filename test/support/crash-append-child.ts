/**
 * Child process for the SIGKILL crash test (test/crash/store-crash.test.ts).
 *
 *   node --import tsx test/support/crash-append-child.ts <storeUrl> <sessionId>
 *
 * Opens the store, prints `READY`, waits for a stdin line `GO <n>`, then appends batches with
 * ops `b<n>`, `b<n+1>`, … forever, printing `ACK <op> <firstSeq> <lastSeq> <replayed 0|1>`
 * after each `append` resolves (stdout to a pipe is synchronous on Linux, so a printed ACK
 * reaches the parent even if the child is killed right after). Batch contents are a pure
 * function of `n` (`crashBatch` in crash-batches.ts) so the parent can verify every stored batch.
 */
import { createInterface } from 'node:readline';
import { openStore } from '../../src/persistence/index.js';
import { crashBatch } from './crash-batches.js';

async function main(): Promise<void> {
  const [url, id] = process.argv.slice(2);
  const store = await openStore(url!, { pollIntervalMs: 20 });
  const lines = createInterface({ input: process.stdin });
  process.stdout.write('READY\n');
  let start: number | undefined;
  for await (const line of lines) {
    const match = /^GO (\d+)$/.exec(line.trim());
    if (match) {
      start = Number(match[1]);
      break;
    }
  }
  if (start === undefined) return;
  let expectedSeq = await store.nextSeq(id!);
  for (let n = start; ; n++) {
    const result = await store.append(id!, crashBatch(n), { expectedSeq, op: `b${n}` });
    process.stdout.write(`ACK b${n} ${result.firstSeq} ${result.lastSeq} ${result.replayed ? 1 : 0}\n`);
    expectedSeq = result.replayed ? await store.nextSeq(id!) : result.lastSeq + 1;
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`crash child failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
