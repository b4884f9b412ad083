/**
 * The documentation scripts (plain ES modules under scripts/) as the tests call them, with the
 * types of what they export; and scratch repositories laid out like this one.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach } from 'vitest';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export type DocsCheck = {
  documentsOf(root: string): string[];
  checkLinks(root: string, documents: string[]): string[];
  checkCode(root: string, documents: string[], options?: { codeRoot?: string }): string[];
  checkLayersTable(root: string): string[];
  checkPaths(root: string, documents: string[]): string[];
  checkLongFiles(root: string): string[];
  LONG_FILE_LINES: number;
};

export type ConfigVariableRow = { group: string; default: string; meaning: string; min?: number; max?: number };

export type DocsGenerate = {
  CONFIG_START: string;
  CONFIG_END: string;
  renderConfig(variables: Record<string, ConfigVariableRow>): string;
  apiExports(entry: string, root?: string): { exports: { name: string; docs: string }[]; undocumented: string[] };
  generatedDocuments(root?: string): Promise<{ documents: Record<string, string>; undocumented: string[] }>;
  staleDocuments(root: string, documents: Record<string, string>): string[];
};

/** A script of scripts/ by name (imported through a URL, as Node runs it). */
export async function script<T>(name: string): Promise<T> {
  const url: string = pathToFileURL(join(ROOT, 'scripts', name)).href;
  return (await import(url)) as T;
}

const scratch: string[] = [];
afterEach(() => {
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A scratch folder holding `files` (path → text), removed after the test. */
export function scratchTree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'sessionlog-docs-'));
  scratch.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}
