/**
 * Temporal holds references only (DESIGN §5.2, issue 23), against the real stack (Temporal dev
 * server, SQLite, the fake model over HTTP, a worker):
 *
 * - what callers send (a message by update and by signal, a note's metadata and messages, an
 *   approval's reason and edited arguments, an external tool's output) is found in no byte of
 *   any of the session's workflow histories, while the log holds each of them (so the check
 *   can fail); and every payload of those histories is sealed with the session's key;
 * - a history grows by the same few KiB per turn whether the message is 80 bytes, 1 MiB or
 *   8 MiB (each under 8 KiB), and a message larger than the model's context is logged as a
 *   preview with a locator whose artifact holds every byte;
 * - a send retried with the same id (the update sent twice, the inbox written twice) logs one
 *   user message, and leaves no inbox entry behind;
 * - an inbox entry whose update never came is left for `verify` and `erase`, never logged.
 */
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEALED_ENCODING } from '../../src/client/session-codec.js';
import { inboxKeys } from '../../src/persistence/index.js';
import { isEventOfType, type StoredEvent } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import * as PATCHES from '../../src/workflows/patches.js';
import { waitForEvent } from '../support/log-wait.js';
import { startStack, type Stack } from '../support/stack.js';

const { temporal } = proto;

const TOOLS: Tool[] = [
  {
    name: 'deploy',
    description: 'Deploys the service to a target.',
    parameters: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
    approval: 'always',
    run: (args) => Promise.resolve({ text: `deployed to ${(args as { target: string }).target}` }),
  },
  {
    name: 'browser_click',
    description: "Clicks an element in the user's browser (run by the caller).",
    parameters: { type: 'object', properties: { selector: { type: 'string' } }, required: ['selector'] },
    external: true,
  },
];

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    tunables: { maxMessageBytes: 9 * 1024 * 1024 },
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, ...TOOLS]),
      agent: {
        model: 'fake',
        system: 'You are a test assistant.',
        tools: ['read_artifact', 'deploy', 'browser_click'],
      },
    },
  });
});
afterAll(async () => {
  await stack?.close();
});

let counter = 0;
const newId = (name: string) => `refs-${name}-${Date.now()}-${counter++}`;
const marker = (label: string) => `${label.toUpperCase()}-${Math.random().toString(36).slice(2, 12)}`;

/** Every run of the session's workflow, newest first, each as its encoded history. */
async function histories(sessionId: string): Promise<Array<{ runId: string; bytes: Uint8Array; events: number }>> {
  const out = [];
  for await (const execution of stack.temporal.workflow.list({ query: `WorkflowId = '${workflowIdFor(sessionId)}'` })) {
    const history = await stack.temporal.workflow.getHandle(workflowIdFor(sessionId), execution.runId).fetchHistory();
    out.push({
      runId: execution.runId,
      bytes: temporal.api.history.v1.History.encode(history).finish(),
      events: history.events?.length ?? 0,
    });
  }
  return out;
}

/**
 * The current run's history: its encoded size and every payload in it but the SDK's own
 * bookkeeping of a local activity (its marker's `data`: seq, attempt, activity type, times),
 * which the SDK core writes without a codec and which holds nothing of the session.
 */
async function currentHistory(sessionId: string): Promise<{
  bytes: number;
  payloads: proto.temporal.api.common.v1.IPayload[];
  patchMarkers: proto.temporal.api.common.v1.IPayload[];
  changeVersions: proto.temporal.api.common.v1.IPayload[];
}> {
  const history = await stack.temporal.workflow.getHandle(workflowIdFor(sessionId)).fetchHistory();
  const payloads: proto.temporal.api.common.v1.IPayload[] = [];
  const patchMarkers: proto.temporal.api.common.v1.IPayload[] = [];
  const changeVersions: proto.temporal.api.common.v1.IPayload[] = [];
  // Written by Temporal's SDK, not through the codec: a local activity marker's metadata
  // (`data`: skipped), and a patch's marker (`patch-data`) and `TemporalChangeVersion` search
  // attribute, both held to the ids of patches.ts below.
  const listFor = (key: string, name: string, into: typeof payloads): typeof payloads | undefined => {
    if (key === 'details' && name === 'data') return undefined;
    if (key === 'details' && name === 'patch-data') return patchMarkers;
    if (key === 'indexedFields' && name === 'TemporalChangeVersion') return changeVersions;
    return into;
  };
  const collect = (value: unknown, key: string, into = payloads): void => {
    if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return;
    if (Array.isArray(value)) return value.forEach((item) => collect(item, key, into));
    const record = value as Record<string, unknown>;
    if (record.metadata && typeof record.metadata === 'object' && 'data' in record)
      into.push(record as proto.temporal.api.common.v1.IPayload);
    else
      for (const [name, item] of Object.entries(record)) {
        const list = listFor(key, name, into);
        if (list) collect(item, name, list);
      }
  };
  collect(history.events, 'events');
  return {
    bytes: temporal.api.history.v1.History.encode(history).finish().length,
    payloads,
    patchMarkers,
    changeVersions,
  };
}

