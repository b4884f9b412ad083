/**
 * Erasure leaves no byte of the session's text in the store (DESIGN §4.2, issue 8): SQLite
 * overwrites the deleted rows (secure_delete), removes the words from the contentless FTS5 search
 * index itself (given each row's words again, with its `secure-delete` option; or rebuilding the
 * index when a row no longer has the words it was indexed with) and empties the WAL, so the text
 * is in neither the database file nor its -wal or -shm; JSONL removes the session's folder;
 * PostgreSQL deletes the rows from every table, the `search` vectors with them. A unique text is
 * written into the header, the events and an artifact (the projection checkpoint, also erased,
 * holds seqs), and is found in the store's files and search index before the erase (so the check
 * can fail). The same holds for the session's inbox entries and data key, also of an id that has
 * nothing else (they may be written before the session exists), and for the transcript index
 * entries that name it (their caller scope and digest).
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { ALL_TENANTS, openStore, readDerivedHistory, type SessionStore } from '../../src/persistence/index.js';
import { SESSION_FORMAT_VERSION, type NewEvent, type SessionHeader } from '../../src/session/index.js';
import {
  POSTGRES_TEST_URL,
  postgresTestSchema,
  postgresUrlWithSchema,
  probePostgres,
  tempDir,
} from '../support/store-fixtures.js';

const postgres = await probePostgres();
if (!postgres.available) console.warn(`erase tests: PostgreSQL skipped: ${postgres.reason}`);

const T0 = 1_700_000_000_000;

function header(id: string, system: string): SessionHeader {
  return { version: SESSION_FORMAT_VERSION, id, createdAt: T0, agent: { model: 'fake', system } };
}

function user(id: string, text: string): NewEvent {
  return {
    type: 'user/message',
    time: T0,
    data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
    surfaceOp: 'append',
  };
}

/** Writes a session whose text is `secret` everywhere the store keeps something of it, in many batches. */
async function populate(store: SessionStore, id: string, secret: string): Promise<void> {
  await store.create(header(id, `system prompt ${secret}`));
  for (let i = 0; i < 40; i++)
    await store.append(id, [user(`${id}-${i}`, `message ${i}: ${secret} ${'pad '.repeat(50)}`)], {
      expectedSeq: i,
      op: `b${i}`,
    });
  await store.artifacts.put({ sessionId: id, name: 'tool-out.txt', content: `tool output ${secret}` });
  await readDerivedHistory(store, id);
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(path));
    else out.push(path);
  }
  return out;
}

/**
 * A unique text `<prefix>-w<hex>`. Its word starts with a letter: PostgreSQL's parser reads a
 * word of hex digits such as `50584e300d2b060a` as a number in exponent notation and splits it.
 */
function uniqueText(prefix: string): string {
  return `${prefix}-w${randomBytes(8).toString('hex')}`;
}

/** The word the search index keeps of `erase-w<hex>`: the part after "-" (the index splits there). */
function indexedWordOf(secret: string): string {
  return secret.split('-')[1]!;
}

function filesContaining(paths: readonly string[], text: string): string[] {
  const needle = Buffer.from(text, 'utf8');
  return paths.filter((path) => existsSync(path) && readFileSync(path).includes(needle));
}

/** What the SQLite search index holds of `word`: rows matching it, index segments holding its tail, and the digests of all rows. */
function indexed(db: Database.Database, word: string): { matches: number; segments: number; digests: number } {
  return {
    matches: (db.prepare(`SELECT count(*) AS n FROM search WHERE search MATCH ?`).get(`"${word}"`) as { n: number }).n,
    // Segment leaves store terms prefix-compressed; the word's tail is stored verbatim.
    segments: (
      db.prepare(`SELECT count(*) AS n FROM search_data WHERE instr(block, ?) > 0`).get(Buffer.from(word.slice(4))) as {
        n: number;
      }
    ).n,
    digests: (db.prepare(`SELECT count(*) AS n FROM search_rows`).get() as { n: number }).n,
  };
}

const stores: SessionStore[] = [];
const cleanups: Array<() => void> = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function open(url: string): Promise<SessionStore> {
  const store = await openStore(url);
  stores.push(store);
  return store;
}

