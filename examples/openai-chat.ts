/**
 * An ordinary chat program on the official OpenAI SDK (`openai` on npm). The one change that
 * makes its conversations durable is `baseURL`: it points at sessionlog's OpenAI-compatible
 * API instead of api.openai.com. Each line you type is sent with `responses.stream` and the
 * reply streams back token by token; the conversation is a sessionlog session, so it survives
 * restarts of any process, is compacted when it grows, and can be continued later.
 *
 * Against a running `sessionlog dev`, from its folder or any folder below it:
 *
 *   npx tsx examples/openai-chat.ts
 *
 * Type messages, one per line; end with Ctrl-D. The gateway is found as the CLI finds it (the
 * nearest .sessionlog/dev.json, or SESSIONLOG_HOME's: examples/find-dev.ts), whatever its
 * port; GATEWAY=http://host:port names another one. The API key the client sends is the
 * gateway's token, SESSIONLOG_GATEWAY_TOKEN (a `sessionlog dev` on loopback needs none, but the
 * openai client refuses to start without a key). CONVERSATION_ID=conv_… continues a
 * conversation; OPENAI_MODEL names the model (the conversation's: `deepseek-flash` by default).
 */
import { createInterface } from 'node:readline';
import OpenAI from 'openai';
import { findDev } from './find-dev.js';

const gateway = process.env.GATEWAY ?? findDev()?.gatewayUrl ?? 'http://127.0.0.1:8787';
const client = new OpenAI({
  // The only change from a program that talks to OpenAI itself: where it sends, and the key.
  baseURL: `${gateway}/openai/v1`,
  apiKey: process.env.SESSIONLOG_GATEWAY_TOKEN ?? 'no-token-on-loopback',
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
