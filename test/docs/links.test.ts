/**
 * check:docs, links: every relative link of README.md, BENCHMARKS.md and docs/*.md names a file
 * that exists, and its anchor a heading of the Markdown file it names.
 */
import { describe, expect, it } from 'vitest';
import { ROOT, script, scratchTree, type DocsCheck } from './support.js';

const { checkLinks, checkPaths, documentsOf } = await script<DocsCheck>('docs-check.mjs');

describe('check:docs links', () => {
  it('passes on this repository: every relative link and anchor of the documentation resolves', () => {
    expect(checkLinks(ROOT, documentsOf(ROOT))).toEqual([]);
  });

  it('fails on a link to a missing file and on an anchor no heading has, naming each with its line', () => {
    const root = scratchTree({
      'README.md': '# Title\n\nSee [the guide](docs/guide.md#run-it-twice) and [gone](docs/gone.md).\n',
      'docs/guide.md': [
        '# Guide',
        '',
        '## Run it',
        '',
        'Back [home](../README.md#title), [here](#run-it), [the web](https://example.com/#x).',
        '',
        '```md',
        '[inside a code block](nowhere.md) is not a link',
        '```',
        '',
        'Nor is `[inline code](nowhere.md)`; [a repeated heading](#run-it-1) is.',
        '',
        '## Run it',
        '',
      ].join('\n'),
      'BENCHMARKS.md': '# Benchmarks\n\n[wrong anchor](README.md#no-such-heading)\n',
    });
    expect(checkLinks(root, documentsOf(root))).toEqual([
      'README.md:3: link to docs/guide.md#run-it-twice: docs/guide.md has no heading whose anchor is #run-it-twice',
      'README.md:3: link to docs/gone.md: docs/gone.md does not exist',
      'BENCHMARKS.md:3: link to README.md#no-such-heading: README.md has no heading whose anchor is #no-such-heading',
    ]);
  });

  it('passes on this repository: every repository path the documentation names exists', () => {
    expect(checkPaths(ROOT, documentsOf(ROOT))).toEqual([]);
  });

  it('fails on a named path that does not exist, and on a source file the architecture names that moved', () => {
    const root = scratchTree({
      'src/engine/ops/model-step.ts': '',
      'src/session/errors.ts': '',
      'README.md': 'The step is `src/engine/ops/model-step.ts`; the queue was `src/workflows/queue.ts`.\n',
      'docs/architecture.md': [
        '# Architecture',
        '',
        '| `src/engine/` | `ops/model-step.ts`, `errors.ts`, `ops/step.ts` |',
        '',
        'A `<placeholder>.ts` or `GET /v1/sessions` is not a path.',
        '',
      ].join('\n'),
    });
    expect(checkPaths(root, documentsOf(root))).toEqual([
      'README.md:1: `src/workflows/queue.ts` does not exist',
      'docs/architecture.md:3: `ops/step.ts` is no file under src/',
    ]);
  });
});
