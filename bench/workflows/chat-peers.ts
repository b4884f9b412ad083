/**
 * The peers sessionlog's turn is measured against in bench/turns.ts.
 *
 * - `naiveChatWorkflow`: a chat kept the way Temporal's own chat samples keep one. The message
 *   list lives in workflow state; each user message is an update whose handler appends it,
 *   passes the whole list to the model activity, appends the reply and returns it. Every turn
 *   therefore writes the conversation so far into history again (the activity's input).
 * - `floorWorkflow`: what any update-driven turn costs at least: one update that runs one
 *   no-op activity and returns.
 */
import {
  allHandlersFinished,
  condition,
  defineSignal,
  defineUpdate,
  proxyActivities,
  setHandler,
} from '@temporalio/workflow';
import type { ChatMessage, ChatPeerActivities } from '../support/chat-peer-activities.js';

/** One user message in, the model's reply text out. */
export const chatUpdate = defineUpdate<string, [string]>('chat');
/** One user message in, its length out, after one no-op activity. */
export const floorTurnUpdate = defineUpdate<number, [string]>('floorTurn');
export const endSignal = defineSignal('end');

const { complete } = proxyActivities<ChatPeerActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { maximumAttempts: 3 },
});
const { noop } = proxyActivities<ChatPeerActivities>({ startToCloseTimeout: '30 seconds' });

export async function naiveChatWorkflow(system: string): Promise<void> {
  const messages: ChatMessage[] = [{ role: 'system', content: system }];
  let ended = false;
  setHandler(endSignal, () => {
    ended = true;
  });
  setHandler(chatUpdate, async (text) => {
    messages.push({ role: 'user', content: text });
    const reply = await complete(messages);
    messages.push({ role: 'assistant', content: reply });
    return reply;
  });
  await condition(() => ended && allHandlersFinished());
}

export async function floorWorkflow(): Promise<void> {
  let ended = false;
  setHandler(endSignal, () => {
    ended = true;
  });
  setHandler(floorTurnUpdate, async (text) => {
    await noop();
    return text.length;
  });
  await condition(() => ended && allHandlersFinished());
}
