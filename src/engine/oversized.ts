/**
 * A user message too large for the model's context (DESIGN §6, issue: big messages): stored
 * whole as an artifact of the session and logged as a preview with a notice naming the artifact,
 * as a spilled tool result is, so the request stays within the window and the model pages
 * through the rest with `read_artifact`. Nothing is lost: the artifact holds every byte.
 */
import { contextLimits } from '../context/deps.js';
import { spillText } from '../context/spill.js';
import type { SessionView } from '../session/index.js';
import type { EngineDeps } from './deps.js';
import { learnedWindowOf } from './admission/learned-limits.js';
import type { EnteringMessage } from './inbox.js';

/** How much text is measured at a time: a message far over the limit is not measured whole. */
const MEASURE_SLICE_CHARS = 32 * 1024;

/** Whether `message` takes more than `limit` tokens, measuring it a slice at a time until it does. */
function exceeds(deps: EngineDeps, model: string, message: EnteringMessage, limit: number): boolean {
  const meter = deps.context!.meter;
  let tokens = 0;
  for (let at = 0, end = 0; at < message.text.length && tokens <= limit; at = end) {
    end = Math.min(message.text.length, at + MEASURE_SLICE_CHARS);
    // Never between the two halves of a surrogate pair.
    if (end < message.text.length && /[\uD800-\uDBFF]/.test(message.text[end - 1]!)) end += 1;
    const text = message.text.slice(at, end);
    tokens += meter.messageTokens(
      { id: message.id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } },
      model,
    );
  }
  return tokens > limit;
}

/** The most a spilled message's preview takes: this many bytes, or a quarter of the budget's token count in bytes. */
const PREVIEW_MAX_BYTES = 16 * 1024;

/**
 * `message`, or its preview when it would take more than half the request budget of `model`
 * (measured with the meter only when its byte count allows that; a token is at least a byte).
 */
export async function inlineMessage(
  deps: EngineDeps,
  session: SessionView,
  message: EnteringMessage,
): Promise<EnteringMessage> {
  const context = deps.context;
  if (!context) return message;
  const model = session.header.agent?.model ?? deps.agent.model;
  let budget: number;
  try {
    budget = contextLimits(context, model, learnedWindowOf(deps, session, model)).budget;
  } catch {
    // A model the catalogue does not know: the step's request header refuses it (unknown_model).
    return message;
  }
  const half = Math.floor(budget / 2);
  const bytes = Buffer.byteLength(message.text, 'utf8');
  if (bytes <= half || !exceeds(deps, model, message, half)) return message;
  const ref = await deps.store.artifacts.put({
    sessionId: session.header.id,
    name: `message-${message.id}.txt`,
    content: message.text,
  });
  const text = spillText({
    text: message.text,
    locator: ref.locator,
    toolName: 'user message',
    maxInlineBytes: Math.min(PREVIEW_MAX_BYTES, Math.floor(budget / 4)),
  });
  // A message with media keeps them after its preview (the media are references, already stored).
  const media = message.content?.filter((block) => block.type !== 'text');
  return { ...message, text, ...(media ? { content: [{ type: 'text', text }, ...media] } : {}) };
}
