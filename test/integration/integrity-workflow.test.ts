/**
 * Issue 8's operator reproducers at the workflow level (DESIGN §4.1, §5): sessions written by the
 * real stack (Temporal, worker, store, fake model), damaged while no worker ran, then used again
 * through the SessionClient, the HTTP gateway and the CLI.
 *
 * - A garbled or deleted record: `sessions verify` names its seq and exits 1; `history` and
 *   `export` fail with CORRUPT_LOG; a new message fails with CORRUPT_LOG naming the session and
 *   the seq (client and CLI; HTTP answers the error shape with that code and what to do, as a
 *   5xx never carries the store's own message); nothing on disk changes.
 * - A deleted final `turn/end`: the next run closes the turn with repair closers before the next
 *   turn starts; turn numbering stays right.
 * - A store restored from an older backup: LOG_BEHIND with the fix in the message, nothing
 *   appended; `sessions resume` continues from what the log holds.
 * - Another writer appending behind the workflow's back: LOG_AHEAD.
 */
import { cpSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/persistence/open.js';
import {
  SessionlogError,
  verifyLog,
  type KnownEventType,
  type SessionEvent,
  type StoredEvent,
} from '../../src/session/index.js';
import { eventually } from '../support/log-wait.js';
import { StoreStack } from '../support/store-stack.js';
import {
  dropPostgresTestSchemas,
  jsonlFixture,
  postgresFixture,
  probePostgres,
  sqliteFixture,
  tempDir,
  type BackendFixture,
} from '../support/store-fixtures.js';

const postgres = await probePostgres();
if (!postgres.available) console.warn(`workflow integrity tests: PostgreSQL skipped: ${postgres.reason}`);

const ofType = <K extends KnownEventType>(events: readonly StoredEvent[], type: K) =>
  events.filter((e) => e.type === type) as Array<SessionEvent<K>>;

let counter = 0;
const newId = (name: string) => `integrity-${name}-${Date.now()}-${counter++}`;

/** The error a promise rejects with (fails the test when it resolves). */
async function refusalOf(promise: Promise<unknown>): Promise<SessionlogError> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in outcome)) throw new Error(`expected a refusal, got ${JSON.stringify(outcome.value)}`);
  expect(outcome.error).toBeInstanceOf(SessionlogError);
  return outcome.error as SessionlogError;
}

async function waitStopped(world: StoreStack, id: string): Promise<void> {
  await eventually(async () => ((await world.client.isRunning(id)) ? undefined : true), 30_000, 100);
}

/** SQLite: removes the stored final event and shrinks its batch to match, so the log is intact but shorter. */
function deleteFinalSqliteEvent(url: string, id: string): void {
  const db = new Database(url.slice('sqlite:'.length), { fileMustExist: true });
  try {
    const { key } = db.prepare('SELECT key FROM sessions WHERE id = ?').get(id) as { key: number };
    const { seq } = db.prepare('SELECT max(seq) AS seq FROM events WHERE session_key = ?').get(key) as { seq: number };
    db.prepare('DELETE FROM events WHERE session_key = ? AND seq = ?').run(key, seq);
    // The batch's last seq is on its first row.
    db.prepare(
      'UPDATE events SET batch_last_seq = batch_last_seq - 1 WHERE session_key = ? AND batch_last_seq = ?',
    ).run(key, seq);
  } finally {
    db.close();
  }
}

/** JSONL: cuts the final line in half without its newline, as a crash inside the final write would. */
function tearFinalJsonlLine(url: string, id: string): void {
  const path = join(url.slice('jsonl:'.length), id, 'session.jsonl');
  const text = readFileSync(path, 'utf8').replace(/\n$/, '');
  const lastLine = text.slice(text.lastIndexOf('\n') + 1);
  writeFileSync(path, text.slice(0, text.length - Math.ceil(lastLine.length / 2)));
}

/** The files (SQLite) or directory (JSONL) holding the store, for a backup copy. */
function storePaths(url: string): string[] {
  if (url.startsWith('jsonl:')) return [url.slice('jsonl:'.length)];
  const db = url.slice('sqlite:'.length);
  const dir = dirname(db);
  const base = db.slice(dir.length + 1);
  return readdirSync(dir)
    .filter((name) => name === base || name.startsWith(`${base}-`))
    .map((name) => join(dir, name));
}

function backup(url: string, into: string): void {
  for (const path of storePaths(url))
    cpSync(path, join(into, path.slice(dirname(path).length + 1)), { recursive: true });
}

function restore(url: string, from: string): void {
  for (const path of storePaths(url)) rmSync(path, { recursive: true, force: true });
  const target = url.startsWith('jsonl:') ? dirname(url.slice('jsonl:'.length)) : dirname(url.slice('sqlite:'.length));
  for (const name of readdirSync(from)) cpSync(join(from, name), join(target, name), { recursive: true });
}