/** A SQLite store in a fresh directory, and the unique texts of the session to erase and of the one to keep. */
async function openSqliteWithSecrets(
  prefix: string,
): Promise<{ path: string; secret: string; kept: string; store: SessionStore }> {
  const { dir, cleanup } = tempDir(prefix);
  cleanups.push(cleanup);
  const path = join(dir, 'store.db');
  const store = await open(`sqlite:${path}`);
  return { path, secret: uniqueText('erase'), kept: uniqueText('keep'), store };
}

describe('erase leaves no byte of the session in the store', () => {
  it('SQLite: the text is in neither the database file nor its -wal or -shm after erase, while another session keeps its own', async () => {
    const { path, secret, kept, store } = await openSqliteWithSecrets('sessionlog-erase-sqlite-');
    await populate(store, 'gone', secret);
    // Move part of the data into the main database file, as SQLite's automatic checkpoints do.
    const raw = new Database(path);
    raw.pragma('wal_checkpoint(TRUNCATE)');
    raw.close();
    await store.append('gone', [user('late', `after the checkpoint ${secret}`)], { expectedSeq: 40, op: 'late' });
    await populate(store, 'kept', kept);
    const files = [path, `${path}-wal`, `${path}-shm`];
    expect(filesContaining(files, secret).length).toBeGreaterThan(0);
    // Searched, the sessions' words are in the index segments (and a digest per row): appends
    // do not index, a session's next search does.
    const word = indexedWordOf(secret);
    expect((await store.search('gone', word, { limit: 100 })).length).toBe(41);
    expect((await store.search('kept', indexedWordOf(kept), { limit: 100 })).length).toBe(40);
    const before = new Database(path, { readonly: true });
    expect(indexed(before, word)).toEqual({ matches: 41, segments: expect.any(Number), digests: 81 });
    expect(indexed(before, word).segments).toBeGreaterThan(0);
    before.close();

    const receipt = await store.erase('gone', ALL_TENANTS);
    expect(receipt).toMatchObject({
      erased: true,
      removed: { header: 1, events: 41, artifacts: 1, projectionCheckpoints: 1 },
    });
    expect(receipt.places).toContainEqual({ place: `sqlite:${path} table search`, removed: 41 });
    expect(receipt.notes.join(' ')).toMatch(/checkpointed and truncated/);
    expect(receipt.notes.join(' ')).not.toMatch(/rebuilt/);
    expect(filesContaining(files, secret)).toEqual([]);
    expect(filesContaining(files, word.slice(4))).toEqual([]);
    expect(statSync(`${path}-wal`).size).toBe(0);
    await store.close();
    expect(filesContaining(files, secret)).toEqual([]);
    expect(filesContaining(files, word.slice(4))).toEqual([]);
    expect(filesContaining(files, kept)).toEqual([path]);
    const after = new Database(path);
    expect(indexed(after, word)).toEqual({ matches: 0, segments: 0, digests: 40 });
    // Removing entries from the segments in place left a consistent index.
    after.prepare(`INSERT INTO search (search) VALUES ('integrity-check')`).run();
    after.close();
    const reopened = await open(`sqlite:${path}`);
    expect((await reopened.readFrom('kept', 0)).length).toBe(40);
    expect((await reopened.search('kept', indexedWordOf(kept), { limit: 100 })).length).toBe(40);
  });

  it('SQLite: a row edited in the file after it was indexed cannot be unindexed by its words, so erase rebuilds the index and no word of the session stays', async () => {
    const { path, secret, kept, store } = await openSqliteWithSecrets('sessionlog-erase-sqlite-edited-');
    await populate(store, 'gone', secret);
    await populate(store, 'kept', kept);
    // Searched, both sessions are indexed (appends do not index, a session's next search does).
    expect((await store.search('gone', indexedWordOf(secret), { limit: 100 })).length).toBe(40);
    expect((await store.search('kept', indexedWordOf(kept), { limit: 100 })).length).toBe(40);
    // Someone edits message 7 of the session by hand: its words are no longer the indexed ones.
    const raw = new Database(path);
    const key = (raw.prepare(`SELECT key FROM sessions WHERE id = 'gone'`).get() as { key: number }).key;
    const edited = raw
      .prepare(`UPDATE events SET data = replace(data, 'message 7:', 'edited 7:') WHERE session_key = ? AND seq = 7`)
      .run(key);
    raw.close();
    expect(edited.changes).toBe(1);
    const files = [path, `${path}-wal`, `${path}-shm`];
    const word = indexedWordOf(secret);
    expect(filesContaining(files, word.slice(4)).length).toBeGreaterThan(0);

    const receipt = await store.erase('gone', ALL_TENANTS);
    expect(receipt.erased).toBe(true);
    expect(receipt.notes.join(' ')).toMatch(/the whole search index was rebuilt/);
    await store.close();
    expect(filesContaining(files, secret)).toEqual([]);
    expect(filesContaining(files, word.slice(4))).toEqual([]);
    const after = new Database(path);
    expect(indexed(after, word)).toEqual({ matches: 0, segments: 0, digests: 40 });
    after.prepare(`INSERT INTO search (search) VALUES ('integrity-check')`).run();
    after.close();
    const reopened = await open(`sqlite:${path}`);
    expect((await reopened.search('kept', indexedWordOf(kept), { limit: 100 })).length).toBe(40);
  });

  it('JSONL: the session folder is gone and no file under the root holds the text; the tombstone is kept apart', async () => {
    const { dir, cleanup } = tempDir('sessionlog-erase-jsonl-');
    cleanups.push(cleanup);
    const root = join(dir, 'root');
    const secret = uniqueText('erase');
    const store = await open(`jsonl:${root}`);
    await populate(store, 'gone', secret);
    await populate(store, 'kept', uniqueText('keep'));
    expect(
      filesContaining(filesUnder(root), secret)
        .map((path) => path.slice(root.length))
        .sort(),
    ).toEqual(['/gone/artifacts/tool-out.txt', '/gone/session.jsonl']);
    expect(existsSync(join(root, 'gone', 'projection-cache.json'))).toBe(true);

    await store.erase('gone', ALL_TENANTS);
    expect(existsSync(join(root, 'gone'))).toBe(false);
    expect(filesContaining(filesUnder(root), secret)).toEqual([]);
    // JSONL keeps no search index: search scans the log, which is gone.
    await expect(store.search('gone', indexedWordOf(secret))).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
    expect(readdirSync(root).sort()).toEqual(['.tombstones', 'kept']);
    expect(readdirSync(join(root, '.tombstones'))).toEqual(['gone.json']);
  });

  it('SQLite: inbox bodies and the session key are in neither the database file nor its -wal or -shm after erase, also for an id that has nothing else', async () => {
    const { path, secret, kept, store } = await openSqliteWithSecrets('sessionlog-erase-sqlite-inbox-');
    const early = uniqueText('early');
    await populate(store, 'gone', secret);
    await store.inbox.put('gone', 'm1', `inbox body ${secret}`);
    const key = await store.sessionKeys.obtain('gone');
    await store.inbox.put('early', 'm1', `written before the session ${early}`);
    const earlyKey = await store.sessionKeys.obtain('early');
    await store.inbox.put('kept', 'm1', `inbox body ${kept}`);
    // Move part of the data into the main database file, as SQLite's automatic checkpoints do.
    const raw = new Database(path);
    raw.pragma('wal_checkpoint(TRUNCATE)');
    raw.close();
    await store.inbox.put('gone', 'm2', `after the checkpoint ${secret}`);
    const files = [path, `${path}-wal`, `${path}-shm`];
    const holding = (bytes: Buffer): string[] =>
      files.filter((file) => existsSync(file) && readFileSync(file).includes(bytes));
    for (const bytes of [Buffer.from(secret), key.key, Buffer.from(early), earlyKey.key])
      expect(holding(bytes).length).toBeGreaterThan(0);

    expect(await store.erase('gone', ALL_TENANTS)).toMatchObject({ removed: { inboxEntries: 2, sessionKey: 1 } });
    expect(await store.erase('early', ALL_TENANTS)).toMatchObject({
      erased: true,
      removed: { inboxEntries: 1, sessionKey: 1 },
    });
    await store.close();
    for (const bytes of [Buffer.from(secret), key.key, Buffer.from(early), earlyKey.key])
      expect(holding(bytes)).toEqual([]);
    expect(holding(Buffer.from(kept))).toEqual([path]);
  });

  it('JSONL: inbox entries and the session key go with the session folder, also for an id that has nothing else', async () => {
    const { dir, cleanup } = tempDir('sessionlog-erase-jsonl-inbox-');
    cleanups.push(cleanup);
    const root = join(dir, 'root');
    const secret = uniqueText('erase');
    const store = await open(`jsonl:${root}`);
    await populate(store, 'gone', secret);
    await store.inbox.put('gone', 'm1', `inbox body ${secret}`);
    await store.sessionKeys.obtain('gone');
    await store.inbox.put('early', 'm1', `written before the session ${secret}`);
    const key = await store.sessionKeys.obtain('early');
    expect(existsSync(join(root, 'gone', 'session.key'))).toBe(true);
    expect(filesContaining(filesUnder(root), secret).filter((path) => path.includes('/inbox/'))).toHaveLength(2);

    await store.erase('gone', ALL_TENANTS);
    await store.erase('early', ALL_TENANTS);
    expect(filesContaining(filesUnder(root), secret)).toEqual([]);
    expect(filesUnder(root).filter((path) => readFileSync(path).includes(key.key.toString('base64')))).toEqual([]);
    expect(readdirSync(root).sort()).toEqual(['.tombstones']);
    expect(readdirSync(join(root, '.tombstones')).sort()).toEqual(['early.json', 'gone.json']);
  });

  it('SQLite: the scope and digest of every transcript index entry naming the session are in neither the database file nor its -wal or -shm after erase; those of another session stay', async () => {
    const { path, store } = await openSqliteWithSecrets('sessionlog-erase-sqlite-transcripts-');
    const scope = uniqueText('scope');
    const digests = [randomBytes(32).toString('hex'), randomBytes(32).toString('hex')];
    const keptDigest = randomBytes(32).toString('hex');
    await store.create(header('gone', 'sys'));
    await store.create(header('kept', 'sys'));
    await store.transcripts.put(scope, digests[0]!, { sessionId: 'gone', seq: 1 });
    // Move part of the data into the main database file, as SQLite's automatic checkpoints do.
    const raw = new Database(path);
    raw.pragma('wal_checkpoint(TRUNCATE)');
    raw.close();
    await store.transcripts.put(scope, digests[1]!, { sessionId: 'gone', seq: 2 });
    await store.transcripts.put('kept-caller', keptDigest, { sessionId: 'kept', seq: 3 });
    const files = [path, `${path}-wal`, `${path}-shm`];
    const holding = (text: string): string[] =>
      files.filter((file) => existsSync(file) && readFileSync(file).includes(Buffer.from(text)));
    for (const text of [scope, ...digests]) expect(holding(text).length, text).toBeGreaterThan(0);

    expect(await store.erase('gone', ALL_TENANTS)).toMatchObject({ removed: { transcriptEntries: 2 } });
    await store.close();
    for (const text of [scope, ...digests]) expect(holding(text), text).toEqual([]);
    expect(holding(keptDigest)).toEqual([path]);
    const reopened = await open(`sqlite:${path}`);
    expect(await reopened.transcripts.get('kept-caller', keptDigest)).toEqual({ sessionId: 'kept', seq: 3 });
  });

  it("JSONL: the session's transcript index entries go with its folder and no pointer names it after erase; another session's stay", async () => {
    const { dir, cleanup } = tempDir('sessionlog-erase-jsonl-transcripts-');
    cleanups.push(cleanup);
    const root = join(dir, 'root');
    const scope = uniqueText('scope');
    const store = await open(`jsonl:${root}`);
    await store.create(header('gone', 'sys'));
    await store.create(header('kept', 'sys'));
    await store.transcripts.put(scope, 'a'.repeat(64), { sessionId: 'gone', seq: 1 });
    await store.transcripts.put(scope, 'b'.repeat(64), { sessionId: 'gone', seq: 2 });
    await store.transcripts.put(scope, 'c'.repeat(64), { sessionId: 'kept', seq: 3 });
    const pointers = (): string[] => filesUnder(join(root, '.transcripts'));
    const naming = (id: string): string[] => filesContaining(pointers(), JSON.stringify({ sessionId: id }));
    expect(naming('gone')).toHaveLength(2);
    expect(filesContaining(filesUnder(root), scope)).toHaveLength(3);

    expect(await store.erase('gone', ALL_TENANTS)).toMatchObject({ removed: { transcriptEntries: 2 } });
    expect(naming('gone')).toEqual([]);
    expect(filesContaining(filesUnder(root), scope).map((path) => path.slice(root.length))).toEqual([
      `/kept/transcripts/${createHash('sha256')
        .update(`${scope}\n${'c'.repeat(64)}`)
        .digest('hex')}.json`,
    ]);
    expect(pointers()).toEqual(naming('kept'));
    expect(readdirSync(root).sort()).toEqual(['.tombstones', '.transcripts', 'kept']);
  });

  it.skipIf(!postgres.available)(
    'PostgreSQL: no row of any table holds the session or its text after erase',
    async () => {
      const schema = postgresTestSchema();
      const admin = new pg.Client({ connectionString: POSTGRES_TEST_URL });
      await admin.connect();
      try {
        const secret = uniqueText('erase');
        const store = await open(postgresUrlWithSchema(schema));
        await populate(store, 'gone', secret);
        await store.inbox.put('gone', 'm1', `inbox body ${secret}`);
        await store.sessionKeys.obtain('gone');
        const scope = uniqueText('scope');
        await store.transcripts.put(scope, randomBytes(32).toString('hex'), { sessionId: 'gone', seq: 7 });
        await populate(store, 'kept', uniqueText('keep'));
        const everything = async (): Promise<string> => {
          const tables = (
            await admin.query<{ tablename: string }>(
              `SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`,
              [schema],
            )
          ).rows;
          const dumps: string[] = [];
          for (const { tablename } of tables) {
            // bytea (artifact content) as text, so the search sees it.
            const rows = (await admin.query(`SELECT * FROM "${schema}"."${tablename}"`)).rows as Array<
              Record<string, unknown>
            >;
            dumps.push(
              `${tablename}:${JSON.stringify(rows.map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Buffer.isBuffer(v) ? v.toString('utf8') : v]))))}`,
            );
          }
          return dumps.join('\n');
        };
        expect(await everything()).toContain(secret);
        expect(await everything()).toContain(scope);
        const key = (await admin.query<{ key: string }>(`SELECT key FROM "${schema}".sessions WHERE id = 'gone'`))
          .rows[0]!.key;
        const word = indexedWordOf(secret);
        const vectorsWith = async (): Promise<number> =>
          Number(
            (
              await admin.query<{ n: string }>(
                `SELECT count(*) AS n FROM "${schema}".events WHERE search @@ plainto_tsquery('simple', $1)`,
                [word],
              )
            ).rows[0]!.n,
          );
        expect(await vectorsWith()).toBe(40);
        expect(await everything()).toContain(`'${word}'`);

        const receipt = await store.erase('gone', ALL_TENANTS);
        expect(receipt).toMatchObject({
          erased: true,
          removed: {
            header: 1,
            events: 40,
            artifacts: 1,
            projectionCheckpoints: 1,
            inboxEntries: 1,
            sessionKey: 1,
            transcriptEntries: 1,
          },
        });
        expect(await everything()).not.toContain(secret);
        expect(await everything()).not.toContain(scope);
        for (const table of ['inbox', 'session_keys'])
          expect(
            (await admin.query(`SELECT 1 FROM "${schema}"."${table}" WHERE session_id = 'gone'`)).rowCount,
            table,
          ).toBe(0);
        expect(await everything()).not.toContain(word);
        expect(await vectorsWith()).toBe(0);
        for (const table of ['events', 'batches', 'artifacts', 'projection_cache', 'transcripts']) {
          expect(
            (await admin.query(`SELECT 1 FROM "${schema}"."${table}" WHERE session_key = $1`, [key])).rowCount,
            table,
          ).toBe(0);
        }
        expect((await admin.query(`SELECT id FROM "${schema}".tombstones`)).rows).toEqual([{ id: 'gone' }]);
      } finally {
        for (const store of stores.splice(0)) await store.close();
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
      }
    },
  );
});
