/**
 * Tool calls run with their session's identity (issue: boundaries): the engine gives every tool
 * the calling session's id, never one from the model's arguments, and `read_artifact` refuses a
 * locator of another session — on every backend, driven through the engine without Temporal.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { createTurnEngine, type EngineDeps, type StepContext } from '../../src/engine/index.js';
import { createOpenAIProvider } from '../../src/model/provider.js';
import { openStore } from '../../src/persistence/open.js';
import type { SessionStore } from '../../src/persistence/store.js';
import { SESSION_FORMAT_VERSION, type NewEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import {
  dropPostgresTestSchemas,
  jsonlFixture,
  postgresTestSchema,
  postgresUrlWithSchema,
  probePostgres,
  sqliteFixture,
  tempDir,
} from '../support/store-fixtures.js';

const postgres = await probePostgres();
const cleanups: Array<() => void> = [];
afterAll(() => {
  for (const cleanup of cleanups) cleanup();
  if (postgres.available) dropPostgresTestSchemas();
});

function storeUrl(name: 'sqlite' | 'jsonl' | 'postgres'): string {
  if (name === 'postgres') return postgresUrlWithSchema(postgresTestSchema());
  const { dir, cleanup } = tempDir('sessionlog-isolation-');
  cleanups.push(cleanup);
  return (name === 'sqlite' ? sqliteFixture : jsonlFixture).url(dir);
}

const context: StepContext = {
  attempt: 1,
  signal: new AbortController().signal,
  heartbeat: () => undefined,
  cancelRequested: () => false,
};

function engineOver(store: SessionStore) {
  const deps: EngineDeps = {
    store,
    // Never called: tools run without a model.
    model: createOpenAIProvider({ baseURL: 'http://127.0.0.1:9/v1', apiKey: 'unused' }),
    tools: new ToolRegistry(BUILTIN_TOOLS),
    agent: { model: 'fake', tools: ['read_artifact'] },
    approval: { mode: 'never' },
    heartbeatMs: 60_000,
    now: Date.now,
  };
  return createTurnEngine(deps);
}

/** A session whose open step logged a `read_artifact` call with `args`; returns the call's seq. */
async function sessionCalling(store: SessionStore, id: string, args: unknown): Promise<number> {
  if (!(await store.exists(id))) await store.create({ version: SESSION_FORMAT_VERSION, id, createdAt: 1 });
  const events: NewEvent[] = [
    { type: 'turn/start', time: 1, data: { turn: 1 } },
    { type: 'step/start', time: 1, data: { turn: 1, step: 1 } },
    {
      type: 'user/message',
      time: 1,
      data: { id: `u-${id}`, role: 'user', content: [{ type: 'text', text: 'read it' }], source: { kind: 'user' } },
      surfaceOp: 'append',
    },
    {
      type: 'assistant/message',
      time: 1,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: `a-${id}`,
          role: 'assistant',
          content: [{ type: 'tool-call', id: 'call-1', name: 'read_artifact', arguments: JSON.stringify(args) }],
          source: { kind: 'model', provider: 'fake', model: 'fake' },
        },
      },
      surfaceOp: 'append',
    },
    {
      type: 'tool/call',
      time: 1,
      data: { turn: 1, step: 1, callId: 'call-1', name: 'read_artifact', arguments: JSON.stringify(args) },
    },
  ];
  await store.append(id, events, { expectedSeq: 0, op: 'seed' });
  return events.length - 1;
}

const backends = (['sqlite', 'jsonl', 'postgres'] as const).filter((b) => b !== 'postgres' || postgres.available);

describe.each(backends)('tool isolation on %s', (backend) => {
  it("read_artifact in session attacker refuses session victim's locator, and reads its own", async () => {
    const store = await openStore(storeUrl(backend));
    try {
      await store.create({ version: SESSION_FORMAT_VERSION, id: 'victim', createdAt: 1 });
      const secret = await store.artifacts.put({
        sessionId: 'victim',
        name: 'calculator-call_1.txt',
        content: 'the victim’s private tool output',
      });
      const engine = engineOver(store);

      const callSeq = await sessionCalling(store, 'attacker', { locator: secret.locator });
      const ref = await engine.runTool({ sessionId: 'attacker', turn: 1, step: 1, callSeq, maxAttempts: 1 }, context);
      expect(ref.isError).toBe(true);
      const output = await store.artifacts.get('attacker', ref.locator);
      expect(output).not.toContain('private');
      expect(output).toMatch(/does not belong to session attacker/);

      await store.create({ version: SESSION_FORMAT_VERSION, id: 'reader', createdAt: 1 });
      const own = await store.artifacts.put({ sessionId: 'reader', name: 'mine.txt', content: 'my own output' });
      const ownSeq = await sessionCalling(store, 'reader', { locator: own.locator });
      const mine = await engine.runTool(
        { sessionId: 'reader', turn: 1, step: 1, callSeq: ownSeq, maxAttempts: 1 },
        context,
      );
      expect(mine.isError).toBe(false);
      expect(await store.artifacts.get('reader', mine.locator)).toContain('my own output');
    } finally {
      await store.close();
    }
  });
});

describe('tool isolation, as a property', () => {
  it('no locator a model can write makes read_artifact return another session’s artifact', async () => {
    const store = await openStore(storeUrl('sqlite'));
    try {
      const engine = engineOver(store);
      const sessions = ['s-a', 's-b', 's-c'];
      const planted = new Map<string, string>();
      for (const id of sessions) {
        await store.create({ version: SESSION_FORMAT_VERSION, id, createdAt: 1 });
        const text = `secret-of-${id}`;
        const ref = await store.artifacts.put({ sessionId: id, name: 'out.txt', content: text });
        planted.set(id, ref.locator);
      }
      let n = 0;
      const locatorArb = fc.oneof(
        fc.constantFrom(...planted.values()),
        fc
          .tuple(
            fc.constantFrom(...sessions, '..', 's-a/../s-b', '', 'S-A'),
            fc.constantFrom('out.txt', '../out.txt', 'out.txt/', '%2e%2e', 'out'),
          )
          .map(([s, name]) => `artifact:${s}/${name}`),
        fc.string(),
      );
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...sessions), locatorArb, async (caller, locator) => {
          const id = `caller-${n++}`;
          const callSeq = await sessionCalling(store, id, { locator });
          const ref = await engine.runTool({ sessionId: id, turn: 1, step: 1, callSeq, maxAttempts: 1 }, context);
          const output = await store.artifacts.get(id, ref.locator);
          for (const other of sessions)
            expect(output.includes(`secret-of-${other}`), `${caller} read ${other} through ${locator}`).toBe(false);
        }),
        { numRuns: 120 },
      );
    } finally {
      await store.close();
    }
  });
});
