/**
 * A JSONL session whose final batch was torn after it was written (a garbled last line: the one
 * damage the JSONL store repairs by itself, DESIGN §4.1): an export of the log says that its torn
 * tail was left out, through the CLI and the client; and the session takes its next message, the
 * turn whose end was torn closed as interrupted.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreStack } from '../support/store-stack.js';

const root = mkdtempSync(join(tmpdir(), 'sessionlog-torn-'));
const stack = new StoreStack(`jsonl:${root}`);

beforeAll(async () => {
  await stack.start();
});
afterAll(async () => {
  await stack.stop();
});

/** Garbles the last line of session `id`'s log as a torn write would: half of it, no newline. */
function tearLastLine(id: string): { lines: number } {
  const path = join(root, id, 'session.jsonl');
  const text = readFileSync(path, 'utf8');
  const lines = text.split('\n').filter((line) => line.length > 0);
  const last = lines.pop()!;
  writeFileSync(path, `${lines.join('\n')}\n${last.slice(0, Math.floor(last.length / 2))}`);
  return { lines: lines.length };
}

describe('a JSONL session with a torn final batch', () => {
  it('exports the log with a notice that its torn final batch was left out', async () => {
    const id = `torn-export-${Date.now()}`;
    expect((await stack.client.send(id, 'only')).outcome).toBe('completed');
    const stored = (await stack.client.events(id)).length;
    tearLastLine(id);

    const exported = await stack.client.export(id);
    expect(exported.events.length).toBeLessThan(stored);
    expect(exported.tornTail).toMatchObject({ fromSeq: exported.events.length });

    const cli = await stack.cli(['sessions', 'export', id]);
    expect(cli.code).toBe(0);
    expect(cli.stdout.trim().split('\n')).toHaveLength(exported.events.length + 1);
    expect(cli.stderr).toMatch(/torn/);
    expect(cli.stderr).toMatch(new RegExp(`from seq ${exported.events.length}`));
  });
});

describe('a JSONL session whose acknowledged tail was torn', () => {
  it('takes the next message: the turn whose end was lost is closed as interrupted, and the next one answers', async () => {
    const id = `torn-send-${Date.now()}`;
    expect((await stack.client.send(id, 'first')).outcome).toBe('completed');
    const before = await stack.client.events(id);
    expect(before.at(-1)?.type).toBe('turn/end');
    tearLastLine(id);

    const next = await stack.client.send(id, 'second');
    expect(next.outcome).toBe('completed');
    const events = await stack.client.events(id);
    // Turn 1's torn end was cut and the turn closed by the repair; turn 2 answered after it.
    const ends = events.filter((event) => event.type === 'turn/end').map((event) => event.data);
    expect(ends).toEqual([
      expect.objectContaining({ turn: 1, reason: expect.objectContaining({ kind: 'interrupted' }) }),
      expect.objectContaining({ turn: 2, reason: expect.objectContaining({ kind: 'completed' }) }),
    ]);
    const texts = events.filter((event) => event.type === 'user/message').map((event) => JSON.stringify(event.data));
    expect(texts).toHaveLength(2);
    expect(texts[1]).toContain('second');
    const verified = await stack.cli(['sessions', 'verify', id]);
    expect(verified.code).toBe(0);
  });
});
