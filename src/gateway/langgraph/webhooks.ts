/**
 * Run webhooks of the LangGraph API (issue 25): when a run that asked for one (`webhook: url`)
 * ends, its run object (with its final `values`, or `error`) is POSTed to the url, signed,
 * and retried with backoff until the receiver answers 2xx or the attempts run out.
 *
 * Signature: `x-sessionlog-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
 * with `SESSIONLOG_WEBHOOK_SECRET`, so a receiver checks the body and refuses replays of old
 * deliveries. The delivery is the gateway's that took the run: a gateway that stops gives up its
 * pending deliveries (logged), which is the Agent Server's behaviour too.
 */
import { createHmac } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';

/** Delays before each retry, ms: 5 attempts in all, over about 15 s. */
export const WEBHOOK_RETRY_DELAYS_MS = [500, 1_000, 3_000, 10_000] as const;
const ATTEMPT_TIMEOUT_MS = 10_000;

/** The signature header's value for `body` sent at `t` (unix seconds). */
export function signWebhook(secret: string, t: number, body: string): string {
  return `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')}`;
}

/** Whether `url` may receive webhooks: http(s) with a host. */
export function webhookUrlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'must be an absolute http(s) URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return 'must be an http or https URL';
  if (parsed.username !== '' || parsed.password !== '') return 'must not carry credentials';
  return undefined;
}

export class WebhookSender {
  private readonly stop = new AbortController();
  private readonly pending = new Set<Promise<void>>();

  constructor(
    readonly secret: string | undefined,
    private readonly log: FastifyBaseLogger | undefined,
    private readonly delays: readonly number[] = WEBHOOK_RETRY_DELAYS_MS,
  ) {}

  /** Sends `payload` to `url` in the background; resolves when delivered or given up. */
  send(url: string, payload: unknown): Promise<void> {
    const delivery = this.deliver(url, JSON.stringify(payload)).finally(() => this.pending.delete(delivery));
    this.pending.add(delivery);
    return delivery;
  }

  /** Gives up every pending delivery (the gateway is closing). */
  close(): void {
    this.stop.abort();
  }

  private async deliver(url: string, body: string): Promise<void> {
    const secret = this.secret;
    if (secret === undefined) return;
    for (let attempt = 0; attempt <= this.delays.length; attempt++) {
      if (this.stop.signal.aborted) break;
      const t = Math.floor(Date.now() / 1000);
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'user-agent': 'sessionlog-webhook',
            'x-sessionlog-signature': signWebhook(secret, t, body),
          },
          body,
          redirect: 'manual',
          signal: AbortSignal.any([this.stop.signal, AbortSignal.timeout(ATTEMPT_TIMEOUT_MS)]),
        });
        await response.body?.cancel();
        if (response.ok) return;
        this.log?.warn({ url, status: response.status, attempt: attempt + 1 }, 'webhook refused');
      } catch (error) {
        this.log?.warn({ url, err: error, attempt: attempt + 1 }, 'webhook failed');
      }
      const delay = this.delays[attempt];
      if (delay === undefined) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        this.stop.signal.addEventListener(
          'abort',
          () => {
            clearTimeout(timer);
            resolve();
          },
          { once: true },
        );
      });
    }
    this.log?.error({ url }, 'webhook given up');
  }
}
