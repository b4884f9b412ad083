/**
 * Injected faults: each applies to the next `times` chat requests, in the order injected. Most
 * answer with an error; `hang` answers nothing, `drop_stream` cuts the reply, and
 * `malformed_tool_json` breaks a tool call's arguments.
 */
import { HttpError, rateLimited } from './http.js';
import type { FakeFault, NormalizedReply } from './types.js';
import type { FakeChatBody } from './wire.js';

export class FaultQueue {
  private faults: Array<FakeFault & { remaining: number }> = [];

  inject(fault: FakeFault): void {
    this.faults.push({ ...fault, remaining: fault.times ?? 1 });
  }
  clear(): void {
    this.faults = [];
  }
  /** How many injected faults still wait to apply. */
  get pending(): number {
    return this.faults.length;
  }
  /** The fault for this request, counting it against the fault's `times`. */
  take(): FakeFault | undefined {
    const fault = this.faults[0];
    if (!fault) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.faults.shift();
    return fault;
  }
}

/** The error a fault answers with, given the request's Authorization header; undefined for the others. */
export function faultError(fault: FakeFault | undefined, authorization: string | undefined): HttpError | undefined {
  switch (fault?.kind) {
    case 'rate_limit':
      return rateLimited({ 'retry-after': String(fault.retryAfterSeconds ?? 1) });
    case 'auth_echo': {
      const presented = authorization?.replace(/^Bearer\s+/i, '') ?? '(none)';
      return new HttpError(401, {
        message: `Incorrect API key provided: ${presented}. You can find your API key in your account settings.`,
        type: 'invalid_request_error',
        code: 'invalid_api_key',
      });
    }
    case 'server_error':
      return new HttpError(fault.status ?? 500, {
        message: 'The server had an error while processing your request.',
        type: 'server_error',
        code: 'internal_error',
      });
    default:
      return undefined;
  }
}

/** The reply with its tool calls' arguments cut in half (a call to the first tool when it had none). */
export function malformToolJson(reply: NormalizedReply, body: FakeChatBody, nextCallId: () => string): NormalizedReply {
  const broken = (args: string) => `${args.slice(0, Math.ceil(args.length / 2))}<<malformed`;
  if (reply.toolCalls.length > 0) {
    return { ...reply, toolCalls: reply.toolCalls.map((c) => ({ ...c, arguments: broken(c.arguments) })) };
  }
  const name = body.tools?.[0]?.function.name ?? 'unknown_tool';
  return {
    ...reply,
    toolCalls: [{ id: nextCallId(), name, arguments: broken('{"input": "x"}') }],
    finishReason: 'tool_calls',
  };
}
