/**
 * Child process for the session-key race across processes (test/persistence/multiprocess.test.ts):
 * opens a store, waits until the start time, obtains the session's key and prints it as one JSON
 * line. Usage:
 *   node --import tsx test/support/session-key-child.ts <storeUrl> <sessionId> <startAtEpochMs>
 */
import { openStore } from '../../src/persistence/index.js';
import { isSessionlogError } from '../../src/session/index.js';

const [url, id, startAt] = process.argv.slice(2);
const store = await openStore(url!, { pollIntervalMs: 20 });
try {
  const wait = Number(startAt) - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  const key = await store.sessionKeys.obtain(id!);
  process.stdout.write(`${JSON.stringify({ ok: true, id: key.id, key: key.key.toString('hex') })}\n`);
} catch (error) {
  const code = isSessionlogError(error) ? error.code : 'UNEXPECTED';
  process.stdout.write(`${JSON.stringify({ ok: false, code, message: (error as Error).message })}\n`);
} finally {
  await store.close();
}
