/**
 * Child process for the two-writer conflict test (test/crash/concurrent-writers.test.ts).
 *
 *   node <bundle of this file> <storeUrl> <sessionId> <writerName>
 *
 * Opens the store, prints `READY`, then for each stdin line `ROUND <r> <expectedSeq> <startAtMs>`
 * waits until the wall clock reaches `startAtMs` (so both writers fire together) and appends a
 * two-event batch with op `<writerName>-r<r>` at `expectedSeq`. Prints
 * `RESULT <r> OK <firstSeq> <lastSeq> <replayed 0|1>` or `RESULT <r> ERR <code>`.
 */
import { createInterface } from 'node:readline';
import { openStore } from '../../src/persistence/index.js';
import { isSessionlogError, type NewEvent } from '../../src/session/index.js';

async function waitUntil(startAt: number): Promise<void> {
  const coarse = startAt - Date.now() - 2;
  if (coarse > 0) await new Promise((resolve) => setTimeout(resolve, coarse));
  // Spin the last milliseconds so both writers leave the gate within the same tick.
  while (Date.now() < startAt) {
    // busy wait
  }
}

function racingBatch(writer: string, round: number): NewEvent[] {
  return [0, 1].map((i) => ({
    type: 'session/run',
    time: round,
    data: { workflowId: `${writer}-r${round}`, runId: String(i) },
  }));
}

async function main(): Promise<void> {
  const [url, id, writer] = process.argv.slice(2) as [string, string, string];
  const store = await openStore(url, { pollIntervalMs: 20 });
  process.stdout.write('READY\n');
  for await (const line of createInterface({ input: process.stdin })) {
    const match = /^ROUND (\d+) (\d+) (\d+)$/.exec(line.trim());
    if (!match) continue;
    const [round, expectedSeq, startAt] = [Number(match[1]), Number(match[2]), Number(match[3])];
    await waitUntil(startAt);
    try {
      const result = await store.append(id, racingBatch(writer, round), { expectedSeq, op: `${writer}-r${round}` });
      process.stdout.write(`RESULT ${round} OK ${result.firstSeq} ${result.lastSeq} ${result.replayed ? 1 : 0}\n`);
    } catch (error) {
      process.stdout.write(
        `RESULT ${round} ERR ${isSessionlogError(error) ? error.code : `UNEXPECTED:${String(error).replace(/\s+/g, '_')}`}\n`,
      );
    }
  }
  await store.close();
}

main().catch((error: unknown) => {
  process.stderr.write(`racing writer failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
