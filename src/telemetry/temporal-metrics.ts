/**
 * The Temporal SDK's own worker metrics (task slots, poll and schedule-to-start latencies,
 * activity and workflow task outcomes, sticky cache…) on the same `/metrics` as ours.
 *
 * The SDK core can serve Prometheus on a port of its own; instead its metrics are buffered
 * (`MetricsBuffer`, Runtime telemetry option `metrics.buffer`) and drained into prom-client
 * metrics of the worker's registry before each scrape and every few seconds, so one endpoint
 * and one registry serve everything. Durations are recorded in seconds. Names keep the SDK's
 * `temporal_` prefix; counters are exposed as the SDK names them.
 */
import { MetricsBuffer, type BufferedMetricUpdate } from '@temporalio/worker';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Seconds for durations, counts otherwise: one bucket set that covers both reasonably. */
const BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const DRAIN_INTERVAL_MS = 5_000;

type Bridged = (
  | { kind: 'counter'; metric: Counter<string> }
  | { kind: 'gauge'; metric: Gauge<string> }
  | { kind: 'histogram'; metric: Histogram<string> }
) & {
  labelNames: string[];
};

/** Drains an SDK metrics buffer into a prom-client registry. */
export class TemporalMetricsBridge {
  /** Pass as `Runtime.install({ telemetryOptions: { metrics: { buffer } } })`, before any connection is made. */
  readonly buffer = new MetricsBuffer({ maxBufferSize: 50_000, useSecondsForDurations: true });
  private readonly bridged = new Map<string, Bridged>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly registry: Registry) {}

  /** Drains now, then every few seconds (so the buffer never fills between scrapes) until `stop`. */
  start(): void {
    this.drain();
    this.timer ??= setInterval(() => this.drain(), DRAIN_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Moves every buffered update into the registry. Call before a scrape. */
  drain(): void {
    let updates: Iterable<BufferedMetricUpdate>;
    try {
      updates = this.buffer.retrieveUpdates();
    } catch (error) {
      // Not bound to a runtime yet (Runtime.install has not run with this buffer): nothing to drain.
      void error;
      return;
    }
    for (const update of updates) this.apply(update);
  }

  private apply(update: BufferedMetricUpdate): void {
    const given = labelsOf(update.attributes);
    const target = this.metricFor(update, Object.keys(given));
    if (!target) return;
    // A metric's label names are fixed at its first update; later updates are fitted to them.
    const labels: Record<string, string> = {};
    for (const name of target.labelNames) labels[name] = given[name] ?? '';
    switch (target.kind) {
      case 'counter':
        if (update.value > 0) target.metric.inc(labels, update.value);
        break;
      case 'gauge':
        if (update.metric.kind === 'up-down-counter') target.metric.inc(labels, update.value);
        else target.metric.set(labels, update.value);
        break;
      case 'histogram':
        target.metric.observe(labels, update.value);
        break;
    }
  }

  private metricFor(update: BufferedMetricUpdate, labelNames: string[]): Bridged | undefined {
    const name = promName(update.metric.name);
    const known = this.bridged.get(name);
    if (known) return known;
    const help =
      update.metric.description ||
      `Temporal SDK metric ${update.metric.name}${update.metric.unit ? ` (${update.metric.unit})` : ''}`;
    const common = { name, help, labelNames, registers: [this.registry] };
    let bridged: Bridged;
    try {
      switch (update.metric.kind) {
        case 'counter':
          bridged = { kind: 'counter', metric: new Counter(common), labelNames };
          break;
        case 'histogram':
          bridged = { kind: 'histogram', metric: new Histogram({ ...common, buckets: BUCKETS }), labelNames };
          break;
        case 'gauge':
        case 'up-down-counter':
          bridged = { kind: 'gauge', metric: new Gauge(common), labelNames };
          break;
      }
    } catch (error) {
      // A name clash with a metric already registered: keep the registered one, drop these updates.
      void error;
      return undefined;
    }
    this.bridged.set(name, bridged);
    return bridged;
  }
}

/** Prometheus names: [a-zA-Z_:][a-zA-Z0-9_:]*; the SDK's are already close. */
function promName(name: string): string {
  const cleaned = name.replace(/[^a-zA-Z0-9_:]/g, '_');
  return cleaned.startsWith('temporal_') ? cleaned : `temporal_${cleaned}`;
}

function labelsOf(attributes: Record<string, string | number | boolean>): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(attributes)) labels[key.replace(/[^a-zA-Z0-9_]/g, '_')] = String(value);
  return labels;
}
