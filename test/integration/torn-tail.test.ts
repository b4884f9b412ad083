/**
 * A JSONL session whose final batch was torn after it was written (a garbled last line: the one
 * damage the JSONL store repairs by itself, DESIGN §4.1): an export of the log says that its torn
 * tail was left out, through the CLI and the client. But the running workflow was acknowledged
 * that batch, so for it the batch was committed and then damaged (issue 52): its next message is
 * refused with CORRUPT_LOG and nothing is cut.
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
  it('refuses the next message with CORRUPT_LOG naming the torn seq and cuts nothing: the running workflow saw that batch written, so it is damage, not a torn write (issue 52)', async () => {
    const id = `torn-send-${Date.now()}`;
    expect((await stack.client.send(id, 'first')).outcome).toBe('completed');
    const before = await stack.client.events(id);
    expect(before.at(-1)?.type).toBe('turn/end');
    tearLastLine(id);
    const path = join(root, id, 'session.jsonl');
    const torn = readFileSync(path);

    const refused = await stack.client.send(id, 'second').then(
      () => undefined,
      (error: unknown) => error as { code?: string; message: string },
    );
    expect(refused?.code).toBe('CORRUPT_LOG');
    expect(refused?.message).toContain(`seq ${before.at(-1)!.seq}`);
    expect(readFileSync(path).equals(torn), 'nothing on disk changed').toBe(true);
  });
});
