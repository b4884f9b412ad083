/**
 * The top self-time entries of V8 CPU profiles (`node --cpu-prof`), for the profiles BENCHMARKS
 * quotes (issue 53: where a turn's CPU goes under load). Each file is one thread (the main
 * thread, or one of the SDK's workflow threads); entries are grouped by function and file, and
 * the files by where their code lives (the SDK, better-sqlite3, openai, sessionlog's own, …).
 *
 *   npx tsx bench/support/profile-top.ts [--top 25] FILE.cpuprofile…
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

type CallFrame = { functionName: string; url: string; lineNumber: number };
type ProfileNode = { id: number; callFrame: CallFrame };
type CpuProfile = {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
};

/** Where a frame's code lives, by its file. */
export function areaOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') {
    if (functionName === '(garbage collector)') return 'garbage collection';
    if (functionName === '(idle)') return 'idle';
    if (functionName === '(program)') return 'V8/native (program)';
    return 'native / builtins';
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
  if (pkg) return pkg;
  if (url.startsWith('node:')) return 'node core';
  if (/\/src\//.test(url)) return 'sessionlog src';
  if (/\/bench\//.test(url)) return 'bench harness';
  // The SDK's workflow bundle (webpack: the session workflow and the SDK's workflow runtime),
  // evaluated in the sandbox.
  if (/workflow-bundle-|^evalmachine/.test(url)) return 'workflow bundle';
  return 'other files';
}

export type SelfTime = { key: string; area: string; ms: number };

/** Self time per function (ms) and per area, over the whole profile. */
export function selfTimes(profile: CpuProfile): { total: number; entries: SelfTime[]; areas: Map<string, number> } {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const perNode = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    perNode.set(id, (perNode.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
  }
  const entries = new Map<string, SelfTime>();
  const areas = new Map<string, number>();
  let total = 0;
  for (const [id, ms] of perNode) {
    const frame = byId.get(id)!.callFrame;
    const area = areaOf(frame);
    const file = frame.url ? basename(frame.url) : '';
    const key = `${frame.functionName || '(anonymous)'}${file ? ` ${file}:${frame.lineNumber + 1}` : ''}`;
    const entry = entries.get(key) ?? { key, area, ms: 0 };
    entry.ms += ms;
    entries.set(key, entry);
    areas.set(area, (areas.get(area) ?? 0) + ms);
    total += ms;
  }
  return { total, entries: [...entries.values()].sort((a, b) => b.ms - a.ms), areas };
}

function main(): void {
  const { values, positionals } = parseArgs({
    options: { top: { type: 'string', default: '25' } },
    allowPositionals: true,
  });
  const top = Number(values.top);
  if (positionals.length === 0 || !Number.isInteger(top) || top < 1) {
    console.error('usage: npx tsx bench/support/profile-top.ts [--top N] FILE.cpuprofile…');
    process.exitCode = 2;
    return;
  }
  for (const file of positionals) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    const { total, entries, areas } = selfTimes(profile);
    const busy = total - (areas.get('idle') ?? 0);
    console.log(
      `\n## ${basename(file)}: ${(total / 1000).toFixed(1)} s sampled, ${(busy / 1000).toFixed(1)} s not idle\n`,
    );
    console.log('| area | self time | share of not idle |\n|---|---|---|');
    for (const [area, ms] of [...areas].sort((a, b) => b[1] - a[1]))
      if (area !== 'idle')
        console.log(`| ${area} | ${(ms / 1000).toFixed(2)} s | ${((ms / busy) * 100).toFixed(1)}% |`);
    console.log('\n| function | area | self time | share of not idle |\n|---|---|---|---|');
    for (const entry of entries.filter((e) => e.area !== 'idle').slice(0, top))
      console.log(
        `| ${entry.key.replaceAll('|', '\\|')} | ${entry.area} | ${(entry.ms / 1000).toFixed(2)} s | ${((entry.ms / busy) * 100).toFixed(1)}% |`,
      );
  }
}

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) main();
