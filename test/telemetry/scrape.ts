/**
 * Scrapes a `/metrics` endpoint over HTTP and reads it with a Prometheus text-format parser
 * from npm (prom2javascript), so tests assert on what a Prometheus server would see.
 */
import { getMetricsFromIterator, type PromData, type PromHistogramData, type PromMetrics } from 'prom2javascript';

export type Scrape = { text: string; metrics: PromMetrics; contentType: string | null };

export async function scrape(url: string, headers: Record<string, string> = {}): Promise<Scrape> {
  const response = await fetch(url, { headers });
  if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${await response.text()}`);
  const text = await response.text();
  return {
    text,
    metrics: await getMetricsFromIterator(text.split('\n')[Symbol.iterator]()),
    contentType: response.headers.get('content-type'),
  };
}

function matches(labels: Record<string, string>, wanted: Record<string, string>): boolean {
  return Object.entries(wanted).every(([key, value]) => labels[key] === value);
}

/** The value of a counter or gauge summed over samples with (at least) these labels; 0 when absent. */
export function value(scraped: Scrape, name: string, labels: Record<string, string> = {}): number {
  const metric = scraped.metrics[name];
  if (!metric || (metric.type !== 'counter' && metric.type !== 'gauge')) return 0;
  return (metric.data as PromData[]).filter((d) => matches(d.labels, labels)).reduce((sum, d) => sum + d.value, 0);
}

/** Count and sum of a histogram's samples with (at least) these labels. */
export function histogram(
  scraped: Scrape,
  name: string,
  labels: Record<string, string> = {},
): { count: number; sum: number } {
  const metric = scraped.metrics[name];
  if (!metric || metric.type !== 'histogram') return { count: 0, sum: 0 };
  const samples = (metric.data as PromHistogramData[]).filter((d) => matches(d.labels, labels));
  return { count: samples.reduce((n, d) => n + d.count, 0), sum: samples.reduce((n, d) => n + (d.sum ?? 0), 0) };
}

/** Every value a metric's samples have for `label`. */
export function labelValues(scraped: Scrape, name: string, label: string): string[] {
  const metric = scraped.metrics[name];
  if (!metric) return [];
  return [
    ...new Set(
      (metric.data as Array<{ labels: Record<string, string> }>)
        .map((d) => d.labels[label])
        .filter((v): v is string => v !== undefined),
    ),
  ].sort();
}

/** Names of the metrics scraped. */
export function names(scraped: Scrape): string[] {
  return Object.keys(scraped.metrics);
}
