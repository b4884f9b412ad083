/**
 * SQLite group commit: the appends several sessions ask for in one turn of the event loop share
 * one transaction and one commit; each is in a savepoint of its own, so one that fails fails
 * alone; none is reported written before the commit; closing the store commits what was asked.
 */
import { closeSync, mkdtempSync, openSync, readSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqliteStore, type SqliteSessionStore } from '../../src/persistence/index.js';
import { isSessionlogError } from '../../src/session/index.js';
import { closedTurn, testHeader, userMessage } from '../support/persistence-events.js';

let dir: string;
let path: string;
const stores: SqliteSessionStore[] = [];

function open(): SqliteSessionStore {
  const store = openSqliteStore(path);
  stores.push(store);
  return store;
}

/** Commit frames in the WAL file (a frame whose "database size after commit" field is not 0). */
function walCommits(): number {
  const wal = `${path}-wal`;
  let size: number;
  try {
    size = statSync(wal).size;
  } catch {
    return 0;
  }
  const fd = openSync(wal, 'r');
  try {
    const header = Buffer.alloc(32);
    readSync(fd, header, 0, 32, 0);
    const pageSize = header.readUInt32BE(8);
    const salt = [header.readUInt32BE(16), header.readUInt32BE(20)];
    let commits = 0;
    const frame = Buffer.alloc(24);
    for (let at = 32; at + 24 + pageSize <= size; at += 24 + pageSize) {
      readSync(fd, frame, 0, 24, at);
      // Frames of an older WAL generation (salts differ) are not part of the log.
      if (frame.readUInt32BE(8) !== salt[0] || frame.readUInt32BE(12) !== salt[1]) break;
      if (frame.readUInt32BE(4) !== 0) commits++;
    }
    return commits;
  } finally {
    closeSync(fd);
  }
}

const SESSIONS = 12;
const ids = Array.from({ length: SESSIONS }, (_, i) => `g${i}`);

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sessionlog-group-'));
  path = join(dir, 'store.db');
  const store = open();
  for (const id of ids) await store.create(testHeader(id));
});

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('SQLite group commit', () => {
  it('commits appends of several sessions asked for together in one commit, each durable', async () => {
    const store = stores[0]!;
    const before = walCommits();
    await Promise.all(ids.map((id) => store.append(id, closedTurn(1), { expectedSeq: 0, op: `${id}/t1` })));
    expect(walCommits() - before).toBe(1);
    // A lone append is a commit of its own.
    await store.append('g0', closedTurn(2), { expectedSeq: 6, op: 'g0/t2' });
    expect(walCommits() - before).toBe(2);
    await store.close();
    const reopened = open();
    for (const id of ids) expect(await reopened.nextSeq(id)).toBe(id === 'g0' ? 12 : 6);
  });

  it('fails one write of a group alone (its savepoint is rolled back) and commits the others', async () => {
    const store = stores[0]!;
    const results = await Promise.allSettled(
      ids.map((id, i) =>
        // One writer is wrong about the head, one appends a batch that breaks the surface rules.
        i === 3
          ? store.append(id, closedTurn(1), { expectedSeq: 5, op: `${id}/t1` })
          : i === 7
            ? store.append(id, [{ ...userMessage('m', 'x'), surfaceOp: { op: 'replace', start: 40, end: 41 } }], {
                expectedSeq: 0,
                op: `${id}/bad`,
              })
            : store.append(id, closedTurn(1), { expectedSeq: 0, op: `${id}/t1` }),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(SESSIONS - 2);
    const failed = results[3]!;
    expect(failed.status === 'rejected' && isSessionlogError(failed.reason, 'SEQ_CONFLICT')).toBe(true);
    expect(results[7]!.status).toBe('rejected');
    await store.close();
    const reopened = open();
    for (const [i, id] of ids.entries()) expect(await reopened.nextSeq(id)).toBe(i === 3 || i === 7 ? 0 : 6);
  });

  it('commits the writes asked for when the store closes before their turn of the event loop', async () => {
    const store = stores[0]!;
    const pending = ids.map((id) => store.append(id, closedTurn(1), { expectedSeq: 0, op: `${id}/t1` }));
    // Let them reach the driver: microtasks all run before the group commit's setImmediate.
    for (let i = 0; i < 50; i++) await Promise.resolve();
    const closing = store.close();
    const settled = await Promise.allSettled(pending);
    await closing;
    expect(settled.map((s) => s.status)).toEqual(ids.map(() => 'fulfilled'));
    const reopened = open();
    for (const id of ids) expect(await reopened.nextSeq(id)).toBe(6);
  });
});
