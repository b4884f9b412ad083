/**
 * The fake model's `/_control/*` routes, so another process drives it as JS does: read the
 * recorded requests, reset, inject and clear faults, queue replies, read and change the config.
 */
import type http from 'node:http';
import { z } from 'zod';
import { notFound, invalidRequest, parseJsonOrText, sendError, sendJson } from './http.js';
import type { FakeFault, FakeModelConfig, FakeReply, RecordedRequest } from './types.js';
import { configSchema, faultSchema, replySchema } from './wire.js';

/** What the control routes drive: the server's own API, and how many faults and replies wait. */
export type ControlTarget = {
  model: {
    requests(): RecordedRequest[];
    reset(): void;
    injectFault(fault: FakeFault): void;
    clearFaults(): void;
    enqueueReplies(...replies: FakeReply[]): void;
    configure(patch: Partial<FakeModelConfig>): void;
    currentConfig(): FakeModelConfig;
  };
  pendingFaults(): number;
  queuedReplies(): number;
};

export function handleControl(
  target: ControlTarget,
  method: string,
  path: string,
  raw: string,
  res: http.ServerResponse,
): void {
  const { model } = target;
  const body = parseJsonOrText(raw);
  const route = `${method} ${path}`;
  const bad = (message: string) => sendError(res, invalidRequest(message));
  switch (route) {
    case 'GET /_control/requests':
      return sendJson(res, 200, model.requests());
    case 'POST /_control/reset':
      model.reset();
      return sendJson(res, 200, { ok: true });
    case 'POST /_control/faults': {
      const parsed = z.union([faultSchema, z.array(faultSchema)]).safeParse(body);
      if (!parsed.success) return bad(`invalid fault: ${z.prettifyError(parsed.error)}`);
      for (const fault of [parsed.data].flat()) model.injectFault(fault);
      return sendJson(res, 200, { ok: true, pending: target.pendingFaults() });
    }
    case 'DELETE /_control/faults':
      model.clearFaults();
      return sendJson(res, 200, { ok: true });
    case 'POST /_control/replies': {
      const parsed = z.union([replySchema, z.array(replySchema)]).safeParse(body);
      if (!parsed.success) return bad(`invalid reply: ${z.prettifyError(parsed.error)}`);
      model.enqueueReplies(...[parsed.data].flat());
      return sendJson(res, 200, { ok: true, queued: target.queuedReplies() });
    }
    case 'POST /_control/config': {
      const parsed = configSchema.safeParse(body);
      if (!parsed.success) return bad(`invalid config: ${z.prettifyError(parsed.error)}`);
      model.configure(stripUndefined(parsed.data));
      return sendJson(res, 200, model.currentConfig());
    }
    case 'GET /_control/config':
      return sendJson(res, 200, model.currentConfig());
    default:
      return sendError(res, notFound(`no control route ${route}`));
  }
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
