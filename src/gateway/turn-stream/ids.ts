/**
 * Ids of a turn's output items, derived from the log so they survive any restart: positions in
 * the log, tagged with their session (base64url of its id): `msg_<tag>_<turn>_<step>_<n>` (the
 * n-th assistant message item of that step; n > 0 only when a retried model call diverged from
 * what was already streamed), `rs_…` for reasoning and `fc_<tag>_<turn>_<step>_<i>` for the i-th
 * tool call of a step. They are unique across sessions, and a reference to one finds its session.
 * Every API names the items of its answers with them (the OpenAI API's output and conversation
 * items, LangGraph's message ids, the AI SDK's message parts).
 */
import { isValidSessionId } from '../../session/index.js';

/** The part of an output item id that names its session (item ids are unique across conversations). */
export function itemTag(sessionId: string): string {
  return Buffer.from(sessionId, 'utf8').toString('base64url');
}

export function messageItemId(tag: string, turn: number, step: number, n: number): string {
  return `msg_${tag}_${turn}_${step}_${n}`;
}

export function reasoningItemId(tag: string, turn: number, step: number, n: number): string {
  return `rs_${tag}_${turn}_${step}_${n}`;
}

export function functionCallItemId(tag: string, turn: number, step: number, index: number): string {
  return `fc_${tag}_${turn}_${step}_${index}`;
}

/** The session and place an output item id names, or undefined when it is not one of ours. */
export function decodeItemId(
  id: string,
): { kind: 'msg' | 'rs' | 'fc'; sessionId: string; turn: number; step: number; n: number } | undefined {
  const match = /^(msg|rs|fc)_([A-Za-z0-9_-]{1,200})_(\d{1,9})_(\d{1,9})_(\d{1,9})$/.exec(id);
  if (!match) return undefined;
  const sessionId = Buffer.from(match[2]!, 'base64url').toString('utf8');
  if (!isValidSessionId(sessionId) || itemTag(sessionId) !== match[2]) return undefined;
  return {
    kind: match[1] as 'msg' | 'rs' | 'fc',
    sessionId,
    turn: Number(match[3]),
    step: Number(match[4]),
    n: Number(match[5]),
  };
}
