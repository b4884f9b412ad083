/** The batches the crash-test child appends: a pure function of the batch number. */
import type { NewEvent } from '../../src/session/index.js';

/** How many events batch `n` holds (1–4). */
export function crashBatchSize(n: number): number {
  return 1 + (n % 4);
}

/** The events of batch `n`: user messages (surface) and log-only events, some of them large. */
export function crashBatch(n: number): NewEvent[] {
  const big = n % 7 === 0 ? 100_000 : 10 * (n % 13);
  return Array.from({ length: crashBatchSize(n) }, (_, i): NewEvent =>
    i % 2 === 0
      ? {
          type: 'user/message',
          time: 1_700_000_000_000 + n,
          data: {
            id: `b${n}-${i}`,
            role: 'user',
            content: [{ type: 'text', text: `b${n}-${i}:${'x'.repeat(big)}` }],
            source: { kind: 'user' },
          },
          surfaceOp: 'append',
        }
      : { type: 'session/run', time: 1_700_000_000_000 + n, data: { workflowId: `b${n}`, runId: String(i) } },
  );
}
