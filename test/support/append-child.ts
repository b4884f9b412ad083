/**
 * Child process for persistence tests: opens a store and appends one batch, printing the
 * outcome as one JSON line. Usage:
 *   node --import tsx test/support/append-child.ts <storeUrl> <sessionId> <expectedSeq> <op> <count> [startAtEpochMs]
 * The optional start time lets several children race for the same seq.
 */
import { openStore } from '../../src/persistence/index.js';
import { isSessionlogError } from '../../src/session/index.js';

const [url, id, expected, op, count, startAt] = process.argv.slice(2);
const store = await openStore(url!, { pollIntervalMs: 20 });
try {
  if (startAt) {
    const wait = Number(startAt) - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
  const events = Array.from({ length: Number(count) }, (_, i) => ({
    type: 'session/run' as const,
    time: Date.now(),
    data: { workflowId: `wf-${op}`, runId: `run-${i}` },
  }));
  const result = await store.append(id!, events, { expectedSeq: Number(expected), op: op! });
  process.stdout.write(`${JSON.stringify({ ok: true, ...result })}\n`);
} catch (error) {
  const code = isSessionlogError(error) ? error.code : 'UNEXPECTED';
  process.stdout.write(`${JSON.stringify({ ok: false, code, message: (error as Error).message })}\n`);
} finally {
  await store.close();
}
