/**
 * Salvage (DESIGN §4.1; issue 8): a session written by the real stack and damaged while no worker
 * ran is salvaged into new sessions through `SessionClient.salvage`, `POST
 * /v1/sessions/:id/salvage` and `sessionlog sessions salvage ID --into NEW_ID`. Each new session
 * derives the same history as the damaged log's valid prefix (plus the repair closers when the
 * prefix ends inside a turn), its header names the parent and the first bad seq, and it answers
 * a message end to end; the damaged session's stored data stays exactly as it was.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Session,
  interruptedTurnClosers,
  verifyLog,
  type SessionHeader,
  type StoredEvent,
} from '../../src/session/index.js';
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
if (!postgres.available) console.warn(`salvage tests: PostgreSQL skipped: ${postgres.reason}`);

let counter = 0;
const newId = (name: string) => `salvage-${name}-${Date.now()}-${counter++}`;

/** Everything stored for session `id`: its JSONL folder's files, or its rows in every table. */
function storedData(fixture: BackendFixture, url: string, id: string): string {
  if (fixture.name === 'jsonl') {
    const dir = join(url.slice('jsonl:'.length), id);
    const files = (sub: string): string[] =>
      readdirSync(join(dir, sub), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(join(sub, e.name)) : [join(sub, e.name)],
      );
    return files('')
      .sort()
      .map((file) => `${file}\n${readFileSync(join(dir, file), 'utf8')}`)
      .join('\n');
  }
  const tables = fixture
    .dump(url)
    .split('\n')
    .map((line) => {
      const colon = line.indexOf(':');
      return { name: line.slice(0, colon), rows: JSON.parse(line.slice(colon + 1)) as Array<Record<string, unknown>> };
    });
  const key = String(tables.find((t) => t.name === 'sessions')!.rows.find((r) => r.id === id)!.key);
  return tables
    .map(
      ({ name, rows }) =>
        `${name}:${JSON.stringify(rows.filter((r) => String(r.session_key ?? r.key) === key || r.id === id))}`,
    )
    .join('\n');
}

const FIXTURES: BackendFixture[] = [sqliteFixture, jsonlFixture, ...(postgres.available ? [postgresFixture] : [])];

describe.each(FIXTURES)('salvage: $name', (fixture) => {
  let world: StoreStack;
  let cleanup: () => void;
  beforeAll(async () => {
    const temp = tempDir('sessionlog-salvage-');
    cleanup = temp.cleanup;
    world = new StoreStack(fixture.url(temp.dir));
    await world.start();
  });
  afterAll(async () => {
    await world?.stop();
    if (fixture.name === 'postgres') dropPostgresTestSchemas();
    cleanup?.();
  });

  const damages = [
    {
      name: 'a garbled tool/result (the prefix ends inside turn 2, with a pending tool call)',
      pick: (events: StoredEvent[]) => events.find((e) => e.type === 'tool/result')!.seq,
    },
    {
      name: 'a garbled turn/start of turn 2 (the prefix ends after turn 1)',
      pick: (events: StoredEvent[]) => events.filter((e) => e.type === 'turn/start')[1]!.seq,
    },
  ];

  it.each(damages)(
    "$name: every way of salvaging derives the valid prefix's history, names parent and first bad seq, answers a message, and leaves the damaged session as it was",
    async ({ pick }) => {
      const id = newId('damaged');
      world.stack.fake.configure({ tokenDelayMs: 10 });
      expect((await world.client.send(id, 'hello, remember the number seven')).outcome).toBe('completed');
      world.stack.fake.enqueueReplies(
        { text: 'let me compute that', toolCalls: [{ name: 'calculator', arguments: { expression: '6*7' } }] },
        { text: 'it is 42' },
      );
      expect((await world.client.send(id, 'what is six times seven?')).text).toBe('it is 42');
      const bad = pick(await world.client.events(id));

      await world.stop();
      fixture.editRecord(world.url, id, bad, { kind: 'garble' });
      const damaged = storedData(fixture, world.url, id);
      await world.start();

      const scan = await world.client.store.scan(id);
      expect(scan.problem?.seq).toBe(bad);
      const parent = scan.header!;
      const prefix = [...scan.events];
      expect(prefix.length).toBe(bad);
      const expected = Session.fromEvents(parent, prefix);
      for (const closer of interruptedTurnClosers(prefix)) expected.append(closer);
      const expectedHistory = expected.deriveMessages();
      const lastTurn = prefix.filter((e) => e.type === 'turn/start').length;

      const viaClient = newId('via-client');
      const viaHttp = newId('via-http');
      const viaCli = newId('via-cli');
      const salvaged = await world.client.salvage(id, { into: viaClient });
      expect(salvaged.sessionId).toBe(viaClient);
      const http = await world.http('POST', `/v1/sessions/${id}/salvage`, { json: { into: viaHttp } });
      expect(http.status, JSON.stringify(http.body)).toBe(201);
      expect((http.body as { session: SessionHeader }).session.id).toBe(viaHttp);
      const cli = await world.cli(['sessions', 'salvage', id, '--into', viaCli]);
      expect(cli.code, cli.stderr).toBe(0);
      expect(cli.stdout).toContain(
        `salvaged ${id} into ${viaCli}: kept seqs 0-${bad - 1}; the log is damaged at seq ${bad}`,
      );

      for (const child of [viaClient, viaHttp, viaCli]) {
        const header = await world.client.header(child);
        expect(header).toMatchObject({ parentSession: id, seedLength: bad, salvagedAt: { firstBadSeq: bad } });
        expect(await world.client.history(child), `${child}: the valid prefix's history`).toEqual(expectedHistory);
        const reply = await world.client.send(child, 'are you still with me?');
        expect(reply.outcome).toBe('completed');
        expect(reply.text).toBe('echo: are you still with me?');
        expect(reply.turn).toBe(lastTurn + 1);
        expect(verifyLog(header, await world.client.events(child))).toEqual([]);
      }

      await world.stop();
      expect(storedData(fixture, world.url, id), 'the damaged session is left untouched').toBe(damaged);
      await world.start();
    },
    240_000,
  );
});