const FIXTURES: BackendFixture[] = [sqliteFixture, jsonlFixture, ...(postgres.available ? [postgresFixture] : [])];

describe.each(FIXTURES)('workflow-level integrity: $name', (fixture) => {
  let world: StoreStack;
  let cleanup: () => void;
  let dir: string;
  beforeAll(async () => {
    ({ dir, cleanup } = tempDir('sessionlog-integrity-'));
    world = new StoreStack(fixture.url(dir));
    await world.start();
  });
  afterAll(async () => {
    await world?.stop();
    if (fixture.name === 'postgres') dropPostgresTestSchemas();
    cleanup?.();
  });

  /** A session of `turns` answered turns, written through the real stack; returns its events. */
  async function converse(id: string, turns: number): Promise<StoredEvent[]> {
    // Several chunk batches per reply, so a chunk can be damaged in the middle of a turn.
    world.stack.fake.configure({ tokenDelayMs: 25, firstTokenDelayMs: 0 });
    for (let turn = 1; turn <= turns; turn++) {
      const reply = await world.client.send(
        id,
        `message ${turn} of ${id}: tell me about the number ${turn} in a few words please`,
      );
      expect(reply.outcome).toBe('completed');
      expect(reply.turn).toBe(turn);
    }
    return world.client.events(id);
  }

  const damages = [
    {
      name: 'a garbled user/message of turn 2',
      pick: (events: StoredEvent[]) => ofType(events, 'user/message').at(-1)!.seq,
      edit: { kind: 'garble' } as const,
    },
    {
      name: 'a deleted assistant/chunk in the middle of turn 1',
      pick: (events: StoredEvent[]) => {
        const chunks = ofType(events, 'assistant/chunk').filter((e) => e.data.turn === 1);
        expect(chunks.length).toBeGreaterThan(2);
        return chunks[Math.floor(chunks.length / 2)]!.seq;
      },
      edit: { kind: 'delete' } as const,
    },
  ];

  it.each(damages)(
    '$name: verify names the seq and exits 1, history and export fail with CORRUPT_LOG, a new message fails with CORRUPT_LOG (client and CLI naming session and seq, HTTP in the error shape), and nothing on disk changes',
    async ({ pick, edit }) => {
      const id = newId('damaged');
      const events = await converse(id, 2);
      const seq = pick(events);
      // Damaged while no worker ran; the session's workflow stays open in Temporal.
      await world.stop();
      fixture.editRecord(world.url, id, seq, edit);
      const damaged = fixture.dump(world.url);
      await world.start();
      const namesSessionAndSeq = (message: string) => {
        expect(message).toContain(id);
        expect(message).toContain(`seq ${seq}`);
      };

      const verify = await world.cli(['--json', 'sessions', 'verify', id]);
      expect(verify.code, verify.stderr).toBe(1);
      const report = JSON.parse(verify.stdout) as {
        ok: boolean;
        violations: Array<{ seq: number | null; rule: string }>;
      };
      expect(report.ok).toBe(false);
      expect(report.violations).toContainEqual(expect.objectContaining({ seq, rule: 'stored-record' }));

      for (const command of ['history', 'export']) {
        const result = await world.cli(['sessions', command, id]);
        expect(result.code, `sessions ${command}`).toBe(1);
        expect(result.stdout, `sessions ${command} prints nothing of a refused log`).toBe('');
        expect(result.stderr).toMatch(/CORRUPT_LOG/);
        namesSessionAndSeq(result.stderr);
      }
      expect((await refusalOf(world.client.history(id))).code).toBe('CORRUPT_LOG');
      expect((await refusalOf(world.client.export(id))).code).toBe('CORRUPT_LOG');

      // The running workflow refuses the log when its step opens it.
      const viaClient = await refusalOf(world.client.send(id, 'are you there?'));
      expect(viaClient.code).toBe('CORRUPT_LOG');
      namesSessionAndSeq(viaClient.message);

      // A new run refuses it when it opens the session.
      const viaHttp = await world.http('POST', `/v1/sessions/${id}/messages?wait=true`, {
        json: { text: 'are you there?' },
      });
      const body = viaHttp.body as { error: { code: string; message: string } };
      expect(Object.keys(body)).toEqual(['error']);
      expect(body.error.code).toBe('CORRUPT_LOG');
      expect(viaHttp.status).toBe(500);
      // A 5xx never carries the store's own message (it names where the data lives): it says what to do.
      expect(body.error.message).toMatch(/sessions verify/);
      expect(body.error.message).not.toContain(dir);

      const viaCli = await world.cli(['send', id, 'are', 'you', 'there?']);
      expect(viaCli.code).toBe(1);
      expect(viaCli.stderr).toMatch(/CORRUPT_LOG/);
      expect(viaCli.stderr).not.toMatch(/Workflow Update failed/);
      namesSessionAndSeq(viaCli.stderr);

      await world.stop();
      expect(fixture.dump(world.url), 'the damaged store is exactly as it was').toBe(damaged);
      await world.start();
    },
    240_000,
  );

  it.skipIf(fixture.name === 'postgres')(
    'a deleted final turn/end is closed with repair closers before the next turn starts, and turn numbering stays right',
    async () => {
      const id = newId('open-turn');
      const before = await converse(id, 2);
      expect(before.at(-1)!.type).toBe('turn/end');
      await world.client.close(id);
      await waitStopped(world, id);
      await world.stop();
      // SQLite: the row is gone and its batch shortened (an intact, shorter log). JSONL: the final
      // write is torn, so the store drops that whole unfinished batch (the reply and its turn/end).
      if (fixture.name === 'sqlite') deleteFinalSqliteEvent(world.url, id);
      else tearFinalJsonlLine(world.url, id);
      await world.start();
      const kept = await world.client.events(id);
      expect(kept.length).toBeLessThan(before.length);
      expect(kept).toEqual(before.slice(0, kept.length));

      const reply = await world.client.send(id, 'and now?');
      expect(reply.outcome).toBe('completed');
      expect(reply.turn).toBe(3);
      const after = await world.client.events(id);
      expect(after.slice(0, kept.length), 'nothing stored was removed or rewritten').toEqual(kept);
      const starts = ofType(after, 'turn/start');
      const ends = ofType(after, 'turn/end');
      expect(starts.map((e) => e.data.turn)).toEqual([1, 2, 3]);
      expect(ends.map((e) => [e.data.turn, e.data.reason.kind])).toEqual([
        [1, 'completed'],
        [2, 'interrupted'],
        [3, 'completed'],
      ]);
      expect(ends[1]!.seq, 'turn 2 is closed before turn 3 starts').toBeLessThan(starts[2]!.seq);
      expect(verifyLog(await world.client.header(id), after)).toEqual([]);
    },
    180_000,
  );

  it.skipIf(fixture.name === 'postgres')(
    'a store restored from an older backup stops the session with LOG_BEHIND and the fix, appends nothing, and sessions resume continues from what the log holds',
    async () => {
      const id = newId('restored');
      await converse(id, 2);
      await world.stop();
      const copy = tempDir('sessionlog-backup-');
      try {
        backup(world.url, copy.dir);
        await world.start();
        for (const turn of [3, 4]) expect((await world.client.send(id, `message ${turn}`)).turn).toBe(turn);
        await world.stop();
        restore(world.url, copy.dir);
      } finally {
        copy.cleanup();
      }
      const restored = fixture.dump(world.url);
      await world.start();
      const behind = await refusalOf(world.client.send(id, 'message 5'));
      expect(behind.code).toBe('LOG_BEHIND');
      expect(behind.message).toContain(id);
      expect(behind.message).toContain(`sessionlog sessions resume ${id}`);
      await waitStopped(world, id);
      await world.stop();
      expect(fixture.dump(world.url), 'nothing was appended to the restored log').toBe(restored);
      await world.start();

      const resumed = await world.cli(['sessions', 'resume', id]);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(resumed.stdout).toMatch(/^resumed /);
      const reply = await world.client.send(id, 'message 5 again');
      expect(reply.outcome).toBe('completed');
      expect(reply.turn).toBe(3);
      const events = await world.client.events(id);
      expect(ofType(events, 'turn/start').map((e) => e.data.turn)).toEqual([1, 2, 3]);
      expect(verifyLog(await world.client.header(id), events)).toEqual([]);
    },
    240_000,
  );

  it("another writer appending behind the workflow's back stops the session with LOG_AHEAD", async () => {
    const id = newId('ahead');
    await converse(id, 1);
    const intruder = await openStore(world.url);
    let foreign: number;
    try {
      foreign = await intruder.nextSeq(id);
      await intruder.append(
        id,
        [{ type: 'session/run', time: Date.now(), data: { workflowId: 'someone-else', runId: 'intruder-run' } }],
        { expectedSeq: foreign, op: 'intruder-run/run' },
      );
    } finally {
      await intruder.close();
    }
    const ahead = await refusalOf(world.client.send(id, 'who wrote that?'));
    expect(ahead.code).toBe('LOG_AHEAD');
    expect(ahead.message).toContain(id);
    expect(ahead.message).toContain(`event ${foreign}`);
    expect(ahead.message).toContain(`sessionlog sessions resume ${id}`);
    const events = await world.client.events(id);
    expect(events.at(-1)!.seq, 'the workflow appended nothing after the foreign event').toBe(foreign);
  }, 120_000);
});
