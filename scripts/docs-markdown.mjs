/**
 * What the documentation checks read of a Markdown file (`scripts/docs-check.mjs`): its fenced
 * code blocks, its headings as GitHub turns them into anchors, and its links, each with the line
 * it is on. A line-based reader, enough for the project's own documents: fences are ``` or ~~~,
 * links are `[text](target)` outside code.
 */
import { readFileSync } from 'node:fs';

/** The documents the checks cover, relative to the repository root. */
export function documentPaths(listing) {
  return ['README.md', 'BENCHMARKS.md', ...listing.filter((p) => p.startsWith('docs/') && p.endsWith('.md')).sort()];
}

/** Splits a document into lines, each marked as inside a fence or not; fenced blocks with their language and first line. */
export function parseMarkdown(text) {
  const lines = text.split('\n');
  const blocks = [];
  const prose = []; // { line: number (1-based), text }
  let open;
  lines.forEach((line, index) => {
    const fence = /^\s*(`{3,}|~{3,})\s*([^\s`]*)?(.*)$/.exec(line);
    if (open) {
      if (fence && fence[1][0] === open.marker[0] && fence[1].length >= open.marker.length && !fence[2]) {
        blocks.push({ lang: open.lang, info: open.info, line: open.line, code: open.body.join('\n') });
        open = undefined;
      } else open.body.push(line);
      return;
    }
    if (fence) {
      open = {
        marker: fence[1],
        lang: (fence[2] ?? '').toLowerCase(),
        info: (fence[3] ?? '').trim(),
        line: index + 1,
        body: [],
      };
      return;
    }
    prose.push({ line: index + 1, text: line });
  });
  return { blocks, prose };
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
export function headingSlug(heading) {
  return heading
    .replace(/<[^>]+>/g, '')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a document has: its headings' slugs (a repeated one gets -1, -2 …) and explicit `<a id>`/`name`. */
export function anchorsOf(text) {
  const anchors = new Set();
  const seen = new Map();
  for (const { text: line } of parseMarkdown(text).prose) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = headingSlug(heading[1]);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const match of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(match[1]);
  }
  return anchors;
}

/** The links of a document's prose (inline code and fenced blocks left out), with their lines. */
export function linksOf(text) {
  const links = [];
  for (const { line, text: content } of parseMarkdown(text).prose) {
    const withoutCode = content.replace(/`[^`]*`/g, (code) => ' '.repeat(code.length));
    for (const match of withoutCode.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g))
      links.push({ line, target: match[1] });
    for (const match of withoutCode.matchAll(/<(?:a|img)\s[^>]*(?:href|src)="([^"]+)"/g))
      links.push({ line, target: match[1] });
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?/.exec(withoutCode);
    if (definition) links.push({ line, target: definition[1] });
  }
  return links;
}

export function readText(path) {
  return readFileSync(path, 'utf8');
}
