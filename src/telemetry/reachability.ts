/**
 * Watches the dependencies a long-running process needs (its store, Temporal) and says so, once,
 * when one becomes unreachable and when it is back. The process itself keeps running through
 * an outage: the PostgreSQL pool and the gRPC channels reconnect by themselves, and Temporal
 * retries the activities that failed meanwhile. This only makes the outage visible, in the log
 * and in `/readyz`.
 */
import type { DependencyState } from './ops-server.js';

/** A dependency and how to check that it answers. */
export type Probe = {
  /** Short name, the key in `/readyz` (`store`, `temporal`). */
  name: string;
  /** What it is, for log lines (`PostgreSQL store postgres://…`, `Temporal at 127.0.0.1:7233`). */
  label: string;
  /** Resolves when the dependency answers, rejects with why not. */
  check: () => Promise<void>;
};

export type ReachabilityOptions = {
  /** Time between rounds of probes, ms. */
  intervalMs: number;
  /** A probe that takes longer than this counts as failed, ms. */
  timeoutMs: number;
  log: (line: string) => void;
};

function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** One line of an error: drivers and gRPC put multi-line detail in messages. */
function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0]!.slice(0, 300);
}

/** Probes each dependency every `intervalMs` and logs each change of state. */
export class ReachabilityMonitor {
  private readonly states = new Map<string, DependencyState>();
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly probes: readonly Probe[],
    private readonly options: ReachabilityOptions,
  ) {}

  /** Runs the first round of probes (so the state is known at once), then keeps probing. */
  async start(): Promise<void> {
    await this.probeAll();
    this.schedule();
  }

  /** The last known state of every dependency. */
  snapshot(): Record<string, DependencyState> {
    return Object.fromEntries(
      this.probes.map((p) => [
        p.name,
        this.states.get(p.name) ?? { ok: false, error: 'not checked yet', since: Date.now() },
      ]),
    );
  }

  /** The first dependency that is down, if any. */
  firstDown(): { name: string; label: string; state: DependencyState } | undefined {
    for (const probe of this.probes) {
      const state = this.states.get(probe.name);
      if (!state?.ok)
        return {
          name: probe.name,
          label: probe.label,
          state: state ?? { ok: false, error: 'not checked yet', since: Date.now() },
        };
    }
    return undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.round;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.round = this.probeAll().finally(() => this.schedule());
    }, this.options.intervalMs);
    // Probing alone must not keep the process alive.
    this.timer.unref();
  }

  private async probeAll(): Promise<void> {
    await Promise.all(this.probes.map((probe) => this.probeOne(probe)));
  }

  private async probeOne(probe: Probe): Promise<void> {
    let error: string | undefined;
    try {
      await withTimeout(probe.check(), this.options.timeoutMs);
    } catch (failure) {
      error = oneLine(failure);
    }
    if (this.stopped) return;
    const now = Date.now();
    const previous = this.states.get(probe.name);
    if (error === undefined) {
      if (previous && !previous.ok)
        this.options.log(`${probe.label} is reachable again after ${((now - previous.since) / 1000).toFixed(1)} s`);
      if (!previous?.ok) this.states.set(probe.name, { ok: true, since: now });
      return;
    }
    if (!previous || previous.ok) {
      this.options.log(
        `${probe.label} is unreachable (${error}); still running: work on it is retried, checking every ${(this.options.intervalMs / 1000).toFixed(1)} s`,
      );
      this.states.set(probe.name, { ok: false, error, since: now });
    } else {
      this.states.set(probe.name, { ...previous, error });
    }
  }
}