function holds(bytes: Uint8Array, text: string): boolean {
  return Buffer.from(bytes).includes(Buffer.from(text, 'utf8'));
}

const logText = (events: readonly StoredEvent[]) => JSON.stringify(events);

describe('Temporal holds references only', () => {
  it('no caller input reaches any workflow history, though the log holds all of it; every payload is sealed', async () => {
    const id = newId('inputs');
    const texts = {
      sent: marker('sent'),
      posted: marker('posted'),
      noteValue: marker('note-value'),
      noteMessage: marker('note-message'),
      reason: marker('reason'),
      edited: marker('edited'),
      output: marker('output'),
    };
    await stack.client.start({ sessionId: id });
    expect((await stack.client.send(id, `please remember ${texts.sent}`)).outcome).toBe('completed');
    await stack.client.note(id, {
      metadata: { values: { project: texts.noteValue } },
      messages: [{ text: `background: ${texts.noteMessage}` }],
    });
    const posted = await stack.client.post(id, `and also ${texts.posted}`);
    await waitForEvent(stack.client, id, (e) => isEventOfType(e, 'turn/end') && e.data.turn === 2);

    // An approval with a reason and edited arguments, then an external tool's output.
    stack.fake.enqueueReplies(
      { text: 'Deploying.', toolCalls: [{ id: 'd1', name: 'deploy', arguments: { target: 'staging' } }] },
      { text: 'Clicking.', toolCalls: [{ id: 'c1', name: 'browser_click', arguments: { selector: '#go' } }] },
      { text: 'all done' },
    );
    const turn = stack.client.send(id, 'deploy it and click go');
    await waitForEvent(stack.client, id, (e) => isEventOfType(e, 'tool/approval-request') && e.data.callId === 'd1');
    const approved = await stack.client.approve(id, 'd1', {
      decision: 'approve',
      reason: `go ahead ${texts.reason}`,
      arguments: JSON.stringify({ target: texts.edited }),
    });
    expect(approved).toMatchObject({ callId: 'd1', decision: 'approve', reason: `go ahead ${texts.reason}` });
    await waitForEvent(stack.client, id, (e) => isEventOfType(e, 'tool/approval-request') && e.data.callId === 'c1');
    await stack.client.submitToolResult(id, 'c1', `clicked: ${texts.output}`);
    expect((await turn).outcome).toBe('completed');

    const events = await stack.client.events(id);
    const log = logText(events);
    const answer = events.find(
      (e): e is Extract<StoredEvent, { type: 'tool/approval' }> =>
        isEventOfType(e, 'tool/approval') && e.data.callId === 'c1',
    );
    expect(await stack.store.artifacts.get(id, answer!.data.result!.locator)).toContain(texts.output);
    for (const [name, text] of Object.entries(texts)) {
      if (name !== 'output') expect(log.includes(text), `the log holds ${name}`).toBe(true);
    }
    expect(events.some((e) => isEventOfType(e, 'user/message') && e.data.id === posted.id)).toBe(true);

    const runs = await histories(id);
    expect(runs.length).toBeGreaterThan(0);
    for (const run of runs)
      for (const [name, text] of Object.entries(texts))
        expect(holds(run.bytes, text), `run ${run.runId} holds ${name}`).toBe(false);

    const { payloads, patchMarkers, changeVersions } = await currentHistory(id);
    expect(payloads.length).toBeGreaterThan(10);
    const encodings = new Set(payloads.map((p) => Buffer.from(p.metadata!.encoding ?? []).toString()));
    expect([...encodings]).toEqual([SEALED_ENCODING]);
    // A patch's marker and search attribute hold only the patch's id, as the SDK writes them.
    const json = (payload: proto.temporal.api.common.v1.IPayload): unknown =>
      JSON.parse(Buffer.from(payload.data ?? []).toString());
    expect(patchMarkers.length).toBeGreaterThan(0);
    for (const marker of patchMarkers) {
      const { id: patchId, ...rest } = json(marker) as { id: string };
      expect(Object.values(PATCHES)).toContain(patchId);
      expect(Object.keys(rest)).toEqual(['deprecated']);
    }
    expect(changeVersions.length).toBeGreaterThan(0);
    for (const ids of changeVersions)
      for (const patchId of json(ids) as string[]) expect(Object.values(PATCHES)).toContain(patchId);
    expect(await stack.store.inbox.list(id)).toEqual([]);
  }, 120_000);

  it('a 1 MiB and an 8 MiB message each add under 8 KiB to the history; the log keeps them whole behind a preview', async () => {
    const id = newId('big');
    await stack.client.start({ sessionId: id });
    const growth: Record<string, number> = {};
    const sizes = { '80 B': 80, '1 MiB': 1024 * 1024, '8 MiB': 8 * 1024 * 1024, 'again 80 B': 80 };
    for (const [label, size] of Object.entries(sizes)) {
      const before = (await currentHistory(id)).bytes;
      const head = marker('head');
      const text = `${head} ${'lorem ipsum dolor sit amet '.repeat(Math.ceil(size / 27))}`.slice(0, size);
      const reply = await stack.client.send(id, text);
      expect(reply.outcome, label).toBe('completed');
      growth[label] = (await currentHistory(id)).bytes - before;
      const logged = (await stack.client.events(id)).filter((e) => isEventOfType(e, 'user/message')).at(-1)!;
      const loggedText = (logged.data.content[0] as { text: string }).text;
      if (size < 1024) expect(loggedText).toBe(text);
      else {
        // Behind a preview: the log's event names the artifact that holds every byte.
        expect(loggedText.length).toBeLessThan(20 * 1024);
        const locator = /Full result stored at: (\S+)\. Read/.exec(loggedText)?.[1];
        expect(locator, loggedText.slice(-400)).toBeDefined();
        const whole = await stack.store.artifacts.get(id, locator!);
        expect(whole).toBe(text);
      }
    }
    for (const [label, bytes] of Object.entries(growth)) expect(bytes, label).toBeLessThan(8 * 1024);
    console.log(`history bytes per turn: ${JSON.stringify(growth)}`);
  }, 240_000);

  it('a send retried with the same id logs one user message and leaves no inbox entry', async () => {
    const id = newId('retry');
    await stack.client.start({ sessionId: id });
    const text = `only once ${marker('once')}`;
    const [a, b] = await Promise.all([
      stack.client.send(id, text, { id: 'm-1' }),
      stack.client.send(id, text, { id: 'm-1' }),
    ]);
    expect(a.turn).toBe(b.turn);
    const again = await stack.client.send(id, text, { id: 'm-1' });
    expect(again.turn).toBe(a.turn);
    const logged = (await stack.client.events(id)).filter((e) => isEventOfType(e, 'user/message'));
    expect(logged.map((e) => e.data.id)).toEqual(['m-1']);
    expect(await stack.store.inbox.list(id)).toEqual([]);
  }, 60_000);

  it('an inbox entry whose update never came is not logged, and a new run leaves it for verify and erase', async () => {
    const id = newId('orphan');
    await stack.client.start({ sessionId: id });
    const ref = await stack.store.inbox.put(id, inboxKeys.message('never-sent'), JSON.stringify({ text: 'hello?' }));
    expect((await stack.client.send(id, 'a real message')).outcome).toBe('completed');
    await stack.temporal.workflow.getHandle(workflowIdFor(id)).terminate('test: a new run opens the session');
    expect((await stack.client.resume(id)).started).toBe(true);
    expect((await stack.client.send(id, 'after the new run')).outcome).toBe('completed');
    const entries = await stack.store.inbox.list(id);
    expect(entries.map((e) => e.key)).toEqual([ref.key]);
    const logged = (await stack.client.events(id)).filter((e) => isEventOfType(e, 'user/message'));
    expect(logged.map((e) => (e.data.content[0] as { text: string }).text)).toEqual([
      'a real message',
      'after the new run',
    ]);
    const report = await stack.client.verify(id);
    expect(report.inboxWaiting).toEqual([ref.key]);
  }, 60_000);
});
