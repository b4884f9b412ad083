/**
 * Records workflow histories for the replay test (test/replay/replay.test.ts). Run against a
 * dev server after an intended workflow change:
 *
 *   scripts/temporal-dev-server run -- npx tsx test/support/record-histories.ts
 *
 * Each scenario runs on the in-process stack; its closed or running histories are written to
 * test/fixtures/histories/<scenario>.history.pb (protobuf-encoded History).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import proto from '@temporalio/proto';

const { temporal } = proto;
import { workflowIdFor } from '../../src/workflows/api.js';
import { waitForEvent } from './log-wait.js';
import { startStack, type Stack } from './stack.js';

const OUT = new URL('../fixtures/histories/', import.meta.url).pathname;

async function save(stack: Stack, name: string, sessionId: string): Promise<void> {
  const handle = stack.temporal.workflow.getHandle(workflowIdFor(sessionId));
  const runId = (await handle.describe()).runId;
  const history = await stack.temporal.workflow.getHandle(workflowIdFor(sessionId), runId).fetchHistory();
  writeFileSync(join(OUT, `${name}.history.pb`), temporal.api.history.v1.History.encode(history).finish());
  console.log(`recorded ${name} (${history.events?.length ?? 0} events)`);
}

async function main(): Promise<void> {
  const stack = await startStack({ tunables: { continueAsNewAfterTurns: 3 } });
  const stamp = Date.now();
  try {
    const tools = `replay-tools-${stamp}`;
    stack.fake.enqueueReplies({ text: 'computing', toolCalls: [{ name: 'calculator', arguments: { expression: '6*7' } }, { name: 'word_count', arguments: { text: 'a b' } }] }, { text: '42' });
    await stack.client.send(tools, 'what is 6*7?');
    await stack.client.send(tools, 'thanks');
    await stack.client.close(tools);
    await save(stack, 'tools-and-close', tools);

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

    const faults = `replay-faults-${stamp}`;
    stack.fake.injectFault({ kind: 'server_error', times: 1 });
    await stack.client.send(faults, 'retry me');
    stack.fake.injectFault({ kind: 'server_error', times: 4 });
    await stack.client.send(faults, 'fail me');
    await stack.client.send(faults, 'recover');
    await save(stack, 'faults', faults);

    const can = `replay-can-${stamp}`;
    for (let i = 0; i < 4; i++) await stack.client.send(can, `turn ${i}`);
    await save(stack, 'continued-as-new', can);
  } finally {
    await stack.close();
  }
}

await main();
