/**
 * Child process for the paused-writer test (test/crash/paused-writer.test.ts).
 *
 *   node <bundle of this file> <storeUrl> <sessionId> <optionsJson>
 *
 * Opens the store with the given options and prints `READY`. For each stdin line
 * `APPEND <expectedSeq> <op> <pause>` it appends a two-event batch with that op; when `<pause>` is
 * `write` or `sync`, the process stops itself with SIGSTOP at that point of this append's durable
 * write, inside whatever lock the backend holds (JSONL: the positioned write of the log, or its
 * fsync; SQLite: inside the write transaction; PostgreSQL: inside the transaction that holds the
 * session row), after printing `PAUSED`. The parent resumes it with SIGCONT. Prints
 * `RESULT <op> OK <firstSeq> <lastSeq> <replayed 0|1>` or `RESULT <op> ERR <code>`.
 */
import { readlinkSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import pg from 'pg';
import { openStore, type StoreOptions } from '../../src/persistence/index.js';
import { isSessionlogError, type NewEvent } from '../../src/session/index.js';

let armed: 'write' | 'sync' | undefined;

function pauseHere(): void {
  armed = undefined;
  process.stdout.write('PAUSED\n');
  process.kill(process.pid, 'SIGSTOP');
}

function isSessionLog(fd: number): boolean {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`).endsWith('/session.jsonl');
  } catch {
    // An fd that is already closed: not the log.
    return false;
  }
}

/** Wraps the durable-write primitives each backend uses so an armed append stops at them. */
async function installPausePoints(): Promise<void> {
  const probe = await open(join(tmpdir(), `paused-writer-probe-${process.pid}`), 'w');
  const handleProto = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => unknown; sync: () => unknown };
  await probe.close();
  const write = handleProto.write;
  handleProto.write = function (this: { fd: number }, ...args: unknown[]) {
    if (armed === 'write' && isSessionLog(this.fd)) pauseHere();
    return write.apply(this, args);
  };
  const sync = handleProto.sync;
  handleProto.sync = function (this: { fd: number }) {
    if (armed === 'sync' && isSessionLog(this.fd)) pauseHere();
    return sync.apply(this);
  };

  const db = new Database(':memory:');
  const statementProto = Object.getPrototypeOf(db.prepare('SELECT 1')) as { run: (...args: unknown[]) => unknown };
  db.close();
  const run = statementProto.run;
  statementProto.run = function (this: { source: string }, ...args: unknown[]) {
    // SQLite: the batch's second row (its first carries the op), so the first is written already.
    if (armed !== undefined && this.source.startsWith('INSERT INTO events') && args[10] === null) pauseHere();
    return run.apply(this, args);
  };

  const clientProto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const query = clientProto.query;
  clientProto.query = function (this: unknown, ...args: unknown[]) {
    const text = typeof args[0] === 'string' ? args[0] : '';
    if (armed !== undefined && /INSERT INTO \S+\.batches/.test(text)) pauseHere();
    return query.apply(this, args);
  };
}

function batch(op: string): NewEvent[] {
  return [0, 1].map((i) => ({ type: 'session/run', time: 1, data: { workflowId: op, runId: String(i) } }));
}

async function main(): Promise<void> {
  const [url, id, optionsJson] = process.argv.slice(2) as [string, string, string];
  await installPausePoints();
  const store = await openStore(url, JSON.parse(optionsJson) as StoreOptions);
  process.stdout.write('READY\n');
  for await (const line of createInterface({ input: process.stdin })) {
    const match = /^APPEND (\d+) (\S+) (none|write|sync)$/.exec(line.trim());
    if (!match) continue;
    const [expectedSeq, op, pause] = [Number(match[1]), match[2]!, match[3]!];
    armed = pause === 'none' ? undefined : (pause as 'write' | 'sync');
    try {
      const result = await store.append(id, batch(op), { expectedSeq, op });
      process.stdout.write(`RESULT ${op} OK ${result.firstSeq} ${result.lastSeq} ${result.replayed ? 1 : 0}\n`);
    } catch (error) {
      process.stdout.write(
        `RESULT ${op} ERR ${isSessionlogError(error) ? error.code : `UNEXPECTED:${String(error).replace(/\s+/g, '_')}`}\n`,
      );
    }
  }
  await store.close();
}

main().catch((error: unknown) => {
  process.stderr.write(`paused writer failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
