/**
 * An ordinary chat program on the official OpenAI SDK (`openai` on npm). The one change that
 * makes its conversations durable is `baseURL`: it points at sessionlog's OpenAI-compatible
 * API instead of api.openai.com. Each line you type is sent with `responses.stream` and the
 * reply streams back token by token; the conversation is a sessionlog session, so it survives
 * restarts of any process, is compacted when it grows, and can be continued later.
 *
 * Against a running `sessionlog dev` (from the same directory):
 *
 *   OPENAI_API_KEY=anything npx tsx examples/openai-chat.ts
 *
 * Type messages, one per line; end with Ctrl-D. With a gateway token, OPENAI_API_KEY is the
 * token (SESSIONLOG_GATEWAY_TOKEN). CONVERSATION_ID=conv_… continues a conversation;
 * OPENAI_MODEL names the model (the conversation's: `deepseek-flash` by default).
 */
import { createInterface } from 'node:readline';
import OpenAI from 'openai';

const client = new OpenAI({
  // The only change from a program that talks to OpenAI itself:
  baseURL: process.env.SESSIONLOG_OPENAI_URL ?? 'http://127.0.0.1:8787/openai/v1',
});
const model = process.env.OPENAI_MODEL ?? 'deepseek-flash';

const conversation = process.env.CONVERSATION_ID
  ? await client.conversations.retrieve(process.env.CONVERSATION_ID)
  : await client.conversations.create({ metadata: { app: 'openai-chat example' } });
console.log(`conversation ${conversation.id}`);

const lines = createInterface({ input: process.stdin, terminal: false });
for await (const line of lines) {
  if (line.trim().length === 0) continue;
  const stream = client.responses.stream({ model, conversation: conversation.id, input: line });
  stream.on('response.output_text.delta', (event) => process.stdout.write(event.delta));
  const response = await stream.finalResponse();
  const usage = response.usage;
  console.log(
    `\n[${response.status}; ${usage?.input_tokens ?? 0} tokens in, ${usage?.input_tokens_details.cached_tokens ?? 0} of them cached, ${usage?.output_tokens ?? 0} out]`,
  );
}

console.log('history:');
for await (const item of client.conversations.items.list(conversation.id, { order: 'asc' })) {
  if (item.type !== 'message') continue;
  const text = item.content.map((part) => ('text' in part ? part.text : '')).join('');
  console.log(`  ${item.role}: ${text}`);
}
