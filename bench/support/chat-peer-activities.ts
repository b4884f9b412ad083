/**
 * The activities of bench/workflows/chat-peers.ts: the naive chat's model call, which takes the
 * whole message list and streams the reply from the same fake model, the same way sessionlog
 * does (`streamCompletion`, heartbeating as batches arrive, no chunk logged anywhere); and the
 * floor's no-op.
 */
import { Context } from '@temporalio/activity';
import OpenAI from 'openai';
import { textOf } from '../../src/session/messages.js';
import { streamCompletion } from '../../src/model/stream.js';

/** A chat message as Temporal's chat samples keep them in workflow state. */
export type ChatMessage = { role: 'system' | 'user' | 'assistant'; content: string };

export function createChatPeerActivities(options: { baseURL: string; model: string }) {
  // Created after the bench's fetch probe is installed, so its requests are timed too.
  const client = new OpenAI({ baseURL: options.baseURL, apiKey: 'bench', maxRetries: 0 });
  return {
    async complete(messages: ChatMessage[]): Promise<string> {
      const ctx = Context.current();
      const result = await streamCompletion({
        client,
        request: { model: options.model, messages, stream: true, stream_options: { include_usage: true } },
        signal: ctx.cancellationSignal,
        onChunks: () => ctx.heartbeat(),
      });
      return textOf(result.content);
    },
    async noop(): Promise<void> {},
  };
}

export type ChatPeerActivities = ReturnType<typeof createChatPeerActivities>;
