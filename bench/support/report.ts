/**
 * Statistics and the one table format every benchmark prints: each figure beside its target
 * and whether the target is met. Targets are informational; nothing here fails a build.
 */
import { execFileSync } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import os from 'node:os';
import { basename } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** A measured figure, optionally with a target it is judged against. */
export type Figure = {
  name: string;
  value: string;
  /** The target as shown, e.g. `≥ 50% of raw`; empty when the figure is for context only. */
  target?: string;
  /** Whether the target is met; undefined when there is no target. */
  met?: boolean;
};

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** Nearest-rank percentile (`p` in 0..100) of `values`. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function mean(values: readonly number[]): number {
  return values.reduce((sum, v) => sum + v, 0) / values.length;
}

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * Collects the garbage a previous measurement left, so that a timed section does not pay for it
 * (a cold read timed right after a 100k-event load would otherwise run a full collection of that
 * load's heap).
 */
export function collectGarbage(): void {
  gc();
}

/** Milliseconds since `start` (from `performance.now()`). */
export function since(start: number): number {
  return performance.now() - start;
}

export function fmtMs(ms: number): string {
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms >= 10) return `${ms.toFixed(1)} ms`;
  return `${ms.toFixed(2)} ms`;
}

export function fmtInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

export function fmtBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 * 1024) return `${(bytes / 1024 / 1024 / 1024).toFixed(2)} GiB`;
  if (bytes >= 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${bytes} B`;
}

export function fmtRatio(ratio: number, digits = 2): string {
  return `${ratio.toFixed(digits)}×`;
}

function verdict(figure: Figure): string {
  if (figure.met === undefined) return '';
  return figure.met ? 'met' : 'NOT MET';
}

/**
 * The commit the figures are measured at (`+dirty` when the tree has changes other than the
 * results file, which a run of some benches carries from an earlier run), once per process.
 */
let commit: string | undefined;
function currentCommit(): string {
  if (commit === undefined) {
    const git = (args: string[]) => execFileSync('git', args, { encoding: 'utf8' }).trim();
    try {
      commit = `${git(['rev-parse', '--short', 'HEAD'])}${git(['status', '--porcelain', '--untracked-files=no', '--', '.', ':!bench/results.json']) ? '+dirty' : ''}`;
    } catch {
      commit = 'unknown';
    }
  }
  return commit;
}

/**
 * Adds a printed table to the run's results when `npm run bench` collects them
 * (`SESSIONLOG_BENCH_RESULTS`, one JSON line per table; scripts/bench-summary.mjs merges them
 * into bench/results.json and the generated summary).
 */
function record(table: {
  title: string;
  figures?: readonly Figure[];
  header?: readonly string[];
  rows?: readonly (readonly string[])[];
}): void {
  const file = process.env.SESSIONLOG_BENCH_RESULTS;
  if (!file) return;
  const bench = basename(process.argv[1] ?? 'bench', '.ts');
  const cpus = os.cpus();
  const machine = `Node ${process.version}, ${cpus.length} × ${cpus[0]?.model ?? 'cpu'}, ${fmtBytes(os.totalmem())} RAM, load avg ${os.loadavg()[0]!.toFixed(2)}`;
  appendFileSync(
    file,
    `${JSON.stringify({ bench, at: new Date().toISOString(), commit: currentCommit(), machine, table })}\n`,
  );
}

/** Prints a Markdown table (readable in a terminal, pasteable into BENCHMARKS.md). */
export function printTable(title: string, figures: readonly Figure[]): void {
  record({ title, figures });
  const header = ['figure', 'value', 'target', 'met?'];
  const rows = figures.map((f) => [f.name, f.value, f.target ?? '', verdict(f)]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(`\n### ${title}\n`);
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of rows) console.log(line(row));
}

/** Prints a free-form table with its own columns (for side-by-side series). */
export function printGrid(title: string, header: readonly string[], rows: readonly (readonly string[])[]): void {
  record({ title, header, rows });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    `| ${header.map((_, i) => (cells[i] ?? '').padEnd(widths[i]!)).join(' | ')} |`;
  console.log(`\n### ${title}\n`);
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of rows) console.log(line(row));
}

/** One line saying where and when the figures were taken. */
export function machineLine(): string {
  const cpus = os.cpus();
  const load = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  return `${new Date().toISOString()} · Node ${process.version} · ${cpus.length} × ${cpus[0]?.model ?? 'cpu'} · ${fmtBytes(os.totalmem())} RAM · load avg ${load}`;
}
