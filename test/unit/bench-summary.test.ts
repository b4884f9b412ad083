/**
 * `scripts/bench-summary.mjs` (npm run check:bench, issue 27): README's Performance table and the
 * top of BENCHMARKS.md are generated from bench/results.json, and the check fails when either
 * disagrees with the file. Run on a copy of this repository's three files, then edited.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const copies: string[] = [];
afterEach(() => {
  for (const dir of copies.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A directory laid out like the repository with the script, the two documents and the results file. */
function copyOfRepository(): string {
  const root = mkdtempSync(join(tmpdir(), 'sessionlog-bench-summary-'));
  copies.push(root);
  for (const path of ['scripts/bench-summary.mjs', 'README.md', 'BENCHMARKS.md', 'bench/results.json']) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    copyFileSync(join(ROOT, path), join(root, path));
  }
  return root;
}

function summary(root: string, mode: '--check' | '--write'): { status: number | null; stderr: string } {
  const result = spawnSync(process.execPath, [join(root, 'scripts/bench-summary.mjs'), mode], { encoding: 'utf8' });
  return { status: result.status, stderr: result.stderr };
}

describe('check:bench', () => {
  it('passes on this repository: README and BENCHMARKS.md show bench/results.json', () => {
    const result = summary(copyOfRepository(), '--check');
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('fails when a figure in README was edited by hand, and --write puts the file’s figures back', () => {
    const root = copyOfRepository();
    const readme = join(root, 'README.md');
    const text = readFileSync(readme, 'utf8');
    const row = text.split('\n').find((line) => /^\| [a-z-]+ \| .* \| (met|\*\*not met\*\*) \|$/.test(line));
    expect(row, 'the summary has a row with a target').toBeDefined();
    writeFileSync(readme, text.replace(row!, row!.replace(/\| (met|\*\*not met\*\*) \|$/, '| met (trust me) |')));
    const stale = summary(root, '--check');
    expect(stale.status).toBe(1);
    expect(stale.stderr).toMatch(/README\.md disagrees with bench\/results\.json/);
    expect(summary(root, '--write').status).toBe(0);
    expect(readFileSync(readme, 'utf8')).toBe(text);
    expect(summary(root, '--check').status).toBe(0);
  });

  it('fails when the results file changed and the documents were not regenerated, or is not a results file', () => {
    const root = copyOfRepository();
    const path = join(root, 'bench/results.json');
    const results = JSON.parse(readFileSync(path, 'utf8')) as { runs: Array<{ commit: string }> };
    results.runs[0]!.commit = 'abcdef0';
    writeFileSync(path, JSON.stringify(results));
    expect(summary(root, '--check').stderr).toMatch(/README\.md and .*BENCHMARKS\.md disagree/);
    writeFileSync(path, '{"version": 1}');
    expect(summary(root, '--check')).toMatchObject({ status: 1, stderr: expect.stringMatching(/not a results file/) });
    rmSync(path);
    expect(summary(root, '--check').stderr).toMatch(/results\.json is missing: run `npm run bench`/);
  });
});
