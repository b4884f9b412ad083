/**
 * Records workflow histories for the replay test (test/workflows/replay.test.ts). Run against a
 * dev server after an intended workflow change:
 *
 *   scripts/temporal-dev-server run -- npx tsx test/support/record-histories.ts [SCENARIO…]
 *
 * Each scenario runs on the in-process stack; its closed or running histories are written to
 * test/fixtures/histories/<prefix><scenario>.history.pb (protobuf-encoded History), with
 * `RECORD_PREFIX` (default none) as the prefix. With scenario names, only those are recorded
 * (the other fixtures stay as recorded by older builds, which is what the replay test is for);
 * without, all of them.
 *
 * Histories are sealed with their sessions' keys (DESIGN §5.2): each recorded session's key is
 * added to test/fixtures/histories/keys.json, which the replay test opens them with. These keys
 * guard nothing but the fixtures' own made-up conversations.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import proto from '@temporalio/proto';

const { temporal } = proto;
import { SessionClient } from '../../src/client/session-client.js';
import { isEventOfType } from '../../src/session/index.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { ToolRegistry, type Tool } from '../../src/tools/registry.js';
import { workflowIdFor } from '../../src/workflows/api.js';
import { waitForEvent } from './log-wait.js';
import { TEST_TUNABLES, startStack, type Stack } from './stack.js';

const OUT = new URL('../fixtures/histories/', import.meta.url).pathname;

/** A tool that needs approval, and one the caller runs: the approval scenarios use them. */
const RECORDING_TOOLS: Tool[] = [
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

const PREFIX = process.env.RECORD_PREFIX ?? '';
const KEYS = join(OUT, 'keys.json');

async function save(stack: Stack, name: string, sessionId: string, runId?: string): Promise<void> {
  const handle = stack.temporal.workflow.getHandle(workflowIdFor(sessionId));
  const run = runId ?? (await handle.describe()).runId;
  const history = await stack.temporal.workflow.getHandle(workflowIdFor(sessionId), run).fetchHistory();
  writeFileSync(join(OUT, `${PREFIX}${name}.history.pb`), temporal.api.history.v1.History.encode(history).finish());
  const key = await stack.store.sessionKeys.find(sessionId);
  if (key) {
    const keys = existsSync(KEYS) ? (JSON.parse(readFileSync(KEYS, 'utf8')) as Record<string, unknown>) : {};
    keys[sessionId] = { id: key.id, key: key.key.toString('base64') };
    writeFileSync(KEYS, `${JSON.stringify(keys, null, 2)}\n`);
  }
  console.log(`recorded ${PREFIX}${name} (${history.events?.length ?? 0} events)`);
}

/** Waits for the approval request of `callId` in the session's log. */
function requested(stack: Stack, sessionId: string, callId: string): Promise<unknown> {
  return waitForEvent(
    stack.client,
    sessionId,
    (e) => isEventOfType(e, 'tool/approval-request') && e.data.callId === callId,
  );
}

const SCENARIOS: Record<string, (stack: Stack, stamp: number) => Promise<void>> = {
  async 'tools-and-close'(stack, stamp) {
    const tools = `replay-tools-${stamp}`;
    stack.fake.enqueueReplies(
      {
        text: 'computing',
        toolCalls: [
          { name: 'calculator', arguments: { expression: '6*7' } },
          { name: 'word_count', arguments: { text: 'a b' } },
        ],
      },
      { text: '42' },
    );
    await stack.client.send(tools, 'what is 6*7?');
    await stack.client.send(tools, 'thanks');
    await stack.client.close(tools);
    await save(stack, 'tools-and-close', tools);
  },

  async cancel(stack, stamp) {
    const cancel = `replay-cancel-${stamp}`;
    stack.fake.enqueueReplies({ text: 'word '.repeat(300) });
    stack.fake.configure({ tokenDelayMs: 20 });
    await stack.client.post(cancel, 'long story');
    await waitForEvent(stack.client, cancel, (e) => e.type === 'assistant/chunk');
    await stack.client.cancel(cancel);
    await waitForEvent(stack.client, cancel, (e) => e.type === 'turn/end');
    stack.fake.configure({ tokenDelayMs: 0 });
    await stack.client.send(cancel, 'short one');
    await save(stack, 'cancel', cancel);
  },

  async faults(stack, stamp) {
    const faults = `replay-faults-${stamp}`;
    stack.fake.injectFault({ kind: 'server_error', times: 1 });
    await stack.client.send(faults, 'retry me');
    stack.fake.injectFault({ kind: 'server_error', times: 4 });
    await stack.client.send(faults, 'fail me');
    await stack.client.send(faults, 'recover');
    await save(stack, 'faults', faults);
  },

  async 'continued-as-new'(stack, stamp) {
    const can = `replay-can-${stamp}`;
    for (let i = 0; i < 4; i++) await stack.client.send(can, `turn ${i}`);
    await save(stack, 'continued-as-new', can);
  },

  /**
   * Approval: two calls wait at once in one step; one is approved with edited arguments and
   * "allow for the session", the other denied; a later turn's call runs without waiting. Then a
   * call waits, the run is terminated, and the run resumed from the log re-enters the wait
   * (recorded as `approval-resumed`).
   */
  async approval(stack, stamp) {
    const id = `replay-approval-${stamp}`;
    await stack.client.start({ sessionId: id });
    stack.fake.enqueueReplies(
      {
        text: 'Two deploys.',
        toolCalls: [
          { id: 'rec-a1', name: 'deploy', arguments: { target: 'eu' } },
          { id: 'rec-a2', name: 'deploy', arguments: { target: 'us' } },
        ],
      },
      { text: 'one deployed' },
      { text: '', toolCalls: [{ id: 'rec-a3', name: 'deploy', arguments: { target: 'ap' } }] },
      { text: 'ap deployed without asking' },
    );
    const first = stack.client.send(id, 'deploy eu and us');
    await requested(stack, id, 'rec-a2');
    await stack.client.approve(id, 'rec-a1', {
      decision: 'approve',
      arguments: '{"target":"eu-west"}',
      allowForSession: true,
      by: 'recorder',
    });
    await stack.client.approve(id, 'rec-a2', { decision: 'deny', reason: 'us is frozen' });
    await first;
    await stack.client.send(id, 'deploy ap');
    await save(stack, 'approval', id);

    const resumed = `replay-approval-resumed-${stamp}`;
    await stack.client.start({ sessionId: resumed });
    stack.fake.enqueueReplies(
      { text: '', toolCalls: [{ id: 'rec-r1', name: 'deploy', arguments: { target: 'eu' } }] },
      { text: 'deployed after the resume' },
    );
    await stack.client.post(resumed, 'deploy eu');
    await requested(stack, resumed, 'rec-r1');
    await stack.temporal.workflow.getHandle(workflowIdFor(resumed)).terminate('recording: a run lost while it waits');
    const { runId } = await stack.client.resume(resumed);
    await stack.client.approve(resumed, 'rec-r1', { decision: 'approve' });
    await waitForEvent(stack.client, resumed, (e) => e.type === 'turn/end');
    await save(stack, 'approval-resumed', resumed, runId);
  },

  /** External tool: a result posted by the caller, then a call whose result never comes (expired). */
  async 'external-tool'(stack, stamp) {
    const id = `replay-external-${stamp}`;
    const client = new SessionClient({
      temporal: stack.temporal,
      store: stack.store,
      taskQueue: stack.taskQueue,
      tunables: { ...TEST_TUNABLES, approvalTimeoutMs: 5_000 },
    });
    await client.start({ sessionId: id });
    stack.fake.enqueueReplies(
      { text: 'Clicking.', toolCalls: [{ id: 'rec-x1', name: 'browser_click', arguments: { selector: '#buy' } }] },
      { text: 'bought' },
      { text: '', toolCalls: [{ id: 'rec-x2', name: 'browser_click', arguments: { selector: '#pay' } }] },
      { text: 'the click never came back' },
    );
    const first = client.send(id, 'buy it');
    await requested(stack, id, 'rec-x1');
    await client.submitToolResult(id, 'rec-x1', 'clicked #buy', { by: 'recorder' });
    await first;
    await client.send(id, 'pay for it');
    await save(stack, 'external-tool', id);
  },

  /**
   * Budget changes (issue 52): one while a turn waits for an approval, one while a model step
   * runs, one while a turn is paused on its budget, and one between turns. Builds before the
   * change answered at once (`budget-change-answers-at-once`) answered the first two when the
   * turn ended; recorded by such a build as `unpatched-budget-changes`.
   */
  async 'budget-changes'(stack, stamp) {
    const id = `replay-budget-${stamp}`;
    await stack.client.start({ sessionId: id });
    // The third turn continues the run as new (the recording stack's tunables): this run is the one saved.
    const { runId } = await stack.temporal.workflow.getHandle(workflowIdFor(id)).describe();
    stack.fake.enqueueReplies(
      { text: '', toolCalls: [{ id: 'rec-b1', name: 'deploy', arguments: { target: 'eu' } }] },
      { text: 'deployed' },
    );
    const waiting = stack.client.send(id, 'deploy eu');
    await requested(stack, id, 'rec-b1');
    const duringApproval = stack.client.setBudget(id, { total: { tokens: 1_000_000 } }, { by: 'recorder' });
    // The update reaches the workflow before the approval does (an older build answers it only once the turn ends).
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await stack.client.approve(id, 'rec-b1', { decision: 'approve' });
    await Promise.all([waiting, duringApproval]);

    stack.fake.configure({ firstTokenDelayMs: 2_000 });
    const running = stack.client.send(id, 'a slow answer');
    await new Promise((resolve) => setTimeout(resolve, 500));
    await Promise.all([running, stack.client.setBudget(id, null)]);
    stack.fake.configure({ firstTokenDelayMs: 0 });
    await stack.client.setBudget(id, { turn: { modelCalls: 1 } });

    stack.fake.enqueueReplies(
      { text: '', toolCalls: [{ name: 'calculator', arguments: { expression: '6*7' } }] },
      { text: '42' },
    );
    const paused = stack.client.send(id, 'what is six times seven?');
    for (let phase = ''; phase !== 'paused'; phase = (await stack.client.status(id)).phase)
      await new Promise((resolve) => setTimeout(resolve, 100));
    await stack.client.setBudget(id, { turn: { modelCalls: 5 } });
    await paused;
    await save(stack, 'budget-changes', id, runId);
  },

  /**
   * The work around turns: a metadata note between turns, a turn paused on a provider's long
   * retry-after (a workflow timer) that goes on, a manual compaction, and a turn after it.
   */
  async 'notes-pauses-compaction'(stack, stamp) {
    const id = `replay-notes-${stamp}`;
    const client = new SessionClient({
      temporal: stack.temporal,
      store: stack.store,
      taskQueue: stack.taskQueue,
      tunables: { ...TEST_TUNABLES, rateLimitPauseMs: 1_000 },
    });
    await client.start({ sessionId: id });
    await client.note(id, { metadata: { values: { topic: 'recording' } } });
    stack.fake.injectFault({ kind: 'rate_limit', retryAfterSeconds: 2 });
    await client.send(id, 'hello after a long rate limit');
    await client.compact(id);
    await client.send(id, 'and after a compaction');
    await save(stack, 'notes-pauses-compaction', id);
  },

  /** A note and a compaction sent `atOnce` while a turn waits for an approval: answered at once, done after the turn. */
  async 'answers-at-once'(stack, stamp) {
    const id = `replay-at-once-${stamp}`;
    await stack.client.start({ sessionId: id });
    // The third turn continues the run as new (the recording stack's tunables): this run is the one saved.
    const { runId } = await stack.temporal.workflow.getHandle(workflowIdFor(id)).describe();
    await stack.client.send(id, `a first turn: ${'a fairly long message '.repeat(30)}`);
    stack.fake.enqueueReplies(
      { text: '', toolCalls: [{ id: 'rec-o1', name: 'deploy', arguments: { target: 'eu' } }] },
      { text: 'deployed' },
    );
    const waiting = stack.client.send(id, 'deploy eu');
    await requested(stack, id, 'rec-o1');
    await stack.client.note(id, { metadata: { values: { topic: 'recording' } } }, { atOnce: true });
    await stack.client.compact(id, { atOnce: true });
    await stack.client.approve(id, 'rec-o1', { decision: 'approve' });
    await waiting;
    await waitForEvent(stack.client, id, (e) => e.type === 'compaction/end');
    await stack.client.send(id, 'after the compaction');
    await save(stack, 'answers-at-once', id, runId);
  },
};

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  for (const name of wanted)
    if (!(name in SCENARIOS)) throw new Error(`unknown scenario ${name}; known: ${Object.keys(SCENARIOS).join(', ')}`);
  const stack = await startStack({
    tunables: { continueAsNewAfterTurns: 3 },
    worker: {
      tools: new ToolRegistry([...BUILTIN_TOOLS, ...RECORDING_TOOLS]),
      agent: {
        model: 'fake',
        system: 'You are a test assistant.',
        tools: ['read_artifact', 'calculator', 'word_count', 'deploy', 'browser_click'],
      },
    },
  });
  const stamp = Date.now();
  try {
    for (const [name, scenario] of Object.entries(SCENARIOS)) {
      if (wanted.length === 0 || wanted.includes(name)) await scenario(stack, stamp);
    }
  } finally {
    await stack.close();
  }
}

await main();
